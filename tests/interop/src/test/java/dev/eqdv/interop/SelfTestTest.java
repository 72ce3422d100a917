package dev.eqdv.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.List;
import org.junit.jupiter.api.Test;

/** Every subcommand end to end on the in-memory catalog (see {@link SelfTest}). */
class SelfTestTest {
  private static int run(List<String> argv, ByteArrayOutputStream out, ByteArrayOutputStream err) {
    return Main.run(
        argv,
        new PrintStream(out, true, StandardCharsets.UTF_8),
        new PrintStream(err, true, StandardCharsets.UTF_8));
  }

  @Test
  void everySubcommandWorksOnEveryKeyAndPartitioning() {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    int code = run(List.of("selftest", "--rows", "40", "--commits", "2"), out, err);
    assertEquals(0, code, err.toString(StandardCharsets.UTF_8));
    assertTrue(out.toString(StandardCharsets.UTF_8).contains("\"int_bucket_2\""));
  }

  @Test
  void badUsageExitsWithTwo() {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    assertEquals(2, run(List.of("write-cdc", "--warehouse", "s3://b/p"), out, err));
    assertTrue(err.toString(StandardCharsets.UTF_8).contains("--database is required"));
    assertEquals(2, run(List.of("frobnicate"), out, err));
    assertEquals(
        2,
        run(List.of("write-cdc", "--warehouse", "memory://x", "--database", "d", "--table", "t",
            "--key", "float"), out, err));
    assertEquals(
        2,
        run(List.of("rewrite", "--warehouse", "memory://x", "--database", "d", "--table", "t"),
            out, err));
  }

  @Test
  void failuresExitWithOneAndNameTheTable() {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    int code =
        run(List.of("dump", "--warehouse", "memory://x", "--database", "nodb", "--table", "missing"),
            out, err);
    assertEquals(1, code);
    assertTrue(err.toString(StandardCharsets.UTF_8).contains("nodb.missing"),
        err.toString(StandardCharsets.UTF_8));
  }
}
