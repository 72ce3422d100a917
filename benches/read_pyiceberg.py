"""Reads one snapshot of a bench table with PyIceberg (all columns, streamed) and
prints {"rows", "sum_v"} as JSON; an unsupported snapshot prints {"error": ...}.

Usage: read_pyiceberg.py WAREHOUSE NS.TABLE SNAPSHOT_ID
"""

import json
import sys
import time

import pyarrow.compute as pc
from pyiceberg.catalog.sql import SqlCatalog


def main():
    warehouse, table_name, snapshot = sys.argv[1], sys.argv[2], int(sys.argv[3])
    started = time.monotonic()
    catalog = SqlCatalog(
        "eqdv", uri=f"sqlite:///{warehouse}/catalog.db", warehouse=f"file://{warehouse}"
    )
    table = catalog.load_table(table_name)
    rows = 0
    sum_v = 0
    try:
        reader = table.scan(snapshot_id=snapshot).to_arrow_batch_reader()
        for batch in reader:
            rows += batch.num_rows
            s = pc.sum(batch.column(batch.schema.get_field_index("v"))).as_py()
            sum_v += s or 0
    except Exception as e:  # an unsupported delete kind is a result, not a crash
        print(json.dumps({"error": f"{type(e).__name__}: {e}"[:300]}))
        return
    print(
        json.dumps(
            {
                "rows": rows,
                "sum_v": sum_v % (1 << 64),
                "inner_ms": (time.monotonic() - started) * 1000.0,
            }
        )
    )


if __name__ == "__main__":
    main()
