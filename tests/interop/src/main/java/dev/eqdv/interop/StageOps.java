package dev.eqdv.interop;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Comparator;
import java.util.IdentityHashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.UUID;
import org.apache.iceberg.DataFile;
import org.apache.iceberg.DeleteFile;
import org.apache.iceberg.FileFormat;
import org.apache.iceberg.FileScanTask;
import org.apache.iceberg.MetadataColumns;
import org.apache.iceberg.PartitionSpec;
import org.apache.iceberg.RowDelta;
import org.apache.iceberg.Schema;
import org.apache.iceberg.Snapshot;
import org.apache.iceberg.Table;
import org.apache.iceberg.data.BaseDeleteLoader;
import org.apache.iceberg.data.DeleteLoader;
import org.apache.iceberg.data.Record;
import org.apache.iceberg.deletes.BaseDVFileWriter;
import org.apache.iceberg.deletes.DVFileWriter;
import org.apache.iceberg.io.CloseableIterable;
import org.apache.iceberg.io.DeleteWriteResult;
import org.apache.iceberg.io.OutputFileFactory;

/**
 * The commits of a streaming upsert writer to one branch, for the staging mode's tests: appends,
 * upserts and deletes by key (as {@link Serve}'s), checkpoints in the shape of Flink's upsert sink
 * (one commit adding a data file, an equality delete of every key it upserts, old or new, and a DV
 * on the same data file for the rows upserted twice within the checkpoint), and deletes by
 * position in older data files (a DV merged with the file's previous one).
 */
final class StageOps {
  private final Serve serve;

  StageOps(Serve serve) {
    this.serve = serve;
  }

  /**
   * One random commit to {@code branch}; deletes by position in older files only when {@code
   * positionDeletes} (a target that compacts its files cannot take them: the staging mode refuses
   * a DV on a data file the target no longer holds).
   */
  String stageOp(Table table, String branch, Random random, boolean positionDeletes)
      throws IOException {
    if (!table.refs().containsKey(branch)) {
      // The branch's first commit creates it (from main's head, when there is one).
      return serve.append(table, branch, random);
    }
    int roll = random.nextInt(100);
    if (roll < 20) {
      return serve.append(table, branch, random);
    } else if (roll < 45) {
      return checkpoint(table, branch, random);
    } else if (roll < 70) {
      return serve.deleteRows(table, branch, random, true);
    } else if (roll < 85 || !positionDeletes) {
      return serve.deleteRows(table, branch, random, false);
    } else {
      return deleteByPosition(table, branch, random);
    }
  }

  /**
   * One checkpoint of an upsert writer keyed on k: new keys, new versions of old keys, and a
   * second version of some keys new in this checkpoint; an equality delete of every key upserted
   * (in the spec and partition of the old row, where there is one), and a DV deleting the first
   * versions of keys written twice in the same data file.
   */
  String checkpoint(Table table, String branch, Random random) throws IOException {
    serve.counter++;
    Schema schema = table.schema();
    PartitionSpec spec = table.spec();
    List<Record> live = Serve.liveRecords(table, branch);
    Collections.shuffle(live, random);
    List<Record> oldVictims = live.subList(0, Math.min(live.size(), random.nextInt(12)));
    List<Record> rows = new ArrayList<>();
    int inserts = 5 + random.nextInt(40);
    for (int i = 0; i < inserts; i++) {
      rows.add(serve.newRow(schema, serve.nextKey++, random));
    }
    for (Record old : oldVictims) {
      rows.add(serve.newRow(schema, (Long) old.getField("k"), random));
    }
    // Keys written twice in this checkpoint: the first version is superseded.
    Map<Record, Boolean> superseded = new IdentityHashMap<>();
    List<Record> twice = new ArrayList<>();
    int again = random.nextInt(6);
    for (int i = 0; i < again && i < inserts; i++) {
      Record first = rows.get(random.nextInt(inserts));
      if (superseded.containsKey(first)) {
        continue;
      }
      superseded.put(first, true);
      twice.add(serve.newRow(schema, (Long) first.getField("k"), random));
    }
    rows.addAll(twice);

    // The data files, one per partition, and the positions of superseded rows in each.
    List<DataFile> data = Serve.writeData(table, rows);
    List<List<Record>> groups = new ArrayList<>(Serve.byPartition(spec, schema, rows).values());
    OutputFileFactory puffins =
        OutputFileFactory.builderFor(table, 1, System.nanoTime())
            .format(FileFormat.PUFFIN)
            .operationId(UUID.randomUUID().toString())
            .build();
    DVFileWriter dvWriter = new BaseDVFileWriter(puffins, path -> null);
    int positions = 0;
    try (DVFileWriter w = dvWriter) {
      for (int f = 0; f < data.size(); f++) {
        List<Record> group = groups.get(f);
        for (int pos = 0; pos < group.size(); pos++) {
          if (superseded.containsKey(group.get(pos))) {
            w.delete(data.get(f).location(), pos, spec, data.get(f).partition());
            positions++;
          }
        }
      }
    }
    DeleteWriteResult dvs = dvWriter.result();

    // Equality deletes of every upserted key: old keys where their rows live, new keys (upserted
    // within the checkpoint) in the current spec; none applies to this commit's own rows.
    Map<Integer, List<Record>> bySpec = new LinkedHashMap<>();
    for (Record old : oldVictims) {
      int specId = (Integer) old.getField(MetadataColumns.SPEC_ID.name());
      bySpec.computeIfAbsent(specId, x -> new ArrayList<>()).add(old);
    }
    for (Record first : superseded.keySet()) {
      bySpec.computeIfAbsent(spec.specId(), x -> new ArrayList<>()).add(first);
    }
    List<DeleteFile> deletes = new ArrayList<>();
    for (Map.Entry<Integer, List<Record>> e : bySpec.entrySet()) {
      List<Record> keys = new ArrayList<>();
      for (Record r : e.getValue()) {
        Record plain = org.apache.iceberg.data.GenericRecord.create(schema);
        for (org.apache.iceberg.types.Types.NestedField field : schema.columns()) {
          plain.setField(field.name(), r.getField(field.name()));
        }
        keys.add(plain);
      }
      deletes.addAll(
          Serve.writeEqualityDeletes(table, table.specs().get(e.getKey()), new int[] {1}, keys));
    }
    // Validated from the branch's head as read (Java cannot walk a history cut by expiry).
    RowDelta delta =
        table
            .newRowDelta()
            .toBranch(branch)
            .validateFromSnapshot(TableRef.head(table, branch).snapshotId());
    data.forEach(delta::addRows);
    deletes.forEach(delta::addDeletes);
    dvs.deleteFiles().forEach(delta::addDeletes);
    delta.commit();
    return "checkpoint "
        + branch
        + ": "
        + rows.size()
        + " rows in "
        + data.size()
        + " files ("
        + oldVictims.size()
        + " old keys updated, "
        + superseded.size()
        + " new keys updated twice), "
        + deletes.size()
        + " equality delete files, "
        + dvs.deleteFiles().size()
        + " DVs of "
        + positions
        + " positions";
  }

  /** Deletes 1-3 rows of one older data file of {@code branch} by position (a DV). */
  String deleteByPosition(Table table, String branch, Random random) throws IOException {
    Snapshot head = TableRef.head(table, branch);
    List<FileScanTask> tasks = new ArrayList<>();
    try (CloseableIterable<FileScanTask> planned =
        table.newScan().useSnapshot(head.snapshotId()).planFiles()) {
      for (FileScanTask t : planned) {
        tasks.add(t);
      }
    }
    if (tasks.isEmpty()) {
      return serve.append(table, branch, random);
    }
    tasks.sort(Comparator.comparing(t -> t.file().location()));
    FileScanTask task = tasks.get(random.nextInt(tasks.size()));
    DeleteFile previous = null;
    for (DeleteFile d : task.deletes()) {
      if (d.format() == FileFormat.PUFFIN) {
        previous = d;
      }
    }
    DeleteLoader loader = new BaseDeleteLoader(table.io()::newInputFile);
    DeleteFile old = previous;
    OutputFileFactory puffins =
        OutputFileFactory.builderFor(table, 1, System.nanoTime())
            .format(FileFormat.PUFFIN)
            .operationId(UUID.randomUUID().toString())
            .build();
    DVFileWriter writer =
        new BaseDVFileWriter(
            puffins, path -> old == null ? null : loader.loadPositionDeletes(List.of(old), path));
    long rows = task.file().recordCount();
    int want = 1 + random.nextInt(3);
    try (DVFileWriter w = writer) {
      for (int i = 0; i < want; i++) {
        long pos = random.nextInt((int) Math.min(rows, Integer.MAX_VALUE));
        w.delete(task.file().location(), pos, table.specs().get(task.file().specId()), task.file().partition());
      }
    } catch (UncheckedIOException e) {
      throw e.getCause();
    }
    DeleteWriteResult result = writer.result();
    RowDelta delta = table.newRowDelta().toBranch(branch).validateFromSnapshot(head.snapshotId());
    result.deleteFiles().forEach(delta::addDeletes);
    result.rewrittenDeleteFiles().forEach(delta::removeDeletes);
    delta.commit();
    return "delete by position on "
        + branch
        + ": "
        + want
        + " positions of "
        + task.file().location().replaceAll(".*/", "")
        + (old == null ? "" : " (merged with its DV)");
  }

  /** Moves {@code branch} back to its head's parent (a rolled-back staging branch). */
  static String rollback(Table table, String branch) {
    Snapshot head = TableRef.head(table, branch);
    if (head == null || head.parentId() == null) {
      throw new IllegalStateException("branch " + branch + " has no parent to roll back to");
    }
    table.manageSnapshots().replaceBranch(branch, head.parentId()).commit();
    return "rollback " + branch + " to " + head.parentId();
  }
}
