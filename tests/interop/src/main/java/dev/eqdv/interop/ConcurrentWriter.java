package dev.eqdv.interop;

import java.io.IOException;
import java.io.PrintStream;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import org.apache.iceberg.AppendFiles;
import org.apache.iceberg.DataFile;
import org.apache.iceberg.DeleteFile;
import org.apache.iceberg.RowDelta;
import org.apache.iceberg.Schema;
import org.apache.iceberg.Snapshot;
import org.apache.iceberg.Table;
import org.apache.iceberg.data.IcebergGenerics;
import org.apache.iceberg.data.Record;
import org.apache.iceberg.exceptions.CommitFailedException;
import org.apache.iceberg.io.CloseableIterable;

/**
 * {@code concurrent-writer}: a streaming writer racing whatever else runs on the table (eqdv's
 * converter, a compaction): until the time is up it alternates appends of new rows with RowDelta
 * commits of equality deletes (half of them updates: delete + new row version) for rows it read
 * at start or appended itself. Works on a table made by write-cdc (columns k0, region, ts,
 * payload, version). Each commit is logged to stderr; the totals go to stdout as JSON.
 */
final class ConcurrentWriter {
  static final String COMMIT_SUMMARY = "eqdv.interop.concurrent-writer";

  private ConcurrentWriter() {}

  static int run(List<String> argv, PrintStream out, PrintStream err) throws IOException {
    Set<String> options = new HashSet<>(Main.TABLE_OPTIONS);
    options.addAll(Set.of("seconds", "seed", "rows"));
    Args a = Args.parse("concurrent-writer", argv, options, Set.of());
    long seconds = a.longValue("seconds", 10, 0, 86_400);
    long seed = a.longValue("seed", 1, Long.MIN_VALUE, Long.MAX_VALUE);
    int rowsPerCommit = a.intValue("rows", 20, 1, 100_000);
    try (TableRef ref = new TableRef(a)) {
      Table table = ref.load();
      Schema schema = table.schema();
      if (schema.findField("k0") == null || schema.findField("payload") == null
          || schema.findField("version") == null) {
        throw new IllegalStateException(
            "table " + ref.label() + " was not made by write-cdc (needs k0, payload, version)");
      }
      Workload.KeyType key = Workload.KeyType.of(schema.findField("k0").type());

      // Rows that may be deleted: the live rows at start, then the ones appended here.
      List<Record> candidates = new ArrayList<>();
      Snapshot start = table.currentSnapshot();
      if (start != null) {
        try (CloseableIterable<Record> rows =
            IcebergGenerics.read(table).useSnapshot(start.snapshotId()).build()) {
          for (Record r : rows) {
            candidates.add(r.copy());
          }
        }
      }

      Random random = new Random(Workload.mix(seed ^ 0x5eed));
      long nextKid = Workload.CONCURRENT_KID_BASE + Math.floorMod(seed, 100L) * 100_000L;
      long kidLimit = nextKid + 100_000L;
      TableWriter writer = new TableWriter(table, "k0", 1);
      long deadline = System.nanoTime() + seconds * 1_000_000_000L;
      long commits = 0;
      long appends = 0;
      long deleteCommits = 0;
      long rowsAppended = 0;
      long keysDeleted = 0;
      long rowsUpdated = 0;
      long failed = 0;
      long version = 1_000_000L;
      for (long i = 0; System.nanoTime() < deadline; i++) {
        version++;
        boolean append = i % 2 == 0 || candidates.isEmpty();
        try {
          if (append) {
            if (nextKid + rowsPerCommit > kidLimit) {
              throw new IllegalStateException("concurrent-writer: out of key ids for seed " + seed);
            }
            List<Record> rows = new ArrayList<>();
            for (int j = 0; j < rowsPerCommit; j++) {
              rows.add(
                  Workload.row(schema, key, nextKid++, version, random.nextInt(), "concurrent-writer"));
            }
            List<DataFile> data = writer.writeData(rows);
            AppendFiles op = table.newAppend();
            data.forEach(op::appendFile);
            op.set(COMMIT_SUMMARY, Long.toString(i));
            op.commit();
            candidates.addAll(rows);
            appends++;
            rowsAppended += rows.size();
            err.printf("concurrent-writer: commit %d: appended %d rows in %d files (snapshot %d)%n",
                commits + 1, rows.size(), data.size(), table.currentSnapshot().snapshotId());
          } else {
            int n = Math.min(candidates.size(), Math.max(1, rowsPerCommit / 2));
            List<Record> deleted = new ArrayList<>();
            for (int j = 0; j < n; j++) {
              int at = random.nextInt(candidates.size());
              Record last = candidates.remove(candidates.size() - 1);
              if (at < candidates.size()) {
                deleted.add(candidates.set(at, last));
              } else {
                deleted.add(last);
              }
            }
            List<Record> updated = new ArrayList<>();
            for (int j = 0; j < deleted.size(); j += 2) {
              Record r = deleted.get(j).copy();
              r.setField("payload", "updated by concurrent-writer " + version);
              r.setField("version", version);
              updated.add(r);
            }
            List<DeleteFile> deletes = writer.writeEqualityDeletes(deleted);
            List<DataFile> data = writer.writeData(updated);
            RowDelta op = table.newRowDelta();
            deletes.forEach(op::addDeletes);
            data.forEach(op::addRows);
            op.set(COMMIT_SUMMARY, Long.toString(i));
            op.commit();
            candidates.addAll(updated);
            deleteCommits++;
            keysDeleted += deleted.size();
            rowsUpdated += updated.size();
            err.printf(
                "concurrent-writer: commit %d: %d equality deletes in %d files, %d updated rows"
                    + " (snapshot %d)%n",
                commits + 1, deleted.size(), deletes.size(), updated.size(),
                table.currentSnapshot().snapshotId());
          }
          commits++;
        } catch (CommitFailedException e) {
          failed++;
          err.println("concurrent-writer: commit failed after retries: " + Main.describe(e));
          table.refresh();
        }
      }

      Map<String, Object> json = new LinkedHashMap<>();
      json.put("table", ref.label());
      json.put("seconds", seconds);
      json.put("commits", commits);
      json.put("appends", appends);
      json.put("delete_commits", deleteCommits);
      json.put("rows_appended", rowsAppended);
      json.put("keys_deleted", keysDeleted);
      json.put("rows_updated", rowsUpdated);
      json.put("failed_commits", failed);
      table.refresh();
      json.put(
          "snapshot_id", table.currentSnapshot() == null ? null : table.currentSnapshot().snapshotId());
      Main.printJson(out, json);
      return 0;
    }
  }
}
