package dev.eqdv.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.iceberg.DataFile;
import org.apache.iceberg.DeleteFile;
import org.apache.iceberg.FileContent;
import org.apache.iceberg.FileScanTask;
import org.apache.iceberg.ManifestFile;
import org.apache.iceberg.ManifestFiles;
import org.apache.iceberg.ManifestReader;
import org.apache.iceberg.Snapshot;
import org.apache.iceberg.Table;
import org.apache.iceberg.catalog.TableIdentifier;
import org.apache.iceberg.io.CloseableIterable;
import org.junit.jupiter.api.Test;

/**
 * write-cdc --global-deletes on the in-memory catalog: partitioned data files (spec 1), equality
 * deletes under the unpartitioned spec 0 that Iceberg's planner applies across partitions, and the
 * same live rows (read by the generic reader) as the partition-scoped deletes of the same seed.
 */
class WriteCdcGlobalDeletesTest {
  private static final String DB = "global_deletes";

  @Test
  void bucketedDataWithGlobalDeletes() throws IOException {
    check("bucket:3", "bucket");
  }

  @Test
  void identityPartitionedDataWithGlobalDeletes() throws IOException {
    check("identity", "identity");
  }

  @Test
  void globalDeletesNeedAPartitionedTable() {
    Result r = run("write-cdc", "usage", List.of("--partition", "none", "--global-deletes"));
    assertEquals(2, r.code, r.err);
    assertTrue(r.err.contains("--global-deletes needs a partitioned table"), r.err);
  }

  @Test
  void stateOfOlderTablesParses() {
    WriteCdc.State s =
        Main.fromJson(
            "{\"seed\":1,\"rows\":10,\"key\":\"long\",\"partition\":\"identity\",\"commits\":2}",
            WriteCdc.State.class);
    assertFalse(s.globalDeletes);
    assertEquals(2, s.commits);
  }

  private static void check(String partition, String name) throws IOException {
    List<String> cdc =
        List.of("--seed", "5", "--rows", "90", "--commits", "3", "--key", "long", "--partition",
            partition);
    List<String> globalCdc = new ArrayList<>(cdc);
    globalCdc.add("--global-deletes");
    Map<String, Object> w = json(ok("write-cdc", name + "_global", globalCdc));
    Map<String, Object> scoped = json(ok("write-cdc", name + "_scoped", cdc));
    assertEquals(true, w.get("global_deletes"));
    assertEquals(false, scoped.get("global_deletes"));

    Table table = load(name + "_global");
    assertEquals(2, table.specs().size(), "specs " + table.specs());
    assertTrue(table.specs().get(0).isUnpartitioned());
    assertEquals(1, table.spec().specId());
    assertTrue(
        table.spec().compatibleWith(Workload.Partitioning.parse(partition).spec(table.schema())),
        "spec " + table.spec());

    Snapshot head = table.currentSnapshot();
    Set<String> dataPartitions = new HashSet<>();
    long dataFiles = 0;
    for (ManifestFile m : head.dataManifests(table.io())) {
      try (ManifestReader<DataFile> r = ManifestFiles.read(m, table.io(), table.specs())) {
        for (DataFile f : r) {
          assertEquals(1, f.specId(), f.location());
          dataPartitions.add(table.spec().partitionToPath(f.partition()));
          dataFiles++;
        }
      }
    }
    assertEquals(num(w, "data_files"), dataFiles);
    assertTrue(dataPartitions.size() > 1, "data partitions " + dataPartitions);

    long deleteFiles = 0;
    for (ManifestFile m : head.deleteManifests(table.io())) {
      try (ManifestReader<DeleteFile> r =
          ManifestFiles.readDeleteManifest(m, table.io(), table.specs())) {
        for (DeleteFile f : r) {
          assertEquals(FileContent.EQUALITY_DELETES, f.content(), f.location());
          assertEquals(0, f.specId(), f.location());
          assertEquals(0, f.partition().size(), f.location());
          deleteFiles++;
        }
      }
    }
    // One global file per commit after the initial load.
    assertEquals(3, deleteFiles);
    assertEquals(num(w, "equality_delete_files"), deleteFiles);

    // Iceberg's planner attaches a global delete file to data files of several partitions.
    Map<String, Set<String>> partitionsOfDelete = new HashMap<>();
    try (CloseableIterable<FileScanTask> tasks = table.newScan().planFiles()) {
      for (FileScanTask t : tasks) {
        String p = table.spec().partitionToPath(t.file().partition());
        for (DeleteFile d : t.deletes()) {
          partitionsOfDelete.computeIfAbsent(d.location(), k -> new HashSet<>()).add(p);
        }
      }
    }
    assertTrue(
        partitionsOfDelete.values().stream().anyMatch(s -> s.size() > 1),
        "partitions per delete file " + partitionsOfDelete);

    // The generic reader applies them: the model's live rows, the same as the scoped deletes'.
    List<String> rows = lines(ok("dump", name + "_global", List.of()));
    assertEquals(num(w, "expected_live_rows"), rows.size());
    assertEquals(lines(ok("dump", name + "_scoped", List.of())), rows);

    // Continuing the table needs the flag again: it is part of the workload.
    List<String> more =
        List.of("--seed", "5", "--rows", "90", "--commits", "1", "--key", "long", "--partition",
            partition, "--global-deletes");
    Map<String, Object> w2 = json(ok("write-cdc", name + "_global", more));
    assertEquals(false, w2.get("created"));
    assertEquals(5L, num(w2, "generator_commits"));
    List<String> after = lines(ok("dump", name + "_global", List.of()));
    assertEquals(num(w2, "expected_live_rows"), after.size());
    assertEquals(2, load(name + "_global").specs().size());
    Result without = run("write-cdc", name + "_global", more.subList(0, more.size() - 1));
    assertEquals(1, without.code, without.err);
    assertTrue(without.err.contains("holds another workload"), without.err);
  }

  private static Table load(String name) {
    return TableRef.memoryCatalog().loadTable(TableIdentifier.of(DB, name));
  }

  private static final class Result {
    final int code;
    final String out;
    final String err;

    Result(int code, String out, String err) {
      this.code = code;
      this.out = out;
      this.err = err;
    }
  }

  private static Result run(String command, String table, List<String> extra) {
    List<String> argv = new ArrayList<>();
    argv.add(command);
    argv.addAll(
        List.of("--warehouse", "memory://global-deletes", "--database", DB, "--table", table));
    argv.addAll(extra);
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    int code =
        Main.run(
            argv,
            new PrintStream(out, true, StandardCharsets.UTF_8),
            new PrintStream(err, true, StandardCharsets.UTF_8));
    return new Result(
        code, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
  }

  private static String ok(String command, String table, List<String> extra) {
    Result r = run(command, table, extra);
    assertEquals(0, r.code, command + " " + table + ": " + r.err);
    return r.out;
  }

  private static List<String> lines(String text) {
    return text.isEmpty() ? List.of() : List.of(text.split("\n"));
  }

  @SuppressWarnings("unchecked")
  private static Map<String, Object> json(String text) {
    return Main.fromJson(text.trim(), Map.class);
  }

  private static long num(Map<String, Object> m, String key) {
    return ((Number) m.get(key)).longValue();
  }
}
