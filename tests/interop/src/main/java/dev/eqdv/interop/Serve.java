package dev.eqdv.interop;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.UUID;
import org.apache.iceberg.AppendFiles;
import org.apache.iceberg.DataFile;
import org.apache.iceberg.DeleteFile;
import org.apache.iceberg.FileFormat;
import org.apache.iceberg.FileScanTask;
import org.apache.iceberg.MetadataColumns;
import org.apache.iceberg.PartitionField;
import org.apache.iceberg.PartitionKey;
import org.apache.iceberg.PartitionSpec;
import org.apache.iceberg.RewriteFiles;
import org.apache.iceberg.RowDelta;
import org.apache.iceberg.Schema;
import org.apache.iceberg.Snapshot;
import org.apache.iceberg.StructLike;
import org.apache.iceberg.Table;
import org.apache.iceberg.TableProperties;
import org.apache.iceberg.UpdatePartitionSpec;
import org.apache.iceberg.data.GenericDeleteFilter;
import org.apache.iceberg.data.GenericFileWriterFactory;
import org.apache.iceberg.data.GenericRecord;
import org.apache.iceberg.data.IcebergGenerics;
import org.apache.iceberg.data.InternalRecordWrapper;
import org.apache.iceberg.data.Record;
import org.apache.iceberg.data.parquet.GenericParquetReaders;
import org.apache.iceberg.deletes.EqualityDeleteWriter;
import org.apache.iceberg.encryption.EncryptedOutputFile;
import org.apache.iceberg.expressions.Expressions;
import org.apache.iceberg.io.CloseableIterable;
import org.apache.iceberg.io.DataWriter;
import org.apache.iceberg.io.OutputFileFactory;
import org.apache.iceberg.data.orc.GenericOrcReader;
import org.apache.iceberg.orc.ORC;
import org.apache.iceberg.parquet.Parquet;
import org.apache.iceberg.types.Type;
import org.apache.iceberg.types.TypeUtil;
import org.apache.iceberg.types.Types;

/**
 * {@code serve}: one table, many commands, one JVM. Reads one JSON command per line on stdin
 * and answers each with one JSON line on stdout ({@code "ok": true} plus the result, or {@code
 * "ok": false, "error": ...}). The table is loaded afresh for every command (another writer,
 * eqdv, commits in between). Commands:
 *
 * <ul>
 *   <li>{@code {"op":"create","seed":N}}: a new v3 table (k long key, p int, v string, n int),
 *       unpartitioned, identity(p) or bucket(4, k) as the seed says.
 *   <li>{@code {"op":"random-op","seed":N}}: one random operation, a function of the seed and
 *       the table's state: append, upsert (equality delete + re-insert), delete by key (to main
 *       or to branch {@code b}), add a column, rename a non-key column, promote an int column to
 *       long, change the partition spec, compact data files (RewriteFiles, as {@code rewrite}
 *       does), expire snapshots, create branch {@code b}. Answers {@code "desc"}: what it did.
 *       With {@code "soak":true} (the soak's mix), branch {@code b} is created sooner and
 *       columns are dropped too, the key column k among them (rarely, right after a delete by key,
 *       so that the drop meets live equality deletes on it).
 *   <li>{@code {"op":"dump","branch":B,"lineage":L}}: {@code "rows"}: the live rows of B with the
 *       lineage columns (unless L is false), canonical and sorted ({@code dump --lineage}).
 *   <li>{@code {"op":"check-dvs","branch":B}}: {@code check-dvs}'s result.
 *   <li>{@code {"op":"stage-op","seed":N,"branch":B}}: one random commit of a streaming writer to
 *       B (see {@link StageOps}; {@code "position_deletes":false} leaves out deletes by position
 *       in older files); {@code {"op":"compact","seed":N,"branch":B}}: a compaction of
 *       B; {@code {"op":"set-property","key":K,"value":V}}: a table property set; {@code
 *       {"op":"delete-by-position","seed":N,"branch":B}}: a DV deleting rows of one of
 *       B's data files; {@code {"op":"rollback-branch","branch":B}}: B moved back to its head's parent.
 *   <li>{@code {"op":"branches"}}: nothing but the branches.
 *   <li>{@code {"op":"expire","retain":N,"incremental":B}}: expire all but the last N snapshots,
 *       with the incremental or the reachable-file cleanup.
 * </ul>
 *
 * Every answer carries {@code "branches"}: the table's branches (none before create).
 */
final class Serve {
  static final String BRANCH = "b";

  private final TableRef ref;
  long nextKey;
  int counter;
  /**
   * Expiry with Java's incremental file cleanup (the Table API's default for a table with no
   * branch but main). It deletes every file named by a DELETED entry of an expired snapshot, so a
   * Puffin file that still holds live DVs goes once one of its DVs is removed; by default expiry
   * uses the reachable-file cleanup (a set difference of paths) instead.
   */
  private boolean incrementalExpiry;

  private Serve(TableRef ref) {
    this.ref = ref;
  }

  static int run(List<String> argv, PrintStream out) throws IOException {
    Args a = Args.parse("serve", argv, Main.TABLE_OPTIONS, Set.of());
    try (TableRef ref = new TableRef(a)) {
      Serve serve = new Serve(ref);
      BufferedReader in =
          new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
      String line;
      while ((line = in.readLine()) != null) {
        if (line.isBlank()) {
          continue;
        }
        Map<String, Object> answer;
        try {
          @SuppressWarnings("unchecked")
          Map<String, Object> cmd = Main.fromJson(line, Map.class);
          answer = serve.handle(cmd);
          answer.put("ok", true);
        } catch (Exception | LinkageError e) {
          answer = new LinkedHashMap<>();
          answer.put("ok", false);
          answer.put("error", Main.describe(e));
          if (System.getenv("EQDV_INTEROP_TRACE") != null) {
            e.printStackTrace(System.err);
          }
        }
        try {
          answer.put("branches", serve.branches());
        } catch (RuntimeException e) {
          answer.put("branches", List.of());
        }
        out.println(Main.toJson(answer));
        out.flush();
      }
      return 0;
    }
  }

  List<String> branches() {
    if (!ref.catalog.tableExists(ref.identifier())) {
      return List.of();
    }
    List<String> out = new ArrayList<>();
    ref.load().refs().forEach((name, r) -> {
      if (r.isBranch()) {
        out.add(name);
      }
    });
    Collections.sort(out);
    return out;
  }

  Map<String, Object> handle(Map<String, Object> cmd) throws IOException {
    String op = String.valueOf(cmd.get("op"));
    Map<String, Object> answer = new LinkedHashMap<>();
    switch (op) {
      case "create":
        answer.put(
            "desc",
            create(new Random(seedOf(cmd)), cmd.get("delete_format"), cmd.get("data_format")));
        return answer;
      case "random-op":
        incrementalExpiry = Boolean.TRUE.equals(cmd.get("incremental_expiry"));
        answer.put(
            "desc", randomOp(new Random(seedOf(cmd)), Boolean.TRUE.equals(cmd.get("soak"))));
        return answer;
      case "dump":
        {
          List<String> rows = new ArrayList<>();
          // With the lineage columns unless told otherwise.
          boolean lineage = !Boolean.FALSE.equals(cmd.get("lineage"));
          for (byte[] r : Dump.liveRows(ref.load(), branchOf(cmd), lineage)) {
            rows.add(new String(r, StandardCharsets.UTF_8));
          }
          answer.put("rows", rows);
          return answer;
        }
      case "branches":
        return answer;
      case "expire":
        {
          // {"op":"expire","retain":N,"incremental":B}: one expiry, as random-op's.
          incrementalExpiry = Boolean.TRUE.equals(cmd.get("incremental"));
          Object retain = cmd.get("retain");
          answer.put("desc", expire(ref.load(), retain == null ? 1 : ((Number) retain).intValue()));
          return answer;
        }
      case "check-dvs":
        answer.putAll(CheckDvs.check(ref.load(), branchOf(cmd)));
        return answer;
      case "stage-op":
        answer.put("desc", new StageOps(this)
                .stageOp(
                    ref.load(),
                    branchOf(cmd),
                    new Random(seedOf(cmd)),
                    !Boolean.FALSE.equals(cmd.get("position_deletes"))));
        return answer;
      case "delete-by-position":
        answer.put(
            "desc",
            new StageOps(this).deleteByPosition(ref.load(), branchOf(cmd), new Random(seedOf(cmd))));
        return answer;
      case "compact":
        answer.put("desc", compact(ref.load(), branchOf(cmd), new Random(seedOf(cmd))));
        return answer;
      case "set-property":
        {
          // {"op":"set-property","key":K,"value":V}: one table property set.
          String key = String.valueOf(cmd.get("key"));
          String value = String.valueOf(cmd.get("value"));
          ref.load().updateProperties().set(key, value).commit();
          answer.put("desc", "set " + key + "=" + value);
          return answer;
        }
      case "rollback-branch":
        answer.put("desc", StageOps.rollback(ref.load(), branchOf(cmd)));
        return answer;
      default:
        throw new IllegalArgumentException("unknown op '" + op + "'");
    }
  }

  static long seedOf(Map<String, Object> cmd) {
    Object s = cmd.get("seed");
    return s == null ? 1 : ((Number) s).longValue();
  }

  static String branchOf(Map<String, Object> cmd) {
    Object b = cmd.get("branch");
    return b == null ? "main" : b.toString();
  }

  // --- create -------------------------------------------------------------------------------

  /**
   * Creates the table with a random spec and manifest merging; its data files are written in
   * {@code dataFormat} ("parquet", the default, or "orc": the table's write.format.default)
   * and its equality deletes in {@code deleteFormat} ("parquet", "avro" or "orc", the table's
   * write.delete.format.default), or, when null, in the data files' format (as Iceberg's
   * writers do by default) but in Avro for one table in three.
   */
  String create(Random random, Object deleteFormat, Object dataFormat) {
    ref.ensureDatabase();
    Schema schema =
        new Schema(
            Types.NestedField.required(1, "k", Types.LongType.get()),
            Types.NestedField.optional(2, "p", Types.IntegerType.get()),
            Types.NestedField.optional(3, "v", Types.StringType.get()),
            Types.NestedField.optional(4, "n", Types.IntegerType.get()));
    int pick = random.nextInt(3);
    PartitionSpec spec =
        pick == 0
            ? PartitionSpec.unpartitioned()
            : pick == 1
                ? PartitionSpec.builderFor(schema).identity("p").build()
                : PartitionSpec.builderFor(schema).bucket("k", 4).build();
    // Half the tables merge manifests from two on (small target size, so several bins):
    // Java's own commits and eqdv's then rewrite and merge manifests all the time.
    boolean mergeOften = random.nextBoolean();
    Map<String, String> props = new HashMap<>();
    props.put(TableProperties.FORMAT_VERSION, "3");
    String data = dataFormat != null ? dataFormat.toString() : "parquet";
    props.put(TableProperties.DEFAULT_FILE_FORMAT, data);
    if (mergeOften) {
      props.put(TableProperties.MANIFEST_MIN_MERGE_COUNT, "2");
      props.put(TableProperties.MANIFEST_TARGET_SIZE_BYTES, "16384");
    }
    String deletes =
        deleteFormat != null ? deleteFormat.toString() : random.nextInt(3) == 0 ? "avro" : data;
    props.put(TableProperties.DELETE_DEFAULT_FILE_FORMAT, deletes);
    ref.catalog
        .buildTable(ref.identifier(), schema)
        .withPartitionSpec(spec)
        .withProperties(props)
        .create();
    return "create "
        + spec.fields()
        + ", data in "
        + data
        + (mergeOften ? ", manifests merged from 2" : "")
        + ", deletes in "
        + deletes;
  }

  // --- random operations --------------------------------------------------------------------

  String randomOp(Random random, boolean soak) throws IOException {
    Table table = ref.load();
    boolean hasBranch = table.refs().containsKey(BRANCH);
    boolean empty = table.currentSnapshot() == null;
    String branch = hasBranch && random.nextInt(10) < 3 ? BRANCH : "main";
    if (empty) {
      return append(table, "main", random);
    }
    if (soak) {
      // The soak's mix: the branch made early, and columns dropped (the key among them,
      // rarely: eqdv must refuse the equality deletes on it from then on).
      if (!hasBranch && random.nextInt(8) == 0) {
        table.manageSnapshots().createBranch(BRANCH, table.currentSnapshot().snapshotId()).commit();
        return "branch " + BRANCH + " from main";
      }
      int soakRoll = random.nextInt(100);
      if (soakRoll < 1 && table.schema().findField(1) != null) {
        // Rows deleted by key first, so that the drop meets live equality deletes on it.
        String deleted = deleteRows(table, "main", random, false);
        String key = table.schema().findField(1).name();
        table.updateSchema().deleteColumn(key).commit();
        return deleted + "; drop key column " + key + " (id 1)";
      } else if (soakRoll < 5) {
        String s = dropColumn(table, random);
        if (s != null) {
          return s;
        }
      }
    }
    int roll = random.nextInt(100);
    if (roll < 20) {
      return append(table, branch, random);
    } else if (roll < 45) {
      return deleteRows(table, branch, random, true);
    } else if (roll < 58) {
      return deleteRows(table, branch, random, false);
    } else if (roll < 63) {
      return addColumn(table, random);
    } else if (roll < 68) {
      return rename(table, random);
    } else if (roll < 73) {
      String s = promote(table, random);
      return s != null ? s : append(table, branch, random);
    } else if (roll < 80) {
      return evolveSpec(table, random);
    } else if (roll < 90) {
      return compact(table, branch, random);
    } else if (roll < 95) {
      return expire(table, random);
    } else {
      if (!hasBranch) {
        table.manageSnapshots().createBranch(BRANCH, table.currentSnapshot().snapshotId()).commit();
        return "branch " + BRANCH + " from main";
      }
      return append(table, BRANCH, random);
    }
  }

  /** A value for column {@code f} of a new row with key {@code k}. */
  Object value(Types.NestedField f, long k, Random random) {
    if (f.fieldId() == 1) {
      return k;
    }
    if (f.isOptional() && random.nextInt(12) == 0) {
      return null;
    }
    long x = f.fieldId() == 2 ? random.nextInt(4) : random.nextInt(1000);
    switch (f.type().typeId()) {
      case INTEGER:
        return (int) x;
      case LONG:
        return x;
      case STRING:
        return f.name() + "-" + k + "-" + counter;
      default:
        throw new IllegalStateException("no values for " + f);
    }
  }

  Record newRow(Schema schema, long k, Random random) {
    Record r = GenericRecord.create(schema);
    for (Types.NestedField f : schema.columns()) {
      r.setField(f.name(), value(f, k, random));
    }
    return r;
  }

  String append(Table table, String branch, Random random) {
    counter++;
    int n = 20 + random.nextInt(130);
    Schema schema = table.schema();
    List<Record> rows = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      rows.add(newRow(schema, nextKey++, random));
    }
    List<DataFile> files = writeData(table, rows);
    AppendFiles append = table.newAppend().toBranch(branch);
    files.forEach(append::appendFile);
    append.commit();
    return "append " + branch + " " + n + " rows, " + files.size() + " files";
  }

  /** The live rows of {@code branch} (current schema) with their file's spec id. */
  static List<Record> liveRecords(Table table, String branch) throws IOException {
    Snapshot head = TableRef.head(table, branch);
    List<Record> out = new ArrayList<>();
    if (head == null) {
      return out;
    }
    List<Types.NestedField> columns = new ArrayList<>(table.schema().columns());
    columns.add(MetadataColumns.SPEC_ID);
    Schema schema = new Schema(columns);
    try (CloseableIterable<Record> rows =
        IcebergGenerics.read(table).useSnapshot(head.snapshotId()).project(schema).build()) {
      for (Record r : rows) {
        out.add(r.copy());
      }
    }
    // A stable order (the scan's order depends on file names).
    out.sort(
        (x, y) -> {
          int c = Long.compare((Long) x.getField("k"), (Long) y.getField("k"));
          return c != 0 ? c : Canonical.row(schema, x).compareTo(Canonical.row(schema, y));
        });
    return out;
  }

  /**
   * Equality deletes for some live rows of {@code branch}, each in its own file's spec, the
   * current spec or an unpartitioned (global) one; with {@code reinsert}, a new row for each key.
   */
  String deleteRows(Table table, String branch, Random random, boolean reinsert)
      throws IOException {
    counter++;
    List<Record> live = liveRecords(table, branch);
    if (live.isEmpty()) {
      return append(table, branch, random);
    }
    Collections.shuffle(live, random);
    int want = reinsert ? 3 + random.nextInt(38) : 2 + random.nextInt(19);
    List<Record> victims = live.subList(0, Math.min(want, live.size()));
    Schema schema = table.schema();
    // The equality fields: k, sometimes (k, n) with n's current name.
    int[] eqIds = random.nextInt(5) == 0 && schema.findField(4) != null ? new int[] {1, 4} : new int[] {1};
    PartitionSpec global = null;
    for (PartitionSpec s : table.specs().values()) {
      if (s.isUnpartitioned()) {
        global = s;
      }
    }
    int mode = random.nextInt(100);
    String scope = mode < 60 ? "own" : mode < 85 || global == null ? "current" : "global";
    Map<Integer, List<Record>> bySpec = new LinkedHashMap<>();
    for (Record r : victims) {
      int specId =
          scope.equals("own")
              ? (Integer) r.getField(MetadataColumns.SPEC_ID.name())
              : scope.equals("current") ? table.spec().specId() : global.specId();
      Record plain = GenericRecord.create(schema);
      for (Types.NestedField f : schema.columns()) {
        plain.setField(f.name(), r.getField(f.name()));
      }
      bySpec.computeIfAbsent(specId, x -> new ArrayList<>()).add(plain);
    }
    List<DeleteFile> deletes = new ArrayList<>();
    for (Map.Entry<Integer, List<Record>> e : bySpec.entrySet()) {
      deletes.addAll(writeEqualityDeletes(table, table.specs().get(e.getKey()), eqIds, e.getValue()));
    }
    List<DataFile> data = new ArrayList<>();
    if (reinsert) {
      List<Record> rows = new ArrayList<>();
      for (Record r : victims) {
        rows.add(newRow(schema, (Long) r.getField("k"), random));
      }
      data = writeData(table, rows);
    }
    RowDelta delta = table.newRowDelta().toBranch(branch);
    data.forEach(delta::addRows);
    deletes.forEach(delta::addDeletes);
    delta.commit();
    List<String> eqNames = new ArrayList<>();
    for (int id : eqIds) {
      eqNames.add(schema.findField(id).name());
    }
    return (reinsert ? "upsert " : "delete ") + branch + " " + victims.size() + " keys on "
        + eqNames + " (" + scope + " spec, " + deletes.size() + " delete files)";
  }

  String addColumn(Table table, Random random) {
    String name = "c" + table.schema().highestFieldId();
    Type type = random.nextBoolean() ? Types.IntegerType.get() : Types.StringType.get();
    table.updateSchema().addColumn(name, type).commit();
    return "add column " + name + " " + type;
  }

  /** Drops a column that is neither the key (id 1) nor the partition source (id 2). */
  String dropColumn(Table table, Random random) {
    List<Types.NestedField> candidates = new ArrayList<>();
    for (Types.NestedField f : table.schema().columns()) {
      if (f.fieldId() > 2) {
        candidates.add(f);
      }
    }
    if (candidates.isEmpty()) {
      return null;
    }
    Types.NestedField f = candidates.get(random.nextInt(candidates.size()));
    table.updateSchema().deleteColumn(f.name()).commit();
    return "drop column " + f.name() + " (id " + f.fieldId() + ")";
  }

  String rename(Table table, Random random) {
    List<Types.NestedField> candidates = new ArrayList<>();
    for (Types.NestedField f : table.schema().columns()) {
      if (f.fieldId() != 1) {
        candidates.add(f);
      }
    }
    Types.NestedField f = candidates.get(random.nextInt(candidates.size()));
    String name = f.name().replaceAll("_r[0-9]+$", "") + "_r" + (++counter);
    table.updateSchema().renameColumn(f.name(), name).commit();
    return "rename " + f.name() + " (id " + f.fieldId() + ") to " + name;
  }

  String promote(Table table, Random random) {
    List<Types.NestedField> ints = new ArrayList<>();
    for (Types.NestedField f : table.schema().columns()) {
      if (f.type().typeId() == Type.TypeID.INTEGER) {
        ints.add(f);
      }
    }
    if (ints.isEmpty()) {
      return null;
    }
    Types.NestedField f = ints.get(random.nextInt(ints.size()));
    table.updateSchema().updateColumn(f.name(), Types.LongType.get()).commit();
    return "promote " + f.name() + " (id " + f.fieldId() + ") int -> long";
  }

  String evolveSpec(Table table, Random random) {
    String p = table.schema().findField(2).name();
    PartitionSpec current = table.spec();
    List<String> choices = new ArrayList<>(List.of("none", "identity(p)", "bucket(4,k)", "bucket(2,p)"));
    choices.remove(describeSpec(current));
    String pick = choices.get(random.nextInt(choices.size()));
    UpdatePartitionSpec update = table.updateSpec();
    for (PartitionField f : current.fields()) {
      update.removeField(f.name());
    }
    switch (pick) {
      case "identity(p)":
        update.addField(p);
        break;
      case "bucket(4,k)":
        update.addField(Expressions.bucket("k", 4));
        break;
      case "bucket(2,p)":
        update.addField(Expressions.bucket(p, 2));
        break;
      default:
        break;
    }
    update.commit();
    return "spec " + describeSpec(current) + " -> " + pick;
  }

  static String describeSpec(PartitionSpec spec) {
    if (spec.isUnpartitioned()) {
      return "none";
    }
    PartitionField f = spec.fields().get(0);
    String t = f.transform().toString();
    if (t.equals("identity")) {
      return "identity(p)";
    }
    return f.sourceId() == 1 ? "bucket(4,k)" : "bucket(2,p)";
  }

  /** Rewrites one or two data files of {@code branch} as compaction does. */
  String compact(Table table, String branch, Random random) throws IOException {
    Snapshot start = TableRef.head(table, branch);
    List<FileScanTask> tasks = new ArrayList<>();
    try (CloseableIterable<FileScanTask> planned =
        table.newScan().useSnapshot(start.snapshotId()).planFiles()) {
      for (FileScanTask t : planned) {
        tasks.add(t);
      }
    }
    if (tasks.isEmpty()) {
      return append(table, branch, random);
    }
    tasks.sort((x, y) -> x.file().location().compareTo(y.file().location()));
    Collections.shuffle(tasks, random);
    List<FileScanTask> chosen = tasks.subList(0, Math.min(1 + random.nextInt(2), tasks.size()));
    boolean newSeq = random.nextInt(3) == 0;
    Schema schema = table.schema();
    RewriteFiles op = table.newRewrite().validateFromSnapshot(start.snapshotId()).toBranch(branch);
    if (!newSeq) {
      op.dataSequenceNumber(start.sequenceNumber());
    }
    long before = 0;
    long after = 0;
    for (FileScanTask task : chosen) {
      DataFile old = task.file();
      before += old.recordCount();
      GenericDeleteFilter filter = new GenericDeleteFilter(table.io(), task, schema, schema);
      Schema required = filter.requiredSchema();
      PartitionSpec spec = table.specs().get(old.specId());
      StructLike partition = spec.isUnpartitioned() ? null : old.partition();
      GenericFileWriterFactory factory =
          new GenericFileWriterFactory.Builder(table)
              .dataFileFormat(dataFormat(table))
              .dataSchema(schema)
              .build();
      EncryptedOutputFile target = newFile(outputs(table), spec, partition);
      DataWriter<Record> writer = factory.newDataWriter(target, spec, partition);
      long rows = 0;
      int columns = schema.columns().size();
      try (DataWriter<Record> w = writer;
          CloseableIterable<Record> raw = readDataFile(table, old, required);
          CloseableIterable<Record> live = filter.filter(raw)) {
        for (Record r : live) {
          Record copy = GenericRecord.create(schema);
          for (int i = 0; i < columns; i++) {
            copy.set(i, r.get(i));
          }
          w.write(copy);
          rows++;
        }
      }
      op.deleteFile(old);
      if (rows > 0) {
        op.addFile(writer.toDataFile());
      }
      after += rows;
    }
    op.set(Rewrite.COMMIT_SUMMARY, "serve");
    op.commit();
    return "compact " + branch + " " + chosen.size() + " files (" + before + " -> " + after
        + " rows, " + (newSeq ? "new" : "starting") + " sequence number)";
  }

  String expire(Table table, Random random) {
    return expire(table, 1 + random.nextInt(3));
  }

  String expire(Table table, int keep) {
    org.apache.iceberg.ExpireAccess.withIncrementalCleanup(table.expireSnapshots(), incrementalExpiry)
        .expireOlderThan(System.currentTimeMillis())
        .retainLast(keep)
        .commit();
    return "expire snapshots (retain last " + keep + ", " + (incrementalExpiry ? "incremental" : "reachable")
        + " file cleanup)";
  }

  // --- files --------------------------------------------------------------------------------

  /** The rows of data file {@code file} (Parquet or ORC) in schema {@code schema}. */
  static CloseableIterable<Record> readDataFile(Table table, DataFile file, Schema schema) {
    if (file.format() == FileFormat.ORC) {
      return ORC.read(table.io().newInputFile(file))
          .project(schema)
          .createReaderFunc(fs -> GenericOrcReader.buildReader(schema, fs))
          .build();
    }
    return Parquet.read(table.io().newInputFile(file))
        .project(schema)
        .createReaderFunc(fs -> GenericParquetReaders.buildReader(schema, fs))
        .build();
  }

  /** The format the table's writers write data files in (Parquet unless set). */
  static FileFormat dataFormat(Table table) {
    return FileFormat.fromString(
        table.properties().getOrDefault(TableProperties.DEFAULT_FILE_FORMAT, FileFormat.PARQUET.name()));
  }

  static OutputFileFactory outputs(Table table) {
    return OutputFileFactory.builderFor(table, 1, System.nanoTime())
        .format(dataFormat(table))
        .operationId(UUID.randomUUID().toString())
        .build();
  }

  static EncryptedOutputFile newFile(OutputFileFactory files, PartitionSpec spec, StructLike partition) {
    // newOutputFile(spec, null) puts an empty segment ("data//") in the path; MinIO rejects it.
    return spec.isUnpartitioned() ? files.newOutputFile() : files.newOutputFile(spec, partition);
  }

  static Map<StructLike, List<Record>> byPartition(
      PartitionSpec spec, Schema schema, List<Record> records) {
    PartitionKey key = new PartitionKey(spec, schema);
    InternalRecordWrapper wrapper = new InternalRecordWrapper(schema.asStruct());
    Map<StructLike, List<Record>> groups = new LinkedHashMap<>();
    for (Record r : records) {
      key.partition(wrapper.wrap(r));
      groups.computeIfAbsent(key.copy(), k -> new ArrayList<>()).add(r);
    }
    return groups;
  }

  static List<DataFile> writeData(Table table, List<Record> rows) {
    Schema schema = table.schema();
    PartitionSpec spec = table.spec();
    GenericFileWriterFactory factory =
        new GenericFileWriterFactory.Builder(table)
            .dataFileFormat(dataFormat(table))
            .dataSchema(schema)
            .build();
    OutputFileFactory files = outputs(table);
    List<DataFile> out = new ArrayList<>();
    for (Map.Entry<StructLike, List<Record>> group : byPartition(spec, schema, rows).entrySet()) {
      StructLike partition = spec.isUnpartitioned() ? null : group.getKey();
      DataWriter<Record> writer = factory.newDataWriter(newFile(files, spec, partition), spec, partition);
      try (DataWriter<Record> w = writer) {
        group.getValue().forEach(w::write);
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
      out.add(writer.toDataFile());
    }
    return out;
  }

  /** The format the table's writers write delete files in (Parquet unless set). */
  static FileFormat deleteFormat(Table table) {
    return FileFormat.fromString(
        table
            .properties()
            .getOrDefault(TableProperties.DELETE_DEFAULT_FILE_FORMAT, FileFormat.PARQUET.name()));
  }

  static List<DeleteFile> writeEqualityDeletes(
      Table table, PartitionSpec spec, int[] eqIds, List<Record> rows) {
    Schema schema = table.schema();
    Set<Integer> ids = new HashSet<>();
    for (int id : eqIds) {
      ids.add(id);
    }
    Schema deleteSchema = TypeUtil.select(schema, ids);
    GenericFileWriterFactory factory =
        new GenericFileWriterFactory.Builder(table)
            .dataSchema(schema)
            .deleteFileFormat(deleteFormat(table))
            .equalityFieldIds(eqIds)
            .equalityDeleteRowSchema(deleteSchema)
            .build();
    OutputFileFactory files = outputs(table);
    List<DeleteFile> out = new ArrayList<>();
    for (Map.Entry<StructLike, List<Record>> part : byPartition(spec, schema, rows).entrySet()) {
      StructLike partition = spec.isUnpartitioned() ? null : part.getKey();
      EqualityDeleteWriter<Record> writer =
          factory.newEqualityDeleteWriter(newFile(files, spec, partition), spec, partition);
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
    return out;
  }
}
