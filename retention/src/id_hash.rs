//! A fast 64-bit hash of backup ids, so that the engine can resolve parent links and detect
//! duplicate ids over compact integer arrays instead of hashing and comparing strings that
//! are scattered over the heap (at a million backups that is the difference between tens and
//! hundreds of milliseconds).
//!
//! Equal ids always hash equal. The engine treats two equal hashes as the same id only after
//! checking that no two ids of the catalog share a hash; when two do, it falls back to exact
//! string comparison. A parent that is missing from the catalog could, with odds of about
//! 2^-64, alias an existing id and be kept as if it were the parent: that errs on keeping
//! more, never on deleting something a kept backup needs.

const SEED: u64 = 0x243f_6a88_85a3_08d3;
const MULTIPLIER: u64 = 0x9e37_79b9_7f4a_7c15;

/// Hash of one id. Never 0 (the engine uses 0 for "no parent").
pub(crate) fn hash_id(id: &str) -> u64 {
    let bytes = id.as_bytes();
    let mut state = SEED ^ (bytes.len() as u64).wrapping_mul(MULTIPLIER);
    let mut chunks = bytes.chunks_exact(8);
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        state = step(state, u64::from_le_bytes(word));
    }
    let remainder = chunks.remainder();
    if !remainder.is_empty() {
        let mut word = [0u8; 8];
        word[..remainder.len()].copy_from_slice(remainder);
        state = step(state, u64::from_le_bytes(word));
    }
    let hash = finish(state);
    if hash == 0 {
        1
    } else {
        hash
    }
}

/// One bijective mixing step per 8-byte word: two states that differ stay different.
fn step(state: u64, word: u64) -> u64 {
    let mixed = (state ^ word).wrapping_mul(MULTIPLIER);
    mixed ^ (mixed >> 29)
}

/// MurmurHash3's 64-bit finaliser.
fn finish(mut state: u64) -> u64 {
    state ^= state >> 33;
    state = state.wrapping_mul(0xff51_afd7_ed55_8ccd);
    state ^= state >> 33;
    state = state.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    state ^ (state >> 33)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_collisions_among_a_million_sequential_ids() {
        let mut hashes: Vec<u64> = (0..1_000_000)
            .map(|i| hash_id(&format!("b-{i:010}")))
            .collect();
        hashes.sort_unstable();
        hashes.dedup();
        assert_eq!(hashes.len(), 1_000_000);
    }

    #[test]
    fn length_matters() {
        assert_ne!(hash_id("a"), hash_id("a\0"));
        assert_ne!(hash_id(""), hash_id("\0"));
    }
}
