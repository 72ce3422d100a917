package dev.eqdv.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.math.BigDecimal;
import java.nio.ByteBuffer;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.time.LocalTime;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import java.util.List;
import java.util.UUID;
import org.apache.iceberg.Schema;
import org.apache.iceberg.data.GenericRecord;
import org.apache.iceberg.data.Record;
import org.apache.iceberg.types.Types;
import org.junit.jupiter.api.Test;

class CanonicalTest {
  private static String f(double v) {
    StringBuilder s = new StringBuilder();
    Canonical.appendFloat(s, v);
    return s.toString();
  }

  @Test
  void floatsPrintAsSerdeJsonPrintsThem() {
    assertEquals("1.0", f(1.0));
    assertEquals("-1.0", f(-1.0));
    assertEquals("0.0", f(0.0));
    assertEquals("-0.0", f(-0.0));
    assertEquals("0.1", f(0.1));
    assertEquals("123.456", f(123.456));
    assertEquals("100.0", f(100.0));
    assertEquals("1000000000000000.0", f(1e15));
    assertEquals("1e+16", f(1e16));
    assertEquals("1.2345678901234568e+17", f(1.2345678901234568e17));
    assertEquals("2.82879384806159e+17", f(2.82879384806159E17));
    assertEquals("1e+21", f(1e21));
    assertEquals("1e+23", f(1e23));
    assertEquals("0.001", f(0.001));
    assertEquals("0.00001", f(1e-5));
    assertEquals("0.000123", f(0.000123));
    assertEquals("1e-6", f(1e-6));
    assertEquals("1.5e-7", f(1.5e-7));
    assertEquals("5e-324", f(Double.MIN_VALUE));
    assertEquals("1.7976931348623157e+308", f(Double.MAX_VALUE));
    assertEquals("2.2250738585072014e-308", f(Double.MIN_NORMAL));
    assertEquals("0.30000000000000004", f(0.1 + 0.2));
    assertEquals("9007199254740992.0", f(9007199254740992.0));
    // f32 values are widened to f64 first, as the Rust side does.
    assertEquals("0.10000000149011612", f((double) 0.1f));
    assertEquals("\"NaN\"", f(Double.NaN));
    assertEquals("\"Infinity\"", f(Double.POSITIVE_INFINITY));
    assertEquals("\"-Infinity\"", f(Double.NEGATIVE_INFINITY));
  }

  @Test
  void shortestDigitsReadBack() {
    java.util.Random random = new java.util.Random(42);
    for (int i = 0; i < 20_000; i++) {
      double v = Double.longBitsToDouble(random.nextLong());
      if (Double.isNaN(v) || Double.isInfinite(v)) {
        continue;
      }
      String s = Canonical.formatDouble(v);
      assertEquals(v, Double.parseDouble(s), s);
      // Never longer than Java's own (which is shortest or one digit longer).
      BigDecimal ours = new BigDecimal(s).stripTrailingZeros();
      BigDecimal javas = new BigDecimal(Double.toString(v)).stripTrailingZeros();
      if (ours.precision() > javas.precision()) {
        throw new AssertionError(v + ": " + s + " longer than " + Double.toString(v));
      }
    }
  }

  @Test
  void decimalsKeepTheirScale() {
    assertEquals("123.45", Canonical.decimal(new BigDecimal("123.45"), 2));
    assertEquals("-0.005", Canonical.decimal(new BigDecimal("-0.005"), 3));
    assertEquals("0.00", Canonical.decimal(BigDecimal.ZERO, 2));
    assertEquals("7", Canonical.decimal(BigDecimal.valueOf(7), 0));
    assertEquals("-12.0", Canonical.decimal(BigDecimal.valueOf(-120, 1), 1));
    assertEquals("1.5000", Canonical.decimal(new BigDecimal("1.5"), 4));
    assertThrows(ArithmeticException.class, () -> Canonical.decimal(new BigDecimal("1.55"), 1));
  }

  @Test
  void stringsEscapeAsSerdeJson() {
    StringBuilder s = new StringBuilder();
    Canonical.appendString(s, "zürich \"q\" \\ \n\r\t\b\f \u0001\u001f\u007f 😀 /");
    assertEquals(
        "\"zürich \\\"q\\\" \\\\ \\n\\r\\t\\b\\f \\u0001\\u001f\u007f 😀 /\"", s.toString());
  }

  @Test
  void rowsMatchTheRustCanonicalForm() {
    Schema schema =
        new Schema(
            Types.NestedField.optional(1, "l", Types.LongType.get()),
            Types.NestedField.optional(2, "s", Types.StringType.get()),
            Types.NestedField.optional(3, "b", Types.BinaryType.get()),
            Types.NestedField.optional(4, "u", Types.UUIDType.get()),
            Types.NestedField.optional(5, "d", Types.DecimalType.of(10, 2)),
            Types.NestedField.optional(6, "t", Types.TimestampType.withZone()));
    Record r = GenericRecord.create(schema);
    r.setField("l", 2L);
    r.setField("s", "zürich \"q\"");
    r.setField("b", ByteBuffer.wrap(new byte[] {0, (byte) 0xff}));
    r.setField("u", UUID.fromString("01234567-89ab-cdef-0011-223344556677"));
    r.setField("d", new BigDecimal("-0.05"));
    r.setField("t", OffsetDateTime.of(1969, 12, 31, 23, 59, 59, 999_999_000, ZoneOffset.UTC));
    assertEquals(
        "[2,\"zürich \\\"q\\\"\",\"00ff\",\"01234567-89ab-cdef-0011-223344556677\",\"-0.05\",-1]",
        Canonical.row(schema, r));
    assertEquals("[null,null,null,null,null,null]", Canonical.row(schema, GenericRecord.create(schema)));
  }

  @Test
  void otherTypes() {
    Schema schema =
        new Schema(
            Types.NestedField.optional(1, "i", Types.IntegerType.get()),
            Types.NestedField.optional(2, "bo", Types.BooleanType.get()),
            Types.NestedField.optional(3, "da", Types.DateType.get()),
            Types.NestedField.optional(4, "ts", Types.TimestampType.withoutZone()),
            Types.NestedField.optional(5, "fx", Types.FixedType.ofLength(3)),
            Types.NestedField.optional(6, "ti", Types.TimeType.get()),
            Types.NestedField.optional(7, "fl", Types.FloatType.get()),
            Types.NestedField.optional(8, "db", Types.DoubleType.get()),
            Types.NestedField.optional(9, "tn", Types.TimestampNanoType.withoutZone()));
    Record r = GenericRecord.create(schema);
    r.setField("i", -7);
    r.setField("bo", true);
    r.setField("da", LocalDate.of(1969, 12, 31));
    r.setField("ts", LocalDateTime.of(2024, 3, 9, 0, 0, 0, 1_000));
    r.setField("fx", new byte[] {1, 2, (byte) 0xab});
    r.setField("ti", LocalTime.of(0, 0, 1));
    r.setField("fl", 1.5f);
    r.setField("db", 2.5e-7);
    r.setField("tn", LocalDateTime.of(1970, 1, 1, 0, 0, 0, 5));
    assertEquals(
        "[-7,true,-1,1709942400000001,\"0102ab\",1000000,1.5,2.5e-7,5]", Canonical.row(schema, r));
  }

  @Test
  void uuidsReadAsRawBytesPrintAsUuids() {
    UUID u = UUID.fromString("81234567-89ab-cdef-0011-223344556677");
    ByteBuffer b = ByteBuffer.allocate(16).putLong(u.getMostSignificantBits())
        .putLong(u.getLeastSignificantBits());
    assertEquals(u, Canonical.uuid(b.array()));
    assertEquals(u, Canonical.uuid(ByteBuffer.wrap(b.array())));
    assertEquals(u, Canonical.uuid(u));
  }

  @Test
  void linesSortByUtf8Bytes() {
    // U+FF5E (3 UTF-8 bytes, EF BD 9E) sorts before U+1F600 (F0 ...) by bytes, but after it
    // by UTF-16 units (FF5E > D83D).
    List<String> sorted = Canonical.sorted(List.of("[\"😀\"]", "[\"～\"]", "[\"a\"]", "[null]", "[1]"));
    assertEquals(List.of("[\"a\"]", "[\"～\"]", "[\"😀\"]", "[1]", "[null]"), sorted);
  }

  @Test
  void workloadKeysAreDistinct() {
    for (Workload.KeyType k : Workload.KeyType.values()) {
      java.util.Set<Object> seen = new java.util.HashSet<>();
      for (long kid = 0; kid < 5000; kid++) {
        if (!seen.add(k.value(kid))) {
          throw new AssertionError(k + " repeats a value at kid " + kid);
        }
      }
    }
  }

  @Test
  void workloadIsDeterministic() {
    Workload a = new Workload(7, 200, Workload.KeyType.LONG, Workload.Partitioning.parse("none"));
    Workload b = new Workload(7, 200, Workload.KeyType.LONG, Workload.Partitioning.parse("none"));
    for (int c = 0; c < 6; c++) {
      Workload.CommitPlan pa = a.next();
      Workload.CommitPlan pb = b.next();
      assertEquals(pa.deletes, pb.deletes);
      assertEquals(pa.inserts.size(), pb.inserts.size());
    }
    assertEquals(a.liveRows(), b.liveRows());
    // 200 loaded, then per commit: 10 updates, 4 deletes, 6 inserts.
    assertEquals(200 + 5 * (6 - 4), a.liveRows());
  }
}
