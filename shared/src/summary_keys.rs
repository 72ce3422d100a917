//! The snapshot summary properties eqdv reads or writes: Iceberg's own totals and the
//! marks eqdv leaves on the snapshots it commits. Below every layer that reads a
//! summary (the plan, the planner) and the one that writes them (`snapshot`).

/// Summary property naming the snapshot a conversion was planned on.
pub const CONVERTED_FROM_PROPERTY: &str = "eqdv.converted-from";
/// Summary property naming what ran the conversion (e.g. `eqdv-converter`, `eqdv-cli`).
pub const SOURCE_PROPERTY: &str = "eqdv.source";
/// Summary property naming the shard converted, when there was one.
pub const SHARD_PROPERTY: &str = "eqdv.shard-id";
/// Summary property naming the split whose data ranges a snapshot committed together.
pub const SPLIT_PROPERTY: &str = "eqdv.split-id";
/// Summary property counting the equality deletes live after a snapshot.
pub const TOTAL_EQUALITY_DELETES_PROPERTY: &str = "total-equality-deletes";
/// Summary property holding the size of a snapshot's files (Iceberg's name); the
/// planner reads it to tell a table that fits one shard.
pub const TOTAL_FILES_SIZE_PROPERTY: &str = "total-files-size";
