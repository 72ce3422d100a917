#!/usr/bin/env python3
"""A second independent reader: reads a table's current snapshot with DuckDB's iceberg extension.

    duckdb_read.py --metadata LOCATION           (a metadata.json: local path, file:// or s3://)
    duckdb_read.py --warehouse DIR --table NS.NAME   (eqdv's SQLite catalog DIR/catalog.db)
    duckdb_read.py --catalog glue --table DB.NAME    (Glue + S3 from the AWS_* environment)

DuckDB does the whole scan (`iceberg_scan` on the metadata file: manifests, data files,
equality deletes, DVs, v2 position deletes); PyIceberg only finds the metadata location
(through the same catalogs as read_table.py) and parses the metadata for the current
schema, which orders the columns and types the canonical form. Prints one JSON object:

    {"rows": [...], "row_count": N, "snapshot_id": ID or null}

`rows` are in exactly read_table.py's canonical form (its `canonical_rows`), sorted.

The extensions come from PyPI wheels (duckdb-extension-avro/-iceberg/-httpfs, pinned
to DuckDB's version; httpfs only for s3:// tables, with a secret from the AWS_*
environment, path-style) and are LOADed from their files: autoinstall and autoload are
off, so DuckDB never reaches for its extension repository and never reads ~/.duckdb.

What DuckDB 1.5.5 (iceberg extension 45163a28) does, as observed on eqdv's, PyIceberg's
and Java's tables and pinned by tests/duckdb.rs, tests/pyiceberg_smoke.rs and
tests/histories.rs:

* Equality deletes, DVs and v2 position deletes are applied.
* Known wrong or failed reads, each refused with exit status 3 and a message naming it
  (never retried without the deletes):
  - Equality deletes are applied with SQL NULL semantics: a data row with a null in
    an equality column is dropped when some applicable delete row equals it on the
    row's other equality columns (so a row whose equality columns are all null is
    dropped by any applicable delete), even though no delete row matches it (Iceberg
    Java and eqdv keep it, null matching only null). DuckDB returns too few rows
    without an error, so this script refuses before DuckDB reads whenever an equality
    delete applies to a data file whose manifest entry does not say "no nulls" for each
    of the delete's equality columns.
  - An equality delete on a column dropped since (Iceberg Java fails on it too).
  - DVs in a table whose data files span several partition specs: DuckDB once read two
    rows too few (refused before the scan).
  - Files without Parquet field ids in a table without a name mapping: DuckDB reads
    other rows than Iceberg Java (which falls back to column positions). Refused before
    the scan (one look at every live file's Parquet schema).
  - Failures inside DuckDB while applying equality deletes, named here when the table
    explains them: a uuid key stored as fixed[16] without Parquet's UUID annotation (as
    eqdv's generator writes it; `INTERNAL Error: Expected [unified] vector [format] of
    type INT128, but found [vector of] type VARCHAR`); a key column promoted int -> long
    or a decimal key widened (`... of type INT64, but found ... INT32`); a null partition
    value (e.g. bucket(k) of a null key) or files of more than one partition spec
    (`INTERNAL Error: Comparison on NULL values`).
* Seen once and worked around in eqdv, not refused here: when a manifest lists the DVs
  of one Puffin file out of the order of their blobs, DuckDB may apply another DV of
  that file to a data file (it applied the DV at offset 4 to the file whose DV is at
  offset 100). eqdv's merged manifests list each Puffin file's DVs in blob order
  (tests/manifest_merge.rs failed about three runs in four before they did).
* uuid columns come out of its Arrow export as strings and timestamptz in the session
  time zone (set to UTC here); both are converted to PyIceberg's Arrow forms before
  canonicalizing.

Checks of its own, so a wrong read is not taken for a right one: the snapshot DuckDB
reads is the head of `main` (the metadata's current-snapshot-id); DuckDB's column names
are the current schema's; and when the snapshot has neither equality deletes nor v2
position deletes, the row count equals the data files' record counts minus the DVs'
cardinalities.

Exit status: 0 ok, 1 error (message on stderr, no rows printed), 2 usage, 3 a case
DuckDB is known not to read.
"""

from __future__ import annotations

import time

IMPORTS_STARTED = time.monotonic()

import argparse
import json
import os
import sys
import uuid
from typing import Any
from urllib.parse import urlparse

import pyarrow as pa

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from read_table import EXIT_ERROR, Failure, canonical_rows, open_catalog, snapshot_files  # noqa: E402

IMPORTS_SECONDS = time.monotonic() - IMPORTS_STARTED

EXIT_KNOWN_LIMIT = 3


def s3_properties() -> dict[str, str]:
    """PyIceberg FileIO properties for S3 from the AWS_* environment (path-style)."""
    env = os.environ
    props = {"s3.force-virtual-addressing": "false"}
    region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
    if region:
        props["s3.region"] = region
    for key, var in [
        ("s3.endpoint", "AWS_ENDPOINT_URL_S3"),
        ("s3.access-key-id", "AWS_ACCESS_KEY_ID"),
        ("s3.secret-access-key", "AWS_SECRET_ACCESS_KEY"),
    ]:
        if env.get(var):
            props[key] = env[var]
    return props


def load_table(args: argparse.Namespace) -> Any:
    """The PyIceberg table (for its metadata location, parsed metadata and FileIO)."""
    if args.metadata:
        from pyiceberg.table import StaticTable

        location = args.metadata
        if "://" not in location:
            location = "file://" + os.path.abspath(location)
        try:
            return StaticTable.from_metadata(location, s3_properties())
        except Exception as e:  # noqa: BLE001 - any failure to read the metadata is fatal
            raise Failure(EXIT_ERROR, f"cannot read table metadata {location}: {e}") from e
    from pyiceberg.exceptions import NoSuchTableError

    try:
        return open_catalog(args).load_table(args.table)
    except NoSuchTableError as e:
        raise Failure(EXIT_ERROR, f"no table {args.table} in the {args.catalog} catalog: {e}") from e


def connect(extensions: list[str]) -> Any:
    import duckdb

    con = duckdb.connect(
        config={
            # Never reach for an extension repository or ~/.duckdb: only the wheels' files.
            "autoinstall_known_extensions": "false",
            "autoload_known_extensions": "false",
            "threads": 2,
        }
    )
    # timestamptz comes out of the Arrow export in the session time zone: make it UTC.
    con.execute("SET TimeZone = 'UTC'")
    version = con.sql("PRAGMA version").fetchone()[0]
    import importlib

    for name in extensions:
        try:
            module = importlib.import_module(f"duckdb_extension_{name}")
        except ImportError as e:
            raise Failure(
                EXIT_ERROR,
                f"the duckdb-extension-{name} wheel is not installed ({e}): "
                "pip install -r tests/pyiceberg/requirements.txt",
            ) from e
        path = os.path.join(os.path.dirname(module.__file__), "extensions", version, f"{name}.duckdb_extension")
        if not os.path.isfile(path):
            raise Failure(EXIT_ERROR, f"duckdb-extension-{name} has no build for DuckDB {version} ({path} is missing)")
        con.execute("LOAD " + sql_string(path))
    return con


def sql_string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def configure_s3(con: Any) -> None:
    """An S3 secret from the AWS_* environment: MinIO in the tests, path-style URLs."""
    env = os.environ
    options = ["TYPE s3", "URL_STYLE 'path'"]
    for option, var in [("KEY_ID", "AWS_ACCESS_KEY_ID"), ("SECRET", "AWS_SECRET_ACCESS_KEY")]:
        if env.get(var):
            options.append(f"{option} {sql_string(env[var])}")
    region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
    if region:
        options.append(f"REGION {sql_string(region)}")
    endpoint = env.get("AWS_ENDPOINT_URL_S3")
    if endpoint:
        parsed = urlparse(endpoint)
        if not parsed.netloc:
            raise Failure(EXIT_ERROR, f"AWS_ENDPOINT_URL_S3={endpoint!r} is not a URL")
        options.append(f"ENDPOINT {sql_string(parsed.netloc)}")
        options.append(f"USE_SSL {'true' if parsed.scheme == 'https' else 'false'}")
    con.execute(f"CREATE SECRET eqdv_s3 ({', '.join(options)})")


def to_pyiceberg_arrow(column: pa.ChunkedArray, iceberg_type: Any, name: str) -> pa.ChunkedArray:
    """DuckDB's Arrow form of a column in the form read_table.canonical_cells expects."""
    from pyiceberg.types import UUIDType

    if isinstance(iceberg_type, UUIDType) and pa.types.is_string(column.type):
        # DuckDB exports UUID as its text; parse it strictly into the 16 bytes PyIceberg gives.
        def parse(text: str | None) -> bytes | None:
            if text is None:
                return None
            value = uuid.UUID(text)
            if str(value) != text.lower():
                raise Failure(EXIT_ERROR, f"column {name!r}: DuckDB gave uuid text {text!r}")
            return value.bytes

        return pa.chunked_array([pa.array([parse(v) for v in column.to_pylist()], pa.binary(16))])
    return column


def read(args: argparse.Namespace) -> dict[str, Any]:
    started = time.monotonic()
    table = load_table(args)
    metadata = table.metadata
    location = table.metadata_location
    main_ref = metadata.refs.get("main")
    if main_ref is not None and main_ref.snapshot_id != metadata.current_snapshot_id:
        raise Failure(
            EXIT_ERROR,
            f"main is at snapshot {main_ref.snapshot_id} but current-snapshot-id is "
            f"{metadata.current_snapshot_id}; DuckDB reads the latter",
        )
    snapshot = metadata.current_snapshot()
    schema = metadata.schema()
    if snapshot is None:
        return {"rows": [], "row_count": 0, "snapshot_id": None}
    files = snapshot_files(table, snapshot)
    if not args.unguarded:
        refuse_dropped_equality_fields(schema, files)
        refuse_null_keys(table, schema, files)
        refuse_dvs_across_specs(files)

    connect_started = time.monotonic()
    on_s3 = location.startswith(("s3://", "s3a://"))
    con = connect(["avro", "iceberg", "httpfs"] if on_s3 else ["avro", "iceberg"])
    if on_s3:
        configure_s3(con)
    connect_seconds = time.monotonic() - connect_started
    if not args.unguarded:
        refuse_files_without_field_ids(con, metadata, files)
    columns = ", ".join('"' + f.name.replace('"', '""') + '"' for f in schema.fields)
    query = f"SELECT {columns} FROM iceberg_scan({sql_string(location)})"
    scan_started = time.monotonic()
    try:
        result = con.sql(query).to_arrow_table()
    except Exception as e:  # noqa: BLE001 - DuckDB raises many types; all are fatal here
        message = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise known_limit(table, schema, files, message) or Failure(
            EXIT_ERROR, f"DuckDB could not read {location}: {type(e).__name__}: {message}"
        ) from e
    scan_seconds = time.monotonic() - scan_started
    if result.column_names != [f.name for f in schema.fields]:
        raise Failure(EXIT_ERROR, f"DuckDB returned columns {result.column_names}, the current schema has {[f.name for f in schema.fields]}")
    arrow = pa.table(
        [to_pyiceberg_arrow(result.column(i), f.field_type, f.name) for i, f in enumerate(schema.fields)],
        names=result.column_names,
    )
    rows = canonical_rows(arrow, schema)
    if not files.equality_deletes and not files.position_deletes:
        stored = sum(d.file.record_count for d in files.data.values())
        deleted = sum(dv.file.record_count for dv in files.dvs)
        if len(rows) != stored - deleted:
            raise Failure(
                EXIT_ERROR,
                f"DuckDB read {len(rows)} rows; the data files hold {stored} and the DVs delete {deleted}, "
                f"so {stored - deleted} are live",
            )
    if args.timing:
        print(
            f"duckdb_read.py: imports {IMPORTS_SECONDS:.3f}s; read {time.monotonic() - started:.3f}s, of which "
            f"DuckDB start-up and LOADs {connect_seconds:.3f}s, iceberg_scan {scan_seconds:.3f}s",
            file=sys.stderr,
        )
    return {"rows": rows, "row_count": len(rows), "snapshot_id": snapshot.snapshot_id}


def refuse_dropped_equality_fields(schema: Any, files: Any) -> None:
    """Exits (status 3) when a live equality delete keys on a field the current schema no
    longer has: such deletes still apply, but a scan of the current schema cannot compare
    them (Iceberg Java fails on it too)."""
    for delete in files.equality_deletes:
        dropped = [i for i in delete.file.equality_ids or [] if field_or_none(schema, i) is None]
        if dropped:
            raise Failure(
                EXIT_KNOWN_LIMIT,
                f"equality delete {delete.path} keys on field id(s) {dropped}, which the current schema "
                "no longer has (a dropped column): no reader of the current schema can apply it",
            )


def refuse_dvs_across_specs(files: Any) -> None:
    """Exits (status 3) when DVs are live in a snapshot whose data files span more than one
    partition spec: on such a table (tests/histories.rs, spec-evolution, after eqdv's
    conversion) DuckDB once read 399 rows where Iceberg Java, PyIceberg and the DVs'
    cardinalities all say 401, and read 401 on other runs, so its answer cannot be
    trusted there."""
    specs = sorted({d.spec_id for d in files.data.values()})
    if files.dvs and len(specs) > 1:
        raise Failure(
            EXIT_KNOWN_LIMIT,
            f"DVs on data files of partition specs {specs}: DuckDB's iceberg extension has read such a "
            "table with rows missing (399 of 401), so its read could be wrong",
        )


def refuse_null_keys(table: Any, schema: Any, files: Any) -> None:
    """Exits (status 3) when an equality delete applies to a data file that may hold a null in
    one of its equality columns: DuckDB can drop such rows (see the module docstring)."""
    specs = table.metadata.specs()
    for delete in files.equality_deletes:
        ids = sorted(delete.file.equality_ids or [])
        if not ids:
            raise Failure(EXIT_ERROR, f"equality delete {delete.path} has no equality_ids")
        is_global = specs[delete.spec_id].is_unpartitioned()
        for data in files.data.values():
            if data.seq >= delete.seq:
                continue
            if not is_global and (data.spec_id != delete.spec_id or data.file.partition != delete.file.partition):
                continue
            nulls = data.file.null_value_counts or {}
            # No count (no stats, or a column added after the file was written): maybe null.
            nullable = [schema.find_field(i).name for i in ids if nulls.get(i) != 0]
            if nullable:
                raise Failure(
                    EXIT_KNOWN_LIMIT,
                    f"data file {data.path} may hold nulls in equality column(s) {', '.join(nullable)} "
                    f"(null_value_counts {[nulls.get(i) for i in ids]}) and equality delete {delete.path} applies "
                    "to it: DuckDB's iceberg extension would drop a row with a null key column whenever a delete "
                    "row equals it on its other columns, so its read could be wrong",
                )


def refuse_files_without_field_ids(con: Any, metadata: Any, files: Any) -> None:
    """Exits (status 3) when a live Parquet file has no field ids and the table has no name
    mapping: DuckDB then resolves its columns otherwise than Iceberg Java does."""
    if metadata.properties.get("schema.name-mapping.default"):
        return
    paths = [
        live.path
        for live in [*files.data.values(), *files.equality_deletes, *files.position_deletes]
        if live.file.file_format.name == "PARQUET"
    ]
    if not paths:
        return
    query = (
        "SELECT file_name FROM parquet_schema(?) GROUP BY file_name "
        "HAVING count(field_id) = 0 ORDER BY file_name LIMIT 3"
    )
    without = [row[0] for row in con.execute(query, [paths]).fetchall()]
    if without:
        raise Failure(
            EXIT_KNOWN_LIMIT,
            f"file(s) without Parquet field ids and no schema.name-mapping.default: {', '.join(without)}; "
            "DuckDB resolves such columns otherwise than Iceberg Java (which reads them by position) "
            "and reads other rows, so its read could be wrong",
        )


def field_or_none(schema: Any, field_id: int) -> Any:
    try:
        return schema.find_field(field_id)
    except ValueError:
        return None


def known_limit(table: Any, schema: Any, files: Any, message: str) -> Failure | None:
    """The failure DuckDB 1.5.5 is known for, named, when `message` is it (all are failures
    while applying equality deletes)."""
    from pyiceberg.types import UUIDType

    if not files.equality_deletes:
        return None
    key_ids = sorted({i for d in files.equality_deletes for i in (d.file.equality_ids or [])})
    current = {i: f for i in key_ids if (f := field_or_none(schema, i)) is not None}
    # "Expected vector of type X, but found ...", or "Expected unified vector format of type X, ..."
    if "INTERNAL Error: Expected " in message:
        causes = []
        uuid_keys = [f.name for f in current.values() if isinstance(f.field_type, UUIDType)]
        if uuid_keys:
            causes.append(
                f"keyed on uuid column(s) {', '.join(uuid_keys)} (seen with eqdv-generated files, which store "
                "uuid as fixed[16] without Parquet's UUID annotation; Java-written uuid keys read)"
            )
        promoted = sorted(
            {
                f.name
                for old in table.metadata.schemas
                for i, f in current.items()
                if (was := field_or_none(old, i)) is not None and was.field_type != f.field_type
            }
        )
        if promoted:
            causes.append(f"keyed on column(s) {', '.join(promoted)} whose type was promoted after files were written")
        if causes:
            return Failure(
                EXIT_KNOWN_LIMIT,
                f"DuckDB cannot apply these equality deletes: {'; '.join(causes)}: {message}",
            )
    if "Comparison on NULL values" in message:
        live = [*files.data.values(), *files.equality_deletes]
        null_partition = next((f.path for f in live if any(v is None for v in f.file.partition)), None)
        specs = sorted({f.spec_id for f in live})
        if null_partition or len(specs) > 1:
            where = f"a null partition value ({null_partition})" if null_partition else f"files of partition specs {specs}"
            return Failure(
                EXIT_KNOWN_LIMIT,
                f"DuckDB cannot apply equality deletes to a table with {where}: {message}",
            )
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Read an Iceberg table with DuckDB; print canonical rows as JSON.")
    parser.add_argument("--metadata", help="a metadata.json location: local path, file:// or s3://")
    parser.add_argument("--catalog", choices=["sqlite", "glue"], default="sqlite")
    parser.add_argument("--warehouse", help="sqlite: the directory holding catalog.db and the tables")
    parser.add_argument("--table", help="NAMESPACE.TABLE")
    parser.add_argument(
        "--unguarded",
        action="store_true",
        help="skip the refusals made before the scan and let DuckDB read (for the tests that pin DuckDB's wrong reads)",
    )
    parser.add_argument("--timing", action="store_true", help="print the in-process read time on stderr")
    args = parser.parse_args(argv)
    if bool(args.metadata) == bool(args.table):
        parser.error("give --metadata LOCATION, or --table with --warehouse DIR or --catalog glue")
    try:
        result = read(args)
    except Failure as e:
        print(f"duckdb_read.py: {e}", file=sys.stderr)
        return e.status
    sys.stdout.reconfigure(encoding="utf-8")  # type: ignore[attr-defined]
    sys.stdout.write(json.dumps(result, ensure_ascii=False, separators=(",", ":")) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
