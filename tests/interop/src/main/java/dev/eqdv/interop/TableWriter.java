package dev.eqdv.interop;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import org.apache.iceberg.DataFile;
import org.apache.iceberg.DeleteFile;
import org.apache.iceberg.FileFormat;
import org.apache.iceberg.PartitionKey;
import org.apache.iceberg.PartitionSpec;
import org.apache.iceberg.Schema;
import org.apache.iceberg.StructLike;
import org.apache.iceberg.Table;
import org.apache.iceberg.data.GenericFileWriterFactory;
import org.apache.iceberg.data.GenericRecord;
import org.apache.iceberg.data.InternalRecordWrapper;
import org.apache.iceberg.data.Record;
import org.apache.iceberg.deletes.EqualityDeleteWriter;
import org.apache.iceberg.encryption.EncryptedOutputFile;
import org.apache.iceberg.io.DataWriter;
import org.apache.iceberg.io.OutputFileFactory;

/**
 * Writes rows and equality deletes the way a streaming writer does: one Parquet file per
 * partition per batch, through Iceberg's generic file writer factory, equality deletes keyed on
 * one column and scoped to the partition of the rows they delete (or, under an unpartitioned spec
 * of the table, global: see {@link #writeEqualityDeletes(List, PartitionSpec)}).
 */
final class TableWriter {
  private final Schema schema;
  private final PartitionSpec spec;
  private final GenericFileWriterFactory factory;
  private final OutputFileFactory files;
  private final Schema deleteSchema;
  private final String keyColumn;
  private final PartitionKey partitionKey;
  private final InternalRecordWrapper wrapper;

  TableWriter(Table table, String keyColumn, int taskId) {
    this.schema = table.schema();
    this.spec = table.spec();
    this.keyColumn = keyColumn;
    this.deleteSchema = schema.select(keyColumn);
    int keyId = schema.findField(keyColumn).fieldId();
    this.factory =
        new GenericFileWriterFactory.Builder(table)
            .dataFileFormat(FileFormat.PARQUET)
            .dataSchema(schema)
            .deleteFileFormat(FileFormat.PARQUET)
            .equalityFieldIds(new int[] {keyId})
            .equalityDeleteRowSchema(deleteSchema)
            .build();
    this.files =
        OutputFileFactory.builderFor(table, taskId, System.currentTimeMillis())
            .format(FileFormat.PARQUET)
            .operationId(UUID.randomUUID().toString())
            .build();
    this.partitionKey = new PartitionKey(spec, schema);
    this.wrapper = new InternalRecordWrapper(schema.asStruct());
  }

  Schema schema() {
    return schema;
  }

  /** Data files holding {@code rows}, one per partition. */
  List<DataFile> writeData(List<Record> rows) {
    List<DataFile> out = new ArrayList<>();
    for (Map.Entry<PartitionKey, List<Record>> group : byPartition(rows, partitionKey).entrySet()) {
      StructLike partition = spec.isUnpartitioned() ? null : group.getKey();
      EncryptedOutputFile file = newOutputFile(spec, partition);
      DataWriter<Record> writer = factory.newDataWriter(file, spec, partition);
      try (DataWriter<Record> w = writer) {
        for (Record r : group.getValue()) {
          w.write(r);
        }
      } catch (IOException e) {
        throw new UncheckedIOException("cannot write data file " + file.encryptingOutputFile(), e);
      }
      out.add(writer.toDataFile());
    }
    return out;
  }

  /**
   * Equality delete files on the key column that delete every row whose key equals the key of a
   * row of {@code deletedRows}, each scoped to that row's partition.
   */
  List<DeleteFile> writeEqualityDeletes(List<Record> deletedRows) {
    return writeEqualityDeletes(deletedRows, spec);
  }

  /**
   * {@link #writeEqualityDeletes(List)} under {@code deleteSpec}, one of the table's specs. Under
   * an unpartitioned one (while the data is partitioned) they are global: one file, which Iceberg
   * applies to the data files of every partition, as a CDC writer that cannot know where a key's
   * old row sits writes them.
   */
  List<DeleteFile> writeEqualityDeletes(List<Record> deletedRows, PartitionSpec deleteSpec) {
    PartitionKey deleteKey =
        deleteSpec == spec ? partitionKey : new PartitionKey(deleteSpec, schema);
    List<DeleteFile> out = new ArrayList<>();
    Map<PartitionKey, List<Record>> groups = byPartition(deletedRows, deleteKey);
    for (Map.Entry<PartitionKey, List<Record>> group : groups.entrySet()) {
      StructLike partition = deleteSpec.isUnpartitioned() ? null : group.getKey();
      EncryptedOutputFile file = newOutputFile(deleteSpec, partition);
      EqualityDeleteWriter<Record> writer =
          factory.newEqualityDeleteWriter(file, deleteSpec, partition);
      try (EqualityDeleteWriter<Record> w = writer) {
        for (Record r : group.getValue()) {
          Record key = GenericRecord.create(deleteSchema);
          key.setField(keyColumn, r.getField(keyColumn));
          w.write(key);
        }
      } catch (IOException e) {
        throw new UncheckedIOException(
            "cannot write equality delete file " + file.encryptingOutputFile(), e);
      }
      out.add(writer.toDeleteFile());
    }
    return out;
  }

  /** A new file under data/, in the partition's directory (none for an unpartitioned spec). */
  private EncryptedOutputFile newOutputFile(PartitionSpec fileSpec, StructLike partition) {
    // newOutputFile(spec, null) would put an empty path segment ("data//") in the location,
    // which MinIO rejects.
    return partition == null ? files.newOutputFile() : files.newOutputFile(fileSpec, partition);
  }

  private Map<PartitionKey, List<Record>> byPartition(List<Record> rows, PartitionKey keyOf) {
    Map<PartitionKey, List<Record>> groups = new LinkedHashMap<>();
    for (Record r : rows) {
      keyOf.partition(wrapper.wrap(r));
      groups.computeIfAbsent(keyOf.copy(), k -> new ArrayList<>()).add(r);
    }
    return groups;
  }
}
