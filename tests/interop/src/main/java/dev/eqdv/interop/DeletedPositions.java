package dev.eqdv.interop;

import java.io.IOException;
import java.io.PrintStream;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import org.apache.iceberg.FileScanTask;
import org.apache.iceberg.MetadataColumns;
import org.apache.iceberg.Schema;
import org.apache.iceberg.Snapshot;
import org.apache.iceberg.Table;
import org.apache.iceberg.data.IcebergGenerics;
import org.apache.iceberg.data.Record;
import org.apache.iceberg.io.CloseableIterable;
import org.apache.iceberg.types.TypeUtil;

/**
 * {@code deleted-positions}: for every live data file of a branch head, the row positions that
 * Java's generic reader does not return (whatever deletes them: equality deletes, v2 position
 * deletes, DVs). Files with no deleted row are left out. Before a conversion this is what the
 * converted DVs must hold, file by file.
 */
final class DeletedPositions {
  private DeletedPositions() {}

  static int run(List<String> argv, PrintStream out) throws IOException {
    Set<String> options = new HashSet<>(Main.TABLE_OPTIONS);
    options.add("branch");
    Args a = Args.parse("deleted-positions", argv, options, Set.of());
    String branch = a.get("branch", "main");
    try (TableRef ref = new TableRef(a)) {
      Table table = ref.load();
      Snapshot head = TableRef.head(table, branch);
      Map<String, Long> records = new HashMap<>();
      Map<String, Set<Long>> live = new HashMap<>();
      Map<String, List<Long>> deleted = new TreeMap<>();
      if (head != null) {
        try (CloseableIterable<FileScanTask> tasks =
            table.newScan().useSnapshot(head.snapshotId()).planFiles()) {
          for (FileScanTask t : tasks) {
            records.put(t.file().location(), t.file().recordCount());
            live.put(t.file().location(), new HashSet<>());
          }
        }
        Schema schema =
            TypeUtil.join(
                table.schema(), new Schema(MetadataColumns.FILE_PATH, MetadataColumns.ROW_POSITION));
        try (CloseableIterable<Record> rows =
            IcebergGenerics.read(table).useSnapshot(head.snapshotId()).project(schema).build()) {
          for (Record r : rows) {
            String file = r.getField(MetadataColumns.FILE_PATH.name()).toString();
            long pos = (Long) r.getField(MetadataColumns.ROW_POSITION.name());
            Set<Long> seen = live.get(file);
            if (seen == null || !seen.add(pos)) {
              throw new IllegalStateException(
                  "the reader returned " + file + " position " + pos + " twice or from no planned file");
            }
          }
        }
        for (Map.Entry<String, Long> e : records.entrySet()) {
          Set<Long> seen = live.get(e.getKey());
          List<Long> gone = new ArrayList<>();
          for (long p = 0; p < e.getValue(); p++) {
            if (!seen.contains(p)) {
              gone.add(p);
            }
          }
          if (!gone.isEmpty()) {
            deleted.put(e.getKey(), gone);
          }
        }
      }
      Map<String, Object> json = new LinkedHashMap<>();
      json.put("table", ref.label());
      json.put("snapshot_id", head == null ? null : head.snapshotId());
      json.put("deleted", deleted);
      Main.printJson(out, json);
      return 0;
    }
  }
}
