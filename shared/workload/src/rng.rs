//! The seeded random stream behind every generated value (SplitMix64). Defined here, not
//! taken from a crate, so a replay of a seed never changes with a dependency's version.

/// SplitMix64's finalizer (the one the engine's key hashing uses).
pub use eqdv::resolve::mix64;

/// A SplitMix64 stream.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    /// One independent stream per commit: replaying commit c needs no earlier stream.
    pub fn for_commit(seed: u64, commit: u32) -> Self {
        Rng(mix64(
            seed ^ mix64(u64::from(commit).wrapping_add(0x5851_f42d_4c95_7f2d)),
        ))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix64(self.0)
    }

    /// Uniform in `0..n` (0 when n is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// True with probability `p` percent.
    pub fn percent(&mut self, p: u64) -> bool {
        self.below(100) < p
    }
}
