//! A float sum that survives retraction: Neumaier's compensated summation keeps, next to the
//! rounded sum, the low-order bits each addition rounded away. Adding a large value and taking
//! it back again (1e17 among values near 0.1) restores the small values' sum, where a plain
//! `f64` sum would have lost them for good and left the view off its recomputation.

/// A compensated sum: the value is `hi + lo`.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(super) struct Fsum {
    pub hi: f64,
    pub lo: f64,
}

impl Fsum {
    pub fn new(hi: f64, lo: f64) -> Self {
        Fsum { hi, lo }
    }

    /// Adds `x` (a finite value; callers count NaN and infinities apart).
    pub fn add(&mut self, x: f64) {
        let t = self.hi + x;
        // The rounding error of `hi + x` is exact in f64 when computed from the larger operand.
        self.lo += if self.hi.abs() >= x.abs() { (self.hi - t) + x } else { (x - t) + self.hi };
        self.hi = t;
    }

    pub fn value(&self) -> f64 {
        self.hi + self.lo
    }
}

#[cfg(test)]
mod tests {
    use super::Fsum;

    #[test]
    fn a_large_value_added_and_retracted_leaves_the_small_ones() {
        let mut s = Fsum::default();
        for x in [0.1, 0.2, 0.3] {
            s.add(x);
        }
        let before = s.value();
        s.add(1e17);
        s.add(-1e17);
        assert_eq!(s.value(), before);
        let mut plain = 0.0;
        for x in [0.1, 0.2, 0.3, 1e17, -1e17] {
            plain += x;
        }
        assert_eq!(plain, 0.0, "a plain f64 sum loses them");
        // Many updates that cancel leave no drift either.
        for i in 0..1000 {
            let x = (i as f64) * 1.37e-3 + 1e9;
            s.add(x);
            s.add(-x);
        }
        assert_eq!(s.value(), before);
    }
}
