//! What the reads of one pass may hold at once. Against object storage the reads in
//! flight, not the cores, set the pace (each is a round trip of 10-50 ms), so many run
//! at once; what bounds them is memory: the compressed column chunks a data file scan
//! is decoding and the decoded batches of delete files waiting for their turn to join a
//! key set, counted against one budget of bytes.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore, SemaphorePermit};

use crate::{Error, Result};

/// The budget is counted in KiB, so that any budget fits the semaphore's `u32` requests.
const UNIT: u64 = 1024;

pub(super) struct ReadBudget {
    /// Delete file reads in flight (data file scans are bounded by their stream).
    files: Semaphore,
    bytes: Arc<Semaphore>,
    total_units: u32,
}

impl ReadBudget {
    pub(super) fn new(parallelism: usize, bytes: u64) -> Self {
        let total_units = u32::try_from(bytes.div_ceil(UNIT).max(1)).unwrap_or(u32::MAX);
        Self {
            files: Semaphore::new(parallelism.max(1)),
            bytes: Arc::new(Semaphore::new(total_units as usize)),
            total_units,
        }
    }

    /// One delete file read in flight, until the permit is dropped.
    pub(super) async fn file(&self) -> Result<SemaphorePermit<'_>> {
        self.files.acquire().await.map_err(closed)
    }

    /// Holds `bytes` of the budget until the permit is dropped. A request larger than
    /// the whole budget takes all of it, so one big row group waits for the others but
    /// never forever.
    pub(super) async fn bytes(&self, bytes: u64) -> Result<OwnedSemaphorePermit> {
        let units = u32::try_from(bytes.div_ceil(UNIT))
            .unwrap_or(u32::MAX)
            .clamp(1, self.total_units);
        self.bytes
            .clone()
            .acquire_many_owned(units)
            .await
            .map_err(closed)
    }
}

// The semaphores are never closed; should that change, the reads fail instead of
// running unbounded.
fn closed(e: tokio::sync::AcquireError) -> Error {
    Error::InvalidInput(format!("the read budget was closed: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn holders_wait_for_bytes_and_oversized_requests_take_the_whole_budget() {
        let budget = ReadBudget::new(2, 10 * UNIT);
        let first = budget.bytes(6 * UNIT).await.unwrap();
        // 6 of 10 units held: 5 more must wait until the first is released.
        let second = budget.bytes(5 * UNIT);
        tokio::pin!(second);
        assert!(
            futures::poll!(second.as_mut()).is_pending(),
            "the budget was overdrawn"
        );
        drop(first);
        let second = second.await.unwrap();
        drop(second);
        // More than the budget: it takes all of it rather than waiting forever.
        let all = budget.bytes(1000 * UNIT).await.unwrap();
        assert_eq!(all.num_permits(), 10);
        let small = budget.bytes(1);
        tokio::pin!(small);
        assert!(futures::poll!(small.as_mut()).is_pending());
        drop(all);
        assert_eq!(small.await.unwrap().num_permits(), 1);
    }
}
