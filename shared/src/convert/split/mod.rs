//! One conversion split across data-file ranges, committed once.
//!
//! A group too big for one invocation (a global group makes the whole table one) is
//! converted in ranges: every range resolves all of the group's keys against its own
//! share of the candidate data files, all read at one snapshot, and writes their DVs to a
//! Puffin file of its own, committing nothing ([`convert_range`]). One fan-in then
//! commits every range's DVs and removes the group's equality deletes in a single
//! snapshot ([`commit_ranges`]), validated against the head as any conversion is. The
//! equality deletes go only when every range of the split came back: a missing, failed or
//! mismatched range commits nothing, and the ranges' Puffin files are removed.
//!
//! A data file's range follows from the base's manifest list and the file's entry alone
//! (`crate::data_range`), so every range task and the fan-in agree on it: nothing lists
//! the files of a range, and a range fetches only the data manifests that hold its files.
//!
//! The pieces: [`result`] (what a range hands the fan-in), [`range`] (converting one
//! range), [`fan_in`] (committing them all), [`in_process`] (a split within one process)
//! and [`tasks`] (a split run as separate tasks, each possibly in another process, as
//! the deployed state machine runs it). Which range a data file belongs to is
//! `crate::data_range`'s, below the table read.

mod fan_in;
mod in_process;
mod range;
mod result;
mod tasks;

pub use crate::data_range::{DataRange, Membership, RangeLayout};
pub use fan_in::{commit_ranges, commit_ranges_of};
pub use in_process::convert_in_ranges;
pub use range::{convert_range, convert_range_of};
pub use result::{DvTarget, RangeDv, RangePuffin, RangeResult, discard_ranges};
pub use tasks::{
    MAX_RANGES, RangePhases, RangeTaskOutput, SplitCleanup, SplitJob, run_cleanup_task,
    run_commit_task, run_range_task,
};
