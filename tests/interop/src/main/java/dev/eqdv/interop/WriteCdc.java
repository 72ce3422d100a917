package dev.eqdv.interop;

import java.io.IOException;
import java.io.PrintStream;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import org.apache.iceberg.DataFile;
import org.apache.iceberg.DeleteFile;
import org.apache.iceberg.PartitionSpec;
import org.apache.iceberg.Schema;
import org.apache.iceberg.Table;
import org.apache.iceberg.TableProperties;
import org.apache.iceberg.Transaction;
import org.apache.iceberg.RowDelta;
import org.apache.iceberg.catalog.TableIdentifier;
import org.apache.iceberg.data.Record;
import org.apache.iceberg.exceptions.AlreadyExistsException;

/**
 * {@code write-cdc}: creates a v3 table if it is missing and commits a CDC workload the way a
 * streaming upsert writer does: per commit, data files with the new row versions plus equality
 * delete files (on the key column, scoped to the rows' partitions) for the keys updated or
 * deleted, in one RowDelta. Everything is a function of the seed; the workload's parameters and
 * commit count live in a table property, so running it again on the same table continues it.
 *
 * <p>{@code --bloom-filters} (on creation only) sets the table properties that make Java's
 * Parquet writer write a bloom filter on the key column, with row groups small enough that a data
 * file has several, as a writer tuned for point lookups does.
 *
 * <p>{@code --global-deletes} (with a partitioned {@code --partition}): the table is created
 * unpartitioned (spec 0) and evolved in the same commit to the partitioned spec (spec 1), which
 * the data files are written with; the equality deletes are written with spec 0, one
 * unpartitioned file per commit, as CDC writers that cannot know which partition a key's old row
 * sits in write them. Iceberg applies such global deletes to the data files of every partition.
 */
final class WriteCdc {
  static final String STATE_PROPERTY = "eqdv.interop.state";
  static final String COMMIT_SUMMARY = "eqdv.interop.commit";

  static final String BLOOM_FILTER_PROPERTY =
      TableProperties.PARQUET_BLOOM_FILTER_COLUMN_ENABLED_PREFIX + "k0";

  private WriteCdc() {}

  /**
   * A bloom filter on k0 of 128 bytes (without a cap Parquet sizes each at 1 MiB), and row groups
   * of about ten rows (the writer checks its buffered size every 5 to 10 rows against a 1 KiB
   * target), so that a small table has many row groups and a few deleted keys leave many of them
   * without one.
   */
  static Map<String, String> bloomFilterProperties() {
    Map<String, String> props = new HashMap<>();
    props.put(BLOOM_FILTER_PROPERTY, "true");
    props.put(TableProperties.PARQUET_BLOOM_FILTER_MAX_BYTES, "128");
    props.put(TableProperties.PARQUET_ROW_GROUP_SIZE_BYTES, "1024");
    props.put(TableProperties.PARQUET_ROW_GROUP_CHECK_MIN_RECORD_COUNT, "5");
    props.put(TableProperties.PARQUET_ROW_GROUP_CHECK_MAX_RECORD_COUNT, "10");
    return props;
  }

  /** The table property's JSON. */
  public static final class State {
    public long seed;
    public int rows;
    public String key;
    public String partition;
    /** Absent (false) in the state of tables written before the option existed. */
    public boolean globalDeletes;
    public long commits;

    public State() {}

    State(long seed, int rows, String key, String partition, boolean globalDeletes, long commits) {
      this.seed = seed;
      this.rows = rows;
      this.key = key;
      this.partition = partition;
      this.globalDeletes = globalDeletes;
      this.commits = commits;
    }

    boolean sameWorkload(State o) {
      return seed == o.seed
          && rows == o.rows
          && Objects.equals(key, o.key)
          && Objects.equals(partition, o.partition)
          && globalDeletes == o.globalDeletes;
    }

    String describe() {
      return "seed " + seed + ", rows " + rows + ", key " + key + ", partition " + partition
          + (globalDeletes ? ", global deletes" : "");
    }
  }

  static int run(List<String> argv, PrintStream out) throws IOException {
    Set<String> options = new HashSet<>(Main.TABLE_OPTIONS);
    options.addAll(Set.of("seed", "commits", "rows", "key", "partition"));
    Args a = Args.parse("write-cdc", argv, options, Set.of("bloom-filters", "global-deletes"));
    long seed = a.longValue("seed", 1, Long.MIN_VALUE, Long.MAX_VALUE);
    int commits = a.intValue("commits", 5, 0, Workload.MAX_COMMITS);
    int rows = a.intValue("rows", 1000, 1, Workload.MAX_ROWS);
    Workload.KeyType key = Workload.KeyType.parse(a.get("key", "long"));
    Workload.Partitioning partitioning = Workload.Partitioning.parse(a.get("partition", "none"));
    boolean global = a.flag("global-deletes");
    if (global && !partitioning.isPartitioned()) {
      // Every equality delete of an unpartitioned table is global already.
      throw new Args.UsageException(
          "write-cdc: --global-deletes needs a partitioned table (--partition identity or"
              + " bucket:N), got --partition " + partitioning);
    }

    try (TableRef ref = new TableRef(a)) {
      ref.ensureDatabase();
      State wanted = new State(seed, rows, key.label(), partitioning.toString(), global, 0);
      boolean created = false;
      Table table;
      TableIdentifier id = ref.identifier();
      if (ref.catalog.tableExists(id)) {
        table = ref.load();
      } else {
        Schema schema = Workload.schema(key);
        Map<String, String> props = new HashMap<>();
        props.put(TableProperties.FORMAT_VERSION, "3");
        props.put(TableProperties.DEFAULT_FILE_FORMAT, "parquet");
        props.put(STATE_PROPERTY, Main.toJson(wanted));
        if (a.flag("bloom-filters")) {
          props.putAll(bloomFilterProperties());
        }
        try {
          if (global) {
            // Unpartitioned first (spec 0, for the deletes), then the data's spec (spec 1, the
            // default), in the one creating commit.
            Transaction create =
                ref.catalog
                    .buildTable(id, schema)
                    .withPartitionSpec(PartitionSpec.unpartitioned())
                    .withProperties(props)
                    .createTransaction();
            partitioning.addFields(create.updateSpec()).commit();
            create.commitTransaction();
            table = ref.load();
          } else {
            table =
                ref.catalog
                    .buildTable(id, schema)
                    .withPartitionSpec(partitioning.spec(schema))
                    .withProperties(props)
                    .create();
          }
          created = true;
        } catch (AlreadyExistsException e) {
          table = ref.load();
        }
      }

      String stateJson = table.properties().get(STATE_PROPERTY);
      if (stateJson == null) {
        throw new IllegalStateException(
            "table " + ref.label() + " exists but was not made by write-cdc (no property "
                + STATE_PROPERTY + ")");
      }
      if (a.flag("bloom-filters")
          && !"true".equals(table.properties().get(BLOOM_FILTER_PROPERTY))) {
        throw new IllegalStateException(
            "table " + ref.label() + " exists without bloom filters on k0 (" + BLOOM_FILTER_PROPERTY
                + "); --bloom-filters applies only when write-cdc creates the table");
      }
      State state = Main.fromJson(stateJson, State.class);
      if (!state.sameWorkload(wanted)) {
        throw new IllegalStateException(
            "table " + ref.label() + " holds another workload (" + state.describe()
                + "); asked for " + wanted.describe());
      }

      Workload workload = new Workload(seed, rows, key, partitioning);
      for (long i = 0; i < state.commits; i++) {
        workload.next(); // replay the commits already made
      }
      long toWrite = commits + (state.commits == 0 ? 1 : 0);
      if (state.commits + toWrite + rows * 1L + toWrite * (rows / 33 + 1) >= Workload.ABSENT_KID_BASE) {
        throw new Args.UsageException("write-cdc: --rows x --commits too large for the key space");
      }

      TableWriter writer = new TableWriter(table, "k0", 0);
      Schema schema = writer.schema();
      PartitionSpec deleteSpec = global ? table.specs().get(0) : table.spec();
      if (global && (deleteSpec == null || !deleteSpec.isUnpartitioned())) {
        throw new IllegalStateException(
            "table " + ref.label() + " has no unpartitioned spec 0 for global deletes");
      }
      long dataFiles = 0;
      long deleteFiles = 0;
      long rowsWritten = 0;
      long deletesWritten = 0;
      long updates = 0;
      long pureDeletes = 0;
      long absentDeletes = 0;
      long inserts = 0;
      for (long i = 0; i < toWrite; i++) {
        Workload.CommitPlan plan = workload.next();
        List<Record> newRows = new ArrayList<>(plan.inserts.size());
        for (Workload.RowVersion v : plan.inserts) {
          newRows.add(Workload.row(schema, key, v.kid, v.version, v.salt, "commit"));
        }
        List<Record> deleted = new ArrayList<>(plan.deletes.size());
        for (long kid : plan.deletes) {
          deleted.add(Workload.row(schema, key, kid, 0, 0, "commit"));
        }
        List<DataFile> data = writer.writeData(newRows);
        List<DeleteFile> deletes = writer.writeEqualityDeletes(deleted, deleteSpec);

        Transaction txn = table.newTransaction();
        RowDelta delta = txn.newRowDelta();
        data.forEach(delta::addRows);
        deletes.forEach(delta::addDeletes);
        delta.set(COMMIT_SUMMARY, Long.toString(plan.commit));
        delta.commit();
        State next =
            new State(seed, rows, key.label(), partitioning.toString(), global, plan.commit + 1);
        txn.updateProperties().set(STATE_PROPERTY, Main.toJson(next)).commit();
        txn.commitTransaction();

        dataFiles += data.size();
        deleteFiles += deletes.size();
        rowsWritten += newRows.size();
        deletesWritten += deleted.size();
        updates += plan.updates;
        pureDeletes += plan.pureDeletes;
        absentDeletes += plan.absentDeletes;
        inserts += plan.freshInserts;
      }
      table.refresh();

      Map<String, Object> result = new LinkedHashMap<>();
      result.put("table", ref.label());
      result.put("location", table.location());
      result.put("created", created);
      result.put("format_version", 3);
      result.put("key", key.label());
      result.put("partition", partitioning.toString());
      result.put("global_deletes", global);
      result.put("commits", toWrite);
      result.put("generator_commits", workload.commitsDone());
      result.put("data_files", dataFiles);
      result.put("equality_delete_files", deleteFiles);
      result.put("rows_written", rowsWritten);
      result.put("equality_deletes_written", deletesWritten);
      result.put("inserts", inserts);
      result.put("updates", updates);
      result.put("deletes", pureDeletes);
      result.put("absent_deletes", absentDeletes);
      result.put("expected_live_rows", workload.liveRows());
      result.put(
          "snapshot_id", table.currentSnapshot() == null ? null : table.currentSnapshot().snapshotId());
      Main.printJson(out, result);
      return 0;
    }
  }
}
