package dev.eqdv.interop;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * eqdv-interop: Apache Iceberg Java, used as a library, as the reference writer and reader that
 * eqdv's Glue + S3 results are judged by. Every subcommand works on one table of a Glue catalog
 * with S3FileIO, configured from the AWS SDK's environment variables. Results go to stdout (JSON,
 * or canonical rows for {@code dump}); logs and errors to stderr.
 *
 * <p>Exit codes: 0 success, 1 failure (the message names what failed), 2 bad usage.
 */
public final class Main {
  static final String USAGE =
      String.join(
          "\n",
          "usage: java -jar eqdv-interop.jar COMMAND --warehouse s3://BUCKET/PREFIX --database DB"
              + " --table NAME [options]",
          "",
          "commands:",
          "  write-cdc          create a v3 table if missing and commit a CDC workload (data files +",
          "                     equality deletes, RowDelta); prints JSON counts",
          "      --seed N (1) --commits N (5) --rows N (1000)",
          "      --key long|int|string|uuid|decimal|date (long)",
          "      --partition none|identity|bucket:N (none)",
          "      --bloom-filters: on creation, a bloom filter on k0 and small row groups",
          "      --global-deletes: partitioned data (spec 1), equality deletes under the",
          "                     unpartitioned spec 0 (global); needs --partition other than none",
          "  write-history      create a new v3 table with one real-world history: data files and",
          "                     equality deletes (RowDelta) around a schema or spec change; prints",
          "                     JSON counts and expected_live_rows",
          "      --case name-mapping|no-name-mapping|initial-default|promote-partition|",
          "             promote-partition-data-only|rename-key|promote-key|widen-decimal-key|",
          "             spec-evolution|drop-key  --seed N (1) --rows N (400)",
          "  write-nested       create a new v3 table keyed on a field nested in a struct (s.id, or",
          "                     k and s.region) with null structs and null keys, and commit",
          "                     appends and equality deletes; prints JSON counts",
          "      --keys s.id|k,s.region (s.id) --seed N (1) --commits N (8) --rows N (40)",
          "      --delete-format parquet|avro (parquet) --struct-added-later (first two commits",
          "                     without s: Java reads their s as null)",
          "  dump               the live rows of --branch (main) in canonical form, sorted",
          "      [--lineage]    each row ends with _row_id and _last_updated_sequence_number",
          "  check-dvs          loads every live DV of --branch (main) with Java's delete loader;",
          "                     prints JSON {dvs, positions, equality_delete_files,"
              + " position_delete_files, ...}",
          "      [--positions]  also dv_positions: each DV's positions, by data file",
          "  deleted-positions  per live data file of --branch (main), the positions Java's reader",
          "                     drops (any delete); prints JSON {deleted: {PATH: [POS...]}}",
          "  write-dvs          deletes a few rows by position, written as DVs by Java's DV writer",
          "      --seed N (1) --files N (2) --positions N (3)",
          "  break-dv           replaces a DV of main with a broken one (for judging the judges)",
          "      --kind crc|cardinality|referenced|other-file|partition|range|empty|",
          "             blob-metadata|drop  [--file DATA_FILE]",
          "  concurrent-writer  commits appends and equality deletes until --seconds S pass",
          "      --seconds S (10) --seed N (1) --rows N (20)",
          "  rewrite            rewrites one data file as compaction does (RewriteFiles)",
          "      --file PATH | --largest  [--new-sequence-number]",
          "  serve              one JSON command per line on stdin, one JSON answer per line on",
          "                     stdout: create, random-op (seeded random writes, schema and spec",
          "                     changes, compaction, expiry, branch b), dump, check-dvs (Serve.java)",
          "  bench-read         benchmarks: one snapshot of a local table read by the generic reader;",
          "      --metadata FILE --snapshot ID; prints JSON {rows, sum_v, inner_ms} (no services,",
          "      no table options)",
          "  selftest           the writers, dump, check-dvs and rewrite in one JVM on an in-memory",
          "                     catalog (no services)",
          "      --rows N (300) --commits N (3) --only KEY/PARTITION; takes no table options",
          "",
          "environment: AWS_REGION, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY (or the SDK's other",
          "credential sources), AWS_ENDPOINT_URL_S3 (MinIO: path-style access is turned on),",
          "AWS_ENDPOINT_URL_GLUE; EQDV_INTEROP_LOG sets the log level (warn).");

  static final Set<String> TABLE_OPTIONS = Set.of("warehouse", "database", "table");

  private Main() {}

  public static void main(String[] argv) {
    String level = System.getenv("EQDV_INTEROP_LOG");
    System.setProperty(
        "org.slf4j.simpleLogger.defaultLogLevel", level == null || level.isBlank() ? "warn" : level);
    System.setProperty("org.slf4j.simpleLogger.logFile", "System.err");
    PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
    PrintStream err = new PrintStream(System.err, true, StandardCharsets.UTF_8);
    int code = run(Arrays.asList(argv), out, err);
    out.flush();
    err.flush();
    System.exit(code);
  }

  static int run(List<String> argv, PrintStream out, PrintStream err) {
    if (argv.isEmpty() || argv.get(0).equals("--help") || argv.get(0).equals("-h")
        || argv.get(0).equals("help")) {
      (argv.isEmpty() ? err : out).println(USAGE);
      return argv.isEmpty() ? 2 : 0;
    }
    String command = argv.get(0);
    List<String> rest = argv.subList(1, argv.size());
    try {
      switch (command) {
        case "write-cdc":
          return WriteCdc.run(rest, out);
        case "write-history":
          return WriteHistory.run(rest, out);
        case "dump":
          return Dump.run(rest, out);
        case "check-dvs":
          return CheckDvs.run(rest, out);
        case "deleted-positions":
          return DeletedPositions.run(rest, out);
        case "break-dv":
          return BreakDv.run(rest, out);
        case "write-dvs":
          return WriteDvs.run(rest, out);
        case "concurrent-writer":
          return ConcurrentWriter.run(rest, out, err);
        case "rewrite":
          return Rewrite.run(rest, out);
        case "selftest":
          return SelfTest.run(rest, out, err);
        case "bench-read":
          return BenchRead.run(rest, out);
        case "serve":
          return Serve.run(rest, out);
        case "write-nested":
          return WriteNested.run(rest, out);
        default:
          throw new Args.UsageException("unknown command '" + command + "'");
      }
    } catch (Args.UsageException e) {
      err.println("eqdv-interop: " + e.getMessage());
      err.println(USAGE);
      return 2;
    } catch (Exception | LinkageError e) {
      err.println("eqdv-interop " + command + ": error: " + describe(e));
      if (System.getenv("EQDV_INTEROP_TRACE") != null) {
        e.printStackTrace(err);
      }
      return 1;
    }
  }

  /** The message of {@code e} and of each of its causes, so the root cause is never hidden. */
  static String describe(Throwable e) {
    StringBuilder s = new StringBuilder();
    Throwable t = e;
    int depth = 0;
    while (t != null && depth < 8) {
      if (depth > 0) {
        s.append(": caused by ");
      }
      s.append(t.getClass().getSimpleName());
      if (t.getMessage() != null) {
        s.append(": ").append(t.getMessage());
      }
      if (t.getCause() == t) {
        break;
      }
      t = t.getCause();
      depth++;
    }
    return s.toString();
  }

  private static final ObjectMapper JSON = new ObjectMapper();

  /** One compact JSON object on its own line. */
  static void printJson(PrintStream out, Map<String, ?> value) {
    try {
      out.println(JSON.writeValueAsString(value));
    } catch (com.fasterxml.jackson.core.JsonProcessingException e) {
      throw new IllegalStateException("cannot print JSON: " + e.getMessage(), e);
    }
  }

  static String toJson(Object value) {
    try {
      return JSON.writeValueAsString(value);
    } catch (com.fasterxml.jackson.core.JsonProcessingException e) {
      throw new IllegalStateException("cannot print JSON: " + e.getMessage(), e);
    }
  }

  static <T> T fromJson(String text, Class<T> type) {
    try {
      return JSON.readValue(text, type);
    } catch (com.fasterxml.jackson.core.JsonProcessingException e) {
      throw new IllegalArgumentException("not valid JSON: " + e.getOriginalMessage(), e);
    }
  }
}
