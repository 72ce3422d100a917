//! The fast hashing of deleted keys: the hash set the scan probes once per data row,
//! and the mixing function the key passes and key sets split by.

use std::hash::{BuildHasher, Hasher};

/// SplitMix64's finalizer: a bijection on u64 that scrambles well. Public so that the
/// test workloads' random stream (eqdv-workload) uses this one copy.
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Hashing for the deleted-key sets, probed once per data row read: a multiply-rotate
/// per 8 bytes and a SplitMix64 finish, several times cheaper than SipHash. The seed is
/// random per set, so keys cannot be crafted to collide ahead of time. Public so that
/// the benchmarks' floor hashes exactly as the engine does.
#[derive(Clone, Copy)]
pub struct KeyHashBuilder {
    seed: u64,
}

impl Default for KeyHashBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl KeyHashBuilder {
    pub fn new() -> Self {
        Self {
            seed: rand::random(),
        }
    }
}

impl BuildHasher for KeyHashBuilder {
    type Hasher = KeyHasher;

    fn build_hasher(&self) -> KeyHasher {
        KeyHasher(self.seed)
    }
}

pub struct KeyHasher(u64);

impl KeyHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0 ^ word)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15)
            .rotate_left(29);
    }
}

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        mix64(self.0)
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut word = [0u8; 8];
            word[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(word) ^ ((rest.len() as u64) << 59));
        }
    }

    fn write_u64(&mut self, word: u64) {
        self.add(word);
    }

    fn write_i64(&mut self, word: i64) {
        self.add(word as u64);
    }

    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn key_hasher_tells_lengths_and_values_apart() {
        let build = KeyHashBuilder { seed: 7 };
        let hash = |bytes: &[u8]| {
            let mut h = build.build_hasher();
            h.write(bytes);
            h.finish()
        };
        assert_eq!(hash(b"abc"), hash(b"abc"));
        assert_ne!(hash(b"abc"), hash(b"abc\0"));
        assert_ne!(hash(b"12345678"), hash(b"12345679"));
        let mut set: HashSet<i64, KeyHashBuilder> = HashSet::with_hasher(build);
        set.extend(0..10_000);
        assert!((0..10_000).all(|k| set.contains(&k)));
        assert!(!set.contains(&10_000));
    }
}
