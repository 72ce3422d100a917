"""Baseline (b) on S3: what a user would pick for an ad-hoc conversion with DuckDB, on a
Glue + S3 table, through whatever S3 endpoint AWS_ENDPOINT_URL_S3 names (the latency
proxy in benches/s3_latency).

Untimed: PyIceberg lists the head's live data files and equality delete files (with
their data sequence numbers and partitions) through --list-endpoint. Timed in-process
(`inner_ms`): DuckDB with its httpfs extension joins the key columns of every data file
(read_parquet with filename and file_row_number) against the keys of the equality
delete files that apply to it (a newer sequence number, the same partition or a global
delete) and materialises the (file, position) pairs a DV writer needs. No Puffin file is
written and nothing is committed, so it is favoured. Prints one JSON object.

Runs under the tests' Python (tests/run's venv: DuckDB with the httpfs wheel, PyIceberg),
whose helpers it uses: tests/pyiceberg/duckdb_read.py and read_table.py.

Tuning (`--threads`, `--metadata-cache`): DuckDB's default is one thread per core, which
over S3 leaves most of the time waiting on round trips (one read in flight per thread);
a user reading remote Parquet raises `threads` well past the cores and turns on httpfs's
metadata cache (each file's HEAD once): benches/s3_latency runs the default and such
settings side by side.

Usage: duckdb_s3_convert.py --table NS.TABLE --list-endpoint URL [--threads N] [--metadata-cache]
"""

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "pyiceberg"))
from duckdb_read import configure_s3, connect, sql_string  # noqa: E402
from read_table import open_catalog, snapshot_files  # noqa: E402


def sql_list(paths):
    return "[" + ", ".join(sql_string(p) for p in paths) + "]"


def quoted(name):
    return '"' + name.replace('"', '""') + '"'


def partition_key(table, live):
    """The partition a file belongs to, as text; None for an unpartitioned spec (a delete
    written under it applies to every partition)."""
    spec = table.metadata.specs()[live.spec_id]
    if not spec.fields:
        return None
    return f"{live.spec_id}:{live.file.partition}"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--table", required=True, help="NAMESPACE.TABLE in Glue")
    parser.add_argument("--list-endpoint", required=True, help="S3 endpoint for the untimed listing")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--metadata-cache", action="store_true",
                        help="SET enable_http_metadata_cache and parquet_metadata_cache")
    args = parser.parse_args()

    # Untimed: the head's files, listed directly.
    timed_endpoint = os.environ.get("AWS_ENDPOINT_URL_S3")
    os.environ["AWS_ENDPOINT_URL_S3"] = args.list_endpoint
    args.catalog = "glue"
    table = open_catalog(args).load_table(args.table)
    files = snapshot_files(table, table.metadata.current_snapshot())
    if timed_endpoint:
        os.environ["AWS_ENDPOINT_URL_S3"] = timed_endpoint
    schema = table.metadata.schema()
    equality_ids = {tuple(d.file.equality_ids or []) for d in files.equality_deletes}
    if len(equality_ids) != 1:
        raise SystemExit(f"expected one set of equality field ids, found {sorted(equality_ids)}")
    keys = [quoted(schema.find_field(i).name) for i in next(iter(equality_ids))]
    data = [(path, live.seq, partition_key(table, live)) for path, live in files.data.items()]
    deletes = [(d.path, d.seq, partition_key(table, d)) for d in files.equality_deletes]

    def values(rows):
        return ", ".join(
            f"({sql_string(p)}, {seq}, {'NULL' if part is None else sql_string(part)})"
            for p, seq, part in rows
        )

    started = time.monotonic()
    con = connect(["httpfs"])
    con.execute(f"SET threads = {args.threads}")
    if args.metadata_cache:
        con.execute("SET enable_http_metadata_cache = true")
        con.execute("SET parquet_metadata_cache = true")
    configure_s3(con)
    con.execute("CREATE TEMP TABLE dm (filename VARCHAR, seq BIGINT, part VARCHAR)")
    con.execute(f"INSERT INTO dm VALUES {values(data)}")
    con.execute("CREATE TEMP TABLE em (filename VARCHAR, seq BIGINT, part VARCHAR)")
    con.execute(f"INSERT INTO em VALUES {values(deletes)}")
    key_list = ", ".join(f"r.{k}" for k in keys)
    matches = " AND ".join(f"e.{k} IS NOT DISTINCT FROM d.{k}" for k in keys)
    query = f"""
        WITH e AS (
            SELECT em.seq, em.part, {key_list}
            FROM read_parquet({sql_list([d[0] for d in deletes])}, filename = true) AS r
            JOIN em ON r.filename = em.filename
        )
        SELECT d.filename, d.file_row_number
        FROM read_parquet({sql_list([d[0] for d in data])},
                          filename = true, file_row_number = true) AS d
        JOIN dm ON d.filename = dm.filename
        WHERE EXISTS (
            SELECT 1 FROM e
            WHERE {matches} AND e.seq > dm.seq AND (e.part IS NULL OR e.part = dm.part)
        )
    """
    result = con.sql(query).to_arrow_table()
    inner_ms = (time.monotonic() - started) * 1000.0
    files_with_matches = len(set(result.column("filename").to_pylist())) if result.num_rows else 0
    print(json.dumps({
        "positions": result.num_rows,
        "files_with_matches": files_with_matches,
        "data_files": len(data),
        "delete_files": len(deletes),
        "threads": args.threads,
        "metadata_cache": args.metadata_cache,
        "duckdb": con.sql("PRAGMA version").fetchone()[0],
        "inner_ms": inner_ms,
    }))


if __name__ == "__main__":
    main()
