//! The benches' random numbers: xorshift64, deterministic from its seed, no dependency. Shared
//! by `retention/benches/engine.rs` and the issue-17 catalog (`catalog.rs`).

pub struct Random(pub u64);

impl Random {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    pub fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound
    }
}
