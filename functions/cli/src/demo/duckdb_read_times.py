"""Times DuckDB reading Iceberg tables, for `eqdv demo`.

    python3 duckdb_read_times.py REPS METADATA_LOCATION...

Reads each table (a metadata.json) whole, every column with its deletes applied, up to
REPS times in one DuckDB session (once when a read takes over a second: it shows what it
shows), and keeps the fastest read. The rows are materialized
inside DuckDB (a temporary table), so Python's own conversions are not timed. Prints one
JSON object: {"duckdb": VERSION, "reads": [{"rows": N, "seconds": S}, ...]}.

The iceberg and avro extensions are LOADed from the files of their PyPI wheels
(duckdb-extension-iceberg, duckdb-extension-avro): DuckDB never reaches for its
extension repository. Exit status 3 (a reason on stderr) when DuckDB or an extension is
not installed, 1 when DuckDB fails.
"""

import importlib
import json
import os
import sys
import time


def quoted(text):
    return "'" + text.replace("'", "''") + "'"


def main():
    reps, locations = int(sys.argv[1]), sys.argv[2:]
    try:
        import duckdb
    except ImportError as e:
        print(f"DuckDB is not installed ({e})", file=sys.stderr)
        return 3
    con = duckdb.connect(
        config={
            "autoinstall_known_extensions": "false",
            "autoload_known_extensions": "false",
        }
    )
    # Its progress bar would print to stdout, where the JSON goes.
    con.execute("SET enable_progress_bar = false")
    version = con.sql("PRAGMA version").fetchone()[0]
    for name in ("avro", "iceberg"):
        try:
            module = importlib.import_module(f"duckdb_extension_{name}")
        except ImportError as e:
            print(f"the duckdb-extension-{name} wheel is not installed ({e})", file=sys.stderr)
            return 3
        path = os.path.join(
            os.path.dirname(module.__file__), "extensions", version, f"{name}.duckdb_extension"
        )
        if not os.path.isfile(path):
            print(f"duckdb-extension-{name} has no build for DuckDB {version}", file=sys.stderr)
            return 3
        con.execute("LOAD " + quoted(path))
    reads = []
    for location in locations:
        best, rows = None, None
        for _ in range(reps):
            if best is not None and best > 1.0:
                break
            started = time.perf_counter()
            con.execute(f"CREATE OR REPLACE TEMP TABLE read AS SELECT * FROM iceberg_scan({quoted(location)})")
            seconds = time.perf_counter() - started
            rows = con.sql("SELECT count(*) FROM read").fetchone()[0]
            best = seconds if best is None else min(best, seconds)
        con.execute("DROP TABLE read")
        reads.append({"rows": rows, "seconds": best})
    print(json.dumps({"duckdb": version, "reads": reads}))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as e:  # DuckDB's own errors: one line, for the demo to print
        print(f"{type(e).__name__}: {e}".splitlines()[0], file=sys.stderr)
        sys.exit(1)
