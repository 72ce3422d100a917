//! The embedded default catalog: a SQLite file with the schema that iceberg-rust's
//! SQL catalog, PyIceberg's SqlCatalog and Java's JdbcCatalog share, so tables made by
//! any of them open here and the other way round.
//!
//! The swap is `UPDATE ... WHERE metadata_location = <expected>`: zero rows updated
//! means someone else committed first. It never overwrites a pointer it did not read.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use iceberg::io::FileIO;
use rusqlite::{Connection, OptionalExtension, params};

use super::{Catalog, TableName, TablePointer, already_exists, not_found};
use crate::{Error, Result};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS iceberg_tables (
    catalog_name VARCHAR(255) NOT NULL,
    table_namespace VARCHAR(255) NOT NULL,
    table_name VARCHAR(255) NOT NULL,
    metadata_location VARCHAR(1000),
    previous_metadata_location VARCHAR(1000),
    iceberg_type VARCHAR(5),
    PRIMARY KEY (catalog_name, table_namespace, table_name)
);
CREATE TABLE IF NOT EXISTS iceberg_namespace_properties (
    catalog_name VARCHAR(255) NOT NULL,
    namespace VARCHAR(255) NOT NULL,
    property_key VARCHAR(255) NOT NULL,
    property_value VARCHAR(1000),
    PRIMARY KEY (catalog_name, namespace, property_key)
);
";

/// A SQLite-backed catalog over a warehouse on local disk.
#[derive(Clone)]
pub struct SqliteCatalog {
    name: String,
    db_path: PathBuf,
    warehouse: PathBuf,
    conn: Arc<Mutex<Connection>>,
    file_io: FileIO,
}

impl std::fmt::Debug for SqliteCatalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteCatalog")
            .field("name", &self.name)
            .field("db_path", &self.db_path)
            .field("warehouse", &self.warehouse)
            .finish()
    }
}

impl SqliteCatalog {
    /// The embedded default: `DIR/catalog.db`, catalog name `eqdv`, data under `DIR`.
    pub fn open_warehouse(warehouse: &Path) -> Result<Self> {
        Self::open("eqdv", &warehouse.join("catalog.db"), warehouse)
    }

    /// Opens (creating if needed) a SQLite catalog file.
    pub fn open(name: &str, db_path: &Path, warehouse: &Path) -> Result<Self> {
        std::fs::create_dir_all(warehouse).map_err(|e| {
            Error::file(
                warehouse.display().to_string(),
                "cannot create warehouse directory",
                e,
            )
        })?;
        let warehouse = warehouse.canonicalize().map_err(|e| {
            Error::file(
                warehouse.display().to_string(),
                "cannot resolve warehouse",
                e,
            )
        })?;
        let conn = Connection::open(db_path).map_err(|e| sql_error(name, e))?;
        // Concurrent converters (processes) wait for each other's short transactions.
        conn.busy_timeout(Duration::from_secs(30))
            .map_err(|e| sql_error(name, e))?;
        conn.execute_batch(SCHEMA).map_err(|e| sql_error(name, e))?;
        Ok(Self {
            name: name.to_string(),
            db_path: db_path.to_path_buf(),
            warehouse,
            conn: Arc::new(Mutex::new(conn)),
            file_io: FileIO::new_with_fs(),
        })
    }

    /// The warehouse directory (absolute).
    pub fn warehouse(&self) -> &Path {
        &self.warehouse
    }

    fn with_conn<T>(&self, f: impl FnOnce(&Connection) -> rusqlite::Result<T>) -> Result<T> {
        let conn = self.conn.lock().map_err(|_| Error::Catalog {
            catalog: self.name.clone(),
            message: "connection lock poisoned".into(),
            // Another task panicked holding it: not the fault of this table or input.
            retryable: true,
            source: None,
        })?;
        f(&conn).map_err(|e| sql_error(&self.name, e))
    }

    /// Creates a namespace if it does not exist (PyIceberg marks it with `exists=true`).
    pub fn ensure_namespace(&self, namespace: &str) -> Result<()> {
        self.with_conn(|c| {
            c.execute(
                "INSERT OR IGNORE INTO iceberg_namespace_properties
                 (catalog_name, namespace, property_key, property_value) VALUES (?1, ?2, 'exists', 'true')",
                params![self.name, namespace],
            )
            .map(|_| ())
        })
    }
}

fn sql_error(catalog: &str, e: rusqlite::Error) -> Error {
    use rusqlite::ErrorCode as C;
    // SQLite's result code: another process holds the database past the busy timeout, or
    // the disk failed or filled; anything else (a file that is no database, a
    // constraint, a query eqdv got wrong) fails the same way again.
    let retryable = matches!(
        e.sqlite_error_code(),
        Some(
            C::DatabaseBusy | C::DatabaseLocked | C::SystemIoFailure | C::DiskFull | C::OutOfMemory
        )
    );
    Error::Catalog {
        catalog: catalog.to_string(),
        message: format!("sqlite: {e}"),
        retryable,
        source: Some(Box::new(e)),
    }
}

#[async_trait]
impl Catalog for SqliteCatalog {
    fn name(&self) -> &str {
        &self.name
    }

    fn file_io(&self) -> &FileIO {
        &self.file_io
    }

    fn default_table_location(&self, table: &TableName) -> String {
        format!(
            "file://{}/{}.db/{}",
            self.warehouse.display(),
            table.namespace,
            table.name
        )
    }

    async fn load_pointer(&self, table: &TableName) -> Result<TablePointer> {
        let location: Option<Option<String>> = self.with_conn(|c| {
            c.query_row(
                "SELECT metadata_location FROM iceberg_tables
                 WHERE catalog_name = ?1 AND table_namespace = ?2 AND table_name = ?3",
                params![self.name, table.namespace, table.name],
                |row| row.get(0),
            )
            .optional()
        })?;
        match location.flatten() {
            Some(metadata_location) => Ok(TablePointer {
                metadata_location,
                version: None,
            }),
            None => Err(not_found(&self.name, table)),
        }
    }

    async fn swap_pointer(
        &self,
        table: &TableName,
        expected: &TablePointer,
        new_metadata_location: &str,
    ) -> Result<()> {
        let updated = self.with_conn(|c| {
            c.execute(
                "UPDATE iceberg_tables SET metadata_location = ?1, previous_metadata_location = ?2
                 WHERE catalog_name = ?3 AND table_namespace = ?4 AND table_name = ?5
                   AND metadata_location = ?2",
                params![
                    new_metadata_location,
                    expected.metadata_location,
                    self.name,
                    table.namespace,
                    table.name
                ],
            )
        })?;
        if updated == 1 {
            Ok(())
        } else {
            Err(Error::CommitConflict {
                table: table.to_string(),
                message: format!(
                    "metadata pointer is no longer {}",
                    expected.metadata_location
                ),
            })
        }
    }

    async fn create_table(&self, table: &TableName, metadata_location: &str) -> Result<()> {
        self.ensure_namespace(&table.namespace)?;
        let inserted = self.with_conn(|c| {
            c.execute(
                "INSERT OR IGNORE INTO iceberg_tables
                 (catalog_name, table_namespace, table_name, metadata_location, previous_metadata_location, iceberg_type)
                 VALUES (?1, ?2, ?3, ?4, NULL, 'TABLE')",
                params![self.name, table.namespace, table.name, metadata_location],
            )
        })?;
        if inserted == 1 {
            Ok(())
        } else {
            Err(already_exists(&self.name, table))
        }
    }

    async fn list_tables(&self, namespace: Option<&str>) -> Result<Vec<TableName>> {
        self.with_conn(|c| {
            let mut stmt = c.prepare(
                "SELECT table_namespace, table_name FROM iceberg_tables
                 WHERE catalog_name = ?1 AND (?2 IS NULL OR table_namespace = ?2)
                 ORDER BY table_namespace, table_name",
            )?;
            let rows = stmt.query_map(params![self.name, namespace], |row| {
                Ok(TableName::new(
                    row.get::<_, String>(0)?,
                    row.get::<_, String>(1)?,
                ))
            })?;
            rows.collect()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlite_errors_are_retryable_only_when_the_database_was_busy_or_the_disk_failed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = dir.path().join("catalog.db");
        let holder = Connection::open(&db).expect("open");
        holder.execute_batch("BEGIN EXCLUSIVE").expect("lock");
        let waiter = Connection::open(&db).expect("open");
        waiter.busy_timeout(Duration::ZERO).expect("timeout");
        let busy = waiter.execute_batch("BEGIN EXCLUSIVE").expect_err("busy");
        let busy = sql_error("eqdv", busy);
        assert!(busy.retryable(), "{busy}");

        let garbage = dir.path().join("not-a-catalog.db");
        std::fs::write(&garbage, vec![7u8; 4096]).expect("write");
        let not_a_db = Connection::open(&garbage)
            .and_then(|c| c.execute_batch(SCHEMA))
            .expect_err("not a database");
        let not_a_db = sql_error("eqdv", not_a_db);
        assert!(!not_a_db.retryable(), "{not_a_db}");
        assert_eq!(not_a_db.kind(), crate::ErrorKind::Catalog);
    }
}
