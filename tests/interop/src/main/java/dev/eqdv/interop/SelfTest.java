package dev.eqdv.interop;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * {@code selftest}: every other subcommand end to end, in this JVM, on Iceberg's in-memory
 * catalog and FileIO (no services): write-cdc twice with one seed (the dumps must be equal and
 * hold the expected number of rows), write-dvs, check-dvs, rewrite (the rows must not change),
 * concurrent-writer. It proves the jar's classes (Parquet, Hadoop's few, the DV path) are all
 * there. Prints a JSON summary; fails on the first mismatch.
 */
final class SelfTest {
  private SelfTest() {}

  static int run(List<String> argv, PrintStream out, PrintStream err) {
    Set<String> options = new HashSet<>(Set.of("rows", "commits", "only"));
    Args a = Args.parse("selftest", argv, options, Set.of());
    int rows = a.intValue("rows", 300, 10, 100_000);
    int commits = a.intValue("commits", 3, 1, 100);
    Map<String, Object> summary = new LinkedHashMap<>();
    String[][] cases = {
      {"long", "none"}, {"string", "identity"}, {"uuid", "bucket:4"}, {"decimal", "none"},
      {"date", "identity"}, {"int", "bucket:2"},
    };
    String only = a.get("only", null);
    if (only != null) {
      int slash = only.indexOf('/');
      if (slash < 0) {
        throw new Args.UsageException("selftest: --only expects KEY/PARTITION, got '" + only + "'");
      }
      cases = new String[][] {{only.substring(0, slash), only.substring(slash + 1)}};
    }
    for (String[] c : cases) {
      String label = c[0] + "_" + c[1].replace(':', '_');
      summary.put(label, oneCase(label, c[0], c[1], rows, commits, err));
    }
    if (only == null) {
      for (String history : WriteHistory.CASES) {
        summary.put("history_" + history, oneHistory(history, rows, err));
      }
    }
    Main.printJson(out, summary);
    return 0;
  }

  private static Map<String, Object> oneCase(
      String label, String key, String partition, int rows, int commits, PrintStream err) {
    String db = "selftest";
    List<String> t1 = table(db, label + "_a");
    List<String> t2 = table(db, label + "_b");
    List<String> cdc =
        List.of("--seed", "11", "--rows", Integer.toString(rows), "--commits",
            Integer.toString(commits), "--key", key, "--partition", partition);
    Map<String, Object> w1 = json(call("write-cdc", t1, cdc, err));
    json(call("write-cdc", t2, cdc, err));
    String dump1 = call("dump", t1, List.of(), err);
    String dump2 = call("dump", t2, List.of(), err);
    check(dump1.equals(dump2), label + ": two tables written with one seed dump differently");
    long lines = dump1.isEmpty() ? 0 : dump1.split("\n", -1).length - 1;
    long expected = ((Number) w1.get("expected_live_rows")).longValue();
    check(lines == expected, label + ": dump has " + lines + " rows, the model " + expected);

    Map<String, Object> none = json(call("check-dvs", t1, List.of(), err));
    check(num(none, "dvs") == 0, label + ": DVs before any were written");
    check(num(none, "equality_delete_files") > 0, label + ": no equality delete files");

    Map<String, Object> dv = json(call("write-dvs", t1, List.of("--files", "2", "--positions", "3"), err));
    Map<String, Object> dvs = json(call("check-dvs", t1, List.of(), err));
    check(num(dvs, "dvs") == num(dv, "dvs_written"), label + ": check-dvs disagrees with write-dvs");
    check(num(dvs, "positions") == num(dv, "positions_deleted"), label + ": DV positions differ");
    // Twice on the same files: the second DVs must merge with (and replace) the first ones.
    Map<String, Object> dvAgain =
        json(call("write-dvs", t1, List.of("--files", "2", "--positions", "3"), err));
    check(num(dvAgain, "dvs_replaced") == num(dv, "dvs_written"), label + ": DVs not replaced");
    Map<String, Object> merged = json(call("check-dvs", t1, List.of(), err));
    check(num(merged, "dvs") == num(dvs, "dvs"), label + ": a second DV for a data file");
    String afterDvs = call("dump", t1, List.of(), err);
    long afterLines = afterDvs.isEmpty() ? 0 : afterDvs.split("\n", -1).length - 1;
    check(afterLines < lines && afterLines >= lines - num(merged, "positions"),
        label + ": DVs removed " + (lines - afterLines) + " rows");

    Map<String, Object> rw = json(call("rewrite", t1, List.of("--largest"), err));
    String afterRewrite = call("dump", t1, List.of(), err);
    check(afterRewrite.equals(afterDvs), label + ": rewrite changed the rows");
    Map<String, Object> afterRewriteDvs = json(call("check-dvs", t1, List.of(), err));

    // Rewriting a file that has a DV: the rows stay, and the DV must go with the file (a DV
    // left behind would dangle: check-dvs rejects that).
    String withDv = fileWithDv(db, label + "_a");
    Map<String, Object> rwDv = json(call("rewrite", t1, List.of("--file", withDv), err));
    check(call("dump", t1, List.of(), err).equals(afterDvs), label + ": rewrite changed the rows");
    Map<String, Object> afterDvRewrite = json(call("check-dvs", t1, List.of(), err));
    check(num(afterDvRewrite, "dvs") == num(afterRewriteDvs, "dvs") - 1,
        label + ": rewriting a file with a DV left " + afterDvRewrite.get("dvs") + " DVs");
    check(num(rwDv, "rows_after") < num(rwDv, "rows_before"), label + ": the DV was not applied");

    Map<String, Object> cw =
        json(call("concurrent-writer", t1, List.of("--seconds", "1", "--seed", "3", "--rows", "5"), err));
    check(num(cw, "commits") > 0, label + ": concurrent-writer made no commit");
    call("dump", t1, List.of(), err);
    json(call("check-dvs", t1, List.of(), err));

    Map<String, Object> r = new LinkedHashMap<>();
    r.put("rows", lines);
    r.put("equality_delete_files", none.get("equality_delete_files"));
    r.put("dvs", merged.get("dvs"));
    r.put("rows_after_dvs", afterLines);
    r.put("rewritten_rows", rw.get("rows_after"));
    r.put("dvs_after_rewrite", afterRewriteDvs.get("dvs"));
    r.put("dvs_after_rewriting_a_file_with_one", afterDvRewrite.get("dvs"));
    r.put("concurrent_commits", cw.get("commits"));
    return r;
  }

  /**
   * write-history: the dump (with lineage) holds as many rows as the writer's model, and every
   * row's lineage columns are filled.
   */
  private static Map<String, Object> oneHistory(String name, int rows, PrintStream err) {
    List<String> t = table("selftest", "history_" + name.replace('-', '_'));
    Map<String, Object> w =
        json(call("write-history", t, List.of("--case", name, "--rows", Integer.toString(rows)), err));
    if (name.equals("drop-key")) {
      // Java itself cannot apply equality deletes on a field the schema no longer has.
      String error = callFailing("dump", t, List.of("--lineage"));
      check(error.contains("Cannot find required field"), "history drop-key: dump said " + error);
      Map<String, Object> r = new LinkedHashMap<>(w);
      r.remove("location");
      r.remove("table");
      r.put("dump_error", error.trim());
      return r;
    }
    String dump = call("dump", t, List.of("--lineage"), err);
    String[] lines = dump.isEmpty() ? new String[0] : dump.split("\n");
    long expected = num(w, "expected_live_rows");
    check(lines.length == expected,
        "history " + name + ": dump has " + lines.length + " rows, the model " + expected);
    for (String line : lines) {
      check(!line.endsWith(",null]") && !line.contains(",null,null]"),
          "history " + name + ": a row without lineage: " + line);
    }
    Map<String, Object> r = new LinkedHashMap<>(w);
    r.remove("location");
    r.remove("table");
    r.put("rows", lines.length);
    return r;
  }

  /** A live data file of the in-memory table that has a DV. */
  private static String fileWithDv(String db, String name) {
    org.apache.iceberg.Table table =
        TableRef.memoryCatalog()
            .loadTable(org.apache.iceberg.catalog.TableIdentifier.of(db, name));
    try (org.apache.iceberg.io.CloseableIterable<org.apache.iceberg.FileScanTask> tasks =
        table.newScan().planFiles()) {
      for (org.apache.iceberg.FileScanTask t : tasks) {
        for (org.apache.iceberg.DeleteFile d : t.deletes()) {
          if (d.format() == org.apache.iceberg.FileFormat.PUFFIN) {
            return t.file().location();
          }
        }
      }
    } catch (java.io.IOException e) {
      throw new java.io.UncheckedIOException(e);
    }
    throw new IllegalStateException("selftest: " + name + " has no data file with a DV");
  }

  private static List<String> table(String db, String name) {
    return List.of("--warehouse", "memory://selftest", "--database", db, "--table", name);
  }

  private static String call(String command, List<String> table, List<String> extra, PrintStream err) {
    List<String> argv = new ArrayList<>();
    argv.add(command);
    argv.addAll(table);
    argv.addAll(extra);
    ByteArrayOutputStream buffer = new ByteArrayOutputStream();
    PrintStream capture = new PrintStream(buffer, true, StandardCharsets.UTF_8);
    ByteArrayOutputStream errBuffer = new ByteArrayOutputStream();
    PrintStream errCapture = new PrintStream(errBuffer, true, StandardCharsets.UTF_8);
    int code = Main.run(argv, capture, errCapture);
    if (code != 0) {
      err.print(errBuffer.toString(StandardCharsets.UTF_8));
      throw new IllegalStateException(String.join(" ", argv) + " exited with " + code);
    }
    return buffer.toString(StandardCharsets.UTF_8);
  }

  /** Runs a command that must fail; returns its stderr. */
  private static String callFailing(String command, List<String> table, List<String> extra) {
    List<String> argv = new ArrayList<>();
    argv.add(command);
    argv.addAll(table);
    argv.addAll(extra);
    ByteArrayOutputStream errBuffer = new ByteArrayOutputStream();
    PrintStream errCapture = new PrintStream(errBuffer, true, StandardCharsets.UTF_8);
    int code = Main.run(argv, new PrintStream(new ByteArrayOutputStream()), errCapture);
    check(code == 1, String.join(" ", argv) + " exited with " + code + ", expected a failure");
    return errBuffer.toString(StandardCharsets.UTF_8);
  }

  @SuppressWarnings("unchecked")
  private static Map<String, Object> json(String text) {
    return Main.fromJson(text.trim(), Map.class);
  }

  private static long num(Map<String, Object> m, String key) {
    Object v = m.get(key);
    if (!(v instanceof Number)) {
      throw new IllegalStateException("no number '" + key + "' in " + m);
    }
    return ((Number) v).longValue();
  }

  private static void check(boolean ok, String message) {
    if (!ok) {
      throw new IllegalStateException("selftest: " + message);
    }
  }
}
