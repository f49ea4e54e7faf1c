//! A small seeded generator for failure rates: SplitMix64 (Steele, Lea and Flood, 2014), the
//! seeding generator of `java.util.SplittableRandom` and of the xoshiro family. Written out
//! rather than taken from a crate so that a seed gives the same failures on every platform
//! and in every later version: a simulation is only worth comparing if it is reproducible.

pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// True with probability `per_million` / 1,000,000.
    pub fn chance(&mut self, per_million: u32) -> bool {
        let threshold = (u128::from(per_million) << 64) / 1_000_000;
        u128::from(self.next_u64()) < threshold
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_reference_sequence() {
        // The first outputs for seed 1234567 in the reference implementation.
        let mut generator = SplitMix64::new(1_234_567);
        assert_eq!(generator.next_u64(), 6_457_827_717_110_365_317);
        assert_eq!(generator.next_u64(), 3_203_168_211_198_807_973);
    }

    #[test]
    fn chance_is_never_for_zero_and_always_for_a_million() {
        let mut generator = SplitMix64::new(7);
        assert!((0..1000).all(|_| !generator.chance(0)));
        assert!((0..1000).all(|_| generator.chance(1_000_000)));
    }
}
