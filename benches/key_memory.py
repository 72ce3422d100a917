"""Memory per deleted key: eqdv's conversion of a table whose equality deletes hold N
long keys (100 that rows hold, the rest absent from the table, as CDC streams delete
keys never written), for N up to 30,000,000, each run its own process measured with
wait4 (peak RSS). Bytes per key are the growth of the peak over the run with the fewest
keys, divided by the keys added. A baseline binary (eqdv-bench built from an earlier
revision) runs the same scenarios in the same run.

Usage: key_memory.py --bin BIN --rev REV [--baseline-bin BIN --baseline-rev REV]
       [--profile dev|bench-fast] --data DIR --out RESULTS.json
       [--keys 1000,1000000,10000000,30000000] [--reps 3]
The report section: report_key_memory.py RESULTS.json --out BENCHMARKS.md
"""

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench  # noqa: E402  (measure, ensure_layout, drop_table, reset, machine)

# A tiny table: the keys, not the data, are what is measured.
LAYOUT = dict(files=10, rows_per_file=1000, key="long", buckets=0)
PRESENT = 100
# One pass for every binary: large enough that neither splits the keys.
ONE_PASS_MB = 16384
# The target: this many keys in one pass within this budget.
TARGET_KEYS, TARGET_MB = 30_000_000, 512


def ensure_absent_scenario(args, warehouse, absent):
    name = f"m_absent_{absent}"
    path = os.path.join(warehouse, f"{name}.json")
    spec = {"dist": "hot", "keys": PRESENT, "seed": 7}
    if absent:
        spec["absent"] = absent
    if os.path.exists(path):
        with open(path) as f:
            if json.load(f)["spec"] == spec:
                return path
    bench.drop_table(warehouse, f"bench.{name}")
    started = time.monotonic()
    bench.run_json([
        args.bin, "build-scenario", "--warehouse", warehouse, "--name", name,
        "--dist", "hot", "--keys", str(PRESENT), "--seed", "7", "--absent", str(absent),
    ])
    bench.log(f"  built {name} in {time.monotonic() - started:.1f}s")
    return path


def convert(args, binary, label, path, budget_mb):
    bench.reset(args, path)
    run = bench.measure(
        [binary, "convert", "--scenario", path, "--key-memory-mb", str(budget_mb)], label
    )
    bench.reset(args, path)
    out = run.pop("out", None) or {}
    metrics = out.get("resolve", {})
    run["delete_keys"] = metrics.get("delete_keys")
    run["key_passes"] = metrics.get("key_passes")
    run["positions_added"] = out.get("positions_added")
    return run


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--baseline-bin")
    ap.add_argument("--baseline-rev")
    ap.add_argument("--rev", help="the revision --bin was built from")
    ap.add_argument("--profile", default="bench-fast", help="the profile both were built with")
    ap.add_argument("--data", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--keys", default="1000,1000000,10000000,30000000")
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    counts = [int(k) for k in args.keys.split(",")]
    warehouse = bench.ensure_layout(args, "K-long-tiny", LAYOUT)
    binaries = [("current", args.bin)]
    if args.baseline_bin:
        binaries.insert(0, ("baseline", args.baseline_bin))
    results = {
        "machine": bench.machine(),
        "layout": LAYOUT,
        "present_keys": PRESENT,
        "one_pass_mb": ONE_PASS_MB,
        "baseline_rev": args.baseline_rev,
        "rev": args.rev,
        "profile": args.profile,
        "runs": [],
        "target": None,
    }
    for total in counts:
        absent = max(total - PRESENT, 0)
        path = ensure_absent_scenario(args, warehouse, absent)
        for name, binary in binaries:
            for rep in range(args.reps):
                run = convert(args, binary, f"{name} {total} keys #{rep + 1}", path, ONE_PASS_MB)
                run.update(binary=name, keys=total, rep=rep)
                results["runs"].append(run)
    if TARGET_KEYS in counts:
        path = ensure_absent_scenario(args, warehouse, TARGET_KEYS - PRESENT)
        run = convert(args, args.bin, f"current {TARGET_KEYS} keys, {TARGET_MB} MiB budget",
                      path, TARGET_MB)
        run.update(binary="current", keys=TARGET_KEYS, budget_mb=TARGET_MB)
        results["target"] = run
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(results, f, indent=1)
    bench.log(f"wrote {args.out}")


if __name__ == "__main__":
    main()
