package dev.eqdv.interop;

import java.io.IOException;
import java.io.PrintStream;
import java.util.Comparator;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import org.apache.iceberg.DataFile;
import org.apache.iceberg.FileFormat;
import org.apache.iceberg.FileScanTask;
import org.apache.iceberg.PartitionSpec;
import org.apache.iceberg.RewriteFiles;
import org.apache.iceberg.Schema;
import org.apache.iceberg.Snapshot;
import org.apache.iceberg.StructLike;
import org.apache.iceberg.Table;
import org.apache.iceberg.data.GenericDeleteFilter;
import org.apache.iceberg.data.GenericFileWriterFactory;
import org.apache.iceberg.data.GenericRecord;
import org.apache.iceberg.data.Record;
import org.apache.iceberg.data.parquet.GenericParquetReaders;
import org.apache.iceberg.encryption.EncryptedOutputFile;
import org.apache.iceberg.io.CloseableIterable;
import org.apache.iceberg.io.DataWriter;
import org.apache.iceberg.io.OutputFileFactory;
import org.apache.iceberg.parquet.Parquet;

/**
 * {@code rewrite}: rewrites one data file the way compaction does: reads it with its deletes
 * applied (Java's delete filter: equality deletes, position deletes, DVs), writes the live rows
 * to a new file in the same partition, and commits a RewriteFiles that replaces the old file with
 * the new one, validated from the starting snapshot. Like Spark's rewrite_data_files by default,
 * the new file keeps the starting snapshot's sequence number (so equality deletes committed after
 * the start still apply to it); --new-sequence-number gives it the commit's own. Row lineage
 * (_row_id) is not carried over: the new file's rows get new row ids.
 */
final class Rewrite {
  static final String COMMIT_SUMMARY = "eqdv.interop.rewrite";

  private Rewrite() {}

  static int run(List<String> argv, PrintStream out) throws IOException {
    Set<String> options = new HashSet<>(Main.TABLE_OPTIONS);
    options.add("file");
    // Plan and validate from an older snapshot: a compaction that started before
    // another writer's commit and commits after it.
    options.add("from-snapshot");
    Args a = Args.parse("rewrite", argv, options, Set.of("largest", "new-sequence-number"));
    String path = a.get("file", null);
    boolean largest = a.flag("largest");
    if ((path == null) == !largest) {
      throw new Args.UsageException("rewrite: give exactly one of --file PATH and --largest");
    }
    try (TableRef ref = new TableRef(a)) {
      Table table = ref.load();
      String from = a.get("from-snapshot", null);
      Snapshot start =
          from == null ? table.currentSnapshot() : table.snapshot(Long.parseLong(from));
      if (start == null) {
        throw new IllegalStateException(
            "table " + ref.label() + " has no snapshot " + (from == null ? "" : from));
      }
      FileScanTask task = null;
      try (CloseableIterable<FileScanTask> tasks =
          table.newScan().useSnapshot(start.snapshotId()).planFiles()) {
        Comparator<FileScanTask> bySize =
            Comparator.<FileScanTask>comparingLong(t -> t.file().fileSizeInBytes())
                .thenComparing(t -> t.file().location(), Comparator.reverseOrder());
        for (FileScanTask t : tasks) {
          if (largest) {
            if (task == null || bySize.compare(t, task) > 0) {
              task = t;
            }
          } else if (t.file().location().equals(path)) {
            task = t;
          }
        }
      }
      if (task == null) {
        throw new IllegalStateException(
            largest
                ? "table " + ref.label() + " has no data file"
                : path + " is not a live data file of " + ref.label() + " at snapshot "
                    + start.snapshotId());
      }
      DataFile old = task.file();

      Schema schema = table.schema();
      GenericDeleteFilter filter = new GenericDeleteFilter(table.io(), task, schema, schema);
      Schema required = filter.requiredSchema();
      PartitionSpec spec = table.specs().get(old.specId());
      StructLike partition = spec.isUnpartitioned() ? null : old.partition();
      GenericFileWriterFactory factory =
          new GenericFileWriterFactory.Builder(table)
              .dataFileFormat(FileFormat.PARQUET)
              .dataSchema(schema)
              .build();
      OutputFileFactory outputs =
          OutputFileFactory.builderFor(table, 0, System.currentTimeMillis())
              .format(FileFormat.PARQUET)
              .operationId(UUID.randomUUID().toString())
              .suffix("rewrite")
              .build();
      EncryptedOutputFile target =
          partition == null ? outputs.newOutputFile() : outputs.newOutputFile(spec, partition);
      DataWriter<Record> writer = factory.newDataWriter(target, spec, partition);
      long rowsAfter = 0;
      int columns = schema.columns().size();
      try (DataWriter<Record> w = writer;
          CloseableIterable<Record> raw =
              Parquet.read(table.io().newInputFile(old))
                  .project(required)
                  .createReaderFunc(fileSchema -> GenericParquetReaders.buildReader(required, fileSchema))
                  .build();
          CloseableIterable<Record> live = filter.filter(raw)) {
        for (Record r : live) {
          Record copy = GenericRecord.create(schema);
          for (int i = 0; i < columns; i++) {
            copy.set(i, r.get(i));
          }
          w.write(copy);
          rowsAfter++;
        }
      }
      DataFile replacement = writer.toDataFile();

      RewriteFiles op = table.newRewrite().validateFromSnapshot(start.snapshotId());
      if (!a.flag("new-sequence-number")) {
        op.dataSequenceNumber(start.sequenceNumber());
      }
      op.deleteFile(old);
      if (rowsAfter > 0) {
        op.addFile(replacement);
      }
      op.set(COMMIT_SUMMARY, old.location());
      op.commit();
      if (rowsAfter == 0) {
        try {
          table.io().deleteFile(replacement.location());
        } catch (RuntimeException e) {
          // An empty writer may never have created the file.
        }
      }
      table.refresh();

      Map<String, Object> json = new LinkedHashMap<>();
      json.put("table", ref.label());
      json.put("rewritten", old.location());
      json.put("new_file", rowsAfter > 0 ? replacement.location() : null);
      json.put("rows_before", old.recordCount());
      json.put("rows_after", rowsAfter);
      json.put("delete_files_applied", task.deletes().size());
      json.put(
          "data_sequence_number",
          a.flag("new-sequence-number") ? null : start.sequenceNumber());
      json.put("snapshot_id", table.currentSnapshot().snapshotId());
      Main.printJson(out, json);
      return 0;
    }
  }
}
