//! eqdv's workloads, kept out of the engine that the functions run:
//! - `generate`: the CDC workload generator (tables that look like what streaming
//!   upserts leave behind) with its model of the rows that must be live; used by the
//!   tests, `eqdv generate`, `eqdv demo` and the benchmarks.
//! - `read`: eqdv's own DV-aware reader and the canonical row form, a second opinion
//!   next to the independent judges (`eqdv-judges`).
//! - `rng`: the small seeded random stream behind every generated value.
//!
//! The harness every crate's tests share is `eqdv-test-support` (tests/support).

pub mod generate;
pub mod read;
pub mod rng;
