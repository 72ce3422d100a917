package dev.eqdv.interop;

import java.math.BigDecimal;
import java.time.LocalDate;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Random;
import java.util.UUID;
import org.apache.iceberg.PartitionSpec;
import org.apache.iceberg.Schema;
import org.apache.iceberg.UpdatePartitionSpec;
import org.apache.iceberg.data.GenericRecord;
import org.apache.iceberg.data.Record;
import org.apache.iceberg.expressions.Expressions;
import org.apache.iceberg.types.Type;
import org.apache.iceberg.types.Types;
import org.apache.iceberg.util.DateTimeUtil;

/**
 * The CDC workload of {@code write-cdc}: the table's shape and a model of its live rows that is a
 * pure function of (seed, rows, key, partition, commit number). Rows are named by a key id (kid);
 * a row's key value, region and timestamp follow from its kid, so an update (equality delete +
 * new row) always lands in the partition of the row it replaces.
 */
final class Workload {
  static final String[] REGIONS = {
    "us-east-1", "eu-west-1", "ap-southeast-2", "sa-east-1", "me-south-1"
  };
  /** 2024-03-09T00:00:00Z in microseconds. */
  static final long TS_BASE = 1_709_942_400_000_000L;

  static final long DAY_MICROS = 86_400_000_000L;
  /** Kids of deletes for keys that never existed start here. */
  static final long ABSENT_KID_BASE = 5_000_000L;
  /** Kids of the rows concurrent-writer appends start here. */
  static final long CONCURRENT_KID_BASE = 10_000_000L;

  static final int MAX_ROWS = 1_000_000;
  static final int MAX_COMMITS = 10_000;

  /** The key column types write-cdc knows. */
  enum KeyType {
    LONG,
    INT,
    STRING,
    UUID,
    DECIMAL,
    DATE;

    static KeyType parse(String s) {
      try {
        return valueOf(s.trim().toUpperCase(Locale.ROOT));
      } catch (IllegalArgumentException e) {
        throw new Args.UsageException(
            "--key: unknown key type '" + s + "' (expected long, int, string, uuid, decimal, date)");
      }
    }

    static KeyType of(Type type) {
      switch (type.typeId()) {
        case LONG:
          return LONG;
        case INTEGER:
          return INT;
        case STRING:
          return STRING;
        case UUID:
          return UUID;
        case DECIMAL:
          return DECIMAL;
        case DATE:
          return DATE;
        default:
          throw new IllegalArgumentException("key column type " + type + " is not supported");
      }
    }

    String label() {
      return name().toLowerCase(Locale.ROOT);
    }

    Type icebergType() {
      switch (this) {
        case LONG:
          return Types.LongType.get();
        case INT:
          return Types.IntegerType.get();
        case STRING:
          return Types.StringType.get();
        case UUID:
          return Types.UUIDType.get();
        case DECIMAL:
          return Types.DecimalType.of(20, 4);
        case DATE:
          return Types.DateType.get();
        default:
          throw new AssertionError(this);
      }
    }

    /** The key value of row kid {@code kid}: distinct kids give distinct values. */
    Object value(long kid) {
      switch (this) {
        case LONG:
          return kid * 10 - 500;
        case INT:
          return Math.toIntExact(kid * 3 - 1000);
        case STRING:
          // Longer than the 16 characters Java keeps in bounds; some non-ASCII.
          return String.format(
              Locale.ROOT, kid % 7 == 3 ? "customer-ü-%010d" : "customer-%010d", kid);
        case UUID:
          // The top bit stays clear: Iceberg Java 1.12 compares UUID bounds as signed longs, so
          // a file whose keys cross 0x80.. loses its equality deletes to bounds pruning there
          // (the spec orders UUIDs as unsigned bytes). The low half (kid) keeps them distinct.
          return new UUID(mix(kid) & Long.MAX_VALUE, kid);
        case DECIMAL:
          return BigDecimal.valueOf(kid * 12_345 - 500_000, 4);
        case DATE:
          return LocalDate.ofEpochDay(kid - 1000);
        default:
          throw new AssertionError(this);
      }
    }
  }

  /** How the table is partitioned. */
  static final class Partitioning {
    final String kind;
    final int buckets;

    private Partitioning(String kind, int buckets) {
      this.kind = kind;
      this.buckets = buckets;
    }

    static Partitioning parse(String s) {
      String t = s.trim().toLowerCase(Locale.ROOT);
      if (t.equals("none") || t.equals("identity")) {
        return new Partitioning(t, 0);
      }
      if (t.startsWith("bucket:")) {
        try {
          int n = Integer.parseInt(t.substring("bucket:".length()));
          if (n >= 1 && n <= 10_000) {
            return new Partitioning("bucket", n);
          }
        } catch (NumberFormatException e) {
          // fall through
        }
      }
      throw new Args.UsageException(
          "--partition: expected none, identity or bucket:N (1..10000), got '" + s + "'");
    }

    PartitionSpec spec(Schema schema) {
      switch (kind) {
        case "none":
          return PartitionSpec.unpartitioned();
        case "identity":
          return PartitionSpec.builderFor(schema).identity("region").build();
        case "bucket":
          return PartitionSpec.builderFor(schema).bucket("k0", buckets, "k0_bucket").build();
        default:
          throw new AssertionError(kind);
      }
    }

    /**
     * Adds the fields of {@link #spec} (same names and transforms) to an unpartitioned table's
     * spec: how write-cdc --global-deletes evolves its table to partitioned data.
     */
    UpdatePartitionSpec addFields(UpdatePartitionSpec update) {
      switch (kind) {
        case "none":
          return update;
        case "identity":
          return update.addField("region");
        case "bucket":
          return update.addField("k0_bucket", Expressions.bucket("k0", buckets));
        default:
          throw new AssertionError(kind);
      }
    }

    boolean isPartitioned() {
      return !kind.equals("none");
    }

    @Override
    public String toString() {
      return kind.equals("bucket") ? "bucket:" + buckets : kind;
    }
  }

  static Schema schema(KeyType key) {
    return new Schema(
        Types.NestedField.optional(1, "k0", key.icebergType()),
        Types.NestedField.optional(2, "region", Types.StringType.get()),
        Types.NestedField.optional(3, "ts", Types.TimestampType.withoutZone()),
        Types.NestedField.optional(4, "payload", Types.StringType.get()),
        Types.NestedField.required(5, "version", Types.LongType.get()));
  }

  static String region(long kid) {
    return REGIONS[(int) Math.floorMod(kid, (long) REGIONS.length)];
  }

  /** A row of the table's schema (looked up by name, so added columns read as null). */
  static Record row(Schema schema, KeyType key, long kid, long version, int salt, String writer) {
    Record r = GenericRecord.create(schema);
    r.setField("k0", key.value(kid));
    r.setField("region", region(kid));
    long micros = TS_BASE + Math.floorMod(kid, 4L) * DAY_MICROS + (salt & 0xffffffL) * 1_000L;
    r.setField("ts", DateTimeUtil.timestampFromMicros(micros));
    r.setField(
        "payload",
        String.format(
            Locale.ROOT,
            "payload of key %d written by %s %d / %08x",
            kid,
            writer,
            version,
            salt));
    r.setField("version", version);
    return r;
  }

  /** splitmix64's finaliser: a fixed bijection of longs. */
  static long mix(long z) {
    z = (z ^ (z >>> 30)) * 0xbf58476d1ce4e5b9L;
    z = (z ^ (z >>> 27)) * 0x94d049bb133111ebL;
    return z ^ (z >>> 31);
  }

  // ---------------------------------------------------------------------------------------
  // The model.

  /** One row version: its kid, the commit that wrote it and its salt. */
  static final class RowVersion {
    final long kid;
    final long version;
    final int salt;

    RowVersion(long kid, long version, int salt) {
      this.kid = kid;
      this.version = version;
      this.salt = salt;
    }
  }

  /** What one commit writes: new row versions and kids deleted by equality. */
  static final class CommitPlan {
    final long commit;
    final List<RowVersion> inserts = new ArrayList<>();
    /** Kids whose rows an equality delete removes (updates included; some never existed). */
    final List<Long> deletes = new ArrayList<>();
    int updates;
    int pureDeletes;
    int absentDeletes;
    int freshInserts;

    CommitPlan(long commit) {
      this.commit = commit;
    }
  }

  final long seed;
  final int rows;
  final KeyType key;
  final Partitioning partitioning;

  private final List<Long> live = new ArrayList<>();
  private final Map<Long, Integer> livePos = new HashMap<>();
  private long nextKid = 0;
  private long commitsDone = 0;

  Workload(long seed, int rows, KeyType key, Partitioning partitioning) {
    this.seed = seed;
    this.rows = rows;
    this.key = key;
    this.partitioning = partitioning;
  }

  long commitsDone() {
    return commitsDone;
  }

  int liveRows() {
    return live.size();
  }

  /**
   * The plan of the next commit, applied to the model. Commit 0 is the initial load of {@code
   * rows} rows; later ones update ~5% of the live rows, delete ~2%, insert ~3% new ones and delete
   * one key that never existed.
   */
  CommitPlan next() {
    long c = commitsDone;
    Random random = new Random(mix(seed * 1_000_003L + c));
    CommitPlan plan = new CommitPlan(c);
    if (c == 0) {
      for (int i = 0; i < rows; i++) {
        plan.inserts.add(new RowVersion(nextKid++, c, random.nextInt()));
        plan.freshInserts++;
      }
    } else {
      int updates = Math.min(live.size(), Math.max(1, rows / 20));
      for (int i = 0; i < updates; i++) {
        long kid = removeRandom(random);
        plan.deletes.add(kid);
        plan.inserts.add(new RowVersion(kid, c, random.nextInt()));
        plan.updates++;
      }
      int deletes = Math.min(live.size(), Math.max(1, rows / 50));
      for (int i = 0; i < deletes; i++) {
        plan.deletes.add(removeRandom(random));
        plan.pureDeletes++;
      }
      plan.deletes.add(ABSENT_KID_BASE + c);
      plan.absentDeletes++;
      int inserts = Math.max(1, rows / 33);
      for (int i = 0; i < inserts; i++) {
        plan.inserts.add(new RowVersion(nextKid++, c, random.nextInt()));
        plan.freshInserts++;
      }
    }
    for (RowVersion v : plan.inserts) {
      add(v.kid);
    }
    commitsDone++;
    return plan;
  }

  private long removeRandom(Random random) {
    int i = random.nextInt(live.size());
    long kid = live.get(i);
    long last = live.remove(live.size() - 1);
    livePos.remove(kid);
    if (i < live.size()) {
      live.set(i, last);
      livePos.put(last, i);
    }
    return kid;
  }

  private void add(long kid) {
    if (livePos.containsKey(kid)) {
      throw new IllegalStateException("kid " + kid + " is already live");
    }
    livePos.put(kid, live.size());
    live.add(kid);
  }
}
