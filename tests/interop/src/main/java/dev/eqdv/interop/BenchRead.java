package dev.eqdv.interop;

import java.io.File;
import java.io.PrintStream;
import java.net.URI;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.iceberg.BaseTable;
import org.apache.iceberg.Files;
import org.apache.iceberg.StaticTableOperations;
import org.apache.iceberg.Table;
import org.apache.iceberg.data.IcebergGenerics;
import org.apache.iceberg.data.Record;
import org.apache.iceberg.io.CloseableIterable;
import org.apache.iceberg.io.FileIO;
import org.apache.iceberg.io.InputFile;
import org.apache.iceberg.io.OutputFile;
import org.apache.iceberg.io.SeekableInputStream;

/**
 * {@code bench-read}: the benchmarks' Java reader (benches/bench.py). Reads one snapshot of a
 * table on the local file system, given its metadata file (no catalog, no services), with Iceberg
 * Java's generic reader, which applies equality deletes, v2 position deletes and DVs. Prints
 * {@code {"rows", "sum_v", "inner_ms"}}: the row count and the sum of the long column {@code v}.
 */
final class BenchRead {
  private BenchRead() {}

  static int run(List<String> argv, PrintStream out) throws Exception {
    Args a = Args.parse("bench-read", argv, Set.of("metadata", "snapshot"), Set.of());
    String metadata = a.required("metadata");
    a.required("snapshot");
    long snapshot = a.longValue("snapshot", -1, Long.MIN_VALUE, Long.MAX_VALUE);
    long started = System.nanoTime();
    FileIO io = new LocalFileIO();
    Table table = new BaseTable(new StaticTableOperations(metadata, io), "bench");
    long rows = 0;
    long sumV = 0;
    try (CloseableIterable<Record> records =
        IcebergGenerics.read(table).useSnapshot(snapshot).build()) {
      for (Record r : records) {
        rows++;
        Object v = r.getField("v");
        if (v instanceof Long) {
          sumV += (Long) v;
        }
      }
    }
    Map<String, Object> result = new LinkedHashMap<>();
    result.put("rows", rows);
    result.put("sum_v", Long.toUnsignedString(sumV));
    result.put("inner_ms", (System.nanoTime() - started) / 1e6);
    Main.printJson(out, result);
    return 0;
  }

  /** Local files by {@code file:} URI or plain path; locations are kept as given. */
  static final class LocalFileIO implements FileIO {
    private static final long serialVersionUID = 1L;

    static File file(String location) {
      return new File(location.startsWith("file:") ? URI.create(location).getPath() : location);
    }

    @Override
    public InputFile newInputFile(String location) {
      InputFile local = Files.localInput(file(location));
      return new InputFile() {
        @Override
        public long getLength() {
          return local.getLength();
        }

        @Override
        public SeekableInputStream newStream() {
          return local.newStream();
        }

        @Override
        public String location() {
          return location;
        }

        @Override
        public boolean exists() {
          return local.exists();
        }
      };
    }

    @Override
    public OutputFile newOutputFile(String location) {
      throw new UnsupportedOperationException("bench-read never writes: " + location);
    }

    @Override
    public void deleteFile(String location) {
      throw new UnsupportedOperationException("bench-read never deletes: " + location);
    }
  }
}
