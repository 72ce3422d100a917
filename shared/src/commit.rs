//! Making a prepared snapshot the table's current state: write the new metadata.json
//! (unless it was written with the manifests, [`publish_written`]), then swap the
//! catalog pointer with compare-and-swap; or, for a catalog that takes changes (the
//! Iceberg REST protocol), send the changes with the requirements that guard them.
//!
//! Never swaps a pointer it did not read: the swap is guarded by the pointer (and the
//! catalog's version token) the base was loaded from. On a conflict the caller decides
//! whether to rebase or re-plan. Nothing is deleted after a failed swap until the
//! pointer has been read back ([`commit_outcome`]).

use iceberg::spec::TableMetadata;

use crate::catalog::Catalog;
use crate::location::normalize_location;
use crate::snapshot::{PreparedSnapshot, WrittenSnapshot};
use crate::table::LoadedTable;
use crate::{Error, Result};

/// The outcome of [`publish`].
#[derive(Debug)]
pub struct Published {
    pub metadata_location: String,
}

/// Writes `prepared`'s metadata file and swaps the pointer from `base`'s to it.
///
/// On a failed swap, [`commit_outcome`] reads the pointer back first: if our commit
/// landed this returns Ok; if it is proven absent the metadata file is deleted and the
/// error returned (an unknown outcome proven absent becomes [`Error::CommitConflict`]);
/// the prepared manifests stay for the caller, who may reuse them. If the read-back
/// fails nothing is deleted and the error is [`Error::CommitStateUnknown`]. Any error
/// other than that one means our commit is not in the table.
pub async fn publish(
    catalog: &dyn Catalog,
    base: &LoadedTable,
    prepared: &PreparedSnapshot,
) -> Result<Published> {
    if catalog.commits_changes() {
        return commit_changes(catalog, base, prepared).await;
    }
    let next = base.next_metadata_location(&prepared.metadata)?;
    let new_location = next.to_string();
    if let Err(e) = prepared.metadata.write_to(&base.file_io, &next).await {
        // The object may have landed before the error (e.g. a dropped connection), and
        // no swap was attempted: nothing can reference it.
        crate::storage::delete_files(
            &base.file_io,
            base.location(),
            std::slice::from_ref(&new_location),
        )
        .await;
        return Err(Error::file(
            &new_location,
            format!("cannot write new metadata of table {}", base.name),
            e,
        ));
    }
    let swapped = swap(catalog, base, &new_location, prepared.snapshot_id).await;
    if let Err(e) = &swapped
        && !matches!(e, Error::CommitStateUnknown { .. })
    {
        // Proven absent: nothing references the file.
        crate::storage::delete_files(
            &base.file_io,
            base.location(),
            std::slice::from_ref(&new_location),
        )
        .await;
    }
    swapped
}

/// Commits `written` on top of `base`, as [`publish`] does after writing its metadata
/// file (a pointer swap to the file `written` wrote, or the changes for a catalog that
/// takes changes), but deleting nothing: on an error other than
/// [`Error::CommitStateUnknown`] the commit is proven absent and the caller removes
/// `written.prepared.written_files` (the metadata file among them).
pub async fn publish_written(
    catalog: &dyn Catalog,
    base: &LoadedTable,
    written: &WrittenSnapshot,
) -> Result<Published> {
    match (&written.metadata_location, catalog.commits_changes()) {
        (None, true) => commit_changes(catalog, base, &written.prepared).await,
        (Some(location), false) => {
            swap(catalog, base, location, written.prepared.snapshot_id).await
        }
        // The snapshot was built for the other kind of catalog: a caller's mistake,
        // caught before anything is sent.
        (location, _) => Err(Error::InvalidInput(format!(
            "table {}: a snapshot built {} a metadata file cannot be committed to catalog {}",
            base.name,
            if location.is_some() {
                "with"
            } else {
                "without"
            },
            catalog.name()
        ))),
    }
}

/// Swaps the pointer from `base`'s to `new_location` (written already), reading it
/// back after a failed swap: Ok if the commit landed; an error other than
/// [`Error::CommitStateUnknown`] only when it is proven absent. Deletes nothing.
async fn swap(
    catalog: &dyn Catalog,
    base: &LoadedTable,
    new_location: &str,
    snapshot_id: i64,
) -> Result<Published> {
    crate::test_hooks::pause_point(crate::test_hooks::BEFORE_SWAP).await;

    let swapped = catalog
        .swap_pointer(&base.name, &base.pointer, new_location)
        .await
        .map(|()| new_location.to_string());
    settle(catalog, base, swapped, Some(new_location), snapshot_id).await
}

/// Sends `prepared`'s changes to a catalog that takes changes, reading the table back
/// after a failed commit, as [`swap`] does. Deletes nothing.
async fn commit_changes(
    catalog: &dyn Catalog,
    base: &LoadedTable,
    prepared: &PreparedSnapshot,
) -> Result<Published> {
    crate::test_hooks::pause_point(crate::test_hooks::BEFORE_SWAP).await;

    let committed = catalog
        .commit_changes(&base.name, &base.metadata, &prepared.updates)
        .await;
    // The catalog names the metadata file; none is ours to find in the pointer, so
    // the read-back looks for the snapshot.
    settle(catalog, base, committed, None, prepared.snapshot_id).await
}

/// The commit's outcome from the catalog's answer: its new metadata location, or, after
/// an error, what reading the table back proves (see [`commit_outcome`]).
async fn settle(
    catalog: &dyn Catalog,
    base: &LoadedTable,
    answer: Result<String>,
    new_location: Option<&str>,
    snapshot_id: i64,
) -> Result<Published> {
    let error = match answer {
        Ok(metadata_location) => return Ok(Published { metadata_location }),
        Err(error) => error,
    };
    match commit_outcome(catalog, base, new_location, Some(snapshot_id), &error).await {
        CommitOutcome::Landed { current } => {
            // Ours when we wrote it; else the metadata that holds our snapshot.
            let metadata_location = new_location.map_or(current, str::to_string);
            tracing::info!(
                table = %base.name,
                metadata_location = %metadata_location,
                error = %error,
                "the commit landed although the catalog reported an error"
            );
            Ok(Published { metadata_location })
        }
        CommitOutcome::Absent => Err(absent(error)),
        // Still unknown: keep every file, a later cleanup decides.
        CommitOutcome::Unknown(read_back) => {
            let message = match error {
                Error::CommitStateUnknown { message, .. } => message,
                e => e.to_string(),
            };
            Err(Error::CommitStateUnknown {
                table: base.name.to_string(),
                message: format!("{message}; reading the pointer back failed: {read_back}"),
            })
        }
    }
}

/// The error of a swap whose commit is proven absent: an unknown outcome becomes a
/// conflict (for a retry loop it is one like any other); other errors stay as they are.
pub fn absent(error: Error) -> Error {
    match error {
        Error::CommitStateUnknown { table, message } => Error::CommitConflict {
            table,
            message: format!("commit did not land ({message})"),
        },
        e => e,
    }
}

/// What a failed pointer swap did to the table, as far as it can be proven.
#[derive(Debug)]
pub enum CommitOutcome {
    /// Our metadata is (or was) the table's current metadata: the commit is done.
    /// `current` is the metadata location the table's pointer names now.
    Landed { current: String },
    /// Our commit is not in the table: the attempt's files may be deleted.
    Absent,
    /// The read-back failed: nothing may be deleted (the payload is why).
    Unknown(Error),
}

/// Decides whether a commit whose swap returned `error` landed, by reading the pointer
/// back, before anyone deletes a file.
///
/// Why: an error from the catalog does not prove that the swap was not applied. A
/// request may land and its answer be lost; the client (the AWS SDK) then retries it,
/// and the retry meets the VersionId the first request already replaced, so Glue
/// answers ConcurrentModificationException although our commit is the table's current
/// state. A 5xx answered after the request was forwarded may have been applied too.
/// Deleting the new metadata.json on such an error would leave the table pointing at a
/// missing file. So every error is checked against the pointer, except
/// [`Error::CommitConflict`]: a catalog returns it only when it knows the swap was not
/// applied (Glue's pre-check GetTable saw the pointer moved, a SQL update matched no
/// row).
///
/// The commit landed if the pointer names `new_location` (the metadata file eqdv wrote;
/// `None` when the catalog writes it), or if the metadata it names holds our snapshot
/// (`snapshot_id`, when the commit adds one) or lists `new_location` in its metadata-log
/// (another writer committed on top of ours). It is absent only when that metadata
/// shows neither. When the pointer or its metadata cannot be read, the outcome stays
/// unknown and every file must be kept.
pub async fn commit_outcome(
    catalog: &dyn Catalog,
    base: &LoadedTable,
    new_location: Option<&str>,
    snapshot_id: Option<i64>,
    error: &Error,
) -> CommitOutcome {
    if matches!(error, Error::CommitConflict { .. }) {
        return CommitOutcome::Absent;
    }
    let pointer = match catalog.load_pointer(&base.name).await {
        Ok(p) => p,
        Err(e) => return CommitOutcome::Unknown(e),
    };
    if Some(pointer.metadata_location.as_str()) == new_location {
        return CommitOutcome::Landed {
            current: pointer.metadata_location,
        };
    }
    if pointer.metadata_location == base.pointer.metadata_location {
        // Nothing was committed since our base: not ours, not anyone's.
        return CommitOutcome::Absent;
    }
    let current = match TableMetadata::read_from(&base.file_io, &pointer.metadata_location).await {
        Ok(m) => m,
        Err(e) => {
            return CommitOutcome::Unknown(Error::file(
                &pointer.metadata_location,
                format!("cannot read the current metadata of table {}", base.name),
                e,
            ));
        }
    };
    let ours = new_location.map(normalize_location);
    let in_log = current
        .metadata_log()
        .iter()
        .any(|entry| Some(normalize_location(&entry.metadata_file)) == ours);
    let has_snapshot = snapshot_id.is_some_and(|id| current.snapshot_by_id(id).is_some());
    if in_log || has_snapshot {
        CommitOutcome::Landed {
            current: pointer.metadata_location,
        }
    } else {
        CommitOutcome::Absent
    }
}
