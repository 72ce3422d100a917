package dev.eqdv.flink;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * eqdv-flink: Apache Flink's Iceberg sink in upsert mode as a test writer for eqdv. One
 * subcommand, {@code write-flink} ({@link WriteFlink}); results go to stdout as JSON, logs and
 * errors to stderr. Exit codes: 0 success, 1 failure, 2 bad usage.
 */
public final class Main {
  static final String USAGE =
      String.join(
          "\n",
          "usage: java -jar eqdv-flink.jar write-flink --warehouse s3://BUCKET/PREFIX --database DB"
              + " --table NAME --seed N --checkpoints C --branch B",
          "           [--create --partition none|identity|bucket]",
          "",
          "  Runs Flink's Iceberg sink (FlinkSink, upsert mode) on a local mini-cluster: C",
          "  checkpoints of a seeded changelog (inserts, updates of older keys and of keys inserted",
          "  in the same checkpoint, deletes) committed to branch B of a v3 table on Glue + S3.",
          "  --create creates the table first (identifier field k; with --partition identity, k and",
          "  its partition column p). Prints JSON: the rows a reader must see (the writer's model),",
          "  commits, and the data, equality delete, DV and position delete files they added.",
          "",
          "environment: AWS_REGION, AWS credentials, AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL_GLUE;",
          "EQDV_FLINK_LOG sets the log level (warn).");

  private Main() {}

  public static void main(String[] argv) {
    String level = System.getenv("EQDV_FLINK_LOG");
    System.setProperty(
        "org.slf4j.simpleLogger.defaultLogLevel", level == null || level.isBlank() ? "warn" : level);
    System.setProperty("org.slf4j.simpleLogger.logFile", "System.err");
    if (level == null || level.isBlank()) {
      // The mini-cluster warns about what a local run lacks (web UI log files, delegation
      // tokens) and about a checkpoint triggered as the finished job shuts down; Iceberg 1.11
      // warns on every manifest the report reads. Errors still show.
      System.setProperty("org.slf4j.simpleLogger.log.org.apache.flink", "error");
      System.setProperty("org.slf4j.simpleLogger.log.org.apache.iceberg.ManifestReader", "error");
    }
    int code;
    try {
      code = run(argv);
    } catch (UsageException e) {
      System.err.println("eqdv-flink: " + e.getMessage());
      System.err.println(USAGE);
      code = 2;
    } catch (Throwable e) {
      System.err.println("eqdv-flink: error: " + e);
      e.printStackTrace(System.err);
      code = 1;
    }
    System.out.flush();
    // Flink's and the AWS SDK's non-daemon threads must not keep the JVM alive.
    System.exit(code);
  }

  static int run(String[] argv) throws Exception {
    if (argv.length == 0 || !argv[0].equals("write-flink")) {
      throw new UsageException("expected the subcommand write-flink");
    }
    Map<String, String> options = new HashMap<>();
    List<String> flags = new ArrayList<>();
    for (int i = 1; i < argv.length; i++) {
      String a = argv[i];
      if (a.equals("--create")) {
        flags.add("create");
      } else if (a.startsWith("--") && i + 1 < argv.length) {
        String name = a.substring(2);
        if (!List.of(
                "warehouse", "database", "table", "seed", "checkpoints", "partition", "branch")
            .contains(name)) {
          throw new UsageException("unknown option " + a);
        }
        options.put(name, argv[++i]);
      } else {
        throw new UsageException("unexpected argument '" + a + "'");
      }
    }
    for (String required : List.of("warehouse", "database", "table", "seed", "checkpoints")) {
      if (!options.containsKey(required)) {
        throw new UsageException("--" + required + " is required");
      }
    }
    String partition = options.get("partition");
    boolean create = flags.contains("create");
    if (create && partition == null) {
      throw new UsageException("--create needs --partition none|identity|bucket");
    }
    if (partition != null && !List.of("none", "identity", "bucket").contains(partition)) {
      throw new UsageException("--partition: expected none, identity or bucket");
    }
    long seed;
    int checkpoints;
    try {
      seed = Long.parseLong(options.get("seed"));
      checkpoints = Integer.parseInt(options.get("checkpoints"));
    } catch (NumberFormatException e) {
      throw new UsageException("--seed and --checkpoints take integers");
    }
    if (checkpoints < 1 || checkpoints > 100) {
      throw new UsageException("--checkpoints must be between 1 and 100");
    }
    WriteFlink w =
        new WriteFlink(
            options.get("warehouse"),
            options.get("database"),
            options.get("table"),
            options.getOrDefault("branch", "main"));
    System.out.println(w.run(seed, checkpoints, create ? partition : null));
    return 0;
  }

  static final class UsageException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    UsageException(String message) {
      super(message);
    }
  }
}
