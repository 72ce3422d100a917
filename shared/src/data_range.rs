//! Which range of a split a data file belongs to.
//!
//! Every range task and the fan-in must agree on it from what each reads by itself: the
//! base snapshot's manifest list and a file's manifest entry. The list decides how
//! ([`Membership`]):
//! - **By manifest layout**, when every data manifest gives its live file counts (as
//!   format v2 and later require). The data manifests, in list order, lay the base's live
//!   data files out on one line, each manifest a segment as long as its count, and range
//!   `i` of `N` takes the `i`-th `N`-th of the line. A manifest inside one range's part
//!   is that range's; one that straddles parts deals its files among them by a hash of
//!   each path to a point of its segment. A range then fetches only the manifests its
//!   part covers (about 1/N of them, plus one at each end) instead of every one.
//! - **By path hash**, when a data manifest lacks its counts: XXH64 of the path modulo
//!   `N`, and every range fetches every data manifest.
//!
//! The counts only balance the ranges: were a writer's counts wrong, every file would
//! still fall in exactly one range (its point lies in its manifest's segment, and the
//! parts cover the line once), because all compute the same layout from the same list.

use std::collections::HashMap;
use std::fmt;

use iceberg::spec::{ManifestContentType, ManifestFile};
use serde::{Deserialize, Serialize};
use twox_hash::XxHash64;

use crate::{Error, Result};

/// One range of a split into `count`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DataRange {
    /// 0-based.
    pub index: u32,
    pub count: u32,
}

impl DataRange {
    /// Range `index` of `count`; refuses an empty split or an index outside it.
    pub fn new(index: u32, count: u32) -> Result<Self> {
        if count == 0 || index >= count {
            return Err(Error::InvalidInput(format!(
                "data range {index} of {count} does not exist: a split has at least one range, numbered from 0"
            )));
        }
        Ok(Self { index, count })
    }

    /// Every range of a split into `count` (none for 0).
    pub fn all(count: u32) -> impl Iterator<Item = DataRange> {
        (0..count).map(move |index| DataRange { index, count })
    }

    /// Whether the data file at `path` is this range's by path hash: XXH64 (seed 0) of the
    /// path's bytes, modulo the count, fixed so that tasks of different builds agree.
    pub fn holds(&self, path: &str) -> bool {
        path_hash(path) % u64::from(self.count) == u64::from(self.index)
    }
}

impl fmt::Display for DataRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "data range {} of {}", self.index, self.count)
    }
}

/// How a split's data files are dealt to its ranges (see the module's documentation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Membership {
    /// By XXH64 of the path (every range fetches every data manifest). Results of
    /// versions before the layout say nothing, which means this.
    #[default]
    PathHash,
    /// By the data manifests' layout in the manifest list.
    ManifestLayout,
}

impl fmt::Display for Membership {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Membership::PathHash => "path hash",
            Membership::ManifestLayout => "manifest layout",
        })
    }
}

/// The data manifests of one snapshot laid out for a split into `count` ranges.
#[derive(Clone, Debug)]
pub struct RangeLayout {
    count: u32,
    /// The line's length: the live data files of all the manifests.
    total: u64,
    /// Manifest path -> its segment (start, length); `None` by path hash.
    segments: Option<HashMap<String, (u64, u64)>>,
}

impl RangeLayout {
    /// The layout of a split into `count` ranges over a snapshot's `manifests` (its whole
    /// manifest list, in order: the data manifests with live files are laid out).
    pub fn new(count: u32, manifests: &[ManifestFile]) -> Self {
        let mut segments = HashMap::new();
        let mut total = 0u64;
        for m in manifests
            .iter()
            .filter(|m| m.content == ManifestContentType::Data)
        {
            let (Some(added), Some(existing)) = (m.added_files_count, m.existing_files_count)
            else {
                return Self {
                    count,
                    total: 0,
                    segments: None,
                };
            };
            let live = u64::from(added) + u64::from(existing);
            if live == 0 {
                // No live file: no read lists one (see `TableFiles`).
                continue;
            }
            segments.insert(m.manifest_path.clone(), (total, live));
            total += live;
        }
        Self {
            count,
            total,
            segments: Some(segments),
        }
    }

    pub fn membership(&self) -> Membership {
        match self.segments {
            Some(_) => Membership::ManifestLayout,
            None => Membership::PathHash,
        }
    }

    /// Where range `index`'s part of the line starts (the next one's start ends it).
    fn start(&self, index: u32) -> u64 {
        let start = u128::from(index) * u128::from(self.total) / u128::from(self.count.max(1));
        u64::try_from(start).unwrap_or(u64::MAX)
    }

    /// The range whose part holds point `point` of the line.
    fn range_at(&self, point: u64) -> u32 {
        let guess = u128::from(point) * u128::from(self.count) / u128::from(self.total.max(1));
        let mut index = u32::try_from(guess)
            .unwrap_or(u32::MAX)
            .min(self.count.saturating_sub(1));
        while index + 1 < self.count && self.start(index + 1) <= point {
            index += 1;
        }
        while index > 0 && self.start(index) > point {
            index -= 1;
        }
        index
    }

    /// Whether `range` may hold files of the data manifest `manifest`: whether its part
    /// meets the manifest's segment (always, by path hash). A manifest the layout does
    /// not know (one without live files) holds nobody's.
    pub fn may_hold(&self, range: DataRange, manifest: &ManifestFile) -> bool {
        let Some(segments) = &self.segments else {
            return true;
        };
        let Some(&(offset, length)) = segments.get(&manifest.manifest_path) else {
            return false;
        };
        let (start, end) = (self.start(range.index), self.start(range.index + 1));
        start < end && start < offset + length && offset < end
    }

    /// Whether the data file at `path`, listed by the manifest at `manifest_path`, is
    /// `range`'s.
    pub fn holds(&self, range: DataRange, manifest_path: &str, path: &str) -> bool {
        let Some(segments) = &self.segments else {
            return range.holds(path);
        };
        let Some(&(offset, length)) = segments.get(manifest_path) else {
            return false;
        };
        self.range_at(offset + path_hash(path) % length) == range.index
    }
}

fn path_hash(path: &str) -> u64 {
    XxHash64::oneshot(0, path.as_bytes())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use iceberg::spec::{ManifestContentType, ManifestFile};

    use super::*;

    fn manifest(
        path: &str,
        content: ManifestContentType,
        live: Option<(u32, u32)>,
    ) -> ManifestFile {
        ManifestFile {
            manifest_path: path.to_string(),
            added_files_count: live.map(|(a, _)| a),
            existing_files_count: live.map(|(_, e)| e),
            ..crate::test_fixtures::manifest_file(content)
        }
    }

    /// Manifests of the given live counts, with paths `m<i>.avro`, and their files'
    /// paths.
    fn table(lives: &[u32]) -> (Vec<ManifestFile>, Vec<(String, String)>) {
        let manifests: Vec<_> = lives
            .iter()
            .enumerate()
            .map(|(i, &n)| {
                manifest(
                    &format!("m{i}.avro"),
                    ManifestContentType::Data,
                    Some((n, 0)),
                )
            })
            .collect();
        let files = manifests
            .iter()
            .zip(lives)
            .flat_map(|(m, &n)| {
                (0..n).map(move |f| {
                    (
                        m.manifest_path.clone(),
                        format!("s3://b/t/data/{f}-{}.parquet", m.manifest_path),
                    )
                })
            })
            .collect();
        (manifests, files)
    }

    #[test]
    fn every_file_falls_in_exactly_one_range_whose_part_covers_its_manifest() {
        for lives in [
            vec![1],
            vec![5, 0, 3],
            vec![1000],
            vec![400, 400, 400, 400, 400],
            vec![7, 1300, 2, 2, 90, 600, 1],
        ] {
            for count in [1, 2, 3, 4, 8, 13] {
                let (manifests, files) = table(&lives);
                let layout = RangeLayout::new(count, &manifests);
                assert_eq!(layout.membership(), Membership::ManifestLayout);
                let by_path: BTreeMap<&str, &ManifestFile> = manifests
                    .iter()
                    .map(|m| (m.manifest_path.as_str(), m))
                    .collect();
                let mut per_range = vec![0u64; count as usize];
                for (manifest_path, path) in &files {
                    let owners: Vec<DataRange> = DataRange::all(count)
                        .filter(|r| layout.holds(*r, manifest_path, path))
                        .collect();
                    assert_eq!(
                        owners.len(),
                        1,
                        "{path} of {lives:?} in {count}: {owners:?}"
                    );
                    assert!(
                        layout.may_hold(owners[0], by_path[manifest_path.as_str()]),
                        "{}'s owner would not fetch it",
                        manifest_path
                    );
                    per_range[owners[0].index as usize] += 1;
                }
                // The parts are balanced within the manifests cut by a boundary: exact
                // where no manifest straddles two ranges.
                let total: u64 = lives.iter().map(|&n| u64::from(n)).sum();
                if lives.iter().all(|&n| n <= 1) || count == 1 {
                    for (i, &n) in per_range.iter().enumerate() {
                        let part = layout.start(i as u32 + 1) - layout.start(i as u32);
                        assert_eq!(n, part, "{lives:?} in {count}");
                    }
                }
                assert_eq!(per_range.iter().sum::<u64>(), total);
            }
        }
    }

    #[test]
    fn a_range_fetches_only_the_manifests_its_part_covers() {
        // 8 manifests of 100 files in 4 ranges: two manifests each, none straddling.
        let (manifests, files) = table(&[100; 8]);
        let layout = RangeLayout::new(4, &manifests);
        for range in DataRange::all(4) {
            let fetched: Vec<&str> = manifests
                .iter()
                .filter(|m| layout.may_hold(range, m))
                .map(|m| m.manifest_path.as_str())
                .collect();
            let i = range.index as usize;
            assert_eq!(
                fetched,
                vec![
                    manifests[2 * i].manifest_path.as_str(),
                    manifests[2 * i + 1].manifest_path.as_str()
                ]
            );
            let held = files
                .iter()
                .filter(|(m, p)| layout.holds(range, m, p))
                .count();
            assert_eq!(held, 200);
        }
        // Delete manifests and manifests without live files are not laid out.
        let mut with_others = manifests.clone();
        with_others.insert(
            1,
            manifest("d.avro", ManifestContentType::Deletes, Some((9, 0))),
        );
        with_others.insert(
            3,
            manifest("empty.avro", ManifestContentType::Data, Some((0, 0))),
        );
        let other = RangeLayout::new(4, &with_others);
        for (m, p) in &files {
            for range in DataRange::all(4) {
                assert_eq!(other.holds(range, m, p), layout.holds(range, m, p));
            }
        }
        assert!(DataRange::all(4).all(|r| !other.may_hold(r, &with_others[3])));
    }

    #[test]
    fn a_manifest_without_counts_deals_every_file_by_path_hash() {
        let (mut manifests, files) = table(&[50, 50]);
        manifests.push(manifest("v1.avro", ManifestContentType::Data, None));
        let layout = RangeLayout::new(3, &manifests);
        assert_eq!(layout.membership(), Membership::PathHash);
        for (m, p) in &files {
            for range in DataRange::all(3) {
                assert!(layout.may_hold(range, &manifests[0]));
                assert_eq!(layout.holds(range, m, p), range.holds(p));
            }
        }
    }

    #[test]
    fn more_ranges_than_files_leave_some_ranges_empty() {
        // 3 files on a line of 3 in 8 ranges: ranges 2, 5 and 7 have a point each.
        let (manifests, files) = table(&[2, 1]);
        let layout = RangeLayout::new(8, &manifests);
        let with_points: Vec<u32> = DataRange::all(8)
            .filter(|r| layout.start(r.index) < layout.start(r.index + 1))
            .map(|r| r.index)
            .collect();
        assert_eq!(with_points, vec![2, 5, 7]);
        for (m, p) in &files {
            let owners: Vec<u32> = DataRange::all(8)
                .filter(|r| layout.holds(*r, m, p))
                .map(|r| r.index)
                .collect();
            assert_eq!(owners.len(), 1, "{p}: {owners:?}");
            assert!(
                with_points.contains(&owners[0]),
                "{p} in empty range {owners:?}"
            );
        }
        // The one-file manifest is the last point's; the other is dealt to the first two.
        assert!(layout.holds(DataRange { index: 7, count: 8 }, &files[2].0, &files[2].1));
        let fetching: Vec<u32> = DataRange::all(8)
            .filter(|r| manifests.iter().any(|m| layout.may_hold(*r, m)))
            .map(|r| r.index)
            .collect();
        assert_eq!(fetching, with_points);
    }
}
