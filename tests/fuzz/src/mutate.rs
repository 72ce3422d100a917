//! Seeded mutations of a seed input, for the short fuzzing run of the replay test on
//! stable Rust (libFuzzer's own mutators do this for the long runs). Byte mutations
//! favour what breaks decoders: length and count fields set to huge or negative values,
//! truncation, repeated and dropped ranges. A JSON seed is also mutated by value, so
//! that most of its mutants still parse and reach the checks behind the parser.

use rand::rngs::StdRng;
use rand::{Rng, RngCore, SeedableRng};
use serde_json::Value;

/// Values that break length, count and offset fields, in the widths files use.
const INTERESTING: &[u64] = &[
    0,
    1,
    0x7f,
    0x80,
    0xff,
    0x7fff,
    0xffff,
    0x7fff_ffff,
    0x8000_0000,
    0xffff_ffff,
    1 << 32,
    1 << 40,
    1 << 62,
    i64::MAX as u64,
    u64::MAX,
];

/// The `index`th mutant of `seed` (the same inputs give the same mutant).
pub fn mutant(seed: &[u8], index: u64) -> Vec<u8> {
    let mut rng = StdRng::seed_from_u64(index ^ 0x5eed_f00d);
    if rng.random_bool(0.5)
        && let Ok(mut value) = serde_json::from_slice::<Value>(seed)
    {
        for _ in 0..rng.random_range(1..=3) {
            mutate_value(&mut value, &mut rng);
        }
        return serde_json::to_vec(&value).unwrap_or_default();
    }
    let mut bytes = seed.to_vec();
    for _ in 0..rng.random_range(1..=4) {
        mutate_bytes(&mut bytes, &mut rng);
    }
    bytes
}

fn mutate_bytes(bytes: &mut Vec<u8>, rng: &mut StdRng) {
    if bytes.is_empty() {
        bytes.extend((0..rng.random_range(1..64)).map(|_| rng.random::<u8>()));
        return;
    }
    let at = rng.random_range(0..bytes.len());
    match rng.random_range(0..8) {
        0 => bytes[at] ^= 1 << rng.random_range(0..8),
        1 => bytes[at] = rng.random(),
        2 => {
            // An interesting value written over the bytes at `at`, little-endian (Avro
            // zig-zag varints and Parquet's Thrift fields read many of them as lengths).
            let value = INTERESTING[rng.random_range(0..INTERESTING.len())].to_le_bytes();
            let width = [1, 2, 4, 8][rng.random_range(0..4)];
            for (i, b) in value.iter().take(width).enumerate() {
                if let Some(slot) = bytes.get_mut(at + i) {
                    *slot = *b;
                }
            }
        }
        3 => bytes.truncate(at),
        4 => {
            let end = rng.random_range(at..=bytes.len().min(at + 64));
            bytes.drain(at..end);
        }
        5 => {
            let end = rng.random_range(at..=bytes.len().min(at + 64));
            let chunk = bytes[at..end].to_vec();
            let to = rng.random_range(0..=bytes.len());
            bytes.splice(to..to, chunk);
        }
        6 => {
            let mut extra = vec![0; rng.random_range(1..16)];
            rng.fill_bytes(&mut extra);
            bytes.splice(at..at, extra);
        }
        _ => {
            // A varint of many continuation bytes: an Avro long as large as it goes.
            bytes.splice(at..at, [0xff; 9].into_iter().chain([0x01]));
        }
    }
}

/// Strings that reach paths, names and ids.
const HOSTILE_STRINGS: &[&str] = &[
    "",
    "..",
    "../../other",
    "s3://other-bucket/x",
    "a%2F..%2Fb",
    "a/./b",
    "\u{0}",
    "é漢字🙂",
    "main",
];

fn mutate_value(value: &mut Value, rng: &mut StdRng) {
    match value {
        Value::Object(map) if !map.is_empty() && rng.random_bool(0.8) => {
            let key = map.keys().nth(rng.random_range(0..map.len())).cloned();
            if let Some(key) = key {
                if rng.random_bool(0.1) {
                    map.remove(&key);
                } else if let Some(child) = map.get_mut(&key) {
                    mutate_value(child, rng);
                }
            }
        }
        Value::Array(items) if !items.is_empty() && rng.random_bool(0.8) => {
            let at = rng.random_range(0..items.len());
            match rng.random_range(0..6) {
                0 => {
                    items.remove(at);
                }
                1 => {
                    let copy = items[at].clone();
                    items.push(copy);
                }
                _ => mutate_value(&mut items[at], rng),
            }
        }
        _ => *value = leaf(value, rng),
    }
}

fn leaf(old: &Value, rng: &mut StdRng) -> Value {
    match rng.random_range(0..5) {
        0 => Value::from(INTERESTING[rng.random_range(0..INTERESTING.len())]),
        1 => Value::from(-(rng.random_range(1..i64::MAX))),
        2 => Value::from(HOSTILE_STRINGS[rng.random_range(0..HOSTILE_STRINGS.len())]),
        3 => match old {
            Value::String(s) => Value::from(s.repeat(rng.random_range(2..64))),
            _ => Value::Null,
        },
        _ => match old {
            Value::Bool(b) => Value::from(!b),
            Value::String(s) => Value::from(format!("{s}/../x")),
            _ => Value::Array(vec![]),
        },
    }
}
