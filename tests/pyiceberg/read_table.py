#!/usr/bin/env python3
"""The independent reader that judges eqdv's conversions: reads a table with PyIceberg.

    read_table.py --warehouse DIR --table NS.NAME [--branch main] [--allow-equality-deletes]

Opens the table in the SQLite catalog `DIR/catalog.db` (catalog name `eqdv`, the one
eqdv's `SqliteCatalog::open_warehouse` uses), reads the head snapshot of the branch
with PyIceberg and prints one JSON object on stdout:

    {"rows": [...], "equality_delete_files": N, "dv_count": N, "position_delete_files": N,
     "data_files": N, "snapshot_id": ID or null, "format_version": 2 or 3}

`rows` are the live rows in canonical form (below), sorted, in the table's current
schema (PyIceberg's own snapshot scan would use the snapshot's schema). The counts are
the live entries (ADDED or EXISTING) of the snapshot's manifests: `dv_count` counts
position delete entries in Puffin files (one per DV), `position_delete_files` the other
(v2: Parquet/Avro/ORC) position delete files.

How PyIceberg 0.12.0 treats deletes (observed on tables written by PyIceberg and by
eqdv; pinned by tests/pyiceberg_smoke.rs and tests/conversion.rs):

* Equality deletes: refused, never silently ignored. Planning a scan of a snapshot
  with a live equality delete file raises `ValueError: PyIceberg does not yet support
  equality deletes` (`to_arrow`, `count`, `plan_files`, filtered scans alike). This
  script does not rely on that: it counts equality deletes from the manifests first
  and exits with status 3 and a message naming them, so a test cannot pass by reading
  a table whose equality deletes were never applied. With `--allow-equality-deletes`
  it prints only the counts (no `rows` key) and exits 0.
* Deletion vectors: applied, leniently. PyIceberg reads manifests with its v2 read
  schema, so it never sees a DV entry's referenced_data_file, content_offset or
  content_size_in_bytes: it files the DV under its partition (or under a data file
  when the entry has equal lower/upper bounds on file_path), reads the whole Puffin
  file and applies every blob whose `referenced-data-file` property names the data
  file, including (by its code) blobs of the same Puffin file whose entries are no
  longer live. It checks neither length prefix, magic, CRC nor cardinality. So this script reads the
  manifests itself with the v3 schema and, being the judge, checks every live DV
  before reading (`check_dvs`, exit status 4 on a violation): at most one DV per data
  file; the referenced data file is live, with a data sequence number <= the DV's and
  the same spec and partition; the Puffin magic and footer; a `deletion-vector-v1`
  blob at exactly content_offset/content_size_in_bytes with fields [2147483645],
  snapshot-id and sequence-number -1, no compression, `referenced-data-file` and
  `cardinality` properties matching the entry; length prefix, magic, CRC-32; a
  well-formed portable 64-bit Roaring bitmap (parsed here, and by pyroaring) with keys
  <= 2^31 - 2, cardinality == record_count and every position < the data file's
  record_count. Without v2 position deletes, the number of rows PyIceberg returns must
  equal the data files' record counts minus the DVs' cardinalities (which catches a
  stale blob applied or a DV ignored).
* v2 position deletes: applied by PyIceberg.
* PyIceberg 0.12 cannot write v3 metadata (`NotImplementedError: Writing V3 is not
  yet supported`), so `create_table(..., properties={"format-version": "3"})` fails;
  it reads v3 tables. `Table.inspect.files()`/`delete_files()` fail on tables with a
  uuid column (`ArrowNotImplementedError: extension`), another reason to read the
  manifests here.

Canonical row form (must match eqdv::read::canonical_rows exactly): each row is a JSON
array of values in current-schema field order: null -> null; boolean -> true/false;
int/long -> number; float/double -> number as Rust's serde_json prints it (shortest
round-trip digits; plain notation for decimal exponents -5..=15, with ".0" for whole
numbers, else `1e+16` / `1.5e-7`), NaN/infinities -> "NaN"/"Infinity"/"-Infinity";
string -> string; binary/fixed -> lowercase hex string; uuid -> lowercase hyphenated
string; decimal(p, s) -> string with exactly s fractional digits ("12.50", "-0.07");
date -> days since epoch; time -> microseconds since midnight; timestamp/timestamptz ->
microseconds since epoch; timestamp_ns/timestamptz_ns -> nanoseconds since epoch.
Rows are compact JSON (`json.dumps(row, separators=(",", ":"), ensure_ascii=False)`
for everything but floats, whose text Python would print differently, e.g. `1e-05`),
sorted by that string. Nested types have no canonical form (exit 1).

Exit status: 0 ok, 1 error (message on stderr), 2 usage, 3 live equality deletes,
4 an invalid deletion vector.
"""

from __future__ import annotations

import argparse
import os
import decimal
import json
import math
import struct
import sys
import uuid
import zlib
from dataclasses import dataclass, field
from collections.abc import Mapping
from typing import Any

import pyarrow as pa
from pyiceberg.avro.file import AvroFile
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.expressions import AlwaysTrue
from pyiceberg.io.pyarrow import ArrowScan
from pyiceberg.manifest import (
    DATA_FILE_TYPE,
    MANIFEST_ENTRY_SCHEMAS,
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    _inherit_from_manifest,
)
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IcebergType,
    IntegerType,
    LongType,
    StringType,
    TimestampNanoType,
    TimestampType,
    TimestamptzNanoType,
    TimestamptzType,
    TimeType,
    UUIDType,
)

EXIT_ERROR = 1
EXIT_EQUALITY_DELETES = 3
EXIT_INVALID_DV = 4

PUFFIN_MAGIC = b"PFA1"
DV_MAGIC = bytes([0xD1, 0xD3, 0x39, 0x64])
DV_BLOB_TYPE = "deletion-vector-v1"
POS_FIELD_ID = 2147483645
# Java's reader rejects bitmap keys above this (positions >= (2^31 - 1) * 2^32).
MAX_DV_KEY = 2**31 - 2
ROARING_SERIAL_COOKIE_NO_RUNS = 12346
ROARING_SERIAL_COOKIE = 12347
ROARING_NO_OFFSET_THRESHOLD = 4


class Failure(Exception):
    """A reason to exit non-zero, with the status to exit with."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


# ---------------------------------------------------------------------------------
# Canonical form


def float_text(value: float) -> str:
    """`value` as Rust's serde_json writes an f64 (NaN and infinities as JSON strings)."""
    if math.isnan(value):
        return '"NaN"'
    if math.isinf(value):
        return '"Infinity"' if value > 0 else '"-Infinity"'
    sign = "-" if math.copysign(1.0, value) < 0 else ""
    if value == 0:
        return f"{sign}0.0"
    # repr gives the shortest digits that round-trip, as serde_json's formatter does;
    # only the layout differs.
    _, digits_tuple, exponent = decimal.Decimal(repr(abs(value))).as_tuple()
    digits = "".join(map(str, digits_tuple)).rstrip("0")
    exponent += len(digits_tuple) - len(digits)
    assert isinstance(exponent, int)
    sci = len(digits) - 1 + exponent  # value = d.ddd * 10^sci
    if -5 <= sci <= 15:
        if exponent >= 0:
            return f"{sign}{digits}{'0' * exponent}.0"
        if sci < 0:
            return f"{sign}0.{'0' * (-sci - 1)}{digits}"
        return f"{sign}{digits[: sci + 1]}.{digits[sci + 1 :]}"
    mantissa = digits[0] + (f".{digits[1:]}" if len(digits) > 1 else "")
    return f"{sign}{mantissa}e{'+' if sci > 0 else '-'}{abs(sci)}"


def decimal_text(value: decimal.Decimal, scale: int) -> str:
    """`value` with exactly `scale` fractional digits."""
    sign, digits_tuple, exponent = value.as_tuple()
    assert isinstance(exponent, int)
    unscaled = int("".join(map(str, digits_tuple)) or "0")
    shift = exponent + scale
    if shift >= 0:
        unscaled *= 10**shift
    else:
        unscaled, rest = divmod(unscaled, 10 ** (-shift))
        if rest:
            raise Failure(EXIT_ERROR, f"decimal {value} has more than {scale} fractional digits")
    digits = str(unscaled)
    text_sign = "-" if sign and unscaled else ""
    if scale == 0:
        return f"{text_sign}{digits}"
    digits = digits.rjust(scale + 1, "0")
    return f"{text_sign}{digits[:-scale]}.{digits[-scale:]}"


def _int_column(column: pa.ChunkedArray, target: pa.DataType) -> list[Any]:
    return column.cast(target).to_pylist()


def _timestamp_column(column: pa.ChunkedArray, nanos: bool) -> list[Any]:
    if not pa.types.is_timestamp(column.type):
        raise Failure(EXIT_ERROR, f"expected an Arrow timestamp, got {column.type}")
    per_second = {"s": 1, "ms": 10**3, "us": 10**6, "ns": 10**9}[column.type.unit]
    want = 10**9 if nanos else 10**6
    values = column.cast(pa.timestamp(column.type.unit)).cast(pa.int64()).to_pylist()
    if per_second <= want:
        return [None if v is None else v * (want // per_second) for v in values]
    return [None if v is None else v // (per_second // want) for v in values]


def _time_column(column: pa.ChunkedArray) -> list[Any]:
    unit = column.type.unit
    per_second = {"s": 1, "ms": 10**3, "us": 10**6, "ns": 10**9}[unit]
    values = column.cast(pa.int64() if pa.types.is_time64(column.type) else pa.int32()).to_pylist()
    if per_second <= 10**6:
        return [None if v is None else v * (10**6 // per_second) for v in values]
    return [None if v is None else v // (per_second // 10**6) for v in values]


def canonical_cells(column: pa.ChunkedArray, iceberg_type: IcebergType, name: str) -> list[str]:
    """The canonical JSON text of every value of `column` (an Iceberg column of `iceberg_type`)."""

    def each(values: list[Any], encode: Any) -> list[str]:
        return ["null" if v is None else encode(v) for v in values]

    def json_string(s: str) -> str:
        return json.dumps(s, ensure_ascii=False)

    if isinstance(iceberg_type, BooleanType):
        return each(column.to_pylist(), lambda v: "true" if v else "false")
    if isinstance(iceberg_type, (IntegerType, LongType)):
        return each(_int_column(column, pa.int64()), str)
    if isinstance(iceberg_type, (FloatType, DoubleType)):
        return each(column.cast(pa.float64()).to_pylist(), float_text)
    if isinstance(iceberg_type, StringType):
        return each(column.to_pylist(), json_string)
    if isinstance(iceberg_type, (BinaryType, FixedType)):
        return each(column.to_pylist(), lambda v: f'"{bytes(v).hex()}"')
    if isinstance(iceberg_type, UUIDType):

        def uuid_text(v: Any) -> str:
            u = v if isinstance(v, uuid.UUID) else uuid.UUID(bytes=bytes(v))
            return f'"{u}"'

        return each(column.to_pylist(), uuid_text)
    if isinstance(iceberg_type, DecimalType):
        scale = iceberg_type.scale
        return each(column.to_pylist(), lambda v: f'"{decimal_text(v, scale)}"')
    if isinstance(iceberg_type, DateType):
        return each(_int_column(column, pa.int32()), str)
    if isinstance(iceberg_type, TimeType):
        return each(_time_column(column), str)
    if isinstance(iceberg_type, (TimestampType, TimestamptzType)):
        return each(_timestamp_column(column, nanos=False), str)
    if isinstance(iceberg_type, (TimestampNanoType, TimestamptzNanoType)):
        return each(_timestamp_column(column, nanos=True), str)
    raise Failure(EXIT_ERROR, f"column {name!r} has type {iceberg_type}, which has no canonical form")


def canonical_rows(table: pa.Table, schema: Any) -> list[str]:
    """Rows of `table` (columns in `schema`'s field order) in canonical form, sorted."""
    fields = schema.fields
    if table.num_columns != len(fields):
        raise Failure(EXIT_ERROR, f"scan returned {table.num_columns} columns for {len(fields)} schema fields")
    columns = [canonical_cells(table.column(i), f.field_type, f.name) for i, f in enumerate(fields)]
    rows = ["[" + ",".join(cells) + "]" for cells in zip(*columns, strict=True)] if columns else []
    if not columns:
        rows = ["[]"] * table.num_rows
    return sorted(rows)


# ---------------------------------------------------------------------------------
# Live files of a snapshot


# PyIceberg 0.12 reads manifests with its v2 read schema, which drops the v3 fields a DV
# entry is defined by (referenced_data_file, content_offset, content_size_in_bytes), so
# entries are read here with the v3 schema (a v2 manifest reads them as null).
_V3_FIELDS = {f.name: i for i, f in enumerate(DATA_FILE_TYPE[3].fields)}


def read_manifest_entries(io: Any, manifest: ManifestFile) -> list[ManifestEntry]:
    """The live (ADDED or EXISTING) entries of `manifest`, with inherited values."""
    with AvroFile[ManifestEntry](
        io.new_input(manifest.manifest_path),
        MANIFEST_ENTRY_SCHEMAS[3],
        read_types={-1: ManifestEntry, 2: DataFile},
        read_enums={0: ManifestEntryStatus, 101: FileFormat, 134: DataFileContent},
    ) as reader:
        return [_inherit_from_manifest(entry, manifest) for entry in reader if entry.status != ManifestEntryStatus.DELETED]


@dataclass
class Live:
    entry: ManifestEntry
    manifest: str
    spec_id: int

    @property
    def file(self) -> DataFile:
        return self.entry.data_file

    @property
    def path(self) -> str:
        return self.entry.data_file.file_path

    @property
    def seq(self) -> int:
        return self.entry.sequence_number if self.entry.sequence_number is not None else 0

    def v3(self, name: str) -> Any:
        """A v3 data_file field (referenced_data_file, content_offset, ...)."""
        return self.entry.data_file._data[_V3_FIELDS[name]]  # noqa: SLF001


@dataclass
class SnapshotFiles:
    data: dict[str, Live] = field(default_factory=dict)
    equality_deletes: list[Live] = field(default_factory=list)
    dvs: list[Live] = field(default_factory=list)
    position_deletes: list[Live] = field(default_factory=list)


def snapshot_files(table: Any, snapshot: Any) -> SnapshotFiles:
    files = SnapshotFiles()
    if snapshot is None:
        return files
    for manifest in snapshot.manifests(table.io):
        for entry in read_manifest_entries(table.io, manifest):
            live = Live(entry, manifest.manifest_path, manifest.partition_spec_id)
            content = entry.data_file.content
            if content == DataFileContent.DATA:
                if live.path in files.data:
                    raise Failure(EXIT_ERROR, f"data file {live.path} is live twice in the snapshot")
                files.data[live.path] = live
            elif content == DataFileContent.EQUALITY_DELETES:
                files.equality_deletes.append(live)
            elif content == DataFileContent.POSITION_DELETES:
                if entry.data_file.file_format == FileFormat.PUFFIN:
                    files.dvs.append(live)
                else:
                    files.position_deletes.append(live)
            else:
                raise Failure(EXIT_ERROR, f"unknown content {content} of {live.path} in {manifest.manifest_path}")
    return files


# ---------------------------------------------------------------------------------
# Deletion vector checks (independent of PyIceberg's lenient DV reader)


def parse_roaring32(buf: bytes, start: int, where: str) -> tuple[int, int, int]:
    """Parses one 32-bit Roaring bitmap in the portable format at `buf[start:]`.

    Returns (length in bytes, cardinality, largest value or -1).
    """

    def need(pos: int, n: int) -> None:
        if pos + n > len(buf):
            raise Failure(EXIT_INVALID_DV, f"{where}: Roaring bitmap truncated")

    pos = start
    need(pos, 4)
    (cookie,) = struct.unpack_from("<I", buf, pos)
    pos += 4
    run_flags = b""
    if cookie & 0xFFFF == ROARING_SERIAL_COOKIE:
        size = (cookie >> 16) + 1
        need(pos, (size + 7) // 8)
        run_flags = buf[pos : pos + (size + 7) // 8]
        pos += (size + 7) // 8
        has_offsets = size >= ROARING_NO_OFFSET_THRESHOLD
    elif cookie == ROARING_SERIAL_COOKIE_NO_RUNS:
        need(pos, 4)
        (size,) = struct.unpack_from("<I", buf, pos)
        pos += 4
        has_offsets = True
    else:
        raise Failure(EXIT_INVALID_DV, f"{where}: bad Roaring cookie {cookie:#x}")
    if size > 65536:
        raise Failure(EXIT_INVALID_DV, f"{where}: {size} Roaring containers")
    need(pos, 4 * size)
    headers = [struct.unpack_from("<HH", buf, pos + 4 * i) for i in range(size)]
    pos += 4 * size
    if has_offsets:
        need(pos, 4 * size)
        pos += 4 * size
    cardinality = 0
    largest = -1
    last_key = -1
    for i, (key, card_minus_one) in enumerate(headers):
        if key <= last_key:
            raise Failure(EXIT_INVALID_DV, f"{where}: Roaring container keys not ascending")
        last_key = key
        is_run = bool(run_flags) and bool(run_flags[i // 8] & (1 << (i % 8)))
        if is_run:
            need(pos, 2)
            (runs,) = struct.unpack_from("<H", buf, pos)
            pos += 2
            need(pos, 4 * runs)
            count = 0
            prev_end = -1
            high = -1
            for r in range(runs):
                run_start, length = struct.unpack_from("<HH", buf, pos + 4 * r)
                if run_start <= prev_end or run_start + length > 0xFFFF:
                    raise Failure(EXIT_INVALID_DV, f"{where}: Roaring runs overlap or overflow")
                prev_end = run_start + length
                count += length + 1
                high = prev_end
            pos += 4 * runs
        elif card_minus_one + 1 <= 4096:
            n = card_minus_one + 1
            need(pos, 2 * n)
            values = struct.unpack_from(f"<{n}H", buf, pos)
            if any(b <= a for a, b in zip(values, values[1:], strict=False)):
                raise Failure(EXIT_INVALID_DV, f"{where}: Roaring array container not strictly ascending")
            count = n
            high = values[-1]
            pos += 2 * n
        else:
            need(pos, 8192)
            bits = int.from_bytes(buf[pos : pos + 8192], "little")
            count = bits.bit_count()
            high = bits.bit_length() - 1
            pos += 8192
        if count != card_minus_one + 1:
            raise Failure(
                EXIT_INVALID_DV,
                f"{where}: Roaring container header says {card_minus_one + 1} values, holds {count}",
            )
        cardinality += count
        largest = (key << 16) | high
    return pos - start, cardinality, largest


def parse_dv_blob(blob: bytes, where: str) -> tuple[int, int]:
    """Checks a `deletion-vector-v1` blob; returns (cardinality, largest position or -1)."""
    if len(blob) < 20:
        raise Failure(EXIT_INVALID_DV, f"{where}: blob of {len(blob)} bytes is too short")
    (length,) = struct.unpack_from(">I", blob, 0)
    if length != len(blob) - 8:
        raise Failure(
            EXIT_INVALID_DV,
            f"{where}: length prefix {length} != content_size_in_bytes - 8 = {len(blob) - 8}",
        )
    if blob[4:8] != DV_MAGIC:
        raise Failure(EXIT_INVALID_DV, f"{where}: bad DV magic {blob[4:8].hex()}")
    (crc,) = struct.unpack_from(">I", blob, len(blob) - 4)
    actual_crc = zlib.crc32(blob[4 : len(blob) - 4]) & 0xFFFFFFFF
    if crc != actual_crc:
        raise Failure(EXIT_INVALID_DV, f"{where}: CRC {crc:#010x} != computed {actual_crc:#010x}")
    vector = blob[8 : len(blob) - 4]
    (bitmaps,) = struct.unpack_from("<Q", vector, 0)
    pos = 8
    cardinality = 0
    largest = -1
    last_key = -1
    try:
        from pyroaring import BitMap
    except ImportError:  # pragma: no cover - pyroaring comes with pyiceberg's pyarrow extra
        BitMap = None  # noqa: N806
    for _ in range(bitmaps):
        if pos + 4 > len(vector):
            raise Failure(EXIT_INVALID_DV, f"{where}: vector truncated")
        (key,) = struct.unpack_from("<I", vector, pos)
        pos += 4
        if key <= last_key:
            raise Failure(EXIT_INVALID_DV, f"{where}: bitmap keys not ascending ({last_key}, {key})")
        if key > MAX_DV_KEY:
            raise Failure(EXIT_INVALID_DV, f"{where}: bitmap key {key} > {MAX_DV_KEY} (Java readers reject it)")
        last_key = key
        size, count, high = parse_roaring32(vector, pos, where)
        if BitMap is not None:
            bm = BitMap.deserialize(vector[pos : pos + size])
            if len(bm) != count or (count and bm.max() != high):
                raise Failure(EXIT_INVALID_DV, f"{where}: pyroaring reads the bitmap of key {key} differently")
        pos += size
        cardinality += count
        if count:
            largest = (key << 32) | high
    if pos != len(vector):
        raise Failure(EXIT_INVALID_DV, f"{where}: {len(vector) - pos} bytes after the last bitmap")
    return cardinality, largest


def puffin_footer(data: bytes, where: str) -> dict[str, Any]:
    if len(data) < 4 + 12 + 4 or data[:4] != PUFFIN_MAGIC or data[-4:] != PUFFIN_MAGIC:
        raise Failure(EXIT_INVALID_DV, f"{where}: not a Puffin file (magic)")
    (payload_size,) = struct.unpack_from("<I", data, len(data) - 12)
    flags = data[-8:-4]
    if flags != b"\0\0\0\0":
        raise Failure(EXIT_INVALID_DV, f"{where}: footer flags {flags.hex()} (compressed footer)")
    footer_start = len(data) - 12 - payload_size - 4
    if footer_start < 4 or data[footer_start : footer_start + 4] != PUFFIN_MAGIC:
        raise Failure(EXIT_INVALID_DV, f"{where}: footer magic missing")
    try:
        footer = json.loads(data[footer_start + 4 : len(data) - 12].decode("utf-8"))
    except ValueError as e:
        raise Failure(EXIT_INVALID_DV, f"{where}: footer is not JSON: {e}") from e
    blobs = footer.get("blobs")
    if not isinstance(blobs, list):
        raise Failure(EXIT_INVALID_DV, f"{where}: footer has no blobs list")
    for blob in blobs:
        if blob["offset"] < 4 or blob["offset"] + blob["length"] > footer_start:
            raise Failure(EXIT_INVALID_DV, f"{where}: blob at {blob['offset']}+{blob['length']} outside the blob area")
    footer["_footer_start"] = footer_start
    return footer


def check_dvs(table: Any, files: SnapshotFiles) -> int:
    """Checks every live DV; returns the sum of their cardinalities."""
    by_data_file: dict[str, Live] = {}
    puffins: dict[str, tuple[bytes, dict[str, Any]]] = {}
    total = 0
    for dv in files.dvs:
        f = dv.file
        ref = dv.v3("referenced_data_file")
        offset = dv.v3("content_offset")
        size = dv.v3("content_size_in_bytes")
        where = f"DV {f.file_path}@{offset} for {ref}"
        if not ref:
            raise Failure(EXIT_INVALID_DV, f"{where}: no referenced_data_file")
        if ref in by_data_file:
            raise Failure(EXIT_INVALID_DV, f"{where}: a second live DV for the data file (one in {by_data_file[ref].manifest})")
        by_data_file[ref] = dv
        data = files.data.get(ref)
        if data is None:
            raise Failure(EXIT_INVALID_DV, f"{where}: the referenced data file is not live in the snapshot (a dangling DV)")
        if data.seq > dv.seq:
            raise Failure(EXIT_INVALID_DV, f"{where}: data sequence number {dv.seq} < the data file's {data.seq}")
        if dv.spec_id != data.spec_id or f.partition != data.file.partition:
            raise Failure(
                EXIT_INVALID_DV,
                f"{where}: spec/partition {dv.spec_id}/{f.partition} != the data file's {data.spec_id}/{data.file.partition}",
            )
        if offset is None or size is None:
            raise Failure(EXIT_INVALID_DV, f"{where}: content_offset/content_size_in_bytes missing")
        if f.file_path not in puffins:
            with table.io.new_input(f.file_path).open() as stream:
                content = stream.read()
            puffins[f.file_path] = (content, puffin_footer(content, f.file_path))
        content, footer = puffins[f.file_path]
        if len(content) != f.file_size_in_bytes:
            raise Failure(EXIT_INVALID_DV, f"{where}: file_size_in_bytes {f.file_size_in_bytes} != actual {len(content)}")
        blob_meta = [b for b in footer["blobs"] if b["offset"] == offset]
        if len(blob_meta) != 1 or blob_meta[0]["length"] != size:
            raise Failure(EXIT_INVALID_DV, f"{where}: no footer blob at offset {offset} of length {size}")
        meta = blob_meta[0]
        props = meta.get("properties") or {}
        problems = []
        if meta.get("type") != DV_BLOB_TYPE:
            problems.append(f"type {meta.get('type')!r}")
        if meta.get("fields") != [POS_FIELD_ID]:
            problems.append(f"fields {meta.get('fields')}")
        if meta.get("snapshot-id") != -1 or meta.get("sequence-number") != -1:
            problems.append(f"snapshot-id/sequence-number {meta.get('snapshot-id')}/{meta.get('sequence-number')} (must be -1)")
        if meta.get("compression-codec") is not None:
            problems.append(f"compression-codec {meta.get('compression-codec')!r}")
        if props.get("referenced-data-file") != ref:
            problems.append(f"referenced-data-file property {props.get('referenced-data-file')!r}")
        if props.get("cardinality") != str(f.record_count):
            problems.append(f"cardinality property {props.get('cardinality')!r} != record_count {f.record_count}")
        if problems:
            raise Failure(EXIT_INVALID_DV, f"{where}: blob metadata: " + "; ".join(problems))
        blob = content[offset : offset + size]
        cardinality, largest = parse_dv_blob(blob, where)
        if cardinality != f.record_count or cardinality == 0:
            raise Failure(EXIT_INVALID_DV, f"{where}: bitmap holds {cardinality} positions, record_count {f.record_count}")
        if largest >= data.file.record_count:
            raise Failure(EXIT_INVALID_DV, f"{where}: position {largest} >= the data file's {data.file.record_count} rows")
        total += cardinality
    return total


# ---------------------------------------------------------------------------------


class TableBucket:
    """An Amazon S3 Tables table bucket (EQDV_S3TABLES_BUCKET_ARN) as a read-only catalog
    of one-level namespaces. PyIceberg 0.12 has no S3 Tables catalog of its own (its Glue
    catalog reaches S3 Tables only through a Glue federation the test services lack), so
    S3 Tables' GetTableMetadataLocation, through boto3 (API at AWS_ENDPOINT_URL_S3TABLES
    when set), names the table's current metadata file, and PyIceberg opens the table
    from there with its own S3 FileIO."""

    def __init__(self, env: Mapping[str, str], region: str, io: dict[str, str]) -> None:
        import boto3

        self.arn = env.get("EQDV_S3TABLES_BUCKET_ARN", "")
        if not self.arn:
            raise Failure(EXIT_ERROR, "--catalog s3tables needs EQDV_S3TABLES_BUCKET_ARN (the table bucket's ARN)")
        self.client = boto3.client(
            "s3tables", region_name=region, endpoint_url=env.get("AWS_ENDPOINT_URL_S3TABLES") or None
        )
        self.io = io

    def load_table(self, identifier: str) -> Any:
        from pyiceberg.table import StaticTable

        parts = identifier.split(".")
        if len(parts) != 2:
            raise Failure(EXIT_ERROR, f"--table {identifier}: S3 Tables names a table NAMESPACE.TABLE (one level)")
        try:
            pointer = self.client.get_table_metadata_location(
                tableBucketARN=self.arn, namespace=parts[0], name=parts[1]
            )
        except self.client.exceptions.NotFoundException as e:
            raise NoSuchTableError(f"{identifier} is not in table bucket {self.arn}") from e
        if not pointer.get("metadataLocation"):
            # Created in S3 Tables, never committed by an Iceberg writer: no table yet.
            raise NoSuchTableError(f"{identifier} in table bucket {self.arn} has no metadata yet")
        return StaticTable.from_metadata(pointer["metadataLocation"], properties=self.io)


def open_catalog(args: argparse.Namespace) -> Any:
    """The SQLite catalog of a warehouse directory, or Glue (or the REST catalog at
    EQDV_REST_URI, or the S3 Tables table bucket EQDV_S3TABLES_BUCKET_ARN) + S3 from the
    AWS_* environment (the test services: AWS_ENDPOINT_URL_GLUE, AWS_ENDPOINT_URL_S3,
    credentials, region)."""
    if args.catalog == "sqlite":
        if not args.warehouse:
            raise Failure(EXIT_ERROR, "--warehouse DIR is required with --catalog sqlite")
        return SqlCatalog("eqdv", uri=f"sqlite:///{args.warehouse}/catalog.db", warehouse=f"file://{args.warehouse}")
    env = os.environ
    region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or "us-east-1"
    props = {
        "glue.region": region,
        "s3.region": region,
        "s3.force-virtual-addressing": "false",
    }
    if args.catalog == "rest":
        # The Iceberg REST catalog at EQDV_REST_URI, through PyIceberg's REST client; the
        # table files on S3 from the AWS_* environment.
        from pyiceberg.catalog.rest import RestCatalog

        if not env.get("EQDV_REST_URI"):
            raise Failure(EXIT_ERROR, "--catalog rest needs EQDV_REST_URI")
        rest = {"uri": env["EQDV_REST_URI"], "s3.region": region, "s3.force-virtual-addressing": "false"}
        for key, var in [
            ("s3.endpoint", "AWS_ENDPOINT_URL_S3"),
            ("s3.access-key-id", "AWS_ACCESS_KEY_ID"),
            ("s3.secret-access-key", "AWS_SECRET_ACCESS_KEY"),
        ]:
            if env.get(var):
                rest[key] = env[var]
        return RestCatalog("rest", **rest)
    if args.catalog == "s3tables":
        io = {"s3.region": region, "s3.force-virtual-addressing": "false"}
        for key, var in [
            ("s3.endpoint", "AWS_ENDPOINT_URL_S3"),
            ("s3.access-key-id", "AWS_ACCESS_KEY_ID"),
            ("s3.secret-access-key", "AWS_SECRET_ACCESS_KEY"),
            ("s3.session-token", "AWS_SESSION_TOKEN"),
        ]:
            if env.get(var):
                io[key] = env[var]
        return TableBucket(env, region, io)
    from pyiceberg.catalog.glue import GlueCatalog

    for key, var in [
        ("glue.endpoint", "AWS_ENDPOINT_URL_GLUE"),
        ("s3.endpoint", "AWS_ENDPOINT_URL_S3"),
        ("glue.access-key-id", "AWS_ACCESS_KEY_ID"),
        ("glue.secret-access-key", "AWS_SECRET_ACCESS_KEY"),
        ("s3.access-key-id", "AWS_ACCESS_KEY_ID"),
        ("s3.secret-access-key", "AWS_SECRET_ACCESS_KEY"),
    ]:
        if env.get(var):
            props[key] = env[var]
    return GlueCatalog("glue", **props)


def read(args: argparse.Namespace) -> dict[str, Any]:
    catalog = open_catalog(args)
    try:
        table = catalog.load_table(args.table)
    except NoSuchTableError as e:
        raise Failure(EXIT_ERROR, f"no table {args.table} in the {args.catalog} catalog: {e}") from e
    metadata = table.metadata
    snapshot = metadata.snapshot_by_name(args.branch)
    if snapshot is None and (args.branch != "main" or metadata.current_snapshot_id is not None):
        raise Failure(EXIT_ERROR, f"table {args.table} has no branch {args.branch!r}")
    files = snapshot_files(table, snapshot)
    result: dict[str, Any] = {
        "equality_delete_files": len(files.equality_deletes),
        "dv_count": len(files.dvs),
        "position_delete_files": len(files.position_deletes),
        "data_files": len(files.data),
        "snapshot_id": snapshot.snapshot_id if snapshot else None,
        "format_version": metadata.format_version,
    }
    if files.equality_deletes:
        if args.allow_equality_deletes:
            return result
        shown = ", ".join(e.path for e in files.equality_deletes[:3])
        more = f" and {len(files.equality_deletes) - 3} more" if len(files.equality_deletes) > 3 else ""
        raise Failure(
            EXIT_EQUALITY_DELETES,
            f"snapshot {snapshot.snapshot_id} of {args.table} ({args.branch}) still has "
            f"{len(files.equality_deletes)} live equality delete file(s): {shown}{more}. PyIceberg cannot apply "
            "equality deletes, so its rows would be wrong (pass --allow-equality-deletes for the counts only)",
        )
    dv_deleted = check_dvs(table, files)

    schema = table.schema()  # the current schema, whatever schema the snapshot was written with
    if snapshot is None:
        rows: list[str] = []
    else:
        tasks = list(table.scan(snapshot_id=snapshot.snapshot_id).plan_files())
        arrow = ArrowScan(metadata, table.io, schema, AlwaysTrue()).to_table(tasks)
        rows = canonical_rows(arrow, schema)
        if not files.position_deletes:
            expected = sum(d.file.record_count for d in files.data.values()) - dv_deleted
            if len(rows) != expected:
                raise Failure(
                    EXIT_ERROR,
                    f"PyIceberg read {len(rows)} rows; the data files hold {expected + dv_deleted} and the DVs "
                    f"delete {dv_deleted}, so {expected} are live",
                )
    return {"rows": rows, **result}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Read an eqdv test table with PyIceberg; print canonical rows as JSON.")
    parser.add_argument("--catalog", choices=["sqlite", "glue", "rest", "s3tables"], default="sqlite")
    parser.add_argument("--warehouse", help="sqlite: the directory holding catalog.db and the tables")
    parser.add_argument("--table", required=True, help="NAMESPACE.TABLE")
    parser.add_argument("--branch", default="main")
    parser.add_argument(
        "--allow-equality-deletes",
        action="store_true",
        help="print only the counts (no rows) when live equality deletes remain, instead of failing",
    )
    args = parser.parse_args(argv)
    try:
        result = read(args)
    except Failure as e:
        print(f"read_table.py: {e}", file=sys.stderr)
        return e.status
    sys.stdout.reconfigure(encoding="utf-8")  # type: ignore[attr-defined]
    sys.stdout.write(json.dumps(result, ensure_ascii=False, separators=(",", ":")) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
