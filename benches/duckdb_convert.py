"""Baseline (b): what a user would pick for an ad-hoc conversion with DuckDB.

Joins the key column of every data file of the table (read_parquet with filename and
file_row_number) against the keys of the equality delete files, and materialises the
(file, position) pairs a DV writer needs. Prints one JSON object.

With --data-files LIST.json (`eqdv-bench candidates`' output), DuckDB reads only the
data files eqdv's pruning leaves to open instead of every one: the join without the
files eqdv never opens, so that what remains between the two is the reading itself.
Listing them is not timed (eqdv's own pruning is inside its time).

Usage: duckdb_convert.py SCENARIO.json [--threads N] [--data-files LIST.json]
"""

import argparse
import json
import time

import duckdb
import pyarrow.compute as pc


def sql_list(paths):
    return "[" + ", ".join("'" + p.replace("'", "''") + "'" for p in paths) + "]"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("scenario")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--data-files", help="JSON with 'opened': the data files to read")
    args = parser.parse_args()
    with open(args.scenario) as f:
        scenario = json.load(f)
    data_files = scenario["data_files"]
    if args.data_files:
        with open(args.data_files) as f:
            listed = [p.removeprefix("file://") for p in json.load(f)["opened"]]
        unknown = sorted(set(listed) - set(data_files))
        if unknown:
            raise SystemExit(f"{args.data_files}: {len(unknown)} files not in the scenario, e.g. {unknown[0]}")
        if not listed:
            raise SystemExit(f"{args.data_files}: no data files listed")
        data_files = listed
    started = time.monotonic()
    con = duckdb.connect(config={"threads": args.threads})
    query = f"""
        SELECT d.filename, d.file_row_number
        FROM read_parquet({sql_list(data_files)},
                          filename = true, file_row_number = true) AS d
        SEMI JOIN read_parquet({sql_list(scenario["delete_files"])}) AS e ON d.k = e.k
    """
    result = con.sql(query).to_arrow_table()
    files = len(pc.unique(result.column("filename"))) if result.num_rows else 0
    print(
        json.dumps(
            {
                "positions": result.num_rows,
                "files_with_matches": files,
                "threads": args.threads,
                "data_files": len(data_files),
                "duckdb": duckdb.__version__,
                "inner_ms": (time.monotonic() - started) * 1000.0,
            }
        )
    )


if __name__ == "__main__":
    main()
