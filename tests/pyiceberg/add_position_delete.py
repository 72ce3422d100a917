#!/usr/bin/env python3
"""Commits one v2 position delete file to an unpartitioned v2 table (a test fixture).

PyIceberg 0.12 deletes by rewriting data files only, so this writes the position delete
file by hand: the positions, in the head snapshot's live data files, of the rows that
match `--rows`, as a Parquet file of (file_path, pos) with the reserved field ids,
committed like add_equality_delete.py commits an equality delete.

    add_position_delete.py --warehouse DIR --table NS.NAME --rows '[{"id": 1}, ...]'

Each object must match at least one live row (every named column equal, by Python's
`==` on PyArrow's `to_pylist` values). Prints `{"snapshot_id": ..., "file": ...,
"positions": N}`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.typedef import Record

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from add_equality_delete import commit_delete_file, open_v2_unpartitioned, write_delete_parquet  # noqa: E402
from read_table import snapshot_files  # noqa: E402

FILE_PATH_ID = 2147483546
POS_ID = 2147483545


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warehouse", required=True)
    parser.add_argument("--table", required=True)
    parser.add_argument("--rows", required=True, help="JSON list of objects, one per row (or rows) to delete")
    parser.add_argument("--branch", default="main")
    args = parser.parse_args()

    wanted = json.loads(args.rows)
    if not wanted or not isinstance(wanted, list):
        sys.exit("--rows must be a non-empty JSON list of objects")
    table = open_v2_unpartitioned(args.warehouse, args.table)
    files = snapshot_files(table, table.metadata.snapshot_by_name(args.branch))
    positions: list[tuple[str, int]] = []
    found = [False] * len(wanted)
    for path in sorted(files.data):
        with table.io.new_input(path).open() as stream:
            rows = pq.read_table(stream).to_pylist()
        for pos, row in enumerate(rows):
            for i, match in enumerate(wanted):
                if all(row.get(k) == v for k, v in match.items()):
                    positions.append((path, pos))
                    found[i] = True
                    break
    missing = [w for w, f in zip(wanted, found, strict=True) if not f]
    if missing:
        sys.exit(f"no live row matches {missing}")

    schema = pa.schema(
        [
            pa.field("file_path", pa.string(), nullable=False, metadata={"PARQUET:field_id": str(FILE_PATH_ID)}),
            pa.field("pos", pa.int64(), nullable=False, metadata={"PARQUET:field_id": str(POS_ID)}),
        ]
    )
    deletes = pa.Table.from_pylist([{"file_path": p, "pos": n} for p, n in positions], schema=schema)
    file_path = write_delete_parquet(table, "posdel", deletes)
    data_file = DataFile.from_args(
        content=DataFileContent.POSITION_DELETES,
        file_path=file_path,
        file_format=FileFormat.PARQUET,
        partition=Record(),
        record_count=deletes.num_rows,
        file_size_in_bytes=len(table.io.new_input(file_path)),
    )
    snapshot_id = commit_delete_file(
        table,
        args.branch,
        data_file,
        {"added-position-delete-files": "1", "added-position-deletes": str(deletes.num_rows)},
    )
    print(json.dumps({"snapshot_id": snapshot_id, "file": file_path, "positions": deletes.num_rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
