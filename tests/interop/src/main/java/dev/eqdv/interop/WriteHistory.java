package dev.eqdv.interop;

import java.io.IOException;
import java.io.PrintStream;
import java.io.UncheckedIOException;
import java.math.BigDecimal;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.TreeMap;
import java.util.UUID;
import java.util.function.Function;
import org.apache.iceberg.AppendFiles;
import org.apache.iceberg.DataFile;
import org.apache.iceberg.DataFiles;
import org.apache.iceberg.DeleteFile;
import org.apache.iceberg.FileFormat;
import org.apache.iceberg.Metrics;
import org.apache.iceberg.MetricsConfig;
import org.apache.iceberg.PartitionKey;
import org.apache.iceberg.PartitionSpec;
import org.apache.iceberg.RowDelta;
import org.apache.iceberg.Schema;
import org.apache.iceberg.StructLike;
import org.apache.iceberg.Table;
import org.apache.iceberg.TableProperties;
import org.apache.iceberg.catalog.TableIdentifier;
import org.apache.iceberg.data.GenericFileWriterFactory;
import org.apache.iceberg.data.GenericRecord;
import org.apache.iceberg.data.InternalRecordWrapper;
import org.apache.iceberg.data.Record;
import org.apache.iceberg.deletes.EqualityDeleteWriter;
import org.apache.iceberg.encryption.EncryptedOutputFile;
import org.apache.iceberg.expressions.Expressions;
import org.apache.iceberg.expressions.Literal;
import org.apache.iceberg.io.DataWriter;
import org.apache.iceberg.io.InputFile;
import org.apache.iceberg.io.OutputFileFactory;
import org.apache.iceberg.mapping.MappingUtil;
import org.apache.iceberg.mapping.NameMapping;
import org.apache.iceberg.mapping.NameMappingParser;
import org.apache.iceberg.parquet.ParquetUtil;
import org.apache.iceberg.types.Type;
import org.apache.iceberg.types.Types;
import org.apache.parquet.example.data.Group;
import org.apache.parquet.example.data.simple.SimpleGroupFactory;
import org.apache.parquet.hadoop.ParquetWriter;
import org.apache.parquet.hadoop.example.ExampleParquetWriter;
import org.apache.parquet.io.PositionOutputStream;
import org.apache.parquet.schema.MessageType;
import org.apache.parquet.schema.MessageTypeParser;

/**
 * {@code write-history}: creates a new v3 table and writes one of a few table histories that
 * real tables have and that a converter must read exactly as Java does: data files plus equality
 * deletes (RowDelta, as Flink/CDC writers commit them) over several commits, with a schema or
 * spec change in between so later deletes hit files written before the change. The history is a
 * function of the case and the seed. Prints JSON with the counts and the live row count of the
 * writer's own model ({@code expected_live_rows}, by Java's delete semantics).
 *
 * <p>Cases:
 *
 * <ul>
 *   <li>{@code name-mapping}: data files without Parquet field ids (written by Parquet's own
 *       writer, added with AppendFiles as migrate/add_files do, metrics through the mapping),
 *       {@code schema.name-mapping.default} set; then equality deletes on the key for their rows.
 *   <li>{@code no-name-mapping}: the same without the property (a reader cannot resolve the
 *       files' columns by id; Java falls back to column positions).
 *   <li>{@code initial-default}: a column added later with an initial default, then equality
 *       deletes on (key, that column) for rows of files written before it existed (they read the
 *       default), some with another value (must not match).
 *   <li>{@code promote-partition}: identity partition on an int column, data and deletes, the
 *       column promoted to long, then deletes whose partition tuples are longs for rows of files
 *       with int tuples. {@code promote-partition-data-only}: the same with only data before the
 *       promotion (so no manifest of a live delete carries an int tuple).
 *   <li>{@code rename-key}, {@code promote-key} (int to long), {@code widen-decimal-key}
 *       (decimal(9,2) to decimal(18,2)): the equality key column changed between commits.
 *   <li>{@code spec-evolution}: unpartitioned, then identity(p), then bucket(4, k); deletes under
 *       each old spec, deletes under the current spec for rows of older specs (they do not apply),
 *       and global deletes under the unpartitioned spec while the current spec is partitioned.
 *   <li>{@code drop-key}: equality deletes on (k, tag), then tag dropped from the schema.
 *   <li>{@code partition-clustered}: identity(p), one append per partition value (a null one
 *       among them), so each data manifest's partition summary holds one value, as a backfill
 *       by day writes them; then upserts and deletes of rows in two of the partitions only (the
 *       null one among them): a converter needs the data manifests of those two alone.
 * </ul>
 */
final class WriteHistory {
  static final List<String> CASES =
      List.of(
          "name-mapping",
          "no-name-mapping",
          "initial-default",
          "promote-partition",
          "promote-partition-data-only",
          "rename-key",
          "promote-key",
          "widen-decimal-key",
          "spec-evolution",
          "drop-key",
          "partition-clustered");

  /** The initial default of the {@code initial-default} case's added column. */
  static final int REGION_DEFAULT = 7;

  private WriteHistory() {}

  static int run(List<String> argv, PrintStream out) throws IOException {
    Set<String> options = new HashSet<>(Main.TABLE_OPTIONS);
    options.addAll(Set.of("case", "seed", "rows"));
    Args a = Args.parse("write-history", argv, options, Set.of());
    String name = a.required("case");
    if (!CASES.contains(name)) {
      throw new Args.UsageException(
          "write-history: --case must be one of " + String.join(", ", CASES) + ", got '" + name
              + "'");
    }
    long seed = a.longValue("seed", 1, Long.MIN_VALUE, Long.MAX_VALUE);
    int rows = a.intValue("rows", 400, 20, 100_000);
    try (TableRef ref = new TableRef(a)) {
      ref.ensureDatabase();
      if (ref.catalog.tableExists(ref.identifier())) {
        throw new IllegalStateException(
            "table " + ref.label() + " exists: write-history only creates new tables");
      }
      History h = new History(ref, seed, rows);
      switch (name) {
        case "name-mapping":
          h.nameMapping(true);
          break;
        case "no-name-mapping":
          h.nameMapping(false);
          break;
        case "initial-default":
          h.initialDefault();
          break;
        case "promote-partition":
          h.promotePartition(true);
          break;
        case "promote-partition-data-only":
          h.promotePartition(false);
          break;
        case "rename-key":
          h.evolveKey("rename");
          break;
        case "promote-key":
          h.evolveKey("promote");
          break;
        case "widen-decimal-key":
          h.evolveKey("widen");
          break;
        case "spec-evolution":
          h.specEvolution();
          break;
        case "drop-key":
          h.dropKey();
          break;
        case "partition-clustered":
          h.partitionClustered();
          break;
        default:
          throw new IllegalStateException("unhandled case " + name);
      }
      Table table = h.table;
      table.refresh();
      Map<String, Object> result = new LinkedHashMap<>();
      result.put("table", ref.label());
      result.put("case", name);
      result.put("location", table.location());
      result.put("commits", h.commits);
      result.put("data_files", h.dataFiles);
      result.put("imported_files", h.importedFiles);
      result.put("equality_delete_files", h.deleteFiles);
      result.put("rows_written", h.rowsWritten);
      result.put("equality_deletes_written", h.deletesWritten);
      result.put("expected_live_rows", h.liveRows());
      result.put("schema_id", table.schema().schemaId());
      result.put("spec_id", table.spec().specId());
      result.put("snapshot_id", table.currentSnapshot().snapshotId());
      Main.printJson(out, result);
      return 0;
    }
  }

  /** One live row of the writer's model: its values by field id and the spec of its file. */
  static final class Live {
    final long kid;
    final int version;
    final Map<Integer, Object> values;
    final int specId;

    Live(long kid, int version, Map<Integer, Object> values, int specId) {
      this.kid = kid;
      this.version = version;
      this.values = values;
      this.specId = specId;
    }
  }

  /** How one equality delete is written: its values by field id and the spec it is scoped to. */
  static final class Delete {
    final Map<Integer, Object> values;
    final PartitionSpec spec;

    Delete(Map<Integer, Object> values, PartitionSpec spec) {
      this.values = values;
      this.spec = spec;
    }
  }

  static final class History {
    final TableRef ref;
    final Random random;
    final int rows;
    Table table;
    /** Live rows by key id, in Java's semantics (what Java's dump must show). */
    final Map<Long, List<Live>> live = new TreeMap<>();
    long nextKid;
    int commits;
    long dataFiles;
    long importedFiles;
    long deleteFiles;
    long rowsWritten;
    long deletesWritten;
    /** Key id -> values of a new row (by field id) under the current schema. */
    Function<Long, Map<Integer, Object>> rowValues;

    History(TableRef ref, long seed, int rows) {
      this.ref = ref;
      this.random = new Random(seed);
      this.rows = rows;
    }

    Table create(Schema schema, PartitionSpec spec, Map<String, String> extra) {
      Map<String, String> props = new HashMap<>();
      props.put(TableProperties.FORMAT_VERSION, "3");
      props.put(TableProperties.DEFAULT_FILE_FORMAT, "parquet");
      props.putAll(extra);
      TableIdentifier id = ref.identifier();
      table = ref.catalog.buildTable(id, schema).withPartitionSpec(spec).withProperties(props).create();
      return table;
    }

    int fieldId(String name) {
      return table.schema().findField(name).fieldId();
    }

    // --- the cases --------------------------------------------------------------------------

    void nameMapping(boolean withMapping) throws IOException {
      Schema schema = keyPartitionSchema();
      Map<String, String> props = new HashMap<>();
      NameMapping mapping = MappingUtil.create(schema);
      if (withMapping) {
        props.put(TableProperties.DEFAULT_NAME_MAPPING, NameMappingParser.toJson(mapping));
      }
      create(schema, PartitionSpec.unpartitioned(), props);
      rowValues = kid -> values(1, kid, 2, (int) (kid % 5), 3, label(kid, 0), 4, 0);
      // Two imports (as migrate or add_files add files written by another tool), two files each.
      for (int i = 0; i < 2; i++) {
        List<DataFile> files = new ArrayList<>();
        for (int f = 0; f < 2; f++) {
          List<Live> batch = freshRows(rows / 4);
          files.add(importFile(batch, mapping));
        }
        AppendFiles append = table.newAppend();
        files.forEach(append::appendFile);
        append.commit();
        commits++;
        importedFiles += files.size();
      }
      int keyId = 1;
      rowValues = kid -> values(1, kid, 2, (int) (kid % 5), 3, label(kid, commits), 4, commits);
      PartitionSpec spec = table.spec();
      for (int i = 0; i < 2; i++) {
        step(spec, new int[] {keyId}, rows / 20, rows / 8, rows / 16, l -> sameValues(l, spec));
      }
    }

    void initialDefault() {
      Schema schema =
          new Schema(
              Types.NestedField.required(1, "k", Types.LongType.get()),
              Types.NestedField.optional(2, "v", Types.StringType.get()),
              Types.NestedField.optional(3, "ver", Types.IntegerType.get()));
      create(schema, PartitionSpec.unpartitioned(), Map.of());
      PartitionSpec spec = table.spec();
      rowValues = kid -> values(1, kid, 2, label(kid, commits), 3, commits);
      step(spec, new int[] {1}, rows / 2, 0, 0, l -> sameValues(l, spec));
      step(spec, new int[] {1}, rows / 4, rows / 10, rows / 20, l -> sameValues(l, spec));
      step(spec, new int[] {1}, rows / 4, rows / 10, rows / 20, l -> sameValues(l, spec));

      table.updateSchema().addColumn("region", Types.IntegerType.get(), Literal.of(REGION_DEFAULT)).commit();
      table.refresh();
      int region = fieldId("region");
      int[] eq = {1, region};
      // New rows: the default, other regions, or an explicit null.
      rowValues =
          kid -> {
            int pick = (int) (kid % 4);
            Object r = pick == 0 ? null : pick == 1 ? REGION_DEFAULT : (Object) (REGION_DEFAULT + pick);
            return values(1, kid, 2, label(kid, commits), 3, commits, region, r);
          };
      // Old rows match (k, default); every fifth delete says (k, default + 1) and must not match.
      int[] counter = {0};
      Function<Live, Delete> key =
          l -> {
            Map<Integer, Object> v = new HashMap<>(l.values);
            if (!v.containsKey(region)) {
              v.put(region, REGION_DEFAULT);
            }
            if (counter[0]++ % 5 == 4) {
              Object cur = v.get(region);
              v.put(region, cur == null ? REGION_DEFAULT : ((Integer) cur) + 1);
            }
            return new Delete(v, spec);
          };
      step(spec, eq, rows / 10, rows / 8, rows / 16, key);
      step(spec, eq, rows / 10, rows / 8, rows / 16, key);
    }

    /**
     * Identity partition on p (int), promoted to long. With {@code oldDeletes}, equality deletes
     * are written before the promotion too (their manifests carry int tuples, as the data's do);
     * without, the table has only data before it, so every live delete has long tuples.
     */
    void promotePartition(boolean oldDeletes) {
      Schema schema = keyPartitionSchema();
      create(schema, PartitionSpec.builderFor(schema).identity("p").build(), Map.of());
      rowValues = kid -> values(1, kid, 2, (int) (kid % 5), 3, label(kid, commits), 4, commits);
      PartitionSpec spec = table.spec();
      step(spec, new int[] {1}, rows / 2, 0, 0, l -> sameValues(l, spec));
      if (oldDeletes) {
        step(spec, new int[] {1}, rows / 4, rows / 10, rows / 20, l -> sameValues(l, spec));
      } else {
        step(spec, new int[] {1}, rows / 4, 0, 0, l -> sameValues(l, spec));
      }

      table.updateSchema().updateColumn("p", Types.LongType.get()).commit();
      table.refresh();
      PartitionSpec promoted = table.spec();
      rowValues = kid -> values(1, kid, 2, kid % 5, 3, label(kid, commits), 4, commits);
      for (int i = 0; i < 3; i++) {
        step(promoted, new int[] {1}, rows / 10, rows / 8, rows / 16, l -> sameValues(l, promoted));
      }
    }

    /** The equality key column renamed, promoted int to long, or a decimal key widened. */
    void evolveKey(String change) {
      boolean decimal = change.equals("widen");
      Type keyType = decimal ? Types.DecimalType.of(9, 2) : Types.IntegerType.get();
      Schema schema =
          new Schema(
              Types.NestedField.required(1, "id", keyType),
              Types.NestedField.optional(2, "v", Types.StringType.get()),
              Types.NestedField.optional(3, "ver", Types.IntegerType.get()));
      create(schema, PartitionSpec.unpartitioned(), Map.of());
      PartitionSpec spec = table.spec();
      rowValues = kid -> values(1, keyValue(decimal, kid), 2, label(kid, commits), 3, commits);
      step(spec, new int[] {1}, rows / 2, 0, 0, l -> sameValues(l, spec));
      step(spec, new int[] {1}, rows / 4, rows / 10, rows / 20, l -> sameValues(l, spec));
      switch (change) {
        case "rename":
          table.updateSchema().renameColumn("id", "key_id").commit();
          break;
        case "promote":
          table.updateSchema().updateColumn("id", Types.LongType.get()).commit();
          break;
        default:
          table.updateSchema().updateColumn("id", Types.DecimalType.of(18, 2)).commit();
      }
      table.refresh();
      for (int i = 0; i < 3; i++) {
        step(spec, new int[] {1}, rows / 10, rows / 8, rows / 16, l -> sameValues(l, spec));
      }
    }

    void specEvolution() {
      Schema schema = keyPartitionSchema();
      create(schema, PartitionSpec.unpartitioned(), Map.of());
      rowValues = kid -> values(1, kid, 2, (int) (kid % 5), 3, label(kid, commits), 4, commits);
      PartitionSpec unpartitioned = table.spec();
      step(unpartitioned, new int[] {1}, rows / 3, 0, 0, l -> sameValues(l, unpartitioned));
      step(unpartitioned, new int[] {1}, rows / 12, rows / 20, rows / 40, l -> sameValues(l, unpartitioned));

      table.updateSpec().addField("p").commit();
      table.refresh();
      PartitionSpec identity = table.spec();
      // Deletes scoped to the spec of the row's file: global for unpartitioned rows.
      Function<Live, Delete> ownSpec = l -> sameValues(l, table.specs().get(l.specId));
      step(identity, new int[] {1}, rows / 3, rows / 12, rows / 24, ownSpec);

      table.updateSpec().removeField("p").addField(Expressions.bucket("k", 4)).commit();
      table.refresh();
      PartitionSpec bucket = table.spec();
      step(bucket, new int[] {1}, rows / 4, rows / 10, rows / 20, ownSpec);
      // Every fourth delete scoped to the current spec: it does not apply to rows of older specs.
      int[] counter = {0};
      Function<Live, Delete> mostlyOwn =
          l -> counter[0]++ % 4 == 3 ? sameValues(l, bucket) : ownSpec.apply(l);
      step(bucket, new int[] {1}, rows / 10, rows / 10, rows / 20, mostlyOwn);
      // Global deletes (the unpartitioned spec) while the current spec is partitioned.
      step(bucket, new int[] {1}, rows / 10, rows / 10, rows / 20, l -> sameValues(l, unpartitioned));
    }

    void dropKey() {
      Schema schema =
          new Schema(
              Types.NestedField.required(1, "k", Types.LongType.get()),
              Types.NestedField.optional(2, "tag", Types.StringType.get()),
              Types.NestedField.optional(3, "v", Types.StringType.get()),
              Types.NestedField.optional(4, "ver", Types.IntegerType.get()));
      create(schema, PartitionSpec.unpartitioned(), Map.of());
      PartitionSpec spec = table.spec();
      rowValues = kid -> values(1, kid, 2, "t" + (kid % 3), 3, label(kid, commits), 4, commits);
      step(spec, new int[] {1, 2}, rows / 2, 0, 0, l -> sameValues(l, spec));
      step(spec, new int[] {1, 2}, rows / 4, rows / 10, rows / 20, l -> sameValues(l, spec));
      step(spec, new int[] {1, 2}, rows / 4, rows / 10, rows / 20, l -> sameValues(l, spec));
      table.updateSchema().deleteColumn("tag").commit();
      table.refresh();
    }

    /** A long key {@code k}, an int {@code p} to partition by, a label and a version. */
    static Schema keyPartitionSchema() {
      return new Schema(
          Types.NestedField.required(1, "k", Types.LongType.get()),
          Types.NestedField.optional(2, "p", Types.IntegerType.get()),
          Types.NestedField.optional(3, "v", Types.StringType.get()),
          Types.NestedField.optional(4, "ver", Types.IntegerType.get()));
    }

    void partitionClustered() {
      Schema schema = keyPartitionSchema();
      create(schema, PartitionSpec.builderFor(schema).identity("p").build(), Map.of());
      PartitionSpec spec = table.spec();
      Integer[] partition = {null};
      rowValues = kid -> values(1, kid, 2, partition[0], 3, label(kid, commits), 4, commits);
      for (Integer p : java.util.Arrays.asList(0, 1, 2, 3, null, 4, 5)) {
        partition[0] = p;
        step(spec, new int[] {1}, rows / 7, 0, 0, l -> sameValues(l, spec));
      }
      // Changes to rows of partitions 4 and null only; updated rows move to partition 4.
      partition[0] = 4;
      java.util.function.Predicate<Live> touched =
          l -> l.values.get(2) == null || Integer.valueOf(4).equals(l.values.get(2));
      step(spec, new int[] {1}, rows / 20, rows / 14, rows / 28, l -> sameValues(l, spec), touched);
      step(spec, new int[] {1}, 0, rows / 28, rows / 28, l -> sameValues(l, spec), touched);
    }

    // --- one commit ---------------------------------------------------------------------------

    void step(
        PartitionSpec dataSpec,
        int[] eqIds,
        int inserts,
        int updates,
        int deletes,
        Function<Live, Delete> deleteOf) {
      step(dataSpec, eqIds, inserts, updates, deletes, deleteOf, l -> true);
    }

    /**
     * One RowDelta: {@code inserts} new keys, {@code updates} live keys rewritten (an equality
     * delete of the old row plus the new row), {@code deletes} live keys deleted; new rows in
     * {@code dataSpec}, each delete as {@code deleteOf} says; updated and deleted keys are drawn
     * from those whose latest row is {@code eligible}.
     */
    void step(
        PartitionSpec dataSpec,
        int[] eqIds,
        int inserts,
        int updates,
        int deletes,
        Function<Live, Delete> deleteOf,
        java.util.function.Predicate<Live> eligible) {
      List<Long> liveKids = new ArrayList<>();
      for (Map.Entry<Long, List<Live>> e : live.entrySet()) {
        if (eligible.test(e.getValue().get(e.getValue().size() - 1))) {
          liveKids.add(e.getKey());
        }
      }
      java.util.Collections.shuffle(liveKids, random);
      int u = Math.min(updates, liveKids.size());
      int d = Math.min(deletes, liveKids.size() - u);
      List<Map<Integer, Object>> newRows = new ArrayList<>();
      List<Delete> deleteRows = new ArrayList<>();
      List<Live> added = new ArrayList<>();
      Map<Long, List<Live>> next = new TreeMap<>();
      for (int i = 0; i < u + d; i++) {
        long kid = liveKids.get(i);
        List<Live> rowsOfKey = live.get(kid);
        Live latest = rowsOfKey.get(rowsOfKey.size() - 1);
        Delete del = deleteOf.apply(latest);
        deleteRows.add(del);
        List<Live> kept = new ArrayList<>();
        for (Live row : rowsOfKey) {
          if (!applies(del, row, eqIds)) {
            kept.add(row);
          }
        }
        next.put(kid, kept);
        if (i < u) {
          Map<Integer, Object> v = rowValues.apply(kid);
          newRows.add(v);
          added.add(new Live(kid, latest.version + 1, v, dataSpec.specId()));
        }
      }
      for (int i = 0; i < inserts; i++) {
        long kid = nextKid++;
        Map<Integer, Object> v = rowValues.apply(kid);
        newRows.add(v);
        added.add(new Live(kid, 0, v, dataSpec.specId()));
      }
      List<DataFile> data = writeData(dataSpec, newRows);
      List<DeleteFile> eq = writeEqualityDeletes(eqIds, deleteRows);
      if (eq.isEmpty()) {
        AppendFiles append = table.newAppend();
        data.forEach(append::appendFile);
        append.commit();
      } else {
        RowDelta delta = table.newRowDelta();
        data.forEach(delta::addRows);
        eq.forEach(delta::addDeletes);
        delta.commit();
      }
      table.refresh();
      commits++;
      dataFiles += data.size();
      deleteFiles += eq.size();
      rowsWritten += newRows.size();
      deletesWritten += deleteRows.size();
      live.putAll(next);
      for (Live l : added) {
        live.computeIfAbsent(l.kid, k -> new ArrayList<>()).add(l);
      }
      live.values().removeIf(List::isEmpty);
    }

    long liveRows() {
      return live.values().stream().mapToLong(List::size).sum();
    }

    /** Java's rule for one delete and a row of an older file: same spec or global, equal values. */
    boolean applies(Delete del, Live row, int[] eqIds) {
      if (!del.spec.isUnpartitioned() && del.spec.specId() != row.specId) {
        return false;
      }
      for (int id : eqIds) {
        Object a = del.values.get(id);
        Object b = readValue(row, id);
        if (!java.util.Objects.equals(normalize(a), normalize(b))) {
          return false;
        }
      }
      return true;
    }

    /** A row's value of field {@code id} as a reader sees it now (initial default if absent). */
    Object readValue(Live row, int id) {
      if (row.values.containsKey(id)) {
        return row.values.get(id);
      }
      Types.NestedField f = table.schema().findField(id);
      return f == null ? null : f.initialDefault();
    }

    static Object normalize(Object v) {
      if (v instanceof Integer) {
        return ((Integer) v).longValue();
      }
      if (v instanceof BigDecimal) {
        return ((BigDecimal) v).stripTrailingZeros();
      }
      return v;
    }

    // --- files ------------------------------------------------------------------------------

    List<Live> freshRows(int n) {
      List<Live> out = new ArrayList<>();
      for (int i = 0; i < n; i++) {
        long kid = nextKid++;
        Live l = new Live(kid, 0, rowValues.apply(kid), table.spec().specId());
        live.computeIfAbsent(kid, k -> new ArrayList<>()).add(l);
        out.add(l);
      }
      return out;
    }

    /** A record of the current schema from values by field id (ints widened where promoted). */
    Record record(Map<Integer, Object> values) {
      Schema schema = table.schema();
      Record r = GenericRecord.create(schema);
      for (Types.NestedField f : schema.columns()) {
        if (values.containsKey(f.fieldId())) {
          r.setField(f.name(), coerce(f.type(), values.get(f.fieldId())));
        } else if (f.initialDefault() != null) {
          r.setField(f.name(), f.initialDefault());
        }
      }
      return r;
    }

    static Object coerce(Type type, Object v) {
      if (v instanceof Integer && type.typeId() == Type.TypeID.LONG) {
        return ((Integer) v).longValue();
      }
      return v;
    }

    OutputFileFactory files() {
      return OutputFileFactory.builderFor(table, 1, System.nanoTime())
          .format(FileFormat.PARQUET)
          .operationId(UUID.randomUUID().toString())
          .build();
    }

    EncryptedOutputFile newFile(OutputFileFactory files, PartitionSpec spec, StructLike partition) {
      // newOutputFile(spec, null) puts an empty segment ("data//") in the path; MinIO rejects it.
      return spec.isUnpartitioned() ? files.newOutputFile() : files.newOutputFile(spec, partition);
    }

    List<DataFile> writeData(PartitionSpec spec, List<Map<Integer, Object>> rowsToWrite) {
      List<DataFile> out = new ArrayList<>();
      if (rowsToWrite.isEmpty()) {
        return out;
      }
      Schema schema = table.schema();
      GenericFileWriterFactory factory =
          new GenericFileWriterFactory.Builder(table)
              .dataFileFormat(FileFormat.PARQUET)
              .dataSchema(schema)
              .build();
      OutputFileFactory files = files();
      for (Map.Entry<StructLike, List<Record>> group : byPartition(spec, records(rowsToWrite)).entrySet()) {
        StructLike partition = spec.isUnpartitioned() ? null : group.getKey();
        EncryptedOutputFile file = newFile(files, spec, partition);
        DataWriter<Record> writer = factory.newDataWriter(file, spec, partition);
        try (DataWriter<Record> w = writer) {
          group.getValue().forEach(w::write);
        } catch (IOException e) {
          throw new UncheckedIOException(e);
        }
        out.add(writer.toDataFile());
      }
      return out;
    }

    List<DeleteFile> writeEqualityDeletes(int[] eqIds, List<Delete> deletes) {
      List<DeleteFile> out = new ArrayList<>();
      Schema schema = table.schema();
      Set<Integer> ids = new HashSet<>();
      for (int id : eqIds) {
        ids.add(id);
      }
      Schema deleteSchema = org.apache.iceberg.types.TypeUtil.select(schema, ids);
      GenericFileWriterFactory factory =
          new GenericFileWriterFactory.Builder(table)
              .dataSchema(schema)
              .deleteFileFormat(FileFormat.PARQUET)
              .equalityFieldIds(eqIds)
              .equalityDeleteRowSchema(deleteSchema)
              .build();
      OutputFileFactory files = files();
      // Group by spec, then by partition within the spec.
      Map<Integer, List<Delete>> bySpec = new TreeMap<>();
      for (Delete d : deletes) {
        bySpec.computeIfAbsent(d.spec.specId(), k -> new ArrayList<>()).add(d);
      }
      for (List<Delete> group : bySpec.values()) {
        PartitionSpec spec = group.get(0).spec;
        List<Record> full = new ArrayList<>();
        for (Delete d : group) {
          full.add(record(d.values));
        }
        for (Map.Entry<StructLike, List<Record>> part : byPartition(spec, full).entrySet()) {
          StructLike partition = spec.isUnpartitioned() ? null : part.getKey();
          EncryptedOutputFile file = newFile(files, spec, partition);
          EqualityDeleteWriter<Record> writer = factory.newEqualityDeleteWriter(file, spec, partition);
          try (EqualityDeleteWriter<Record> w = writer) {
            for (Record r : part.getValue()) {
              Record key = GenericRecord.create(deleteSchema);
              for (Types.NestedField f : deleteSchema.columns()) {
                key.setField(f.name(), r.getField(f.name()));
              }
              w.write(key);
            }
          } catch (IOException e) {
            throw new UncheckedIOException(e);
          }
          out.add(writer.toDeleteFile());
        }
      }
      return out;
    }

    List<Record> records(List<Map<Integer, Object>> values) {
      List<Record> out = new ArrayList<>(values.size());
      for (Map<Integer, Object> v : values) {
        out.add(record(v));
      }
      return out;
    }

    Map<StructLike, List<Record>> byPartition(PartitionSpec spec, List<Record> records) {
      Schema schema = table.schema();
      PartitionKey key = new PartitionKey(spec, schema);
      InternalRecordWrapper wrapper = new InternalRecordWrapper(schema.asStruct());
      Map<StructLike, List<Record>> groups = new LinkedHashMap<>();
      for (Record r : records) {
        key.partition(wrapper.wrap(r));
        groups.computeIfAbsent(key.copy(), k -> new ArrayList<>()).add(r);
      }
      return groups;
    }

    /**
     * A data file written by Parquet's own writer from a schema without field ids (as a
     * non-Iceberg tool writes it), described with metrics computed through the name mapping.
     */
    DataFile importFile(List<Live> batch, NameMapping mapping) throws IOException {
      MessageType type =
          MessageTypeParser.parseMessageType(
              "message imported { required int64 k; optional int32 p; optional binary v (STRING);"
                  + " optional int32 ver; }");
      String location =
          table.locationProvider().newDataLocation("imported-" + UUID.randomUUID() + ".parquet");
      org.apache.iceberg.io.OutputFile target = table.io().newOutputFile(location);
      SimpleGroupFactory groups = new SimpleGroupFactory(type);
      try (ParquetWriter<Group> writer =
          ExampleParquetWriter.builder(parquetOutput(target)).withType(type).build()) {
        for (Live l : batch) {
          Group g = groups.newGroup();
          g.append("k", (Long) l.values.get(1));
          g.append("p", (Integer) l.values.get(2));
          g.append("v", (String) l.values.get(3));
          g.append("ver", (Integer) l.values.get(4));
          writer.write(g);
        }
      }
      InputFile in = table.io().newInputFile(location);
      Metrics metrics = ParquetUtil.fileMetrics(in, MetricsConfig.forTable(table), mapping);
      rowsWritten += batch.size();
      return DataFiles.builder(table.spec())
          .withPath(location)
          .withFormat(FileFormat.PARQUET)
          .withFileSizeInBytes(in.getLength())
          .withMetrics(metrics)
          .build();
    }
  }

  // --- small helpers --------------------------------------------------------------------------

  static Delete sameValues(Live l, PartitionSpec spec) {
    return new Delete(l.values, spec);
  }

  static Map<Integer, Object> values(Object... idValue) {
    Map<Integer, Object> m = new HashMap<>();
    for (int i = 0; i < idValue.length; i += 2) {
      m.put((Integer) idValue[i], idValue[i + 1]);
    }
    return m;
  }

  static String label(long kid, int commit) {
    return "k" + kid + "-c" + commit;
  }

  static Object keyValue(boolean decimal, long kid) {
    return decimal ? BigDecimal.valueOf(kid * 7 + 13, 2) : (Object) (int) kid;
  }

  /** Iceberg's output file as Parquet's (Parquet writes through it; nothing is buffered here). */
  static org.apache.parquet.io.OutputFile parquetOutput(org.apache.iceberg.io.OutputFile file) {
    return new org.apache.parquet.io.OutputFile() {
      @Override
      public PositionOutputStream create(long blockSizeHint) {
        return wrap(file.create());
      }

      @Override
      public PositionOutputStream createOrOverwrite(long blockSizeHint) {
        return wrap(file.createOrOverwrite());
      }

      @Override
      public boolean supportsBlockSize() {
        return false;
      }

      @Override
      public long defaultBlockSize() {
        return 0;
      }

      @Override
      public String getPath() {
        return file.location();
      }
    };
  }

  static PositionOutputStream wrap(org.apache.iceberg.io.PositionOutputStream s) {
    return new PositionOutputStream() {
      @Override
      public long getPos() throws IOException {
        return s.getPos();
      }

      @Override
      public void write(int b) throws IOException {
        s.write(b);
      }

      @Override
      public void write(byte[] b, int off, int len) throws IOException {
        s.write(b, off, len);
      }

      @Override
      public void flush() throws IOException {
        s.flush();
      }

      @Override
      public void close() throws IOException {
        s.close();
      }
    };
  }
}
