//! Deterministic pseudo-randomness for generators: every value is a function of a seed and
//! a row's number, so a split resumed at a position generates exactly what it would have.

/// SplitMix64: a fast, well-mixed 64-bit hash.
pub(crate) fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A stream of pseudo-random numbers for one row (seeded by the row's number).
pub(crate) struct Rng(u64);

impl Rng {
    /// The generator of row `n` under `seed`.
    pub(crate) fn new(seed: u64, n: u64) -> Self {
        Rng(mix(seed ^ mix(n)))
    }

    /// The next 64 random bits.
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix(self.0)
    }

    /// A number in `0..n` (`n` > 0).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n.max(1))) >> 64) as u64
    }

    /// A float in `[0, 1)`.
    pub(crate) fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// `len` random lower-case letters.
    pub(crate) fn letters(&mut self, len: usize, out: &mut String) {
        for _ in 0..len {
            out.push((b'a' + self.below(26) as u8) as char);
        }
    }
}

/// A stable hash of a name (field seeds).
pub(crate) fn hash_name(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3))
}
