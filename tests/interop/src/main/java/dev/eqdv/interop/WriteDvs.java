package dev.eqdv.interop;

import java.io.IOException;
import java.io.PrintStream;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.UUID;
import org.apache.iceberg.DeleteFile;
import org.apache.iceberg.FileFormat;
import org.apache.iceberg.FileScanTask;
import org.apache.iceberg.RowDelta;
import org.apache.iceberg.Snapshot;
import org.apache.iceberg.Table;
import org.apache.iceberg.data.BaseDeleteLoader;
import org.apache.iceberg.data.DeleteLoader;
import org.apache.iceberg.deletes.BaseDVFileWriter;
import org.apache.iceberg.deletes.DVFileWriter;
import org.apache.iceberg.io.CloseableIterable;
import org.apache.iceberg.io.DeleteWriteResult;
import org.apache.iceberg.io.OutputFileFactory;

/**
 * {@code write-dvs}: deletes a few rows by position the way a v3 merge-on-read writer does: Java's
 * DV writer merges the new positions with the data file's existing DV, and one RowDelta adds the
 * new DVs and removes the ones they replace. It gives check-dvs and the Rust side DVs written by
 * the reference implementation.
 */
final class WriteDvs {
  private WriteDvs() {}

  static int run(List<String> argv, PrintStream out) throws IOException {
    Set<String> options = new HashSet<>(Main.TABLE_OPTIONS);
    options.addAll(Set.of("seed", "files", "positions"));
    Args a = Args.parse("write-dvs", argv, options, Set.of());
    long seed = a.longValue("seed", 1, Long.MIN_VALUE, Long.MAX_VALUE);
    int files = a.intValue("files", 2, 1, 100_000);
    int positions = a.intValue("positions", 3, 1, 1_000_000);
    try (TableRef ref = new TableRef(a)) {
      Table table = ref.load();
      Snapshot head = table.currentSnapshot();
      if (head == null) {
        throw new IllegalStateException("table " + ref.label() + " has no snapshot");
      }
      List<FileScanTask> tasks = new ArrayList<>();
      try (CloseableIterable<FileScanTask> planned =
          table.newScan().useSnapshot(head.snapshotId()).planFiles()) {
        for (FileScanTask t : planned) {
          tasks.add(t);
        }
      }
      tasks.sort(Comparator.comparing(t -> t.file().location()));
      Random random = new Random(Workload.mix(seed));
      Collections.shuffle(tasks, random);
      List<FileScanTask> chosen = tasks.subList(0, Math.min(files, tasks.size()));

      DeleteLoader loader = new BaseDeleteLoader(table.io()::newInputFile);
      Map<String, DeleteFile> previous = new HashMap<>();
      for (FileScanTask t : chosen) {
        for (DeleteFile d : t.deletes()) {
          if (d.format() == FileFormat.PUFFIN) {
            previous.put(t.file().location(), d);
          }
        }
      }
      OutputFileFactory outputs =
          OutputFileFactory.builderFor(table, 0, System.currentTimeMillis())
              .format(FileFormat.PUFFIN)
              .operationId(UUID.randomUUID().toString())
              .build();
      DVFileWriter writer =
          new BaseDVFileWriter(
              outputs,
              path -> {
                DeleteFile dv = previous.get(path);
                return dv == null ? null : loader.loadPositionDeletes(List.of(dv), path);
              });
      long deleted = 0;
      try (DVFileWriter w = writer) {
        for (FileScanTask t : chosen) {
          long rows = t.file().recordCount();
          Set<Long> picked = new HashSet<>();
          int want = (int) Math.min(positions, rows);
          while (picked.size() < want) {
            picked.add((long) random.nextInt((int) Math.min(rows, Integer.MAX_VALUE)));
          }
          List<Long> sorted = new ArrayList<>(picked);
          Collections.sort(sorted);
          for (long pos : sorted) {
            w.delete(t.file().location(), pos, table.specs().get(t.file().specId()), t.file().partition());
            deleted++;
          }
        }
      }
      DeleteWriteResult result = writer.result();
      RowDelta delta = table.newRowDelta().validateFromSnapshot(head.snapshotId());
      result.deleteFiles().forEach(delta::addDeletes);
      result.rewrittenDeleteFiles().forEach(delta::removeDeletes);
      delta.validateDataFilesExist(result.referencedDataFiles());
      delta.validateDeletedFiles();
      delta.validateNoConflictingDeleteFiles();
      delta.commit();
      table.refresh();

      Map<String, Object> json = new LinkedHashMap<>();
      json.put("table", ref.label());
      json.put("data_files", chosen.size());
      json.put("dvs_written", result.deleteFiles().size());
      json.put("dvs_replaced", result.rewrittenDeleteFiles().size());
      json.put("positions_deleted", deleted);
      json.put("snapshot_id", table.currentSnapshot().snapshotId());
      Main.printJson(out, json);
      return 0;
    }
  }
}
