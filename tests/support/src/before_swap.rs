//! A catalog that runs a test's hook right before each pointer swap, or each commit of
//! changes to a catalog that takes changes (and, if asked, before each pointer read),
//! and hands every other call to the real catalog: how the tests force a race, count
//! swaps or inject a fault at the one moment that matters.

use std::fmt;
use std::future::Future;
use std::pin::Pin;

use async_trait::async_trait;
use eqdv::catalog::{Catalog, TableName, TablePointer};
use iceberg::TableUpdate;
use iceberg::io::FileIO;
use iceberg::spec::TableMetadata;

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What the swap does once its hook has run.
pub enum Then {
    /// The real swap on the inner catalog.
    Swap,
    /// No further swap: this is the swap's answer.
    Answer(eqdv::Result<()>),
}

/// What a swap hook is given: the test's state, the inner catalog and the swap's
/// arguments (for a commit of changes, the pointer the base was loaded from is not
/// known here: `expected` is empty, and so is `new_metadata_location`).
pub struct Swap<'a, S, C> {
    pub state: &'a S,
    pub inner: &'a C,
    pub table: &'a TableName,
    pub expected: &'a TablePointer,
    pub new_metadata_location: &'a str,
}

/// Runs before each swap.
pub type SwapHook<S, C> = for<'a> fn(Swap<'a, S, C>) -> BoxFuture<'a, Then>;

/// Runs before each pointer read; `Some` answers the read in the inner catalog's place.
pub type LoadHook<S, C> =
    for<'a> fn(&'a S, &'a C, &'a TableName) -> Option<eqdv::Result<TablePointer>>;

/// `inner` with `before_swap` run before each swap. `state` is the test's own (counters,
/// a second writer...), readable by the test afterwards.
///
/// `table_file_io` is deliberately not forwarded: like the hand-written wrappers this
/// replaced, the trait's default (the catalog's `file_io`) applies.
pub struct BeforeSwap<C, S> {
    pub inner: C,
    pub state: S,
    before_swap: SwapHook<S, C>,
    before_load: Option<LoadHook<S, C>>,
}

impl<C: Catalog, S: Send + Sync> BeforeSwap<C, S> {
    pub fn new(inner: C, state: S, before_swap: SwapHook<S, C>) -> Self {
        Self {
            inner,
            state,
            before_swap,
            before_load: None,
        }
    }

    /// Also runs `before_load` before each pointer read.
    pub fn before_load(mut self, before_load: LoadHook<S, C>) -> Self {
        self.before_load = Some(before_load);
        self
    }
}

impl<C: fmt::Debug, S: fmt::Debug> fmt::Debug for BeforeSwap<C, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BeforeSwap")
            .field("inner", &self.inner)
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl<C: Catalog, S: fmt::Debug + Send + Sync> Catalog for BeforeSwap<C, S> {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn file_io(&self) -> &FileIO {
        self.inner.file_io()
    }
    fn default_table_location(&self, table: &TableName) -> String {
        self.inner.default_table_location(table)
    }
    async fn load_pointer(&self, table: &TableName) -> eqdv::Result<TablePointer> {
        if let Some(hook) = self.before_load
            && let Some(answer) = hook(&self.state, &self.inner, table)
        {
            return answer;
        }
        self.inner.load_pointer(table).await
    }
    async fn swap_pointer(
        &self,
        table: &TableName,
        expected: &TablePointer,
        new_metadata_location: &str,
    ) -> eqdv::Result<()> {
        let swap = Swap {
            state: &self.state,
            inner: &self.inner,
            table,
            expected,
            new_metadata_location,
        };
        match (self.before_swap)(swap).await {
            Then::Swap => {
                self.inner
                    .swap_pointer(table, expected, new_metadata_location)
                    .await
            }
            Then::Answer(answer) => answer,
        }
    }
    fn commits_changes(&self) -> bool {
        self.inner.commits_changes()
    }
    async fn commit_changes(
        &self,
        table: &TableName,
        base: &TableMetadata,
        updates: &[TableUpdate],
    ) -> eqdv::Result<String> {
        let unknown = TablePointer {
            metadata_location: String::new(),
            version: None,
        };
        let swap = Swap {
            state: &self.state,
            inner: &self.inner,
            table,
            expected: &unknown,
            new_metadata_location: "",
        };
        match (self.before_swap)(swap).await {
            Then::Swap => self.inner.commit_changes(table, base, updates).await,
            Then::Answer(Err(e)) => Err(e),
            // A commit of changes answers with the catalog's new metadata location,
            // which a hook cannot make up.
            Then::Answer(Ok(())) => Err(eqdv::Error::InvalidInput(format!(
                "a test hook answered the commit of {table} without a metadata location"
            ))),
        }
    }
    async fn create_table(&self, table: &TableName, location: &str) -> eqdv::Result<()> {
        self.inner.create_table(table, location).await
    }
    async fn list_tables(&self, namespace: Option<&str>) -> eqdv::Result<Vec<TableName>> {
        self.inner.list_tables(namespace).await
    }
}
