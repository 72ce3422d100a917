//! Two converters on one table, made to overlap by construction rather than by luck:
//! [`overtaken_by`] runs converter B whole inside converter A's first swap (both loaded
//! the same head, B commits first), [`meeting`] holds each of two concurrent converters
//! before its first swap until both got there (both planned on the same head, then they
//! really race the swap), [`interfering`] lets another writer commit right before a
//! converter's swaps. And what each of them must report.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use eqdv::catalog::{Catalog, SqliteCatalog};
use eqdv::convert::{ConvertOptions, ConvertReport, Outcome, convert};

use eqdv_workload::generate::WorkloadSpec;

use super::Warehouse;
use super::before_swap::{BeforeSwap, BoxFuture, Swap, Then};

/// Converter B, run whole inside converter A's first swap.
#[derive(Debug)]
pub struct Overtaker<C> {
    other: C,
    ran: AtomicBool,
    report: Mutex<Option<ConvertReport>>,
}

impl<C> Overtaker<C> {
    /// B's report, once A's first swap ran it.
    pub fn report(&self) -> ConvertReport {
        self.report
            .lock()
            .unwrap()
            .clone()
            .expect("converter B never ran: A did not swap")
    }
}

/// `inner` (converter A's catalog) that, right before its first swap, lets a converter
/// on `other` (B's own connection) convert the whole table.
pub fn overtaken_by<C: Catalog>(inner: C, other: C) -> BeforeSwap<C, Overtaker<C>> {
    let state = Overtaker {
        other,
        ran: AtomicBool::new(false),
        report: Mutex::new(None),
    };
    BeforeSwap::new(inner, state, overtake::<C>)
}

fn overtake<C: Catalog>(swap: Swap<'_, Overtaker<C>, C>) -> BoxFuture<'_, Then> {
    Box::pin(async move {
        if !swap.state.ran.swap(true, Ordering::SeqCst) {
            let b = convert(&swap.state.other, swap.table, &ConvertOptions::default())
                .await
                .expect("converter B");
            *swap.state.report.lock().unwrap() = Some(b);
        }
        Then::Swap
    })
}

/// Holds a converter before its first swap until the other one got there too.
#[derive(Debug)]
pub struct Meet {
    both: Arc<tokio::sync::Barrier>,
    met: AtomicBool,
}

/// `inner` held before its first swap at `both` (a barrier for two).
pub fn meeting<C: Catalog>(inner: C, both: Arc<tokio::sync::Barrier>) -> BeforeSwap<C, Meet> {
    let state = Meet {
        both,
        met: AtomicBool::new(false),
    };
    BeforeSwap::new(inner, state, meet::<C>)
}

fn meet<C: Catalog>(swap: Swap<'_, Meet, C>) -> BoxFuture<'_, Then> {
    Box::pin(async move {
        if !swap.state.met.swap(true, Ordering::SeqCst) {
            swap.state.both.wait().await;
        }
        Then::Swap
    })
}

/// (outcome, conflicts, rebases, replans, commit attempts): how a conversion got there.
pub fn course(r: &ConvertReport) -> (Outcome, u32, u32, u32, u32) {
    (
        r.outcome,
        r.conflicts,
        r.rebases,
        r.replans,
        r.commit_attempts,
    )
}

/// Two converters planned on the same head. The winner's swap lands at once. The
/// loser's conflicts; the winner had removed the equality deletes the loser meant to
/// remove, so it plans again on the winner's snapshot and finds nothing left:
/// NothingToDo, not Converted (Converted means this run's own commit landed), and it
/// reports none of the work it threw away.
pub fn assert_lost_the_race(loser: &ConvertReport, winner: &ConvertReport) {
    assert_eq!(
        course(winner),
        (Outcome::Converted, 0, 0, 0, 1),
        "the winner converts at once"
    );
    assert_eq!(
        course(loser),
        (Outcome::NothingToDo, 1, 0, 1, 1),
        "the loser: one conflict, one re-plan, nothing to do"
    );
    assert_eq!(loser.base_snapshot_id, winner.new_snapshot_id);
    assert_eq!(loser.new_snapshot_id, None);
    assert_eq!(loser.metadata_location, None);
    assert_eq!(loser.puffin_file, None, "names a Puffin file it deleted");
    assert_eq!(
        (
            loser.groups,
            loser.dvs_written,
            loser.equality_delete_files_removed
        ),
        (0, 0, 0),
        "reports work of the attempt it threw away"
    );
}

/// The winner and the loser of two converters that raced (see [`assert_lost_the_race`]).
pub fn winner_and_loser<'a>(
    a: &'a ConvertReport,
    b: &'a ConvertReport,
) -> (&'a ConvertReport, &'a ConvertReport) {
    if a.outcome == Outcome::Converted {
        (a, b)
    } else {
        (b, a)
    }
}

/// Another writer that commits right before each of eqdv's swaps.
#[derive(Debug)]
pub struct Interference {
    other: SqliteCatalog,
    spec: WorkloadSpec,
    /// How many swaps to interfere with.
    remaining: AtomicU32,
    /// The converter's swaps seen.
    pub swaps: AtomicU32,
}

/// A catalog that lets another writer commit right before each of eqdv's swaps.
pub type Interfering = BeforeSwap<SqliteCatalog, Interference>;

/// Commits one more commit of the workload `s` before each of the first `remaining`
/// swaps.
pub fn interfering(w: &Warehouse, s: &WorkloadSpec, remaining: u32) -> Interfering {
    let inner = w.another_handle();
    let state = Interference {
        other: w.another_handle(),
        spec: WorkloadSpec {
            commits: 1,
            ..s.clone()
        },
        remaining: AtomicU32::new(remaining),
        swaps: AtomicU32::new(0),
    };
    BeforeSwap::new(inner, state, interfere)
}

fn interfere(swap: Swap<'_, Interference, SqliteCatalog>) -> BoxFuture<'_, Then> {
    Box::pin(async move {
        swap.state.swaps.fetch_add(1, Ordering::SeqCst);
        if swap
            .state
            .remaining
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
        {
            eqdv_workload::generate::generate(&swap.state.other, swap.table, &swap.state.spec)
                .await
                .expect("interfering writer");
        }
        Then::Swap
    })
}
