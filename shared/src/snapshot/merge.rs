//! Which manifests of the base a new snapshot carries, rewrites or merges.
//!
//! A streaming table gets a delete manifest from every writer commit and one from every
//! conversion, and every conversion reads every delete manifest: unmerged, a shard's
//! fixed cost grows with every commit of the day. So, as Java's snapshot producers do,
//! manifests with no live entry left are dropped, and once a partition spec has
//! `commit.manifest.min-count-to-merge` delete manifests, the base's are merged into
//! manifests of up to `commit.manifest.target-size-bytes`. Below that count, the delete
//! manifests a snapshot writes again anyway (they list an entry it removes: the DVs a
//! conversion replaces, listed by the conversions before it) are packed together the
//! same way, not each written again alone.
//!
//! Only delete manifests are merged, and only from entries already in memory (a
//! conversion reads every delete manifest in full, so merging costs no read). Data
//! manifests are the writer's to merge: a conversion reads only the ones in its scope,
//! and their entries inherit row ids that a rewrite would have to spell out.

use std::collections::HashMap;

use iceberg::spec::{ManifestFile, StructType};

use crate::table::LiveFile;

/// Table property turning manifest merging on or off (Java's name and default: on).
pub const MERGE_ENABLED_PROPERTY: &str = "commit.manifest-merge.enabled";
/// Table property: manifests of one spec at which merging starts (Java's default: 100).
pub const MIN_COUNT_TO_MERGE_PROPERTY: &str = "commit.manifest.min-count-to-merge";
/// Table property: the size merged manifests are packed up to (Java's default: 8 MiB).
pub const TARGET_SIZE_PROPERTY: &str = "commit.manifest.target-size-bytes";

/// How delete manifests are merged, from the table's properties.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MergePolicy {
    pub enabled: bool,
    pub min_count: usize,
    pub target_size_bytes: u64,
}

impl Default for MergePolicy {
    fn default() -> Self {
        Self {
            enabled: true,
            min_count: 100,
            target_size_bytes: 8 * 1024 * 1024,
        }
    }
}

impl MergePolicy {
    /// The policy the table's properties set. A value that does not parse keeps the
    /// default: merging changes how the table's files are listed, never what it holds.
    pub fn from_properties(properties: &HashMap<String, String>) -> Self {
        let default = Self::default();
        let get = |key: &str| properties.get(key).map(|v| v.trim());
        Self {
            enabled: get(MERGE_ENABLED_PROPERTY)
                .and_then(|v| v.parse::<bool>().ok())
                .unwrap_or(default.enabled),
            min_count: get(MIN_COUNT_TO_MERGE_PROPERTY)
                .and_then(|v| v.parse::<usize>().ok())
                .unwrap_or(default.min_count),
            target_size_bytes: get(TARGET_SIZE_PROPERTY)
                .and_then(|v| v.parse::<u64>().ok())
                .filter(|&size| size > 0)
                .unwrap_or(default.target_size_bytes),
        }
    }

    /// Packs `manifests` (the base's delete manifests of one spec that may be merged,
    /// in list order) into bins of up to the target size, when the spec has
    /// `total` delete manifests in the new snapshot before merging and that reaches
    /// the minimum count. Returns the bins by index; a bin of one is left as it is.
    pub fn bins(&self, manifests: &[&ManifestFile], total: usize) -> Vec<Vec<usize>> {
        if !self.enabled || total < self.min_count.max(2) {
            return (0..manifests.len()).map(|i| vec![i]).collect();
        }
        self.pack(manifests, 0..manifests.len())
    }

    /// [`Self::bins`], except that below the minimum count the manifests that are
    /// written again anyway (`rewritten[i]`: they hold an entry the snapshot removes)
    /// are packed together up to the target size rather than each written again alone;
    /// the others stay as they are. A conversion replaces old DVs listed in many
    /// manifests (one per earlier conversion): it then writes one manifest for them,
    /// not one per manifest it touched, and the next conversion reads fewer.
    pub fn bins_rewriting(
        &self,
        manifests: &[&ManifestFile],
        total: usize,
        rewritten: &[bool],
    ) -> Vec<Vec<usize>> {
        if !self.enabled || total >= self.min_count.max(2) {
            return self.bins(manifests, total);
        }
        let is_rewritten = |i: &usize| rewritten.get(*i).copied().unwrap_or(false);
        let mut bins = self.pack(manifests, (0..manifests.len()).filter(is_rewritten));
        bins.extend(
            (0..manifests.len())
                .filter(|i| !is_rewritten(i))
                .map(|i| vec![i]),
        );
        bins
    }

    /// `indices` of `manifests`, in their order, packed into bins of up to the target size.
    fn pack(
        &self,
        manifests: &[&ManifestFile],
        indices: impl IntoIterator<Item = usize>,
    ) -> Vec<Vec<usize>> {
        let mut bins: Vec<Vec<usize>> = Vec::new();
        let mut bin_size = 0u64;
        for i in indices {
            let size = u64::try_from(manifests[i].manifest_length).unwrap_or(0);
            match bins.last_mut() {
                Some(bin) if bin_size + size <= self.target_size_bytes => {
                    bin.push(i);
                    bin_size += size;
                }
                _ => {
                    bins.push(vec![i]);
                    bin_size = size;
                }
            }
        }
        bins
    }
}

/// Whether the live entries of a delete manifest can be written again from memory into
/// a manifest of the current schema: every partition tuple already has the types of the
/// spec's partition type today. A manifest written before a partition source column was
/// promoted (int to long) does not; it is rewritten from its own file, alone.
pub fn writable_from_memory(entries: &[&LiveFile], partition_type: &StructType) -> bool {
    entries.iter().all(|f| {
        let partition = f.file.partition();
        crate::partition::partition_as_type(partition, partition_type) == *partition
    })
}

/// The live entries of `files` by the manifest that lists them, each manifest's in the
/// order of (file path, content offset): the DVs of one Puffin file together, in the
/// order of their blobs, as they were written. (`files` come partly from a hash map;
/// DuckDB 1.5.5 applies the wrong DV of a Puffin file whose DVs a manifest lists out of
/// that order.)
pub fn live_entries_by_manifest<'a>(
    files: impl IntoIterator<Item = &'a LiveFile>,
) -> HashMap<&'a str, Vec<&'a LiveFile>> {
    let mut by_manifest: HashMap<&str, Vec<&LiveFile>> = HashMap::new();
    for f in files {
        by_manifest
            .entry(f.manifest_path.as_str())
            .or_default()
            .push(f);
    }
    for entries in by_manifest.values_mut() {
        entries.sort_by(|a, b| {
            (a.path(), a.file.content_offset()).cmp(&(b.path(), b.file.content_offset()))
        });
    }
    by_manifest
}

#[cfg(test)]
mod tests {
    use super::*;
    use iceberg::spec::ManifestContentType;

    fn manifest(length: i64) -> ManifestFile {
        ManifestFile {
            manifest_path: format!("m-{length}.avro"),
            manifest_length: length,
            ..crate::test_fixtures::manifest_file(ManifestContentType::Deletes)
        }
    }

    #[test]
    fn below_the_minimum_count_nothing_is_merged() {
        let policy = MergePolicy {
            min_count: 4,
            ..MergePolicy::default()
        };
        let ms = [manifest(10), manifest(20), manifest(30)];
        let refs: Vec<&ManifestFile> = ms.iter().collect();
        assert_eq!(policy.bins(&refs, 3), vec![vec![0], vec![1], vec![2]]);
        assert_eq!(policy.bins(&refs, 4), vec![vec![0, 1, 2]]);
        let off = MergePolicy {
            enabled: false,
            ..policy
        };
        assert_eq!(off.bins(&refs, 400), vec![vec![0], vec![1], vec![2]]);
    }

    #[test]
    fn below_the_minimum_count_only_manifests_written_again_are_packed() {
        let policy = MergePolicy {
            enabled: true,
            min_count: 10,
            target_size_bytes: 100,
        };
        let ms = [
            manifest(60),
            manifest(40),
            manifest(30),
            manifest(70),
            manifest(20),
        ];
        let refs: Vec<&ManifestFile> = ms.iter().collect();
        let rewritten = [true, false, true, true, true];
        assert_eq!(
            policy.bins_rewriting(&refs, ms.len(), &rewritten),
            vec![vec![0, 2], vec![3, 4], vec![1]]
        );
        // At the minimum count every manifest is packed, as without rewrites.
        assert_eq!(
            policy.bins_rewriting(&refs, 10, &rewritten),
            policy.bins(&refs, 10)
        );
        // Merging turned off: each is written again alone, or kept.
        let off = MergePolicy {
            enabled: false,
            ..policy
        };
        assert_eq!(
            off.bins_rewriting(&refs, ms.len(), &rewritten),
            vec![vec![0], vec![1], vec![2], vec![3], vec![4]]
        );
        assert_eq!(
            policy.bins_rewriting(&refs, ms.len(), &[false; 5]),
            vec![vec![0], vec![1], vec![2], vec![3], vec![4]]
        );
    }

    #[test]
    fn bins_are_packed_up_to_the_target_size_in_list_order() {
        let policy = MergePolicy {
            enabled: true,
            min_count: 2,
            target_size_bytes: 100,
        };
        let ms = [
            manifest(60),
            manifest(40),
            manifest(70),
            manifest(150),
            manifest(10),
        ];
        let refs: Vec<&ManifestFile> = ms.iter().collect();
        assert_eq!(
            policy.bins(&refs, ms.len()),
            vec![vec![0, 1], vec![2], vec![3], vec![4]]
        );
    }

    #[test]
    fn the_policy_follows_the_table_properties_and_keeps_defaults_for_bad_values() {
        let props = |pairs: &[(&str, &str)]| -> HashMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        assert_eq!(
            MergePolicy::from_properties(&HashMap::new()),
            MergePolicy::default()
        );
        let set = MergePolicy::from_properties(&props(&[
            (MERGE_ENABLED_PROPERTY, "false"),
            (MIN_COUNT_TO_MERGE_PROPERTY, "5"),
            (TARGET_SIZE_PROPERTY, "1024"),
        ]));
        assert_eq!(
            set,
            MergePolicy {
                enabled: false,
                min_count: 5,
                target_size_bytes: 1024
            }
        );
        let bad = MergePolicy::from_properties(&props(&[
            (MIN_COUNT_TO_MERGE_PROPERTY, "many"),
            (TARGET_SIZE_PROPERTY, "0"),
        ]));
        assert_eq!(bad, MergePolicy::default());
    }
}
