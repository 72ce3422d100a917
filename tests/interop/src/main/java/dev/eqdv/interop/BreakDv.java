package dev.eqdv.interop;

import java.io.IOException;
import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.TreeSet;
import java.util.UUID;
import java.util.zip.CRC32;
import org.apache.iceberg.DataFile;
import org.apache.iceberg.DeleteFile;
import org.apache.iceberg.FileFormat;
import org.apache.iceberg.FileMetadata;
import org.apache.iceberg.ManifestFile;
import org.apache.iceberg.ManifestFiles;
import org.apache.iceberg.ManifestReader;
import org.apache.iceberg.MetadataColumns;
import org.apache.iceberg.PartitionSpec;
import org.apache.iceberg.Schema;
import org.apache.iceberg.Snapshot;
import org.apache.iceberg.Table;
import org.apache.iceberg.data.Record;
import org.apache.iceberg.data.parquet.GenericParquetReaders;
import org.apache.iceberg.deletes.PositionDeleteIndex;
import org.apache.iceberg.io.CloseableIterable;
import org.apache.iceberg.io.FileIO;
import org.apache.iceberg.io.IOUtil;
import org.apache.iceberg.io.OutputFile;
import org.apache.iceberg.io.SeekableInputStream;
import org.apache.iceberg.parquet.Parquet;
import org.apache.iceberg.puffin.Blob;
import org.apache.iceberg.puffin.BlobMetadata;
import org.apache.iceberg.puffin.Puffin;
import org.apache.iceberg.puffin.PuffinWriter;

/**
 * {@code break-dv}: replaces one live DV of main with a deliberately broken one, so that tests can
 * show the judges (check-dvs, read_table.py) reject it for the right reason. The broken DV starts
 * from the original blob's bytes (eqdv's, after a conversion), is written with Java's Puffin
 * writer to a new Puffin file, and replaces the original in one RowDelta. Kinds:
 *
 * <ul>
 *   <li>{@code crc}: the blob's stored CRC has one bit flipped.
 *   <li>{@code cardinality}: record_count (and the blob's cardinality property) is one more than
 *       the bitmap holds.
 *   <li>{@code referenced}: the DV names a data file that is not live (entry and blob property).
 *   <li>{@code other-file}: the DV names another data file, one that has a DV of its own.
 *   <li>{@code partition}: the DV's entry is filed under another partition than its data file's.
 *   <li>{@code range}: one more position, the data file's record_count (one past its last row).
 *   <li>{@code empty}: a well-formed bitmap without positions, record_count 0.
 *   <li>{@code blob-metadata}: the blob's snapshot-id and sequence-number are the head's, not -1.
 *   <li>{@code drop}: no replacement: the DV is only removed, so its rows come back; prints them.
 * </ul>
 *
 * <p>The DV is the one of {@code --file DATA_FILE}, or that of the first data file (by path) that
 * has one. Prints JSON with the numbers the judges' messages should name.
 */
final class BreakDv {
  static final Set<String> KINDS =
      Set.of(
          "crc", "cardinality", "referenced", "other-file", "partition", "range", "empty",
          "blob-metadata", "drop");

  private BreakDv() {}

  static int run(List<String> argv, PrintStream out) throws IOException {
    Set<String> options = new HashSet<>(Main.TABLE_OPTIONS);
    options.addAll(Set.of("kind", "file"));
    Args a = Args.parse("break-dv", argv, options, Set.of());
    String kind = a.required("kind");
    if (!KINDS.contains(kind)) {
      throw new Args.UsageException("break-dv: --kind must be one of " + new TreeSet<>(KINDS));
    }
    try (TableRef ref = new TableRef(a)) {
      Table table = ref.load();
      Snapshot head = table.currentSnapshot();
      if (head == null) {
        throw new IllegalStateException("table " + ref.label() + " has no snapshot");
      }
      FileIO io = table.io();
      Map<String, DataFile> dataFiles = liveDataFiles(table, head);
      List<DeleteFile> dvs = liveDvs(table, head);
      dvs.sort(Comparator.comparing(DeleteFile::referencedDataFile));
      String wanted = a.get("file", null);
      DeleteFile found = null;
      for (DeleteFile d : dvs) {
        if (wanted == null || d.referencedDataFile().equals(wanted)) {
          found = d;
          break;
        }
      }
      final DeleteFile dv = found;
      if (dv == null) {
        throw new IllegalStateException(
            "table " + ref.label() + " has no live DV" + (wanted == null ? "" : " for " + wanted));
      }
      String dataPath = dv.referencedDataFile();
      DataFile data = dataFiles.get(dataPath);
      if (data == null) {
        throw new IllegalStateException("the DV's data file " + dataPath + " is not live");
      }
      byte[] blob = readBlob(io, dv);
      PositionDeleteIndex index = PositionDeleteIndex.deserialize(blob, dv);

      Map<String, Object> json = new LinkedHashMap<>();
      json.put("table", ref.label());
      json.put("kind", kind);
      json.put("data_file", dataPath);
      json.put("data_file_records", data.recordCount());
      json.put("original_dv", CheckDvs.describe(dv));
      json.put("cardinality", index.cardinality());
      long sharing = dvs.stream().filter(d -> d.location().equals(dv.location())).count();
      json.put("other_dvs_in_its_puffin_file", sharing - 1);

      if (kind.equals("drop")) {
        json.put("rows", rowsAt(table, data, index));
        table.newRowDelta().validateFromSnapshot(head.snapshotId()).removeDeletes(dv).commit();
      } else {
        String referenced = dataPath;
        // Whose spec and partition the entry carries: the named data file's (so that naming
        // another file breaks nothing else), except for the kind that breaks just that.
        DeleteFile placement = dv;
        long recordCount = index.cardinality();
        long blobSnapshot = -1;
        long blobSequence = -1;
        switch (kind) {
          case "crc":
            int at = blob.length - 1;
            json.put("crc_computed", hex(crcOf(blob)));
            blob[at] ^= 0x01;
            json.put("crc_stored", hex(ByteBuffer.wrap(blob, blob.length - 4, 4).getInt()));
            break;
          case "cardinality":
            recordCount += 1;
            break;
          case "referenced":
            referenced = notLive(dataPath, dataFiles);
            break;
          case "other-file":
            referenced = null;
            for (DeleteFile d : dvs) {
              if (!d.referencedDataFile().equals(dataPath)) {
                referenced = d.referencedDataFile();
                placement = d;
                break;
              }
            }
            if (referenced == null) {
              throw new IllegalStateException("other-file needs a second data file with a DV");
            }
            break;
          case "partition":
            for (DeleteFile d : dvs) {
              if (d.specId() == dv.specId() && !d.partition().equals(dv.partition())) {
                placement = d;
                break;
              }
            }
            if (placement == dv) {
              throw new IllegalStateException("partition needs a DV in another partition");
            }
            break;
          case "empty":
            blob = emptyBlob();
            recordCount = 0;
            break;
          case "blob-metadata":
            blobSnapshot = head.snapshotId();
            blobSequence = head.sequenceNumber();
            json.put("blob_snapshot_id", blobSnapshot);
            json.put("blob_sequence_number", blobSequence);
            break;
          case "range":
            index.delete(data.recordCount());
            blob = toArray(index.serialize());
            recordCount = index.cardinality();
            break;
          default:
            throw new AssertionError(kind);
        }
        DeleteFile broken =
            writeDv(table, placement, blob, referenced, recordCount, blobSnapshot, blobSequence);
        table
            .newRowDelta()
            .validateFromSnapshot(head.snapshotId())
            .removeDeletes(dv)
            .addDeletes(broken)
            .commit();
        json.put("broken_dv", CheckDvs.describe(broken));
        json.put("referenced_data_file", referenced);
        json.put("record_count", recordCount);
      }
      table.refresh();
      // The original must be gone: a test that judged a table still holding it would judge
      // nothing.
      for (DeleteFile d : liveDvs(table, table.currentSnapshot())) {
        if (d.location().equals(dv.location())
            && Objects.equals(d.contentOffset(), dv.contentOffset())) {
          throw new IllegalStateException("the original DV is still live: " + CheckDvs.describe(d));
        }
      }
      json.put("snapshot_id", table.currentSnapshot().snapshotId());
      Main.printJson(out, json);
      return 0;
    }
  }

  static Map<String, DataFile> liveDataFiles(Table table, Snapshot head) throws IOException {
    Map<String, DataFile> files = new HashMap<>();
    for (ManifestFile m : head.dataManifests(table.io())) {
      try (ManifestReader<DataFile> reader = ManifestFiles.read(m, table.io(), table.specs())) {
        for (DataFile f : reader) {
          files.put(f.location(), f.copyWithoutStats());
        }
      }
    }
    return files;
  }

  static List<DeleteFile> liveDvs(Table table, Snapshot head) throws IOException {
    List<DeleteFile> dvs = new ArrayList<>();
    for (ManifestFile m : head.deleteManifests(table.io())) {
      try (ManifestReader<DeleteFile> reader =
          ManifestFiles.readDeleteManifest(m, table.io(), table.specs())) {
        for (DeleteFile f : reader) {
          if (f.format() == FileFormat.PUFFIN) {
            dvs.add(f.copyWithoutStats());
          }
        }
      }
    }
    return dvs;
  }

  private static byte[] readBlob(FileIO io, DeleteFile dv) throws IOException {
    byte[] bytes = new byte[Math.toIntExact(dv.contentSizeInBytes())];
    try (SeekableInputStream in = io.newInputFile(dv.location()).newStream()) {
      in.seek(dv.contentOffset());
      IOUtil.readFully(in, bytes, 0, bytes.length);
    }
    return bytes;
  }

  /** The CRC-32 a DV blob must end with: over its magic and bitmap, after the length prefix. */
  private static int crcOf(byte[] blob) {
    CRC32 crc = new CRC32();
    crc.update(blob, 4, blob.length - 8);
    return (int) crc.getValue();
  }

  /** A DV blob whose portable 64-bit Roaring bitmap holds no 32-bit bitmap at all. */
  private static byte[] emptyBlob() {
    ByteBuffer b = ByteBuffer.allocate(4 + 4 + 8 + 4);
    b.putInt(4 + 8); // the length prefix counts the magic and the bitmap
    b.put(new byte[] {(byte) 0xD1, (byte) 0xD3, 0x39, 0x64});
    b.putLong(0); // no bitmaps (a little-endian 0 is all zero bytes either way)
    byte[] bytes = b.array();
    b.putInt(crcOf(bytes));
    return bytes;
  }

  private static String hex(int value) {
    return String.format(Locale.ROOT, "0x%08x", value);
  }

  private static byte[] toArray(ByteBuffer buffer) {
    byte[] bytes = new byte[buffer.remaining()];
    buffer.duplicate().get(bytes);
    return bytes;
  }

  /** A path next to {@code dataPath} that names no live data file. */
  private static String notLive(String dataPath, Map<String, DataFile> live) {
    int dot = dataPath.lastIndexOf('.');
    String base = dot > dataPath.lastIndexOf('/') ? dataPath.substring(0, dot) : dataPath;
    String path = base + "-not-live.parquet";
    if (live.containsKey(path)) {
      throw new IllegalStateException(path + " is live");
    }
    return path;
  }

  /**
   * Writes {@code blob} as the only blob of a new Puffin file; its DV entry names {@code
   * referenced}, in the spec and partition of {@code placement}.
   */
  private static DeleteFile writeDv(
      Table table,
      DeleteFile placement,
      byte[] blob,
      String referenced,
      long recordCount,
      long blobSnapshot,
      long blobSequence)
      throws IOException {
    String path =
        table.locationProvider().newDataLocation("broken-dv-" + UUID.randomUUID() + ".puffin");
    OutputFile file = table.io().newOutputFile(path);
    BlobMetadata written;
    long size;
    try (PuffinWriter writer = Puffin.write(file).createdBy("eqdv-interop break-dv").build()) {
      written =
          writer.write(
              new Blob(
                  CheckDvs.DV_BLOB_TYPE,
                  List.of(MetadataColumns.ROW_POSITION.fieldId()),
                  blobSnapshot,
                  blobSequence,
                  ByteBuffer.wrap(blob),
                  null,
                  Map.of(
                      "referenced-data-file", referenced,
                      "cardinality", Long.toString(recordCount))));
      writer.finish();
      size = writer.fileSize();
    }
    PartitionSpec spec = table.specs().get(placement.specId());
    FileMetadata.Builder b =
        FileMetadata.deleteFileBuilder(spec)
            .ofPositionDeletes()
            .withFormat(FileFormat.PUFFIN)
            .withPath(path)
            .withFileSizeInBytes(size)
            .withReferencedDataFile(referenced)
            .withContentOffset(written.offset())
            .withContentSizeInBytes(written.length())
            .withRecordCount(recordCount);
    if (spec.isPartitioned()) {
      b.withPartition(placement.partition());
    }
    return b.build();
  }

  /** The canonical rows at the positions of {@code index} in {@code data} (file order). */
  private static List<String> rowsAt(Table table, DataFile data, PositionDeleteIndex index)
      throws IOException {
    Schema schema = table.schema();
    List<String> rows = new ArrayList<>();
    try (CloseableIterable<Record> records =
        Parquet.read(table.io().newInputFile(data))
            .project(schema)
            .createReaderFunc(fileSchema -> GenericParquetReaders.buildReader(schema, fileSchema))
            .build()) {
      long pos = 0;
      for (Record r : records) {
        if (index.isDeleted(pos)) {
          rows.add(Canonical.row(schema, r));
        }
        pos++;
      }
    }
    rows.sort(Comparator.comparing(s -> s.getBytes(StandardCharsets.UTF_8), Canonical.UTF8_ORDER));
    return rows;
  }
}
