package dev.eqdv.flink;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.RestartStrategyOptions;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.table.data.RowData;
import org.apache.flink.table.runtime.typeutils.InternalTypeInfo;
import org.apache.flink.table.types.logical.RowType;
import org.apache.iceberg.CatalogProperties;
import org.apache.iceberg.DeleteFile;
import org.apache.iceberg.FileContent;
import org.apache.iceberg.FileFormat;
import org.apache.iceberg.PartitionSpec;
import org.apache.iceberg.Schema;
import org.apache.iceberg.Snapshot;
import org.apache.iceberg.Table;
import org.apache.iceberg.TableProperties;
import org.apache.iceberg.TableUtil;
import org.apache.iceberg.aws.glue.GlueCatalog;
import org.apache.iceberg.catalog.Namespace;
import org.apache.iceberg.catalog.TableIdentifier;
import org.apache.iceberg.data.IcebergGenerics;
import org.apache.iceberg.data.Record;
import org.apache.iceberg.exceptions.AlreadyExistsException;
import org.apache.iceberg.flink.CatalogLoader;
import org.apache.iceberg.flink.FlinkSchemaUtil;
import org.apache.iceberg.flink.TableLoader;
import org.apache.iceberg.flink.sink.FlinkSink;
import org.apache.iceberg.io.CloseableIterable;
import org.apache.iceberg.types.Types;

/**
 * {@code write-flink}: one Flink job of the changelog ({@link Changelog}) into a branch of a v3
 * table through FlinkSink in upsert mode, then a JSON report of the model's rows and of what the
 * sink's commits added, read back from the table's snapshots. FlinkSink because it is Iceberg
 * 1.11's stable sink: IcebergSink (Sink V2) is still marked @Experimental there, and both write
 * through the same RowDataTaskWriterFactory, so they write the same files.
 */
final class WriteFlink {
  static final String CATALOG_NAME = "eqdv";
  /** The table property of the sink's empty commits (see where it is set). */
  static final String MAX_CONTINUOUS_EMPTY_COMMITS = "flink.max-continuous-empty-commits";

  // Checkpoints often enough that a run of a few batches takes seconds, not minutes.
  static final long CHECKPOINT_INTERVAL_MS = 200;

  private final String warehouse;
  private final TableIdentifier identifier;
  private final String branch;

  WriteFlink(String warehouse, String database, String table, String branch) {
    this.warehouse = warehouse;
    this.identifier = TableIdentifier.of(Namespace.of(database), table);
    this.branch = branch;
  }

  /** The schema: k and p required (identifier fields must be), p a function of k. */
  static Schema schema(boolean keyWithPartition) {
    List<Types.NestedField> columns =
        List.of(
            Types.NestedField.required(1, "k", Types.LongType.get()),
            Types.NestedField.required(2, "p", Types.IntegerType.get()),
            Types.NestedField.optional(3, "v", Types.StringType.get()),
            Types.NestedField.optional(4, "n", Types.LongType.get()));
    // The sink requires a partitioned table's source columns among the equality fields.
    return new Schema(columns, keyWithPartition ? Set.of(1, 2) : Set.of(1));
  }

  static PartitionSpec spec(Schema schema, String partition) {
    switch (partition) {
      case "identity":
        return PartitionSpec.builderFor(schema).identity("p").build();
      case "bucket":
        return PartitionSpec.builderFor(schema).bucket("k", 4).build();
      default:
        return PartitionSpec.unpartitioned();
    }
  }

  Map<String, String> catalogProperties() {
    Map<String, String> env = System.getenv();
    Map<String, String> props = new HashMap<>();
    props.put(CatalogProperties.WAREHOUSE_LOCATION, warehouse);
    props.put(CatalogProperties.FILE_IO_IMPL, "org.apache.iceberg.aws.s3.S3FileIO");
    // Every commit is a new Glue table version otherwise; the emulator and the tests need none.
    props.put("glue.skip-archive", "true");
    String s3 = firstOf(env.get("AWS_ENDPOINT_URL_S3"), env.get("AWS_ENDPOINT_URL"));
    if (s3 != null) {
      props.put("s3.endpoint", s3);
      // MinIO serves buckets by path, not by virtual host.
      props.put("s3.path-style-access", "true");
    }
    String glue = firstOf(env.get("AWS_ENDPOINT_URL_GLUE"), env.get("AWS_ENDPOINT_URL"));
    if (glue != null) {
      props.put("glue.endpoint", glue);
    }
    String region = firstOf(env.get("AWS_REGION"), env.get("AWS_DEFAULT_REGION"));
    if (region != null) {
      props.put("client.region", region);
    }
    return props;
  }

  private static String firstOf(String a, String b) {
    for (String s : new String[] {a, b}) {
      if (s != null && !s.isBlank()) {
        return s.trim();
      }
    }
    return null;
  }

  String run(long seed, int checkpoints, String createPartition) throws Exception {
    Map<String, String> props = catalogProperties();
    Table table;
    try (GlueCatalog catalog = new GlueCatalog()) {
      catalog.initialize(CATALOG_NAME, props);
      if (createPartition != null) {
        try {
          catalog.createNamespace(identifier.namespace());
        } catch (AlreadyExistsException e) {
          // A database of the test's: fine.
        }
        Schema schema = schema(createPartition.equals("identity"));
        Map<String, String> tableProps = new HashMap<>();
        tableProps.put(TableProperties.FORMAT_VERSION, "3");
        // The sink commits an empty snapshot every N checkpoints without data by default; the
        // tests count commits, so only checkpoints with data commit.
        tableProps.put(MAX_CONTINUOUS_EMPTY_COMMITS, String.valueOf(Integer.MAX_VALUE));
        table =
            catalog.createTable(identifier, schema, spec(schema, createPartition), null, tableProps);
      } else {
        table = catalog.loadTable(identifier);
        // A table another writer created (the staging tests' Java server) gets the same
        // setting: on a loaded machine, ten checkpoints without data come quickly, and
        // the sink would commit an empty snapshot the tests do not expect.
        String never = String.valueOf(Integer.MAX_VALUE);
        if (!never.equals(table.properties().get(MAX_CONTINUOUS_EMPTY_COMMITS))) {
          table.updateProperties().set(MAX_CONTINUOUS_EMPTY_COMMITS, never).commit();
        }
      }
    }

    Snapshot startHead = table.snapshot(branch);
    Changelog changelog = new Changelog(seed, liveRows(table, startHead));
    List<List<Changelog.Event>> batches = new ArrayList<>();
    long events = 0;
    for (int c = 1; c <= checkpoints; c++) {
      List<Changelog.Event> batch = changelog.batch(c);
      events += batch.size();
      batches.add(batch);
    }

    List<String> equalityColumns = new ArrayList<>(table.schema().identifierFieldNames());
    Collections.sort(equalityColumns);
    runJob(table, props, batches, equalityColumns);

    table.refresh();
    return report(table, startHead, changelog, checkpoints, events, equalityColumns);
  }

  private void runJob(
      Table table,
      Map<String, String> props,
      List<List<Changelog.Event>> batches,
      List<String> equalityColumns)
      throws Exception {
    Configuration conf = new Configuration();
    // A failure fails the run: the source has no state to restart from.
    conf.set(RestartStrategyOptions.RESTART_STRATEGY, "none");
    StreamExecutionEnvironment env = StreamExecutionEnvironment.createLocalEnvironment(1, conf);
    env.enableCheckpointing(CHECKPOINT_INTERVAL_MS);
    RowType rowType = FlinkSchemaUtil.convert(table.schema());
    @SuppressWarnings("deprecation")
    DataStream<RowData> changes =
        env.addSource(new BatchPerCheckpoint(batches), "changelog", InternalTypeInfo.of(rowType));
    TableLoader loader =
        TableLoader.fromCatalog(
            CatalogLoader.custom(
                CATALOG_NAME,
                props,
                new org.apache.hadoop.conf.Configuration(false),
                GlueCatalog.class.getName()),
            identifier);
    FlinkSink.forRowData(changes)
        .tableLoader(loader)
        .upsert(true)
        .equalityFieldColumns(equalityColumns)
        .toBranch(branch)
        .writeParallelism(1)
        .append();
    env.execute("eqdv write-flink " + identifier);
  }

  /** The live rows of {@code head} by key, read by Iceberg's generic reader. */
  static Map<Long, Changelog.Row> liveRows(Table table, Snapshot head) throws IOException {
    Map<Long, Changelog.Row> rows = new TreeMap<>();
    if (head == null) {
      return rows;
    }
    try (CloseableIterable<Record> records =
        IcebergGenerics.read(table).useSnapshot(head.snapshotId()).build()) {
      for (Record r : records) {
        long k = (Long) r.getField("k");
        Object v = r.getField("v");
        Object n = r.getField("n");
        rows.put(
            k,
            new Changelog.Row(
                k,
                (Integer) r.getField("p"),
                v == null ? null : v.toString(),
                n == null ? 0 : (Long) n));
      }
    }
    return rows;
  }

  private String report(
      Table table,
      Snapshot startHead,
      Changelog changelog,
      int checkpoints,
      long events,
      List<String> equalityColumns)
      throws IOException {
    // The snapshots this run committed to the branch, oldest first.
    List<Snapshot> added = new ArrayList<>();
    Long stop = startHead == null ? null : startHead.snapshotId();
    for (Snapshot s = table.snapshot(branch);
        s != null && (stop == null || s.snapshotId() != stop);
        s = s.parentId() == null ? null : table.snapshot(s.parentId())) {
      added.add(s);
    }
    Collections.reverse(added);

    long dataFiles = 0;
    long equalityDeletes = 0;
    long dvs = 0;
    long positionDeletes = 0;
    List<Map<String, Object>> commits = new ArrayList<>();
    for (Snapshot s : added) {
      long data = 0;
      for (var f : s.addedDataFiles(table.io())) {
        data++;
      }
      long eq = 0;
      long dv = 0;
      long pos = 0;
      for (DeleteFile f : s.addedDeleteFiles(table.io())) {
        if (f.content() == FileContent.EQUALITY_DELETES) {
          eq++;
        } else if (f.format() == FileFormat.PUFFIN) {
          dv++;
        } else {
          pos++;
        }
      }
      Map<String, Object> c = new LinkedHashMap<>();
      c.put("snapshot_id", s.snapshotId());
      c.put("operation", s.operation());
      c.put("data_files", data);
      c.put("equality_delete_files", eq);
      c.put("dvs", dv);
      c.put("position_delete_files", pos);
      // Rows and deletes as the commit's summary counts them.
      for (String key :
          List.of("added-records", "added-equality-deletes", "added-position-deletes", "added-dvs")) {
        c.put(key.replace('-', '_'), Long.parseLong(s.summary().getOrDefault(key, "0")));
      }
      commits.add(c);
      dataFiles += data;
      equalityDeletes += eq;
      dvs += dv;
      positionDeletes += pos;
    }

    List<String> rows = new ArrayList<>();
    for (Changelog.Row r : changelog.live()) {
      rows.add(r.canonical());
    }
    Collections.sort(rows);
    Map<String, Object> out = new LinkedHashMap<>();
    out.put("table", identifier.toString());
    out.put("branch", branch);
    out.put("format_version", TableUtil.formatVersion(table));
    out.put("equality_columns", equalityColumns);
    out.put("spec", table.spec().toString());
    out.put("checkpoints", checkpoints);
    out.put("events", events);
    out.put("commits", added.size());
    out.put("data_files", dataFiles);
    out.put("equality_delete_files", equalityDeletes);
    out.put("dvs", dvs);
    out.put("position_delete_files", positionDeletes);
    out.put("per_commit", commits);
    out.put("expected_live_rows", rows.size());
    out.put("rows", rows);
    return new ObjectMapper().writeValueAsString(out);
  }
}
