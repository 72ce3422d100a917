package dev.eqdv.interop;

import java.io.IOException;
import java.io.PrintStream;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.UUID;
import org.apache.iceberg.DataFile;
import org.apache.iceberg.DeleteFile;
import org.apache.iceberg.FileFormat;
import org.apache.iceberg.PartitionSpec;
import org.apache.iceberg.RowDelta;
import org.apache.iceberg.Schema;
import org.apache.iceberg.Table;
import org.apache.iceberg.TableProperties;
import org.apache.iceberg.data.GenericFileWriterFactory;
import org.apache.iceberg.data.GenericRecord;
import org.apache.iceberg.data.Record;
import org.apache.iceberg.deletes.EqualityDeleteWriter;
import org.apache.iceberg.io.DataWriter;
import org.apache.iceberg.io.OutputFileFactory;
import org.apache.iceberg.types.TypeUtil;
import org.apache.iceberg.types.Types;

/**
 * {@code write-nested}: a new v3 table whose equality key is nested in a struct, {@code k long,
 * s struct<id long, region string>, v string}, keyed on {@code s.id} ({@code --keys s.id}) or on
 * {@code k} and {@code s.region} ({@code --keys k,s.region}). Seeded commits append rows (some
 * with a null {@code s}, some with a null key under a present {@code s}) and write equality
 * deletes in the projected schema (the struct holding only the key) whose keys include both kinds
 * of null: how Java applies them is what eqdv must reproduce. Prints JSON counts.
 */
final class WriteNested {
  /** Iceberg gives the table its own field ids: rows are written in {@code table.schema()}. */
  private static final Schema DECLARED =
      new Schema(
          Types.NestedField.optional(1, "k", Types.LongType.get()),
          Types.NestedField.optional(
              2,
              "s",
              Types.StructType.of(
                  Types.NestedField.optional(3, "id", Types.LongType.get()),
                  Types.NestedField.optional(4, "region", Types.StringType.get()))),
          Types.NestedField.optional(5, "v", Types.StringType.get()));

  private WriteNested() {}

  static int run(List<String> argv, PrintStream out) throws IOException {
    Set<String> options = new HashSet<>(Main.TABLE_OPTIONS);
    options.addAll(Set.of("keys", "seed", "commits", "rows", "delete-format"));
    Args a = Args.parse("write-nested", argv, options, Set.of("struct-added-later"));
    String keys = a.get("keys", "s.id");
    if (!keys.equals("s.id") && !keys.equals("k,s.region")) {
      throw new Args.UsageException("write-nested: --keys must be s.id or k,s.region");
    }
    FileFormat deleteFormat =
        FileFormat.fromString(a.get("delete-format", "parquet").toUpperCase(java.util.Locale.ROOT));
    long seed = a.longValue("seed", 1, Long.MIN_VALUE, Long.MAX_VALUE);
    int commits = a.intValue("commits", 8, 1, 100);
    int rows = a.intValue("rows", 40, 1, 10_000);
    try (TableRef ref = new TableRef(a)) {
      ref.ensureDatabase();
      Map<String, String> props = new HashMap<>();
      props.put(TableProperties.FORMAT_VERSION, "3");
      props.put(TableProperties.DEFAULT_FILE_FORMAT, "parquet");
      boolean later = a.flag("struct-added-later");
      Schema created = later ? TypeUtil.selectNot(DECLARED, Set.of(2, 3, 4)) : DECLARED;
      Table table =
          ref.catalog
              .buildTable(ref.identifier(), created)
              .withPartitionSpec(PartitionSpec.unpartitioned())
              .withProperties(props)
              .create();
      int before = 0;
      if (later) {
        // Files written before s existed: Java reads their s as null.
        before = withoutStruct(table, rows, seed);
        table
            .updateSchema()
            .addColumn("s", DECLARED.findField("s").type())
            .commit();
        table.refresh();
      }
      Map<String, Object> result = new Writer(table, keys, deleteFormat, seed).write(commits, rows);
      result.put("rows_written_before_s", before);
      result.put("table", ref.label());
      Main.printJson(out, result);
      return 0;
    }
  }

  /** Two commits of rows of a table without s (k in the keys' range); returns the rows. */
  static int withoutStruct(Table table, int rows, long seed) {
    Random random = new Random(seed ^ 0x5eed);
    Schema schema = table.schema();
    GenericFileWriterFactory factory =
        new GenericFileWriterFactory.Builder(table)
            .dataFileFormat(FileFormat.PARQUET)
            .dataSchema(schema)
            .build();
    OutputFileFactory files =
        OutputFileFactory.builderFor(table, 2, System.currentTimeMillis())
            .format(FileFormat.PARQUET)
            .operationId(UUID.randomUUID().toString())
            .build();
    for (int c = 0; c < 2; c++) {
      DataWriter<Record> writer = factory.newDataWriter(files.newOutputFile(), table.spec(), null);
      try (DataWriter<Record> w = writer) {
        for (int i = 0; i < rows; i++) {
          Record r = GenericRecord.create(schema);
          r.setField("k", Long.valueOf(random.nextInt(3)));
          r.setField("v", "old" + c + "_" + i);
          w.write(r);
        }
      } catch (IOException e) {
        throw new UncheckedIOException("cannot write a data file", e);
      }
      table.newAppend().appendFile(writer.toDataFile()).commit();
    }
    table.refresh();
    return 2 * rows;
  }

  /** Appends and equality deletes on one table. */
  private static final class Writer {
    final Table table;
    final Schema schema;
    final boolean byId;
    final Schema deleteSchema;
    final GenericFileWriterFactory factory;
    final OutputFileFactory files;
    final Random random;
    long nextK = 0;
    int dataFiles = 0;
    int deleteFiles = 0;
    int rowsWritten = 0;
    int deletesWritten = 0;

    Writer(Table table, String keys, FileFormat deleteFormat, long seed) {
      this.table = table;
      this.schema = table.schema();
      this.byId = keys.equals("s.id");
      int[] ids =
          byId
              ? new int[] {schema.findField("s.id").fieldId()}
              : new int[] {schema.findField("k").fieldId(), schema.findField("s.region").fieldId()};
      Set<Integer> idSet = new HashSet<>();
      for (int id : ids) {
        idSet.add(id);
      }
      // The projected schema Java's writers write deletes in: s holds only the key.
      this.deleteSchema = TypeUtil.select(schema, idSet);
      this.factory =
          new GenericFileWriterFactory.Builder(table)
              .dataFileFormat(FileFormat.PARQUET)
              .dataSchema(schema)
              .deleteFileFormat(deleteFormat)
              .equalityFieldIds(ids)
              .equalityDeleteRowSchema(deleteSchema)
              .build();
      this.files =
          OutputFileFactory.builderFor(table, 1, System.currentTimeMillis())
              .format(FileFormat.PARQUET)
              .operationId(UUID.randomUUID().toString())
              .build();
      this.random = new Random(seed);
    }

    /** A nested key: null (a null struct), or a struct whose key may be null. */
    Object[] key() {
      int shape = random.nextInt(10);
      Long k = byId ? null : (shape == 9 ? null : Long.valueOf(random.nextInt(3)));
      if (shape < 2) {
        return new Object[] {k, false, null};
      }
      if (shape < 4) {
        return new Object[] {k, true, null};
      }
      Object leaf = byId ? (Object) Long.valueOf(random.nextInt(5)) : "r" + random.nextInt(3);
      return new Object[] {k, true, leaf};
    }

    Record row(Object[] key) {
      Record r = GenericRecord.create(schema);
      long n = nextK++;
      r.setField("k", byId ? Long.valueOf(n) : key[0]);
      if ((Boolean) key[1]) {
        Record s = GenericRecord.create(schema.findField("s").type().asStructType());
        if (byId) {
          s.setField("id", key[2]);
          s.setField("region", random.nextBoolean() ? null : "r" + random.nextInt(3));
        } else {
          s.setField("id", random.nextBoolean() ? null : Long.valueOf(random.nextInt(5)));
          s.setField("region", key[2]);
        }
        r.setField("s", s);
      }
      r.setField("v", "v" + n);
      return r;
    }

    Record deleteRow(Object[] key) {
      Record d = GenericRecord.create(deleteSchema);
      if (!byId) {
        d.setField("k", key[0]);
      }
      if ((Boolean) key[1]) {
        Record s = GenericRecord.create(deleteSchema.findField("s").type().asStructType());
        s.setField(byId ? "id" : "region", key[2]);
        d.setField("s", s);
      }
      return d;
    }

    Map<String, Object> write(int commits, int rows) throws IOException {
      for (int c = 0; c < commits; c++) {
        List<Record> data = new ArrayList<>();
        for (int i = 0; i < rows; i++) {
          data.add(row(key()));
        }
        // Every other commit deletes a few keys (both kinds of null among them, often).
        List<Record> deletes = new ArrayList<>();
        if (c % 2 == 1) {
          for (int i = 0; i < 4; i++) {
            deletes.add(deleteRow(key()));
          }
        }
        RowDelta delta = table.newRowDelta();
        delta.addRows(writeData(data));
        if (!deletes.isEmpty()) {
          delta.addDeletes(writeDeletes(deletes));
        }
        delta.commit();
        table.refresh();
        rowsWritten += data.size();
        deletesWritten += deletes.size();
      }
      Map<String, Object> result = new LinkedHashMap<>();
      result.put("commits", commits);
      result.put("data_files", dataFiles);
      result.put("equality_delete_files", deleteFiles);
      result.put("rows_written", rowsWritten);
      result.put("equality_deletes_written", deletesWritten);
      return result;
    }

    DataFile writeData(List<Record> rows) {
      DataWriter<Record> writer = factory.newDataWriter(files.newOutputFile(), table.spec(), null);
      try (DataWriter<Record> w = writer) {
        rows.forEach(w::write);
      } catch (IOException e) {
        throw new UncheckedIOException("cannot write a data file", e);
      }
      dataFiles++;
      return writer.toDataFile();
    }

    DeleteFile writeDeletes(List<Record> keys) {
      EqualityDeleteWriter<Record> writer =
          factory.newEqualityDeleteWriter(files.newOutputFile(), table.spec(), null);
      try (EqualityDeleteWriter<Record> w = writer) {
        keys.forEach(w::write);
      } catch (IOException e) {
        throw new UncheckedIOException("cannot write an equality delete file", e);
      }
      deleteFiles++;
      return writer.toDeleteFile();
    }
  }
}
