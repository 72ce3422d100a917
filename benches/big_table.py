"""The million-file table benchmark's driver (benches/big_table calls it): builds (or
reuses) `bench.big` with eqdv-bench's `build-big` (one data manifest per day, data files
real only in the days the equality deletes touch), then times, for each binary side by
side: `eqdv plan` (the planner's load and plan), `eqdv convert --dry-run` of the whole
table, and `eqdv convert --dry-run` of one shard of a plan with one partition per shard
(a converter's fixed cost: load, read and plan, with a shard's resolve on top), on two
tables of the same size: "clustered" (one append a day: each data manifest holds one
partition) and "spread" (every append writes into every day: each manifest spans every
partition, and summaries rule out nothing). Each run
is its own process measured with wait4 (bench.measure). The warehouse is on local disk:
what this measures is the metadata's cost, in CPU and memory, not S3's round trips.

Usage: big_table.py --bench-bin PATH --bin NAME=PATH [--bin NAME=PATH ...] --data DIR
                    --out RESULTS.json [--reps N] [--days N --files-per-day N ...]
"""

import argparse
import json
import os
import shutil
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import subprocess  # noqa: E402

from bench import log, machine, measure, run_json, spec_hash  # noqa: E402

# Bump when build-big changes what it writes: a cached table is rebuilt.
BUILDER_VERSION = 3
TABLE = "bench.big"


def ensure_table(args, layout):
    key = dict(layout, builder=BUILDER_VERSION)
    warehouse = os.path.join(args.data, f"big-{spec_hash(key)}")
    done = os.path.join(warehouse, "big.done")
    if os.path.exists(done):
        log(f"reusing {warehouse}")
        with open(os.path.join(warehouse, "big.json")) as f:
            return warehouse, json.load(f)
    if os.path.exists(warehouse):
        shutil.rmtree(warehouse)
    os.makedirs(warehouse)
    log(f"building {TABLE}: {layout}")
    built = run_json([args.bench_bin, "build-big", "--warehouse", warehouse,
                      "--days", str(layout["days"]), "--files-per-day", str(layout["files_per_day"]),
                      "--rows-per-file", str(layout["rows_per_file"]),
                      "--touched-days", str(layout["touched_days"]),
                      "--keys-per-day", str(layout["keys_per_day"]),
                      *([] if layout["clustered"] else ["--spread"])])
    open(done, "w").close()
    log(f"built in {built['build_s']:.0f} s")
    return warehouse, built


def tree_bytes(path, suffix):
    total = 0
    for root, _, files in os.walk(path):
        total += sum(os.path.getsize(os.path.join(root, f)) for f in files if f.endswith(suffix))
    return total


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bench-bin", required=True)
    parser.add_argument("--bin", action="append", required=True, help="NAME=PATH, in run order")
    parser.add_argument("--bin-info", default="{}")
    parser.add_argument("--data", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--days", type=int, default=1000)
    parser.add_argument("--files-per-day", type=int, default=1000)
    parser.add_argument("--rows-per-file", type=int, default=100)
    parser.add_argument("--touched-days", type=int, default=4)
    parser.add_argument("--keys-per-day", type=int, default=200)
    args = parser.parse_args()
    binaries = [tuple(b.split("=", 1)) for b in args.bin]
    os.makedirs(args.data, exist_ok=True)
    results = {"machine": machine(), "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
               "binaries": json.loads(args.bin_info), "tables": {},
               "storage": "local disk (SQLite catalog), files in the page cache", "runs": []}
    # Clustered: one manifest a day. Spread: every manifest spans every day.
    for name, clustered in (("clustered", True), ("spread", False)):
        layout = dict(days=args.days, files_per_day=args.files_per_day if clustered else args.days,
                      rows_per_file=args.rows_per_file, touched_days=args.touched_days,
                      keys_per_day=args.keys_per_day, clustered=clustered)
        warehouse, built = ensure_table(args, layout)
        built["manifest_bytes"] = tree_bytes(warehouse, ".avro")
        results["tables"][name] = built
        run_layout(args, binaries, name, warehouse, results)
    results["machine"]["loadavg_end"] = os.getloadavg()
    with open(args.out, "w") as f:
        json.dump(results, f, indent=1)
    log(f"done -> {args.out}")


def run_layout(args, binaries, layout, warehouse, results):
    common = ["--warehouse", warehouse, "--table", TABLE, "--json"]

    # One partition a shard: a converter's shard is then one day of the table.
    plans = {}
    for name, path in binaries:
        plan_file = os.path.join(warehouse, f"plan-{name}.json")
        proc = subprocess.run([path, "plan", *common, "--target-shard-bytes", "1", "--output", plan_file],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise SystemExit(f"{name}: eqdv plan failed:\n{proc.stderr[-3000:]}")
        with open(plan_file) as f:
            plans[name] = (plan_file, json.load(f)["shards"][0]["id"])

    for rep in range(args.reps):
        for name, path in binaries:
            plan_file, shard_id = plans[name]
            for kind, cmd in (
                ("plan", [path, "plan", *common]),
                ("convert", [path, "convert", *common, "--dry-run"]),
                ("shard", [path, "convert", *common, "--dry-run", "--plan", plan_file,
                           "--shard-id", shard_id]),
            ):
                run = measure(cmd, f"{layout}: {name} {kind} #{rep + 1}", timeout=900)
                run.update(layout=layout, binary=name, kind=kind, rep=rep)
                results["runs"].append(run)
                with open(args.out, "w") as f:
                    json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
