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
import org.apache.iceberg.ContentFile;
import org.apache.iceberg.DataFile;
import org.apache.iceberg.DeleteFile;
import org.apache.iceberg.FileContent;
import org.apache.iceberg.FileFormat;
import org.apache.iceberg.FileScanTask;
import org.apache.iceberg.ManifestFile;
import org.apache.iceberg.ManifestFiles;
import org.apache.iceberg.ManifestReader;
import org.apache.iceberg.MetadataColumns;
import org.apache.iceberg.PartitionSpec;
import org.apache.iceberg.Snapshot;
import org.apache.iceberg.Table;
import org.apache.iceberg.data.BaseDeleteLoader;
import org.apache.iceberg.data.DeleteLoader;
import org.apache.iceberg.deletes.PositionDeleteIndex;
import org.apache.iceberg.io.CloseableIterable;
import org.apache.iceberg.io.FileIO;
import org.apache.iceberg.puffin.BlobMetadata;
import org.apache.iceberg.puffin.Puffin;
import org.apache.iceberg.puffin.PuffinReader;
import org.apache.iceberg.util.StructLikeWrapper;

/**
 * {@code check-dvs}: loads every live DV of a branch head through Iceberg Java's own delete
 * loading path (the one its readers use, which checks the blob's length, magic, CRC and
 * cardinality), plans the scan (which rejects a second DV for one data file), and reads each
 * Puffin footer with Java's Puffin reader to check the manifest's offsets against it. Any DV Java
 * rejects, or one that would be silently ignored (its data file is not live), fails the command
 * with every problem found. It also checks what Java's reader lets pass but the spec or other
 * readers do not: positions at or past the data file's record_count, the DV's spec and partition
 * against its data file's, an empty DV, and the blob's fields, snapshot-id and sequence-number.
 * tests/judges.rs shows each kind of broken DV (break-dv) rejected.
 */
final class CheckDvs {
  static final String DV_BLOB_TYPE = "deletion-vector-v1";
  private static final int MAX_PROBLEMS_SHOWN = 20;

  private CheckDvs() {}

  static int run(List<String> argv, PrintStream out) throws IOException {
    Set<String> options = new HashSet<>(Main.TABLE_OPTIONS);
    options.add("branch");
    Args a = Args.parse("check-dvs", argv, options, Set.of("positions"));
    String branch = a.get("branch", "main");
    try (TableRef ref = new TableRef(a)) {
      Table table = ref.load();
      Map<String, Object> result = check(table, branch, a.flag("positions"));
      result.put("table", ref.label());
      Main.printJson(out, result);
      return 0;
    }
  }

  static Map<String, Object> check(Table table, String branch) throws IOException {
    return check(table, branch, false);
  }

  /**
   * {@link #check(Table, String)}; with {@code withPositions} the result also maps every data
   * file with a DV to the DV's positions as Java's loader reads them ({@code dv_positions}).
   */
  static Map<String, Object> check(Table table, String branch, boolean withPositions)
      throws IOException {
    Map<String, Object> result = new LinkedHashMap<>();
    Snapshot head = TableRef.head(table, branch);
    result.put("snapshot_id", head == null ? null : head.snapshotId());
    if (head == null) {
      result.put("dvs", 0);
      result.put("positions", 0);
      result.put("equality_delete_files", 0);
      result.put("position_delete_files", 0);
      result.put("puffin_files", 0);
      result.put("data_files", 0);
      return result;
    }
    FileIO io = table.io();
    Map<Integer, PartitionSpec> specs = table.specs();
    List<String> problems = new ArrayList<>();

    Map<String, DataFile> dataFiles = new HashMap<>();
    for (ManifestFile m : head.dataManifests(io)) {
      try (ManifestReader<DataFile> reader = ManifestFiles.read(m, io, specs)) {
        for (DataFile f : reader) {
          dataFiles.put(f.location(), f.copyWithoutStats());
        }
      }
    }

    List<DeleteFile> dvs = new ArrayList<>();
    long equalityFiles = 0;
    long positionFiles = 0;
    for (ManifestFile m : head.deleteManifests(io)) {
      try (ManifestReader<DeleteFile> reader = ManifestFiles.readDeleteManifest(m, io, specs)) {
        for (DeleteFile f : reader) {
          if (f.content() == FileContent.EQUALITY_DELETES) {
            equalityFiles++;
          } else if (f.format() == FileFormat.PUFFIN) {
            dvs.add(f.copyWithoutStats());
          } else {
            positionFiles++;
          }
        }
      }
    }

    // Java's delete loader, as its readers call it: one data file at a time.
    DeleteLoader loader = new BaseDeleteLoader(io::newInputFile);
    Map<String, DeleteFile> dvByDataFile = new HashMap<>();
    Map<String, List<DeleteFile>> byPuffinFile = new TreeMap<>();
    long positions = 0;
    Map<String, List<Long>> dvPositions = new TreeMap<>();
    for (DeleteFile dv : dvs) {
      String referenced = dv.referencedDataFile();
      String where = describe(dv);
      if (referenced == null) {
        problems.add(where + ": no referenced_data_file");
        continue;
      }
      DeleteFile other = dvByDataFile.put(referenced, dv);
      if (other != null) {
        problems.add(where + ": a second DV for the data file (the other: " + describe(other) + ")");
      }
      byPuffinFile.computeIfAbsent(dv.location(), k -> new ArrayList<>()).add(dv);
      DataFile data = dataFiles.get(referenced);
      if (data == null) {
        problems.add(where + ": the referenced data file is not live in this snapshot (dangling DV)");
      } else if (data.specId() != dv.specId()) {
        problems.add(
            where + ": spec id " + dv.specId() + " differs from its data file's " + data.specId());
      } else if (!samePartition(specs.get(dv.specId()), dv, data)) {
        PartitionSpec spec = specs.get(dv.specId());
        problems.add(
            where + ": partition " + spec.partitionToPath(dv.partition())
                + " differs from its data file's " + spec.partitionToPath(data.partition()));
      }
      try {
        PositionDeleteIndex index = loader.loadPositionDeletes(List.of(dv), referenced);
        long cardinality = index.cardinality();
        if (cardinality != dv.recordCount()) {
          problems.add(
              where + ": cardinality " + cardinality + " but record_count " + dv.recordCount());
        }
        if (cardinality == 0) {
          // Java's loader reads it as deleting nothing; no writer has a reason to commit one.
          problems.add(where + ": an empty DV (no positions)");
        }
        if (data != null) {
          long[] beyond = {0, -1};
          long limit = data.recordCount();
          index.forEach(
              pos -> {
                if (pos >= limit) {
                  beyond[0]++;
                  beyond[1] = Math.max(beyond[1], pos);
                }
              });
          if (beyond[0] > 0) {
            problems.add(
                where + ": " + beyond[0] + " positions at or past the data file's "
                    + limit + " rows (max " + beyond[1] + ")");
          }
        }
        positions += cardinality;
        if (withPositions) {
          List<Long> list = new ArrayList<>();
          index.forEach(list::add);
          dvPositions.put(referenced, list);
        }
      } catch (RuntimeException e) {
        problems.add(where + ": Java's delete loader rejects it: " + Main.describe(e));
      }
    }

    // The Puffin footers: every DV's offset and length must name a deletion-vector-v1 blob
    // whose properties agree with the manifest entry.
    for (Map.Entry<String, List<DeleteFile>> e : byPuffinFile.entrySet()) {
      DeleteFile first = e.getValue().get(0);
      try (PuffinReader reader =
          Puffin.read(io.newInputFile(e.getKey())).withFileSize(first.fileSizeInBytes()).build()) {
        Map<Long, BlobMetadata> blobs = new HashMap<>();
        for (BlobMetadata b : reader.fileMetadata().blobs()) {
          blobs.put(b.offset(), b);
        }
        for (DeleteFile dv : e.getValue()) {
          checkBlob(dv, blobs.get(dv.contentOffset()), problems);
        }
      } catch (IOException | RuntimeException ex) {
        problems.add("Puffin file " + e.getKey() + ": Java's Puffin reader rejects it: " + Main.describe(ex));
      }
    }

    // Planning builds Java's delete file index, which rejects two DVs for one data file.
    long tasksWithDvs = 0;
    try (CloseableIterable<FileScanTask> tasks =
        table.newScan().useSnapshot(head.snapshotId()).planFiles()) {
      for (FileScanTask task : tasks) {
        for (DeleteFile d : task.deletes()) {
          if (d.format() == FileFormat.PUFFIN) {
            tasksWithDvs++;
            break;
          }
        }
      }
    } catch (RuntimeException e) {
      problems.add("planning the scan: " + Main.describe(e));
    }

    if (!problems.isEmpty()) {
      StringBuilder msg = new StringBuilder();
      msg.append(problems.size()).append(" problem(s) with the DVs of ").append(table.name());
      msg.append(" at snapshot ").append(head.snapshotId()).append(':');
      for (int i = 0; i < Math.min(problems.size(), MAX_PROBLEMS_SHOWN); i++) {
        msg.append("\n  ").append(problems.get(i));
      }
      if (problems.size() > MAX_PROBLEMS_SHOWN) {
        msg.append("\n  ... and ").append(problems.size() - MAX_PROBLEMS_SHOWN).append(" more");
      }
      throw new IllegalStateException(msg.toString());
    }

    result.put("dvs", dvs.size());
    result.put("positions", positions);
    result.put("equality_delete_files", equalityFiles);
    result.put("position_delete_files", positionFiles);
    result.put("puffin_files", byPuffinFile.size());
    result.put("data_files", dataFiles.size());
    result.put("data_files_with_dvs_planned", tasksWithDvs);
    if (withPositions) {
      result.put("dv_positions", dvPositions);
    }
    return result;
  }

  private static void checkBlob(DeleteFile dv, BlobMetadata blob, List<String> problems) {
    String where = describe(dv);
    if (blob == null) {
      problems.add(where + ": no blob of the Puffin footer starts at offset " + dv.contentOffset());
      return;
    }
    if (!DV_BLOB_TYPE.equals(blob.type())) {
      problems.add(where + ": the blob's type is " + blob.type());
    }
    if (dv.contentSizeInBytes() == null || blob.length() != dv.contentSizeInBytes()) {
      problems.add(
          where + ": content_size_in_bytes " + dv.contentSizeInBytes() + " but the blob's length is "
              + blob.length());
    }
    // What the spec fixes for a DV blob (Java's reader ignores these; other readers may not).
    if (!List.of(MetadataColumns.ROW_POSITION.fieldId()).equals(blob.inputFields())) {
      problems.add(where + ": the blob's fields are " + blob.inputFields());
    }
    if (blob.snapshotId() != -1 || blob.sequenceNumber() != -1) {
      problems.add(
          where + ": the blob's snapshot-id/sequence-number are " + blob.snapshotId() + "/"
              + blob.sequenceNumber() + " (must be -1)");
    }
    if (blob.compressionCodec() != null) {
      problems.add(where + ": the blob is compressed (" + blob.compressionCodec() + ")");
    }
    String referenced = blob.properties().get("referenced-data-file");
    if (!dv.referencedDataFile().equals(referenced)) {
      problems.add(where + ": the blob's referenced-data-file is " + referenced);
    }
    String cardinality = blob.properties().get("cardinality");
    if (cardinality == null || !cardinality.equals(Long.toString(dv.recordCount()))) {
      problems.add(
          where + ": the blob's cardinality is " + cardinality + ", record_count " + dv.recordCount());
    }
  }

  private static boolean samePartition(PartitionSpec spec, ContentFile<?> a, ContentFile<?> b) {
    StructLikeWrapper x = StructLikeWrapper.forType(spec.partitionType()).set(a.partition());
    StructLikeWrapper y = StructLikeWrapper.forType(spec.partitionType()).set(b.partition());
    return x.equals(y);
  }

  static String describe(ContentFile<?> f) {
    if (f instanceof DeleteFile && ((DeleteFile) f).contentOffset() != null) {
      DeleteFile d = (DeleteFile) f;
      return "DV at " + d.location() + "@" + d.contentOffset() + "+" + d.contentSizeInBytes()
          + " for " + d.referencedDataFile();
    }
    return f.location();
  }
}
