package dev.eqdv.interop;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.math.MathContext;
import java.math.RoundingMode;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.time.LocalTime;
import java.time.OffsetDateTime;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.UUID;
import org.apache.iceberg.Schema;
import org.apache.iceberg.StructLike;
import org.apache.iceberg.types.Type;
import org.apache.iceberg.types.Types;
import org.apache.iceberg.util.DateTimeUtil;

/**
 * The canonical row form every reader of the eqdv test suite is compared in: one compact JSON
 * array per row, values in schema field order, rows sorted by their UTF-8 bytes. It must print
 * exactly what the Rust side prints (serde_json over shared/workload/src/read/canonical.rs's values), byte for byte,
 * so every choice below mirrors that one; it never normalises anything the Rust side keeps.
 */
public final class Canonical {
  private static final char[] HEX = "0123456789abcdef".toCharArray();

  /** Orders strings by their UTF-8 bytes, unsigned (Rust's `str` order), not UTF-16 units. */
  public static final Comparator<byte[]> UTF8_ORDER = Arrays::compareUnsigned;

  private Canonical() {}

  /** The canonical line of one row of {@code schema}. */
  public static String row(Schema schema, StructLike row) {
    List<Types.NestedField> fields = schema.columns();
    StringBuilder out = new StringBuilder(64);
    out.append('[');
    for (int i = 0; i < fields.size(); i++) {
      if (i > 0) {
        out.append(',');
      }
      Types.NestedField field = fields.get(i);
      Object value = row.get(i, Object.class);
      appendValue(out, field, value);
    }
    out.append(']');
    return out.toString();
  }

  /** Sorts canonical lines in place by their UTF-8 bytes and returns them. */
  public static List<String> sorted(List<String> lines) {
    List<byte[]> bytes = new ArrayList<>(lines.size());
    for (String line : lines) {
      bytes.add(line.getBytes(StandardCharsets.UTF_8));
    }
    bytes.sort(UTF8_ORDER);
    List<String> out = new ArrayList<>(lines.size());
    for (byte[] b : bytes) {
      out.add(new String(b, StandardCharsets.UTF_8));
    }
    return out;
  }

  static void appendValue(StringBuilder out, Types.NestedField field, Object value) {
    if (value == null) {
      out.append("null");
      return;
    }
    Type type = field.type();
    switch (type.typeId()) {
      case BOOLEAN:
        out.append(((Boolean) value) ? "true" : "false");
        break;
      case INTEGER:
      case LONG:
        out.append(((Number) value).longValue());
        break;
      case FLOAT:
        // The Rust side widens f32 to f64 before printing it.
        appendFloat(out, (double) ((Float) value).floatValue());
        break;
      case DOUBLE:
        appendFloat(out, (Double) value);
        break;
      case STRING:
        appendString(out, value.toString());
        break;
      case BINARY:
        appendString(out, hex((ByteBuffer) value));
        break;
      case FIXED:
        appendString(
            out,
            value instanceof ByteBuffer ? hex((ByteBuffer) value) : hex(ByteBuffer.wrap((byte[]) value)));
        break;
      case UUID:
        appendString(out, uuid(value).toString());
        break;
      case DECIMAL:
        appendString(out, decimal((BigDecimal) value, ((Types.DecimalType) type).scale()));
        break;
      case DATE:
        out.append(DateTimeUtil.daysFromDate((LocalDate) value));
        break;
      case TIME:
        out.append(DateTimeUtil.microsFromTime((LocalTime) value));
        break;
      case TIMESTAMP:
        if (value instanceof OffsetDateTime) {
          out.append(DateTimeUtil.microsFromTimestamptz((OffsetDateTime) value));
        } else {
          out.append(DateTimeUtil.microsFromTimestamp((LocalDateTime) value));
        }
        break;
      case TIMESTAMP_NANO:
        // Iceberg's timestamp_ns types count nanoseconds, and so does the Rust side.
        if (value instanceof OffsetDateTime) {
          out.append(DateTimeUtil.nanosFromTimestamptz((OffsetDateTime) value));
        } else {
          out.append(DateTimeUtil.nanosFromTimestamp((LocalDateTime) value));
        }
        break;
      case STRUCT:
        appendStruct(out, type.asStructType(), (StructLike) value);
        break;
      default:
        throw new IllegalArgumentException(
            "no canonical form for column '" + field.name() + "' of type " + type);
    }
  }

  /** A struct as the array of its fields' values, in order (nested keys' tables). */
  static void appendStruct(StringBuilder out, Types.StructType type, StructLike value) {
    out.append('[');
    List<Types.NestedField> fields = type.fields();
    for (int i = 0; i < fields.size(); i++) {
      if (i > 0) {
        out.append(',');
      }
      appendValue(out, fields.get(i), value.get(i, Object.class));
    }
    out.append(']');
  }

  /**
   * A uuid value. Java's generic Parquet reader returns the raw 16 bytes instead of a UUID when
   * the file's column lacks Parquet's UUID logical type (as parquet-rs writes it).
   */
  static UUID uuid(Object value) {
    if (value instanceof UUID) {
      return (UUID) value;
    }
    ByteBuffer b =
        value instanceof ByteBuffer ? ((ByteBuffer) value).duplicate() : ByteBuffer.wrap((byte[]) value);
    if (b.remaining() != 16) {
      throw new IllegalArgumentException("a uuid value has " + b.remaining() + " bytes, not 16");
    }
    return new UUID(b.getLong(), b.getLong());
  }

  /** {@code value} with exactly {@code scale} fractional digits ({@code -0.005} at scale 3). */
  public static String decimal(BigDecimal value, int scale) {
    return value.setScale(scale, RoundingMode.UNNECESSARY).toPlainString();
  }

  /** Lowercase hex of the remaining bytes of {@code buffer} (its position is left alone). */
  public static String hex(ByteBuffer buffer) {
    ByteBuffer b = buffer.duplicate();
    StringBuilder s = new StringBuilder(b.remaining() * 2);
    while (b.hasRemaining()) {
      int v = b.get() & 0xff;
      s.append(HEX[v >>> 4]).append(HEX[v & 0x0f]);
    }
    return s.toString();
  }

  /** A JSON string literal escaped as serde_json escapes it; non-ASCII is kept as is. */
  public static void appendString(StringBuilder out, String s) {
    out.append('"');
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      switch (c) {
        case '"':
          out.append("\\\"");
          break;
        case '\\':
          out.append("\\\\");
          break;
        case '\b':
          out.append("\\b");
          break;
        case '\f':
          out.append("\\f");
          break;
        case '\n':
          out.append("\\n");
          break;
        case '\r':
          out.append("\\r");
          break;
        case '\t':
          out.append("\\t");
          break;
        default:
          if (c < 0x20) {
            out.append("\\u00").append(HEX[c >>> 4]).append(HEX[c & 0x0f]);
          } else {
            out.append(c);
          }
      }
    }
    out.append('"');
  }

  /**
   * A float as serde_json prints an f64: NaN and the infinities as the strings the Rust side
   * substitutes, finite values in the shortest digits that read back to the same double (the
   * closest such digits), laid out as serde_json 1.0.154's formatter (the zmij crate) lays them
   * out: plain for decimal exponents -5..=15 (whole numbers end in ".0"), else {@code 1e+16},
   * {@code 1.5e-7}.
   */
  public static void appendFloat(StringBuilder out, double v) {
    if (Double.isNaN(v)) {
      out.append("\"NaN\"");
    } else if (Double.isInfinite(v)) {
      out.append(v > 0 ? "\"Infinity\"" : "\"-Infinity\"");
    } else {
      out.append(formatDouble(v));
    }
  }

  /** zmij's layout of a finite double (what serde_json prints for it). */
  public static String formatDouble(double v) {
    boolean negative = (Double.doubleToRawLongBits(v) & Long.MIN_VALUE) != 0;
    String sign = negative ? "-" : "";
    if (v == 0.0) {
      return sign + "0.0";
    }
    BigDecimal shortest = shortest(Math.abs(v));
    String digits = shortest.unscaledValue().toString();
    int length = digits.length();
    int k = -shortest.scale(); // v = digits * 10^k
    int kk = length + k; // 10^(kk-1) <= v < 10^kk
    StringBuilder s = new StringBuilder(sign);
    if (k >= 0 && kk <= 16) {
      s.append(digits);
      for (int i = 0; i < k; i++) {
        s.append('0');
      }
      s.append(".0");
    } else if (kk > 0 && kk <= 16) {
      s.append(digits, 0, kk).append('.').append(digits, kk, length);
    } else if (kk > -5 && kk <= 0) {
      s.append("0.");
      for (int i = 0; i < -kk; i++) {
        s.append('0');
      }
      s.append(digits);
    } else {
      s.append(digits, 0, 1);
      if (length > 1) {
        s.append('.').append(digits, 1, length);
      }
      int exponent = kk - 1;
      s.append(exponent >= 0 ? "e+" : "e-").append(Math.abs(exponent));
    }
    return s.toString();
  }

  /**
   * The decimal with the fewest significant digits that parses back to {@code v} (> 0); among
   * those of that length, the one closest to {@code v}. Trailing zeros stripped.
   */
  static BigDecimal shortest(double v) {
    BigDecimal exact = new BigDecimal(v);
    for (int precision = 1; precision <= 17; precision++) {
      BigDecimal down = exact.round(new MathContext(precision, RoundingMode.FLOOR));
      BigDecimal up = exact.round(new MathContext(precision, RoundingMode.CEILING));
      boolean downOk = down.doubleValue() == v;
      boolean upOk = up.doubleValue() == v;
      BigDecimal pick = null;
      if (downOk && upOk) {
        int cmp = exact.subtract(down).compareTo(up.subtract(exact));
        if (cmp < 0) {
          pick = down;
        } else if (cmp > 0) {
          pick = up;
        } else {
          pick = evenLastDigit(down) ? down : up;
        }
      } else if (downOk) {
        pick = down;
      } else if (upOk) {
        pick = up;
      }
      if (pick != null) {
        return strip(pick);
      }
    }
    return strip(exact.round(new MathContext(17, RoundingMode.HALF_EVEN)));
  }

  private static boolean evenLastDigit(BigDecimal d) {
    return !d.unscaledValue().testBit(0);
  }

  private static BigDecimal strip(BigDecimal d) {
    BigDecimal s = d.stripTrailingZeros();
    // Keep an integer's unscaled value free of trailing zeros too (1E+3 has unscaled 1).
    if (s.unscaledValue().equals(BigInteger.ZERO)) {
      return BigDecimal.ZERO;
    }
    return s;
  }
}
