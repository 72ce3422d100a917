#!/usr/bin/env python3
"""Commits one equality delete file to an unpartitioned v2 table (a test fixture).

PyIceberg 0.12 cannot write equality deletes, so this builds one by hand with its
low-level APIs: a Parquet file with the key columns (field ids kept), a delete manifest
holding it, a manifest list that adds that manifest to the branch head's, and a
`delete` snapshot committed with compare-and-swap on the branch.

    add_equality_delete.py --warehouse DIR --table NS.NAME --keys '[{"id": 1}, ...]'

Each key object names the equality columns (by name, resolved to field ids in the
current schema); values use the JSON form of PyArrow's `from_pylist` (numbers,
strings, null). Prints `{"snapshot_id": ..., "file": ...}`.
"""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestWriterV2,
    write_manifest_list,
)
from pyiceberg.table.snapshots import Operation, Snapshot, Summary
from pyiceberg.table.update import AddSnapshotUpdate, AssertRefSnapshotId, SetSnapshotRefUpdate
from pyiceberg.typedef import Record


class _DeleteManifestWriterV2(ManifestWriterV2):
    def content(self) -> ManifestContent:
        return ManifestContent.DELETES

    @property
    def _meta(self) -> dict[str, str]:
        return {**super()._meta, "content": "deletes"}


def write_delete_parquet(table: Any, prefix: str, rows: pa.Table) -> str:
    """Writes `rows` as a Parquet file under the table's data/ and returns its location."""
    file_path = f"{table.metadata.location.rstrip('/')}/data/{prefix}-{uuid.uuid4()}.parquet"
    with table.io.new_output(file_path).create() as out:
        pq.write_table(rows, out)
    return file_path


def commit_delete_file(table: Any, branch: str, data_file: DataFile, summary: dict[str, str]) -> int:
    """Commits `data_file` (a delete file of the unpartitioned spec) to `branch` in a new
    `delete` snapshot, with compare-and-swap on the branch; returns the snapshot id."""
    metadata = table.metadata
    spec = table.spec()
    schema = table.schema()
    io = table.io
    location = metadata.location.rstrip("/")
    head = metadata.snapshot_by_name(branch)
    snapshot_id = int(uuid.uuid4().int & ((1 << 63) - 1))
    sequence_number = metadata.next_sequence_number()
    data_file.spec_id = spec.spec_id
    manifest_path = f"{location}/metadata/del-{uuid.uuid4()}-m0.avro"
    with _DeleteManifestWriterV2(spec, schema, io.new_output(manifest_path), snapshot_id, "deflate") as writer:
        writer.add_entry(
            ManifestEntry.from_args(
                status=ManifestEntryStatus.ADDED,
                snapshot_id=snapshot_id,
                sequence_number=None,
                file_sequence_number=None,
                data_file=data_file,
            )
        )
    manifest = writer.to_manifest_file()

    manifests = list(head.manifests(io)) if head else []
    list_path = f"{location}/metadata/snap-{snapshot_id}-0-{uuid.uuid4()}.avro"
    with write_manifest_list(
        2,
        io.new_output(list_path),
        snapshot_id,
        head.snapshot_id if head else None,
        sequence_number,
        "deflate",
    ) as list_writer:
        list_writer.add_manifests([manifest, *manifests])

    snapshot = Snapshot(
        snapshot_id=snapshot_id,
        parent_snapshot_id=head.snapshot_id if head else None,
        sequence_number=sequence_number,
        manifest_list=list_path,
        summary=Summary(operation=Operation.DELETE, **{"added-delete-files": "1", **summary}),
        schema_id=schema.schema_id,
    )
    table._do_commit(  # noqa: SLF001 (no public API commits a hand-built snapshot)
        updates=(
            AddSnapshotUpdate(snapshot=snapshot),
            SetSnapshotRefUpdate(ref_name=branch, type="branch", snapshot_id=snapshot_id),
        ),
        requirements=(AssertRefSnapshotId(ref=branch, snapshot_id=head.snapshot_id if head else None),),
    )
    return snapshot_id


def open_v2_unpartitioned(warehouse: str, name: str) -> Any:
    """The table, which must be a v2 unpartitioned table (what these fixtures can write to)."""
    catalog = SqlCatalog("eqdv", uri=f"sqlite:///{warehouse}/catalog.db", warehouse=f"file://{warehouse}")
    table = catalog.load_table(name)
    if table.metadata.format_version != 2:
        sys.exit(f"this fixture writes v2 metadata; {name} is v{table.metadata.format_version}")
    if not table.spec().is_unpartitioned():
        sys.exit("this fixture supports unpartitioned tables only")
    return table


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warehouse", required=True)
    parser.add_argument("--table", required=True)
    parser.add_argument("--keys", required=True, help="JSON list of objects, one per deleted key")
    parser.add_argument("--branch", default="main")
    args = parser.parse_args()

    keys = json.loads(args.keys)
    if not keys or not isinstance(keys, list):
        sys.exit("--keys must be a non-empty JSON list of objects")
    columns = list(keys[0].keys())

    table = open_v2_unpartitioned(args.warehouse, args.table)
    schema = table.schema()
    fields = [schema.find_field(c) for c in columns]
    arrow_schema = schema.select(*columns).as_arrow()
    rows = pa.Table.from_pylist(keys, schema=arrow_schema)

    file_path = write_delete_parquet(table, "eqdel", rows)
    data_file = DataFile.from_args(
        content=DataFileContent.EQUALITY_DELETES,
        file_path=file_path,
        file_format=FileFormat.PARQUET,
        partition=Record(),
        record_count=rows.num_rows,
        file_size_in_bytes=len(table.io.new_input(file_path)),
        equality_ids=[f.field_id for f in fields],
    )
    snapshot_id = commit_delete_file(
        table,
        args.branch,
        data_file,
        {"added-equality-delete-files": "1", "added-equality-deletes": str(rows.num_rows)},
    )
    print(json.dumps({"snapshot_id": snapshot_id, "file": file_path}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
