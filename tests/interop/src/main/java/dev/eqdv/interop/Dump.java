package dev.eqdv.interop;

import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.apache.iceberg.MetadataColumns;
import org.apache.iceberg.Schema;
import org.apache.iceberg.Snapshot;
import org.apache.iceberg.Table;
import org.apache.iceberg.data.IcebergGenerics;
import org.apache.iceberg.data.Record;
import org.apache.iceberg.io.CloseableIterable;
import org.apache.iceberg.types.Types;

/**
 * {@code dump}: the live rows of a branch read by Iceberg Java's generic reader (which applies
 * equality deletes, v2 position deletes and DVs), in canonical form ({@link Canonical}), sorted,
 * one per line. An empty table prints nothing.
 */
final class Dump {
  private Dump() {}

  static int run(List<String> argv, PrintStream out) throws IOException {
    Set<String> options = new HashSet<>(Main.TABLE_OPTIONS);
    options.add("branch");
    Args a = Args.parse("dump", argv, options, Set.of("lineage"));
    String branch = a.get("branch", "main");
    try (TableRef ref = new TableRef(a)) {
      Table table = ref.load();
      List<byte[]> lines = liveRows(table, branch, a.flag("lineage"));
      for (byte[] line : lines) {
        out.write(line);
        out.write('\n');
      }
      out.flush();
      return 0;
    }
  }

  /** The canonical lines of the live rows of {@code branch}, as UTF-8, sorted. */
  static List<byte[]> liveRows(Table table, String branch) throws IOException {
    return liveRows(table, branch, false);
  }

  /**
   * {@link #liveRows(Table, String)}, with {@code lineage}: each row ends with the v3 row lineage
   * columns {@code _row_id} and {@code _last_updated_sequence_number} (as the generic reader
   * fills them: from the data file's first_row_id and data sequence number when the file holds
   * no values of its own), which a conversion must leave unchanged.
   */
  static List<byte[]> liveRows(Table table, String branch, boolean lineage) throws IOException {
    Snapshot head = TableRef.head(table, branch);
    List<byte[]> lines = new ArrayList<>();
    if (head == null) {
      return lines;
    }
    // The current schema, in its field order, also for a branch whose head predates it.
    Schema schema = table.schema();
    if (lineage) {
      List<Types.NestedField> columns = new ArrayList<>(schema.columns());
      columns.add(MetadataColumns.ROW_ID);
      columns.add(MetadataColumns.LAST_UPDATED_SEQUENCE_NUMBER);
      schema = new Schema(columns);
    }
    try (CloseableIterable<Record> rows =
        IcebergGenerics.read(table).useSnapshot(head.snapshotId()).project(schema).build()) {
      for (Record r : rows) {
        lines.add(Canonical.row(schema, r).getBytes(StandardCharsets.UTF_8));
      }
    }
    lines.sort(Canonical.UTF8_ORDER);
    return lines;
  }
}
