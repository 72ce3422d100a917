//! The model: which rows are live under the spec's delete rules, computed without
//! looking at any file, and the plan of rows and deletes for each commit.

use std::collections::HashSet;
use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray};
use arrow_schema::DataType;
use iceberg::spec::{PrimitiveLiteral, Schema, Transform};
use iceberg::transform::{BoxedTransformFunction, create_transform_function};

use crate::read::canonical_rows_for_schema;
use crate::rng::{Rng, mix64};
use eqdv::{Error, Result};

use super::filler::{filler_column, filler_index};
use super::key_rows::KeyRows;
use super::spec::{GeneratorState, PartitionKind, WorkloadSpec};
use super::values::{KeyCode, Keys};
use super::{ABSENT_KID_OFFSET, DAY_MICROS, REGIONS, TAGS, TS_BASE, TS_DAYS};

/// A row's partition under the table's spec.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) enum Part {
    Unpartitioned,
    Region(u8),
    Day(i32),
    Bucket(Option<i32>),
}

/// Where an equality delete applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) enum Scope {
    /// Written with the unpartitioned spec: every partition.
    Global,
    Part(Part),
}

#[derive(Clone, Debug)]
pub(super) struct Row {
    kid: u64,
    /// The commit that wrote it (its data file's sequence order).
    version: u32,
    region: u8,
    ts: i64,
    salt: u32,
    /// `None`: null (always for rows written before the column existed).
    tag: Option<u8>,
    pub(super) part: Part,
}

impl Row {
    /// What the row's filler columns are drawn from: its key, commit and salt, so a
    /// replay writes the same values.
    fn filler_seed(&self) -> u64 {
        self.kid ^ (u64::from(self.version) << 40) ^ (u64::from(self.salt) << 8)
    }

    fn payload(&self) -> String {
        format!(
            "payload of key {} written by commit {} / {:08x}",
            self.kid, self.version, self.salt
        )
    }
}

/// One equality delete row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct DeleteRow {
    kid: u64,
    /// `None`: `tag` is not an equality column; `Some(t)`: it is, with value `t`.
    pub(super) tag: Option<Option<u8>>,
    pub(super) scope: Scope,
}

/// What one commit writes.
#[derive(Debug, Default)]
pub(super) struct CommitPlan {
    /// Row ids (into `Model::rows`) of the rows written.
    pub(super) inserted: Vec<usize>,
    pub(super) deletes: Vec<DeleteRow>,
}

pub(super) struct Model {
    keys: Keys,
    partition: PartitionKind,
    global_deletes: bool,
    bucket: Option<BoxedTransformFunction>,
    /// Every row ever written; `live` indexes the live ones.
    pub(super) rows: Vec<Row>,
    pub(super) live: Vec<usize>,
    /// Position of a row in `live` (`usize::MAX` once deleted).
    live_pos: Vec<usize>,
    by_key: KeyRows,
    next_kid: u64,
    hot: Vec<u64>,
    dead_kids: Vec<u64>,
    /// With `zipf_keys`: the keys the Zipf draws range over (the initial load's).
    zipf_keys: Option<u64>,
}

impl Model {
    fn new(spec: &WorkloadSpec) -> Result<Self> {
        let bucket = match spec.partition {
            PartitionKind::Bucket(n) => Some(create_transform_function(&Transform::Bucket(n))?),
            _ => None,
        };
        Ok(Self {
            keys: Keys {
                types: spec.keys.clone(),
                seed: spec.seed,
                null_keys: spec.null_keys,
                hashed: spec.hashed_keys,
            },
            partition: spec.partition,
            global_deletes: spec.global_deletes && spec.partition != PartitionKind::None,
            bucket,
            rows: Vec::new(),
            live: Vec::new(),
            live_pos: Vec::new(),
            by_key: KeyRows::default(),
            next_kid: 0,
            hot: Vec::new(),
            dead_kids: Vec::new(),
            zipf_keys: (spec.zipf_keys && spec.rows > 0).then_some(spec.rows),
        })
    }

    /// The model after `state.done` commits.
    pub(super) fn replay(state: &GeneratorState) -> Result<Self> {
        let mut model = Self::new(&state.spec)?;
        for commit in 0..state.done {
            model.run(state, commit)?;
        }
        Ok(model)
    }

    fn part_of(&self, kid: u64, region: u8, ts: i64) -> Result<Part> {
        Ok(match self.partition {
            PartitionKind::None => Part::Unpartitioned,
            PartitionKind::Identity => Part::Region(region),
            PartitionKind::Day => Part::Day(ts.div_euclid(DAY_MICROS) as i32),
            PartitionKind::Bucket(_) => {
                let bucket = match (&self.bucket, self.keys.datum(kid, 0)?) {
                    (Some(f), Some(datum)) => match f.transform_literal(&datum)? {
                        Some(d) => match d.literal() {
                            PrimitiveLiteral::Int(b) => Some(*b),
                            other => {
                                return Err(Error::InvalidInput(format!(
                                    "bucket transform gave {other:?}"
                                )));
                            }
                        },
                        None => None,
                    },
                    _ => None,
                };
                Part::Bucket(bucket)
            }
        })
    }

    fn add_row(&mut self, row: Row) -> usize {
        let id = self.rows.len();
        let code = self.keys.code(row.kid);
        self.rows.push(row);
        self.live_pos.push(self.live.len());
        self.live.push(id);
        self.by_key.add(code, id);
        id
    }

    fn kill(&mut self, id: usize) {
        let pos = self.live_pos[id];
        if pos == usize::MAX {
            return;
        }
        self.live.swap_remove(pos);
        if let Some(&moved) = self.live.get(pos) {
            self.live_pos[moved] = pos;
        }
        self.live_pos[id] = usize::MAX;
        let code = self.keys.code(self.rows[id].kid);
        self.by_key.remove(&code, id);
    }

    /// Applies an equality delete of commit `version` by the spec's rule: rows of older
    /// commits with equal key (and tag, when it is an equality column) in its scope.
    fn apply_delete(&mut self, d: &DeleteRow, version: u32) {
        let victims: Vec<usize> = self
            .by_key
            .ids(&self.keys.code(d.kid))
            .into_iter()
            .filter(|&id| {
                let r = &self.rows[id];
                r.version < version
                    && d.tag.is_none_or(|t| t == r.tag)
                    && match d.scope {
                        Scope::Global => true,
                        Scope::Part(p) => p == r.part,
                    }
            })
            .collect();
        for id in victims {
            self.kill(id);
        }
    }

    fn is_live(&self, kid: u64) -> bool {
        self.by_key.contains(&self.keys.code(kid))
    }

    fn random_ts(rng: &mut Rng) -> i64 {
        TS_BASE + rng.below((TS_DAYS * DAY_MICROS) as u64) as i64
    }

    fn new_row(
        &self,
        kid: u64,
        version: u32,
        region: u8,
        ts: i64,
        rng: &mut Rng,
        tagged: bool,
    ) -> Result<Row> {
        let salt = rng.next_u64() as u32;
        let tag = if tagged && !rng.percent(10) {
            Some(rng.below(TAGS.len() as u64) as u8)
        } else {
            None
        };
        Ok(Row {
            kid,
            version,
            region,
            ts,
            salt,
            tag,
            part: self.part_of(kid, region, ts)?,
        })
    }

    /// Plans commit `commit` and applies it to the model.
    pub(super) fn run(&mut self, state: &GeneratorState, commit: u32) -> Result<CommitPlan> {
        let mut rng = Rng::for_commit(state.spec.seed, commit);
        if commit == 0 {
            self.initial_load(&state.spec, &mut rng)
        } else {
            self.cdc_commit(&state.spec, commit, state.tagged(commit), &mut rng)
        }
    }

    fn initial_load(&mut self, spec: &WorkloadSpec, rng: &mut Rng) -> Result<CommitPlan> {
        let mut plan = CommitPlan::default();
        // Sized once: a load of 10^8 rows must not hold a grown table and its copy.
        let rows = usize::try_from(spec.rows).unwrap_or(usize::MAX);
        self.rows.reserve_exact(rows);
        self.live.reserve_exact(rows);
        self.live_pos.reserve_exact(rows);
        self.by_key.reserve(rows);
        plan.inserted.reserve_exact(rows);
        for _ in 0..spec.rows {
            let kid = self.next_kid;
            self.next_kid += 1;
            let region = rng.below(REGIONS.len() as u64) as u8;
            let ts = Self::random_ts(rng);
            let row = self.new_row(kid, 0, region, ts, rng, false)?;
            plan.inserted.push(self.add_row(row));
        }
        if spec.rows > 0 {
            for i in 0..8u64 {
                let kid = i * spec.rows / 8;
                if !self.hot.contains(&kid) {
                    self.hot.push(kid);
                }
            }
        }
        Ok(plan)
    }

    fn cdc_commit(
        &mut self,
        spec: &WorkloadSpec,
        commit: u32,
        tagged: bool,
        rng: &mut Rng,
    ) -> Result<CommitPlan> {
        let mut plan = CommitPlan::default();
        // Keys this commit already changed: a key changes at most once per commit, so a
        // delete never targets a row written by the same commit.
        let mut touched: HashSet<KeyCode> = HashSet::new();
        for _ in 0..spec.changes_per_commit {
            let roll = rng.below(100);
            if roll < 35 || self.live.is_empty() {
                self.op_insert(commit, tagged, rng, &mut touched, &mut plan)?;
            } else if roll < 97 {
                let update = roll < 80;
                self.op_change(commit, tagged, update, rng, &mut touched, &mut plan)?;
            } else {
                self.op_delete_absent(commit, tagged, rng, &mut touched, &mut plan)?;
            }
        }
        Ok(plan)
    }

    fn op_insert(
        &mut self,
        commit: u32,
        tagged: bool,
        rng: &mut Rng,
        touched: &mut HashSet<KeyCode>,
        plan: &mut CommitPlan,
    ) -> Result<()> {
        // Now and then a deleted key comes back (hot keys first).
        let mut kid = None;
        if rng.percent(10) {
            kid = self
                .hot
                .iter()
                .copied()
                .find(|&k| !self.is_live(k) && !touched.contains(&self.keys.code(k)));
            if kid.is_none() && !self.dead_kids.is_empty() {
                let i = rng.below(self.dead_kids.len() as u64) as usize;
                let k = self.dead_kids.swap_remove(i);
                if !self.is_live(k) && !touched.contains(&self.keys.code(k)) {
                    kid = Some(k);
                }
            }
        }
        let kid = match kid {
            Some(k) => k,
            None => {
                let k = self.next_kid;
                self.next_kid += 1;
                if self.hot.len() < 8 && rng.percent(5) {
                    self.hot.push(k);
                }
                k
            }
        };
        if !touched.insert(self.keys.code(kid)) {
            return Ok(());
        }
        let region = rng.below(REGIONS.len() as u64) as u8;
        let ts = Self::random_ts(rng);
        let row = self.new_row(kid, commit, region, ts, rng, tagged)?;
        plan.inserted.push(self.add_row(row));
        Ok(())
    }

    /// With `zipf_keys`, the key an update changes: a live one not yet changed by this
    /// commit, drawn by a scrambled Zipf distribution over the initial load's keys (the
    /// rank drawn, then hashed to a key id, so hot keys lie anywhere in it; over a fixed
    /// set, so a key stays as hot as the table grows); `None` when a few draws find none.
    fn zipf_pick(&self, rng: &mut Rng, touched: &HashSet<KeyCode>) -> Option<u64> {
        let n = self.zipf_keys?;
        (0..4).find_map(|_| {
            let kid = mix64(zipf_rank(rng, n) ^ ZIPF_SCRAMBLE) % n;
            (self.is_live(kid) && !touched.contains(&self.keys.code(kid))).then_some(kid)
        })
    }

    /// An update (delete + new row, like a Flink upsert) or a delete of a live key.
    fn op_change(
        &mut self,
        commit: u32,
        tagged: bool,
        update: bool,
        rng: &mut Rng,
        touched: &mut HashSet<KeyCode>,
        plan: &mut CommitPlan,
    ) -> Result<()> {
        let hot_pick = if update && rng.percent(30) {
            let candidates: Vec<u64> = self
                .hot
                .iter()
                .copied()
                .filter(|&k| self.is_live(k) && !touched.contains(&self.keys.code(k)))
                .collect();
            (!candidates.is_empty())
                .then(|| candidates[rng.below(candidates.len() as u64) as usize])
        } else {
            None
        };
        let zipf_pick = || update.then(|| self.zipf_pick(rng, touched)).flatten();
        let kid = match hot_pick.or_else(zipf_pick) {
            Some(k) => k,
            None => self.rows[self.live[rng.below(self.live.len() as u64) as usize]].kid,
        };
        let code = self.keys.code(kid);
        if !touched.insert(code) {
            return Ok(());
        }
        let victims: Vec<usize> = self.by_key.ids(&code);
        let Some(&first) = victims.first() else {
            return Ok(());
        };
        let global = self.global_deletes && rng.percent(30);
        let mut deletes: Vec<DeleteRow> = Vec::new();
        for &id in &victims {
            let r = &self.rows[id];
            let d = DeleteRow {
                kid: r.kid,
                tag: tagged.then_some(r.tag),
                scope: if global {
                    Scope::Global
                } else {
                    Scope::Part(r.part)
                },
            };
            // Rows of one key share key values, so one delete row per (tag, scope).
            if !deletes.iter().any(|e| e.tag == d.tag && e.scope == d.scope) {
                deletes.push(d);
            }
        }
        for d in &deletes {
            self.apply_delete(d, commit);
        }
        plan.deletes.extend(deletes);

        let old = self.rows[first].clone();
        if update {
            let region = if rng.percent(80) {
                old.region
            } else {
                rng.below(REGIONS.len() as u64) as u8
            };
            let ts = if rng.percent(70) {
                old.ts + rng.below(6 * 3_600_000_000) as i64
            } else {
                Self::random_ts(rng)
            };
            let row = self.new_row(old.kid, commit, region, ts, rng, tagged)?;
            plan.inserted.push(self.add_row(row));
        } else {
            self.dead_kids.push(old.kid);
        }
        Ok(())
    }

    /// A delete of a key that has no live row (CDC streams carry those too).
    fn op_delete_absent(
        &mut self,
        commit: u32,
        tagged: bool,
        rng: &mut Rng,
        touched: &mut HashSet<KeyCode>,
        plan: &mut CommitPlan,
    ) -> Result<()> {
        let kid = self.next_kid + ABSENT_KID_OFFSET + rng.below(ABSENT_KID_OFFSET);
        if !touched.insert(self.keys.code(kid)) {
            return Ok(());
        }
        let scope = if self.global_deletes && rng.percent(30) {
            Scope::Global
        } else {
            let region = rng.below(REGIONS.len() as u64) as u8;
            Scope::Part(self.part_of(kid, region, Self::random_ts(rng))?)
        };
        let d = DeleteRow {
            kid,
            tag: tagged.then_some(None),
            scope,
        };
        // With null keys the "absent" key may be the live null key: apply by the rule.
        self.apply_delete(&d, commit);
        plan.deletes.push(d);
        Ok(())
    }

    /// Builds a batch in `schema` (fields found by name) from rows.
    pub(super) fn rows_batch(&self, schema: &Schema, rows: &[&Row]) -> Result<RecordBatch> {
        let arrow = Arc::new(iceberg::arrow::schema_to_arrow_schema(schema)?);
        let kids: Vec<u64> = rows.iter().map(|r| r.kid).collect();
        let filler_seeds: Vec<u64> = rows.iter().map(|r| r.filler_seed()).collect();
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(arrow.fields().len());
        for field in arrow.fields() {
            let column: ArrayRef = match field.name().as_str() {
                "region" => Arc::new(StringArray::from_iter_values(
                    rows.iter().map(|r| REGIONS[usize::from(r.region)]),
                )),
                "ts" => Arc::new(TimestampMicrosecondArray::from_iter_values(
                    rows.iter().map(|r| r.ts),
                )),
                "payload" => Arc::new(StringArray::from_iter_values(
                    rows.iter().map(|r| r.payload()),
                )),
                "version" => Arc::new(Int64Array::from_iter_values(
                    rows.iter().map(|r| i64::from(r.version)),
                )),
                "tag" => Arc::new(StringArray::from_iter(
                    rows.iter().map(|r| r.tag.map(|t| TAGS[usize::from(t)])),
                )),
                name => match filler_index(name) {
                    Some(j) => filler_column(j, &filler_seeds, field.data_type())?,
                    None => self.key_column(name, &kids, field.data_type())?,
                },
            };
            columns.push(column);
        }
        Ok(RecordBatch::try_new(arrow, columns)?)
    }

    /// Builds an equality delete batch in `schema` (key columns, maybe `tag`).
    pub(super) fn deletes_batch(
        &self,
        schema: &Schema,
        deletes: &[&DeleteRow],
    ) -> Result<RecordBatch> {
        let arrow = Arc::new(iceberg::arrow::schema_to_arrow_schema(schema)?);
        let kids: Vec<u64> = deletes.iter().map(|d| d.kid).collect();
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(arrow.fields().len());
        for field in arrow.fields() {
            let column: ArrayRef = match field.name().as_str() {
                "tag" => Arc::new(StringArray::from_iter(
                    deletes
                        .iter()
                        .map(|d| d.tag.flatten().map(|t| TAGS[usize::from(t)])),
                )),
                name => self.key_column(name, &kids, field.data_type())?,
            };
            columns.push(column);
        }
        Ok(RecordBatch::try_new(arrow, columns)?)
    }

    fn key_column(&self, name: &str, kids: &[u64], data_type: &DataType) -> Result<ArrayRef> {
        let col = name
            .strip_prefix('k')
            .and_then(|n| n.parse::<usize>().ok())
            .filter(|&j| j < self.keys.types.len())
            .ok_or_else(|| {
                Error::InvalidInput(format!(
                    "the table has a column '{name}' that the generator does not know"
                ))
            })?;
        self.keys.column(col, kids, data_type)
    }

    /// The live rows in canonical form in `schema`, sorted.
    pub(super) fn canonical_live_rows(&self, schema: &Schema) -> Result<Vec<String>> {
        let mut out = Vec::with_capacity(self.live.len());
        let mut ids = self.live.clone();
        ids.sort_unstable();
        for chunk in ids.chunks(8192) {
            let rows: Vec<&Row> = chunk.iter().map(|&id| &self.rows[id]).collect();
            let batch = self.rows_batch(schema, &rows)?;
            out.extend(canonical_rows_for_schema(schema, &[batch])?);
        }
        out.sort_unstable();
        Ok(out)
    }
}

/// The exponent of the Zipf distribution of `zipf_keys` (YCSB's default).
const ZIPF_EXPONENT: f64 = 0.99;

/// Mixed into a Zipf rank before it is hashed to a key id.
const ZIPF_SCRAMBLE: u64 = 0x2545_f491_4f6c_dd1d;

/// A rank in `0..n` drawn from Zipf's law with [`ZIPF_EXPONENT`] (rank 0 the most
/// likely), by inverting the distribution's continuous approximation: the density
/// x^-s on [1, n + 1], whose inverse needs no sum over the ranks.
pub(super) fn zipf_rank(rng: &mut Rng, n: u64) -> u64 {
    let u = rng.below(1 << 53) as f64 / (1u64 << 53) as f64;
    let a = 1.0 - ZIPF_EXPONENT;
    let top = ((n + 1) as f64).powf(a);
    let x = ((top - 1.0) * u + 1.0).powf(1.0 / a);
    (x as u64).saturating_sub(1).min(n - 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn zipf_ranks_follow_the_law() {
        let mut rng = Rng::new(7);
        let n = 100_000;
        let draws = 100_000;
        let ranks: Vec<u64> = (0..draws).map(|_| zipf_rank(&mut rng, n)).collect();
        assert!(ranks.iter().all(|&r| r < n));
        // With an exponent near 1, the ranks below k take about ln(k + 1) / ln(n + 1)
        // of the draws: 60% below 1,000 of 100,000, 21% at rank 0 to 10.
        let share = |k: u64| ranks.iter().filter(|&&r| r < k).count() as f64 / draws as f64;
        assert!((0.55..0.66).contains(&share(1_000)), "{}", share(1_000));
        assert!((0.18..0.25).contains(&share(10)), "{}", share(10));
    }

    /// Over the CDC commits' updates of the initial load's keys: the distinct keys
    /// updated per update, and how far apart (as a share of those keys) the fifty hottest
    /// keys lie (besides the generator's own hot keys).
    fn concentration(zipf_keys: bool) -> (f64, f64) {
        let spec = WorkloadSpec {
            rows: 10_000,
            commits: 30,
            changes_per_commit: 200,
            zipf_keys,
            ..Default::default()
        };
        let mut state = GeneratorState::new(&spec);
        state.done = spec.commits + 1;
        let model = Model::replay(&state).unwrap();
        let mut updates: HashMap<u64, u64> = HashMap::new();
        for row in model
            .rows
            .iter()
            .filter(|r| r.version > 0 && r.kid < spec.rows)
        {
            *updates.entry(row.kid).or_default() += 1;
        }
        let total: u64 = updates.values().sum();
        let mut counts: Vec<(u64, u64)> = updates.iter().map(|(&k, &c)| (c, k)).collect();
        counts.sort_unstable_by(|a, b| b.cmp(a));
        // The generator's own hot keys (every eighth of the load) left out.
        let hottest: Vec<u64> = counts
            .iter()
            .map(|&(_, k)| k)
            .filter(|k| k % (spec.rows / 8) != 0)
            .take(50)
            .collect();
        let span = hottest.iter().max().unwrap() - hottest.iter().min().unwrap();
        eprintln!(
            "zipf {zipf_keys}: {total} updates of {} keys; hottest {:?}",
            updates.len(),
            &counts[..10]
        );
        (
            updates.len() as f64 / total as f64,
            span as f64 / spec.rows as f64,
        )
    }

    #[test]
    fn zipf_keys_concentrate_changes_on_hot_keys_spread_over_history() {
        let (uniform, _) = concentration(false);
        let (zipf, span) = concentration(true);
        // Uniform updates rarely meet a key twice; Zipf's return to the hot keys.
        assert!(uniform > 0.8, "uniform: {uniform:.2} keys per update");
        assert!(zipf < 0.6, "zipf: {zipf:.2} keys per update");
        assert!(
            span > 0.5,
            "the hottest keys lie within {span:.2} of the key ids"
        );
    }
}
