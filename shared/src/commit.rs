//! Making a prepared snapshot the table's current state: write the new metadata.json,
//! then swap the catalog pointer with compare-and-swap.
//!
//! Never swaps a pointer it did not read: the swap is guarded by the pointer (and the
//! catalog's version token) the base was loaded from. On a conflict the caller decides
//! whether to rebase or re-plan; on an unknown outcome nothing may be deleted until the
//! pointer has been read back.

use std::str::FromStr;

use iceberg::MetadataLocation;

use crate::catalog::Catalog;
use crate::snapshot::PreparedSnapshot;
use crate::table::LoadedTable;
use crate::{Error, Result};

/// The outcome of [`publish`].
#[derive(Debug)]
pub struct Published {
    pub metadata_location: String,
}

/// Writes `prepared`'s metadata file and swaps the pointer from `base`'s to it.
///
/// On a conflict (or any error before the swap) the metadata file is deleted and the
/// error returned; the prepared manifests stay for the caller, who may reuse them.
/// On [`Error::CommitStateUnknown`] the pointer is read back: if it names our file the
/// commit landed and this returns Ok.
pub async fn publish(
    catalog: &dyn Catalog,
    base: &LoadedTable,
    prepared: &PreparedSnapshot,
) -> Result<Published> {
    let current = MetadataLocation::from_str(&base.pointer.metadata_location).map_err(|e| {
        Error::file(
            &base.pointer.metadata_location,
            "metadata location does not follow <table>/metadata/<version>-<uuid>.metadata.json",
            e,
        )
    })?;
    let next = current
        .with_next_version()
        .with_new_metadata(&prepared.metadata);
    let new_location = next.to_string();
    if let Err(e) = prepared.metadata.write_to(&base.file_io, &next).await {
        // The object may have landed before the error (e.g. a dropped connection), and
        // no swap was attempted: nothing can reference it.
        crate::storage::delete_files(&base.file_io, std::slice::from_ref(&new_location)).await;
        return Err(Error::file(
            &new_location,
            format!("cannot write new metadata of table {}", base.name),
            e,
        ));
    }
    crate::test_hooks::pause_point(crate::test_hooks::BEFORE_SWAP).await;

    match catalog
        .swap_pointer(&base.name, &base.pointer, &new_location)
        .await
    {
        Ok(()) => Ok(Published {
            metadata_location: new_location,
        }),
        Err(Error::CommitStateUnknown { table, message }) => {
            // The request may have landed: only the pointer can tell.
            match catalog.load_pointer(&base.name).await {
                Ok(p) if p.metadata_location == new_location => Ok(Published {
                    metadata_location: new_location,
                }),
                Ok(_) => {
                    crate::storage::delete_files(&base.file_io, &[new_location]).await;
                    Err(Error::CommitConflict {
                        table,
                        message: format!("commit did not land ({message})"),
                    })
                }
                // Still unknown: keep every file, a later cleanup decides.
                Err(e) => Err(Error::CommitStateUnknown {
                    table,
                    message: format!("{message}; reading the pointer back failed: {e}"),
                }),
            }
        }
        Err(e) => {
            crate::storage::delete_files(&base.file_io, &[new_location]).await;
            Err(e)
        }
    }
}
