//! The generator's own checks: spec parsing, replays and the model's rules.

use super::values::{KeyCode, Keys};
use super::write::{truncate_binary_bound, truncate_string_bound};
use super::*;
use std::collections::{HashMap, HashSet};

#[test]
fn parses_specs() {
    assert_eq!(
        parse_key_types("int, String,uuid").unwrap(),
        vec![KeyType::Int, KeyType::String, KeyType::Uuid]
    );
    assert!(parse_key_types("int,float").is_err());
    assert_eq!(
        "bucket:4".parse::<PartitionKind>().unwrap(),
        PartitionKind::Bucket(4)
    );
    assert_eq!("Day".parse::<PartitionKind>().unwrap(), PartitionKind::Day);
    assert!("bucket:0".parse::<PartitionKind>().is_err());
    assert!("hour".parse::<PartitionKind>().is_err());
    let spec = WorkloadSpec {
        partition: PartitionKind::Bucket(8),
        keys: vec![KeyType::Int, KeyType::Fixed],
        ..Default::default()
    };
    let json = serde_json::to_string(&spec).unwrap();
    assert!(json.contains(r#""partition":"bucket:8""#), "{json}");
    assert!(json.contains(r#""keys":["int","fixed"]"#), "{json}");
    assert_eq!(serde_json::from_str::<WorkloadSpec>(&json).unwrap(), spec);
    let partial: WorkloadSpec = serde_json::from_str(r#"{"seed": 7}"#).unwrap();
    assert_eq!(partial.seed, 7);
    assert_eq!(partial.rows, WorkloadSpec::default().rows);
}

#[test]
fn truncates_bounds_like_java() {
    let long = "tenant/eu-central-1/customer/0000000001";
    assert_eq!(
        truncate_string_bound(long, false).unwrap(),
        "tenant/eu-centra"
    );
    assert_eq!(
        truncate_string_bound(long, true).unwrap(),
        "tenant/eu-centrb"
    );
    assert_eq!(truncate_string_bound("short", true).unwrap(), "short");
    // 16 characters, not 16 bytes.
    let jp = "日本語のキー/顧客番号/東京都/123";
    assert_eq!(
        truncate_string_bound(jp, false).unwrap(),
        "日本語のキー/顧客番号/東京都/"
    );
    assert_eq!(
        truncate_string_bound(jp, true).unwrap(),
        "日本語のキー/顧客番号/東京都0"
    );
    let max = format!("a{}", "\u{10FFFF}".repeat(20));
    assert_eq!(truncate_string_bound(&max, true).unwrap(), "b");
    assert_eq!(truncate_string_bound(&"\u{10FFFF}".repeat(17), true), None);
    let before_surrogates = format!("{}x", "\u{D7FF}".repeat(17));
    assert_eq!(
        truncate_string_bound(&before_surrogates, true).unwrap(),
        format!("{}\u{E000}", "\u{D7FF}".repeat(15))
    );
    let bin = [&[0x01u8, 0xff][..], &[0xffu8; 20][..]].concat();
    assert_eq!(truncate_binary_bound(&bin, true).unwrap(), vec![0x02]);
    assert_eq!(
        truncate_binary_bound(&bin, false).unwrap(),
        bin[..16].to_vec()
    );
    assert_eq!(truncate_binary_bound(&[0xff; 17], true), None);
}

#[test]
fn key_codes_match_key_values() {
    let keys = Keys {
        types: vec![KeyType::String, KeyType::Boolean],
        seed: 3,
        null_keys: true,
        hashed: false,
    };
    let mut seen: HashMap<KeyCode, String> = HashMap::new();
    for kid in 0..5_000u64 {
        let values = format!(
            "{:?}|{:?}",
            keys.datum(kid, 0).unwrap(),
            keys.datum(kid, 1).unwrap()
        );
        let code = keys.code(kid);
        if let Some(previous) = seen.insert(code, values.clone()) {
            assert_eq!(previous, values, "kid {kid}");
        }
    }
    // Distinct values must give distinct codes too.
    let distinct: HashSet<&String> = seen.values().collect();
    assert_eq!(distinct.len(), seen.len());
}

#[test]
fn replay_is_deterministic() {
    let spec = WorkloadSpec {
        rows: 300,
        commits: 4,
        null_keys: true,
        partition: PartitionKind::Identity,
        global_deletes: true,
        add_column: true,
        changes_per_commit: 60,
        ..Default::default()
    };
    let mut state = GeneratorState::new(&spec);
    state.done = 5;
    let a = expected_rows(&state).unwrap();
    let b = expected_rows(&state).unwrap();
    assert_eq!(a, b);
    assert!(!a.is_empty());
    state.spec.seed += 1;
    assert_ne!(expected_rows(&state).unwrap(), a);
}

#[test]
fn hashed_long_keys_are_distinct_and_spread() {
    use super::values::{hashed_long_key, long_key};
    let hashed: HashSet<i64> = (0..10_000u64).map(hashed_long_key).collect();
    assert_eq!(hashed.len(), 10_000);
    // A batch of consecutive ids spans most of i64 (bounds prune nothing), where the
    // plain keys stay within a narrow range.
    let (lo, hi) = (0..1_000u64)
        .map(hashed_long_key)
        .fold((i64::MAX, i64::MIN), |(l, h), k| (l.min(k), h.max(k)));
    assert!(lo < i64::MIN / 2 && hi > i64::MAX / 2, "{lo}..{hi}");
    assert!(long_key(999) - long_key(0) < 1 << 31);
}

#[test]
fn shape_fields_must_match_when_a_table_continues() {
    let stored = WorkloadSpec::default();
    let name = eqdv::catalog::TableName::parse("db.t").unwrap();
    let refused = [
        (
            WorkloadSpec {
                hashed_keys: true,
                ..Default::default()
            },
            "hashed_keys=false",
        ),
        (
            WorkloadSpec {
                zipf_keys: true,
                ..Default::default()
            },
            "zipf_keys=false, not true",
        ),
        (
            WorkloadSpec {
                extra_columns: 3,
                ..Default::default()
            },
            "extra_columns=0, not 3",
        ),
    ];
    for (given, named) in refused {
        let err = given
            .check_continues(&stored, &name)
            .unwrap_err()
            .to_string();
        assert!(err.contains(named), "{err}");
    }
    let too_wide = WorkloadSpec {
        extra_columns: 201,
        ..Default::default()
    };
    assert!(too_wide.validate(1).is_err());
}
