//! Bloom-filter pruning of row groups: which filters are worth reading, the deleted
//! values' hashes (computed once per key column, not once per row group) and the probe
//! of a filter's split blocks. A filter can only ever say "not here", so every doubt
//! (a type this does not map, a filter that cannot be read) keeps the row group.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef};
use arrow_schema::DataType;
use twox_hash::XxHash64;

use super::group_keys::{GroupKeys, Hashes, MAX_CACHED_HASHES, Plain};
use super::prune::ColumnRanges;
use crate::Result;
use crate::parquet_io::ParquetFile;

/// For a filter whose size the writer did not record: probed only for row groups whose
/// range holds at most this many deleted values of a column (with a typical 1%
/// false-positive rate, more probes would rarely all come back negative).
const BLOOM_MAX_PROBES_UNSIZED: usize = 256;

/// What one more request costs, in bytes read: against object storage a request's
/// first byte takes 10-50 ms, in which a connection reads a few hundred KiB.
const REQUEST_COST_BYTES: f64 = 256.0 * 1024.0;

/// A filter that came with the footer's read costs only hashes: probed unless it is
/// all but certain to keep the row group anyway.
const MIN_RULE_OUT_CHANCE: f64 = 0.05;

/// Whether to read and probe the bloom filter of `column` (in a row group of `rows`
/// rows) with `probes` deleted values, `in_footer` when its bytes came with the footer's
/// read. A filter only ever saves reading the column chunk, so it is read when the
/// saving it is likely to bring outweighs its own read (see [`filter_pays`]).
fn bloom_worth_probing(
    column: &parquet::file::metadata::ColumnChunkMetaData,
    rows: i64,
    probes: usize,
    in_footer: bool,
) -> bool {
    column.bloom_filter_offset().is_some()
        && filter_pays(
            column.bloom_filter_length(),
            column.compressed_size(),
            rows,
            probes,
            in_footer,
        )
}

/// `bloom_worth_probing` on the numbers: the filter's recorded length, the column
/// chunk's compressed size, the row group's rows and the values to probe. The chance
/// that a filter rules out a row group holding none of the values is that every probe
/// misses; a filter that needs its own request must save, on average, more than that
/// request and its bytes (so Java's 1 MiB default filters guarding small chunks are not
/// read, and 1 MiB filters guarding the 16 MiB key chunks of big row groups are).
fn filter_pays(
    length: Option<i32>,
    chunk_bytes: i64,
    rows: i64,
    probes: usize,
    in_footer: bool,
) -> bool {
    let Some(length) = length else {
        return probes <= BLOOM_MAX_PROBES_UNSIZED;
    };
    let rate = estimated_false_positive_rate(length, rows);
    let rules_out = (1.0 - rate).powf(probes as f64);
    if in_footer {
        return rules_out >= MIN_RULE_OUT_CHANCE;
    }
    rules_out * (REQUEST_COST_BYTES + chunk_bytes as f64) > REQUEST_COST_BYTES + f64::from(length)
}

/// The false-positive rate of a split-block bloom filter of `length` bytes (its header
/// included) holding at most `values` distinct values. Each value sets one bit in each
/// of the eight 32-bit words of one 256-bit block, so a probe of a block holding `L`
/// values passes with (1 - (31/32)^L)^8; blocks are loaded unevenly (about Poisson,
/// with mean values / blocks), which raises the rate well above that of the mean load.
fn estimated_false_positive_rate(length: i32, values: i64) -> f64 {
    // The thrift header takes a few bytes of the length; count them out.
    let blocks = f64::from((length - 16).max(32) / 32);
    let mean = values.max(1) as f64 / blocks;
    let pass = |load: f64| (1.0 - (31.0f64 / 32.0).powf(load)).powi(8);
    if mean > 64.0 {
        // So overloaded that it passes about everything anyway.
        return pass(mean);
    }
    // The Poisson weights in log space, so that none underflows on the way to the mean.
    let mut log_weight = -mean;
    let mut rate = 0.0;
    let last = (mean + 6.0 * mean.sqrt() + 10.0) as u32;
    for load in 0..=last {
        if load > 0 {
            log_weight += mean.ln() - f64::from(load).ln();
        }
        rate += log_weight.exp() * pass(f64::from(load));
    }
    rate.min(1.0)
}

/// What a group's bloom filters said of one row group.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct BloomVerdict {
    /// A filter proved that none of the deleted values in the row group's range of
    /// some key column is there.
    pub ruled_out: bool,
    /// Had the row group held none of the deleted values, the chance that the filters
    /// probed would all have passed it anyway (their false positives); `None` when no
    /// filter was probed. With filters on several key columns, those after the one that
    /// ruled it out are not read, so the chance is then an upper bound.
    pub pass_chance: Option<f64>,
}

impl BloomVerdict {
    /// No filter had a say.
    pub(super) const UNPROBED: BloomVerdict = BloomVerdict {
        ruled_out: false,
        pass_chance: None,
    };
}

impl GroupKeys {
    /// Whether a bloom filter of `row_group` proves that none of the deleted values in
    /// its range (`ranges`, from `row_group_candidates`) of some key column is there.
    /// A key matches only if every one of its columns does, so one column suffices.
    /// Counts the filters it reads into `filters_read`.
    pub(super) async fn bloom_verdict(
        &self,
        file: &mut ParquetFile,
        row_group: usize,
        ranges: &ColumnRanges,
        filters_read: &mut u64,
    ) -> Result<BloomVerdict> {
        let mut pass_chance: Option<f64> = None;
        for (i, range) in ranges.iter().enumerate() {
            let Some(range) = range else { continue };
            if range.is_empty() {
                // No deleted value in range: ruled out without a filter.
                return Ok(BloomVerdict {
                    ruled_out: true,
                    pass_chance: Some(0.0),
                });
            }
            let Some(leaf) = file.leaf_index(self.key_columns.field_ids[i]) else {
                continue;
            };
            let group = file.metadata().row_group(row_group);
            let column = group.column(leaf);
            let in_footer = column
                .bloom_filter_offset()
                .is_some_and(|offset| file.in_footer_read(offset));
            if !bloom_worth_probing(column, group.num_rows(), range.len(), in_footer) {
                continue;
            }
            let physical = file
                .metadata()
                .file_metadata()
                .schema_descr()
                .column(leaf)
                .physical_type();
            let Some(plain) = Plain::of(self.key_columns.data_type(i), physical) else {
                continue;
            };
            // The filter only ever saves a read: one that cannot be read is no filter.
            let filter = match file.bloom_filter(row_group, leaf).await {
                Ok(Some(filter)) => {
                    *filters_read += 1;
                    filter
                }
                Ok(None) => continue,
                Err(e) => {
                    tracing::warn!(error = %e, row_group, "ignoring an unreadable bloom filter");
                    continue;
                }
            };
            let mut bitset = Vec::new();
            if filter.write_bitset(&mut bitset).is_err() {
                continue;
            }
            let may_hold = match self.bloom_hashes(i, plain)? {
                Some(hashes) => hashes[range.clone()]
                    .iter()
                    .any(|&h| split_block_may_contain(&bitset, h)),
                None => {
                    let values = self.column_values(i, range.clone())?;
                    any_plain_value(&values, plain, |v| filter.check(v)).unwrap_or(true)
                }
            };
            // Each value absent from the row group passes on its own with the filter's
            // rate; the row group is kept unless every one misses.
            let passes = 1.0 - (1.0 - pass_rate(&bitset)).powf(range.len() as f64);
            pass_chance = Some(pass_chance.unwrap_or(1.0) * passes);
            if !may_hold {
                return Ok(BloomVerdict {
                    ruled_out: true,
                    pass_chance,
                });
            }
        }
        Ok(BloomVerdict {
            ruled_out: false,
            pass_chance,
        })
    }

    /// The hashes of column `i`'s sorted deleted values in encoding `plain`, or `None`
    /// when the column has too many values to keep them.
    fn bloom_hashes(&self, i: usize, plain: Plain) -> Result<Option<Hashes>> {
        let mut cache = self
            .bloom_hashes
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(hashes) = cache.get(&(i, plain)) {
            return Ok(hashes.clone());
        }
        let len = self.column_len(i);
        let hashes = if len <= MAX_CACHED_HASHES {
            let values = self.column_values(i, 0..len)?;
            let mut hashes = Vec::with_capacity(len);
            any_plain_value(&values, plain, |v| {
                hashes.push(XxHash64::oneshot(0, v));
                false
            });
            // Null keys have no hash: then indexes would not line up with the values.
            (hashes.len() == len).then(|| Arc::from(hashes))
        } else {
            None
        };
        cache.insert((i, plain), hashes.clone());
        Ok(hashes)
    }
}

/// The chance that a split-block bloom filter's `bitset` passes a value it does not
/// hold, read off the bits it has set rather than estimated from its size: a value's
/// hash picks a block uniformly and a bit of each of its eight words uniformly, so the
/// chance is the mean over blocks of the product of the words' fractions of set bits.
fn pass_rate(bitset: &[u8]) -> f64 {
    let blocks = bitset.chunks_exact(32);
    if blocks.len() == 0 {
        return 1.0;
    }
    let count = blocks.len() as f64;
    let sum: f64 = blocks
        .map(|block| {
            block
                .chunks_exact(4)
                .map(|word| {
                    let ones: u32 = word.iter().map(|b| b.count_ones()).sum();
                    f64::from(ones) / 32.0
                })
                .product::<f64>()
        })
        .sum();
    sum / count
}

/// Whether a split-block bloom filter's `bitset` may contain the value of `hash`, as the
/// Parquet format defines the probe: the hash's upper half picks one 256-bit block, and
/// its lower half, multiplied by eight fixed odd constants, one bit in each of the
/// block's eight 32-bit words; the value may be present only if all eight are set.
fn split_block_may_contain(bitset: &[u8], hash: u64) -> bool {
    const SALT: [u32; 8] = [
        0x47b6_137b,
        0x4497_4d91,
        0x8824_ad5b,
        0xa2b7_289d,
        0x7054_95c7,
        0x2df1_424b,
        0x9efc_4947,
        0x5c6b_fb31,
    ];
    let blocks = bitset.len() / 32;
    if blocks == 0 {
        return true;
    }
    let block = (((hash >> 32) * blocks as u64) >> 32) as usize;
    let key = hash as u32;
    let words = &bitset[block * 32..block * 32 + 32];
    SALT.iter().enumerate().all(|(w, salt)| {
        let bit = key.wrapping_mul(*salt) >> 27;
        let word = u32::from_le_bytes([
            words[4 * w],
            words[4 * w + 1],
            words[4 * w + 2],
            words[4 * w + 3],
        ]);
        word & (1 << bit) != 0
    })
}

/// Whether `probe` holds for any value of `array` as Parquet's PLAIN encoding `plain`
/// stores it (what its bloom filters hash), stopping at the first that does; `None` when
/// the array's type does not have that encoding. Timestamps (microseconds) and dates are
/// stored as their INT64 / INT32 values. No value is copied.
fn any_plain_value(
    array: &ArrayRef,
    plain: Plain,
    mut probe: impl FnMut(&[u8]) -> bool,
) -> Option<bool> {
    use arrow_array::types::{Int32Type, Int64Type};
    let found = match (plain, array.data_type()) {
        (Plain::Int64, _) => arrow_cast::cast(array, &DataType::Int64)
            .ok()?
            .as_primitive::<Int64Type>()
            .iter()
            .flatten()
            .any(|v| probe(&v.to_le_bytes())),
        (Plain::Int32, _) => arrow_cast::cast(array, &DataType::Int32)
            .ok()?
            .as_primitive::<Int32Type>()
            .iter()
            .flatten()
            .any(|v| probe(&v.to_le_bytes())),
        (Plain::ByteArray, DataType::Utf8) => array
            .as_string::<i32>()
            .iter()
            .flatten()
            .any(|v| probe(v.as_bytes())),
        (Plain::ByteArray, DataType::Binary) => {
            array.as_binary::<i32>().iter().flatten().any(&mut probe)
        }
        (Plain::FixedLenByteArray, DataType::FixedSizeBinary(_)) => array
            .as_fixed_size_binary()
            .iter()
            .flatten()
            .any(&mut probe),
        _ => return None,
    };
    Some(found)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use parquet::basic::Type as Physical;

    use super::*;

    #[test]
    fn filters_are_probed_only_where_they_pay() {
        // parquet-rs sizes a 1% filter for 500 values at 1 KiB: about 1e-3 per probe,
        // twice the rate of its mean load (see split_block_probe_agrees_with_parquet).
        let rate = estimated_false_positive_rate(1024 + 15, 500);
        assert!(rate > 7e-4 && rate < 2e-3, "{rate}");
        assert!(estimated_false_positive_rate(32, 1_000) > 0.99);
        assert!(estimated_false_positive_rate(48, 1_000_000) > 0.99);
        // In the footer's read: probed while a rule-out is not hopeless.
        assert!(filter_pays(Some(1039), 8_000, 500, 200, true));
        assert!(filter_pays(Some(1039), 8_000, 500, 2_000, true));
        assert!(!filter_pays(Some(1039), 8_000, 500, 20_000, true));
        // A read of its own for an 8 KB chunk: worth a request only if it all but surely
        // saves the chunk's (then it saves bytes).
        assert!(filter_pays(Some(1039), 8_000, 500, 1, false));
        assert!(!filter_pays(Some(1039), 8_000, 500, 200, false));
        // For a 16 MiB chunk, worth it while the values are few.
        assert!(filter_pays(Some(1039), 16 << 20, 500, 200, false));
        assert!(!filter_pays(Some(1039), 16 << 20, 500, 5_000, false));
        // Java's 1 MiB default filter for 1M rows (8 bits a value: a few % false
        // positives), guarding a 16 MiB chunk: worth reading for ten values, not a
        // thousand.
        assert!(filter_pays(Some(1 << 20), 16 << 20, 1_000_000, 10, false));
        assert!(!filter_pays(
            Some(1 << 20),
            16 << 20,
            1_000_000,
            1_000,
            false
        ));
        // ... and guarding an 8 KB chunk: never.
        assert!(!filter_pays(Some(1 << 20), 8_000, 500, 1, false));
        // Unsized: the fixed cap.
        assert!(filter_pays(
            None,
            8_000,
            250,
            BLOOM_MAX_PROBES_UNSIZED,
            false
        ));
        assert!(!filter_pays(
            None,
            8_000,
            250,
            BLOOM_MAX_PROBES_UNSIZED + 1,
            true
        ));
    }

    /// Every value `any_plain_value` offers, in order (`None`: an unmapped type).
    fn plain_values(array: &ArrayRef, physical: Physical) -> Option<Vec<Vec<u8>>> {
        let plain = Plain::of(array.data_type(), physical)?;
        let mut seen = Vec::new();
        any_plain_value(array, plain, |v| {
            seen.push(v.to_vec());
            false
        })?;
        Some(seen)
    }

    #[test]
    fn plain_value_probes_stop_at_the_first_hit() {
        let longs: ArrayRef = Arc::new(arrow_array::Int64Array::from(vec![1, 2, 3]));
        let mut probed = 0;
        let hit = any_plain_value(&longs, Plain::Int64, |v| {
            probed += 1;
            v == 2i64.to_le_bytes()
        });
        assert_eq!((hit, probed), (Some(true), 2));
    }

    /// The probe written here agrees with parquet's own filter: every inserted value is
    /// found, and values never inserted are found about as often as the rate predicts.
    #[test]
    fn split_block_probe_agrees_with_parquet() {
        let mut filter = parquet::bloom_filter::Sbbf::new_with_ndv_fpp(250, 0.01).unwrap();
        for v in 0..250i64 {
            filter.insert(&v);
        }
        let mut bitset = Vec::new();
        filter.write_bitset(&mut bitset).unwrap();
        let hash = |v: i64| XxHash64::oneshot(0, &v.to_le_bytes());
        let mut false_positives = 0;
        for v in 0..100_000i64 {
            assert_eq!(
                split_block_may_contain(&bitset, hash(v)),
                filter.check(&v),
                "value {v}"
            );
            if v >= 250 && filter.check(&v) {
                false_positives += 1;
            }
        }
        let rate = f64::from(false_positives) / 99_750.0;
        let estimate = estimated_false_positive_rate(bitset.len() as i32 + 16, 250);
        assert!(
            rate < 3.0 * estimate + 1e-4,
            "rate {rate}, estimate {estimate}"
        );
    }

    /// The pass rate read off a filter's bits predicts how often values it never held
    /// pass: to within four standard deviations of the count, over 200,000 probes of
    /// filters loaded from one to eight times what they were sized for.
    #[test]
    fn pass_rate_predicts_false_positives() {
        let hash = |v: i64| XxHash64::oneshot(0, &v.to_le_bytes());
        for inserted in [250i64, 600, 2_000] {
            let mut filter = parquet::bloom_filter::Sbbf::new_with_ndv_fpp(250, 0.01).unwrap();
            for v in 0..inserted {
                filter.insert(&v);
            }
            let mut bitset = Vec::new();
            filter.write_bitset(&mut bitset).unwrap();
            let rate = pass_rate(&bitset);
            let probes = 200_000i64;
            let passed = (1_000_000..1_000_000 + probes)
                .filter(|&v| split_block_may_contain(&bitset, hash(v)))
                .count() as f64;
            let expected = rate * probes as f64;
            let spread = (expected * (1.0 - rate)).sqrt();
            eprintln!("{inserted} values: {passed} of {probes} passed, {expected:.1} expected");
            assert!(
                (passed - expected).abs() <= 4.0 * spread + 1.0,
                "{inserted} values: {passed} passed, {expected:.1} expected"
            );
        }
        // An empty filter passes nothing; a full one everything.
        assert_eq!(pass_rate(&[0u8; 64]), 0.0);
        assert_eq!(pass_rate(&[0xffu8; 64]), 1.0);
    }

    #[test]
    fn plain_values_match_parquet_physical_encodings() {
        use arrow_array::{Int32Array, Int64Array, StringArray};
        let longs: ArrayRef = Arc::new(Int64Array::from(vec![Some(-2), None, Some(7)]));
        assert_eq!(
            plain_values(&longs, Physical::INT64),
            Some(vec![
                (-2i64).to_le_bytes().to_vec(),
                7i64.to_le_bytes().to_vec()
            ])
        );
        // A column stored narrower than the table's type (int promoted to long) is not
        // probed: its filter hashed other bytes.
        assert_eq!(plain_values(&longs, Physical::INT32), None);
        let micros: ArrayRef =
            Arc::new(arrow_array::TimestampMicrosecondArray::from(vec![5]).with_timezone("UTC"));
        assert_eq!(
            plain_values(&micros, Physical::INT64),
            Some(vec![5i64.to_le_bytes().to_vec()])
        );
        let dates: ArrayRef = Arc::new(arrow_array::Date32Array::from(vec![-3]));
        assert_eq!(
            plain_values(&dates, Physical::INT32),
            Some(vec![(-3i32).to_le_bytes().to_vec()])
        );
        let ints: ArrayRef = Arc::new(Int32Array::from(vec![1]));
        assert_eq!(
            plain_values(&ints, Physical::INT32),
            Some(vec![vec![1, 0, 0, 0]])
        );
        let strings: ArrayRef = Arc::new(StringArray::from(vec!["é", ""]));
        assert_eq!(
            plain_values(&strings, Physical::BYTE_ARRAY),
            Some(vec!["é".as_bytes().to_vec(), vec![]])
        );
        assert_eq!(plain_values(&strings, Physical::FIXED_LEN_BYTE_ARRAY), None);
        let uuid = [7u8; 16];
        let uuids: ArrayRef = Arc::new(
            arrow_array::FixedSizeBinaryArray::try_from_sparse_iter_with_size(
                [Some(uuid), None].into_iter(),
                16,
            )
            .unwrap(),
        );
        assert_eq!(
            plain_values(&uuids, Physical::FIXED_LEN_BYTE_ARRAY),
            Some(vec![uuid.to_vec()])
        );
        assert_eq!(plain_values(&uuids, Physical::BYTE_ARRAY), None);
    }
}
