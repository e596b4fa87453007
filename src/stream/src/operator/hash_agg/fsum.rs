//! Float sums that survive retraction. [`Fsum`] is Neumaier's compensated summation: next to
//! the rounded sum it keeps the low-order bits each addition rounded away, so adding a large
//! value and taking it back again (1e17 among values near 0.1) restores the small values' sum,
//! where a plain `f64` sum would have lost them for good and left the view off its
//! recomputation. [`DdSum`] sums double-doubles (exact differences and squares, which a
//! variance needs): their high parts go through an `Fsum` and their low parts (rounding errors,
//! far smaller) into a sum of their own, so the square of 1e10 - 1 is kept whole (a rounded
//! square left a variance of 32768 for 0.5 once the 1e10 row was retracted) and a huge value
//! retracted still leaves the small ones.

/// A compensated sum (`hi + lo`); also a double-double value in products and quotients.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(super) struct Fsum {
    pub hi: f64,
    pub lo: f64,
}

/// `a + b` as a sum and its exact rounding error (Knuth's two-sum).
fn two_sum(a: f64, b: f64) -> (f64, f64) {
    let s = a + b;
    let bb = s - a;
    (s, (a - (s - bb)) + (b - bb))
}

/// `a * b` as a product and its exact rounding error (by a fused multiply-add).
fn two_prod(a: f64, b: f64) -> (f64, f64) {
    let p = a * b;
    (p, a.mul_add(b, -p))
}

impl Fsum {
    pub fn new(hi: f64, lo: f64) -> Self {
        Fsum { hi, lo }
    }

    /// `hi + lo` normalised (|lo| at most half an ulp of hi); a non-finite `hi` stays as it is.
    fn normal(hi: f64, lo: f64) -> Self {
        let (hi, lo) = two_sum(hi, lo);
        if hi.is_finite() {
            Fsum { hi, lo }
        } else {
            Fsum { hi, lo: 0.0 }
        }
    }

    /// `x - k` exactly (a double-double holds the difference of two doubles).
    pub fn diff(x: f64, k: f64) -> Self {
        let (hi, lo) = two_sum(x, -k);
        Fsum { hi, lo }
    }

    /// Adds `x` (a finite value; callers count NaN and infinities apart).
    pub fn add(&mut self, x: f64) {
        let (s, e) = two_sum(self.hi, x);
        self.hi = s;
        self.lo += e;
    }

    /// Adds `o` as a double-double (normalised: for values, not running sums).
    fn add_dd(&mut self, o: Fsum) {
        let (s, e) = two_sum(self.hi, o.hi);
        *self = Fsum::normal(s, e + self.lo + o.lo);
    }

    /// `self * o`.
    pub fn mul(self, o: Fsum) -> Fsum {
        let (p, e) = two_prod(self.hi, o.hi);
        Fsum::normal(p, e + (self.hi * o.lo + self.lo * o.hi))
    }

    /// `self / d`.
    pub fn div(self, d: f64) -> Fsum {
        let q = self.hi / d;
        let (p, e) = two_prod(q, d);
        Fsum::normal(q, ((self.hi - p) - e + self.lo) / d)
    }

    /// `self - o`.
    pub fn sub(self, o: Fsum) -> Fsum {
        let mut r = self;
        r.add_dd(Fsum { hi: -o.hi, lo: -o.lo });
        r
    }

    pub fn value(&self) -> f64 {
        self.hi + self.lo
    }
}

/// A running sum of double-doubles (see the module's note): `main` sums their high parts,
/// `err` their low parts.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(super) struct DdSum {
    pub main: Fsum,
    pub err: f64,
}

impl DdSum {
    /// Adds `x` times `sign` (1 or -1).
    pub fn add(&mut self, x: Fsum, sign: f64) {
        self.main.add(sign * x.hi);
        self.err += sign * x.lo;
    }

    /// The sum as a double-double.
    pub fn total(&self) -> Fsum {
        Fsum::normal(self.main.hi, self.main.lo + self.err)
    }
}

#[cfg(test)]
mod tests {
    use super::{DdSum, Fsum};

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

    #[test]
    fn squares_of_large_values_retract_exactly() {
        // (x - k)^2 for x = 1, 2 and a first value k = 1e10, then k's row retracted: what is
        // left is the variance of 1 and 2.
        let k = 1e10;
        let (mut sum, mut sumsq) = (DdSum::default(), DdSum::default());
        for (x, sign) in [(1e10, 1.0), (1.0, 1.0), (2.0, 1.0), (1e10, -1.0)] {
            let d = Fsum::diff(x, k);
            sum.add(d, sign);
            sumsq.add(d.mul(d), sign);
        }
        let (sum, sumsq) = (sum.total(), sumsq.total());
        assert_eq!(sumsq.sub(sum.mul(sum).div(2.0)).value(), 0.5);
        // A huge value added and retracted leaves the small ones' sum of squares.
        let (k, mut sumsq) = (0.1, DdSum::default());
        for (x, sign) in [(0.1, 1.0), (0.2, 1.0), (0.3, 1.0), (1e17, 1.0), (1e17, -1.0)] {
            let d = Fsum::diff(x, k);
            sumsq.add(d.mul(d), sign);
        }
        assert!((sumsq.total().value() - 0.05).abs() < 1e-15, "{:?}", sumsq);
    }
}
