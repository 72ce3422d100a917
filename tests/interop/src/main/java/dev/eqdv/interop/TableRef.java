package dev.eqdv.interop;

import java.io.Closeable;
import java.io.IOException;
import java.util.Map;
import org.apache.iceberg.CatalogProperties;
import org.apache.iceberg.Snapshot;
import org.apache.iceberg.Table;
import org.apache.iceberg.catalog.Catalog;
import org.apache.iceberg.catalog.Namespace;
import org.apache.iceberg.catalog.SupportsNamespaces;
import org.apache.iceberg.catalog.TableIdentifier;
import org.apache.iceberg.exceptions.AlreadyExistsException;
import org.apache.iceberg.inmemory.InMemoryCatalog;

/**
 * The table every subcommand names (--warehouse --database --table) and its open catalog: Glue
 * with S3FileIO for an s3:// warehouse; for a memory:// warehouse, Iceberg's in-memory catalog
 * and FileIO, shared by every command of one JVM (the self-test and the unit tests use it).
 */
final class TableRef implements Closeable {
  private static InMemoryCatalog memory;

  final String warehouse;
  final String database;
  final String name;
  final Catalog catalog;
  private final boolean shared;

  TableRef(Args args) {
    this.warehouse = args.required("warehouse");
    this.database = args.required("database");
    this.name = args.required("table");
    if (warehouse.startsWith("memory://")) {
      this.catalog = memoryCatalog();
      this.shared = true;
    } else if (warehouse.startsWith("s3://") || warehouse.startsWith("s3a://")) {
      this.catalog = Catalogs.open(warehouse);
      this.shared = false;
    } else {
      throw new Args.UsageException(
          "--warehouse: expected s3://BUCKET/PREFIX, got '" + warehouse + "'");
    }
  }

  static synchronized InMemoryCatalog memoryCatalog() {
    if (memory == null) {
      memory = new InMemoryCatalog();
      memory.initialize(
          "eqdv-memory", Map.of(CatalogProperties.WAREHOUSE_LOCATION, "memory://warehouse"));
    }
    return memory;
  }

  TableIdentifier identifier() {
    return TableIdentifier.of(namespace(), name);
  }

  /** The database as a namespace: a dotted name is a nested namespace, as eqdv reads it. */
  Namespace namespace() {
    return Namespace.of(database.split("\\."));
  }

  String label() {
    return database + "." + name;
  }

  Table load() {
    return catalog.loadTable(identifier());
  }

  /** Creates the database (namespace) if it does not exist yet. */
  void ensureDatabase() {
    if (!(catalog instanceof SupportsNamespaces)) {
      return;
    }
    SupportsNamespaces namespaces = (SupportsNamespaces) catalog;
    // Each level of a nested namespace, outermost first.
    String[] levels = namespace().levels();
    for (int depth = 1; depth <= levels.length; depth++) {
      Namespace ns = Namespace.of(java.util.Arrays.copyOf(levels, depth));
      if (!namespaces.namespaceExists(ns)) {
        try {
          namespaces.createNamespace(ns);
        } catch (AlreadyExistsException e) {
          // Created concurrently: fine.
        }
      }
    }
  }

  /** The head of {@code branch}, or null when the branch has no snapshot yet (an empty table). */
  static Snapshot head(Table table, String branch) {
    if (table.refs().containsKey(branch)) {
      return table.snapshot(branch);
    }
    if (branch.equals("main")) {
      return null;
    }
    throw new IllegalArgumentException("table " + table.name() + " has no branch '" + branch + "'");
  }

  @Override
  public void close() throws IOException {
    if (!shared && catalog instanceof Closeable) {
      ((Closeable) catalog).close();
    }
  }
}
