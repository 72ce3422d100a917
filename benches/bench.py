"""The benchmark driver (benches/run calls it): builds or reuses the tables, runs every
scenario's conversions and baselines side by side, the readers and the memory run,
each as its own process measured with wait4 (wall time, CPU time, peak RSS), and
writes the results as JSON. benches/report.py turns them into BENCHMARKS.md.

Usage: bench.py --mode quick|full --bin PATH --data DIR --out RESULTS.json
"""

import argparse
import hashlib
import json
import os
import platform
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
# Bump when the table builder changes what it writes: cached tables are rebuilt.
BUILDER_VERSION = 1
COUNTS = [200, 2_000, 20_000, 200_000]
DISTS = ["hot", "scattered", "mixed"]

# Layouts: the table of Iceberg PR #18003's harness (2,000 files x 1,000 rows) in all
# four key/partition variants, and 200 files x 1,000,000 rows (long keys, unpartitioned).
LAYOUT_A = dict(files=2000, rows_per_file=1000)
LAYOUT_B = dict(files=200, rows_per_file=1_000_000)


def matrix(mode):
    """Layouts (name, spec, scenarios, reps, reader scenarios, timeout in seconds of the
    reader with equality deletes) and the memory run. Readers run on the 200,000-key scenarios (the target) and, on the
    first layout, on every HOT count (how reading with equality deletes scales)."""
    every = [(d, n) for d in DISTS for n in COUNTS]
    top = [(d, COUNTS[-1]) for d in DISTS]
    scaling = top + [("hot", n) for n in COUNTS[:-1]]
    if mode == "quick":
        return {
            "layouts": [
                ("A-long-none", dict(LAYOUT_A, key="long", buckets=0), every, 1, scaling, 60),
            ],
            "memory": dict(layout="A-long-none", keys=1_000_000, budget_mb=64, compare_mb=1024),
        }
    return {
        "layouts": [
            ("A-long-none", dict(LAYOUT_A, key="long", buckets=0), every, 3, scaling, 60),
            ("A-long-bucket16", dict(LAYOUT_A, key="long", buckets=16), every, 2, [("scattered", 200_000)], 60),
            ("A-string-none", dict(LAYOUT_A, key="string", buckets=0), every, 2, [("scattered", 200_000)], 60),
            ("A-string-bucket16", dict(LAYOUT_A, key="string", buckets=16), every, 2, [("scattered", 200_000)], 60),
            ("B-long-none", dict(LAYOUT_B, key="long", buckets=0), every, 2, [("scattered", 200_000)], 360),
        ],
        "memory": dict(layout="B-long-none", keys=20_000_000, budget_mb=1024, compare_mb=None),
    }


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def measure(cmd, label, timeout=None):
    """Runs cmd as its own process; returns its JSON output plus wall/CPU/RSS. A run
    that outlives `timeout` seconds is killed and reported as timed out."""
    timed_out = False
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.monotonic()
        env = dict(os.environ, RUST_BACKTRACE="0", RUST_LIB_BACKTRACE="0")
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env)
        killer = None
        if timeout is not None:
            killer = threading.Timer(timeout, proc.kill)
            killer.start()
        _, status, usage = os.wait4(proc.pid, 0)
        if killer is not None:
            killer.cancel()
            timed_out = time.monotonic() - started >= timeout
        wall = time.monotonic() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode(errors="replace")
        stderr = err.read().decode(errors="replace")
    result = {
        "label": label,
        "cmd": [os.path.basename(c) if i == 0 else c for i, c in enumerate(cmd)],
        "exit": proc.returncode,
        "wall_s": wall,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "user_s": usage.ru_utime,
        "sys_s": usage.ru_stime,
        "max_rss_mb": usage.ru_maxrss / 1024.0,
    }
    lines = [l for l in stdout.strip().splitlines() if l.startswith("{")]
    if timed_out:
        result["timeout_s"] = timeout
        result["error"] = f"timed out after {timeout:.0f} s"
    elif proc.returncode == 0 and lines:
        try:
            result["out"] = json.loads(lines[-1])
        except json.JSONDecodeError:
            # One pretty-printed document (the eqdv CLI's --json).
            result["out"] = json.loads(stdout)
    else:
        result["error"] = (stderr.strip() or stdout.strip())[-2000:]
    log(
        f"  {label}: {wall:.2f}s wall, {result['cpu_s']:.2f}s cpu, "
        f"{result['max_rss_mb']:.0f} MB rss{' ERROR ' + result['error'][-300:] if 'error' in result else ''}"
    )
    return result


def run_json(cmd):
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def spec_hash(obj):
    text = json.dumps(obj, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:10]


def ensure_layout(args, name, layout):
    """The warehouse holding the base table of `layout`, built unless cached."""
    key = dict(layout, seed=1, builder=BUILDER_VERSION)
    warehouse = os.path.join(args.data, f"{name}-{spec_hash(key)}")
    done = os.path.join(warehouse, "base.done")
    if os.path.exists(done):
        log(f"layout {name}: reusing {warehouse}")
        return warehouse
    if os.path.exists(warehouse):
        shutil.rmtree(warehouse)
    os.makedirs(warehouse)
    log(f"layout {name}: building {layout['files']} files x {layout['rows_per_file']} rows")
    started = time.monotonic()
    out = run_json(
        [
            args.bin, "build-base", "--warehouse", warehouse,
            "--files", str(layout["files"]), "--rows-per-file", str(layout["rows_per_file"]),
            "--key", layout["key"], "--buckets", str(layout["buckets"]), "--seed", "1",
        ]
    )
    with open(done, "w") as f:
        json.dump(dict(out, build_s=time.monotonic() - started), f)
    log(f"layout {name}: {out['data_bytes'] / 1e6:.0f} MB in {time.monotonic() - started:.0f}s")
    return warehouse


def drop_table(warehouse, table):
    db = sqlite3.connect(os.path.join(warehouse, "catalog.db"))
    ns, name = table.split(".", 1)
    db.execute(
        "DELETE FROM iceberg_tables WHERE table_namespace = ? AND table_name = ?", (ns, name)
    )
    db.commit()
    db.close()


def ensure_scenario(args, warehouse, dist, keys):
    name = f"s_{dist}_{keys}"
    path = os.path.join(warehouse, f"{name}.json")
    spec = {"dist": dist, "keys": keys, "seed": 7}
    if os.path.exists(path):
        with open(path) as f:
            if json.load(f)["spec"] == spec:
                return path
    drop_table(warehouse, f"bench.{name}")
    started = time.monotonic()
    run_json(
        [
            args.bin, "build-scenario", "--warehouse", warehouse, "--name", name,
            "--dist", dist, "--keys", str(keys), "--seed", "7",
        ]
    )
    log(f"  built {name} in {time.monotonic() - started:.1f}s")
    return path


def reset(args, scenario_path):
    run_json([args.bin, "reset", "--scenario", scenario_path])


def run_scenario(args, layout_name, warehouse, dist, keys, reps, readers, reader_timeout):
    path = ensure_scenario(args, warehouse, dist, keys)
    with open(path) as f:
        scenario = json.load(f)
    log(f"{layout_name} {dist} {keys}: {len(scenario['truth_files'])} files hold a key")
    runs = {"eqdv": [], "no_pruning": [], "floor": [], "duckdb": [], "duckdb_candidates": []}
    py = args.python
    # The files eqdv's pruning leaves to open, listed once (untimed) for DuckDB given
    # the same candidates.
    reset(args, path)
    candidates = run_json([args.bin, "candidates", "--scenario", path])
    candidates_path = os.path.join(warehouse, f"s_{dist}_{keys}.candidates.json")
    with open(candidates_path, "w") as f:
        json.dump(candidates, f)
    for rep in range(reps):
        reset(args, path)
        runs["eqdv"].append(measure([args.bin, "convert", "--scenario", path], "eqdv"))
        reset(args, path)
        runs["no_pruning"].append(
            measure([args.bin, "convert", "--scenario", path, "--no-pruning"], "no-pruning")
        )
        runs["floor"].append(measure([args.bin, "floor", "--scenario", path], "floor"))
        runs["duckdb"].append(
            measure([py, os.path.join(HERE, "duckdb_convert.py"), path], "duckdb")
        )
        runs["duckdb_candidates"].append(
            measure([py, os.path.join(HERE, "duckdb_convert.py"), path, "--data-files", candidates_path],
                    "duckdb (eqdv's candidates)")
        )
    # The last run leaves the table converted: read both snapshots.
    reset(args, path)
    final = measure([args.bin, "convert", "--scenario", path], "eqdv (kept)")
    entry = {
        "layout": layout_name,
        "dist": dist,
        "keys": keys,
        "truth_files": len(scenario["truth_files"]),
        "data_files": len(scenario["data_files"]),
        "delete_files": len(scenario["delete_files"]),
        "expected_rows": scenario["expected_rows"],
        "expected_sum_v": scenario["expected_sum_v"],
        "deleted_rows": scenario["deleted_rows"],
        "candidates": {k: candidates[k] for k in ("candidate_files", "files_opened", "positions")},
        "runs": runs,
    }
    if readers and "out" in final:
        after = final["out"]["metadata_location"]
        s_after = final["out"]["new_snapshot_id"]
        s_before = scenario["snapshot_before"]
        table = scenario["table"]
        wh = scenario["warehouse"]
        reads = {}
        reads["iceberg_rust_eq"] = measure(
            [args.bin, "read-iceberg", "--metadata", after, "--snapshot", str(s_before)],
            "read iceberg-rust (equality deletes)",
            timeout=reader_timeout,
        )
        reads["iceberg_rust_dv"] = measure(
            [args.bin, "read-iceberg", "--metadata", after, "--snapshot", str(s_after)],
            "read iceberg-rust (DVs)",
        )
        reads["pyiceberg_dv"] = measure(
            [py, os.path.join(HERE, "read_pyiceberg.py"), wh, table, str(s_after)],
            "read PyIceberg (DVs)",
        )
        reads["pyiceberg_eq"] = measure(
            [py, os.path.join(HERE, "read_pyiceberg.py"), wh, table, str(s_before)],
            "read PyIceberg (equality deletes)",
        )
        if scenario["expected_rows"] <= 5_000_000:
            reads["eqdv_eq"] = measure(
                [args.bin, "read-eqdv", "--metadata", scenario["metadata_before"]],
                "read eqdv::read (equality deletes)",
            )
            reads["eqdv_dv"] = measure(
                [args.bin, "read-eqdv", "--metadata", after], "read eqdv::read (DVs)"
            )
        if args.java_jar:
            for label, snap in (("java_eq", s_before), ("java_dv", s_after)):
                reads[label] = measure(
                    ["java", "-jar", args.java_jar, "bench-read", "--metadata", after,
                     "--snapshot", str(snap)],
                    f"read Java IcebergGenerics ({label[5:]})",
                    timeout=reader_timeout,
                )
        entry["reads"] = reads
    return entry


def run_memory(args, warehouses, spec):
    warehouse = warehouses[spec["layout"]]
    path = ensure_scenario(args, warehouse, "scattered", spec["keys"])
    with open(path) as f:
        scenario = json.load(f)
    log(f"memory run: {spec['keys']} keys, budget {spec['budget_mb']} MiB")
    out = {"layout": spec["layout"], "keys": spec["keys"], "budget_mb": spec["budget_mb"],
           "truth_files": len(scenario["truth_files"]), "runs": {}}
    budgets = [spec["budget_mb"]] + ([spec["compare_mb"]] if spec.get("compare_mb") else [])
    for mb in budgets:
        reset(args, path)
        out["runs"][str(mb)] = measure(
            [args.bin, "convert", "--scenario", path, "--key-memory-mb", str(mb)],
            f"eqdv --key-memory-mb {mb}",
        )
    reset(args, path)
    return out


def current_metadata(warehouse, table):
    db = sqlite3.connect(os.path.join(warehouse, "catalog.db"))
    ns, name = table.split(".", 1)
    row = db.execute(
        "SELECT metadata_location FROM iceberg_tables WHERE table_namespace = ? AND table_name = ?",
        (ns, name),
    ).fetchone()
    db.close()
    return row[0]


def add_java_reads(args):
    """Adds Java's reads to the reader scenarios of an existing results file (the tables
    are still converted, their pointers at eqdv's snapshot)."""
    with open(args.out) as f:
        results = json.load(f)
    for entry in results["scenarios"]:
        if not entry.get("reads"):
            continue
        if args.only and args.only not in entry["layout"]:
            continue
        warehouse = [w for w in os.listdir(args.data) if w.startswith(entry["layout"] + "-")]
        if len(warehouse) != 1:
            continue
        path = os.path.join(args.data, warehouse[0], f"s_{entry['dist']}_{entry['keys']}.json")
        with open(path) as f:
            scenario = json.load(f)
        after = current_metadata(scenario["warehouse"], scenario["table"])
        with open(after.removeprefix("file://")) as f:
            s_after = json.load(f)["current-snapshot-id"]
        timeout = 360 if entry["expected_rows"] > 5_000_000 else 60
        log(f"{entry['layout']} {entry['dist']} {entry['keys']}: Java reads")
        for label, snap in (("java_eq", scenario["snapshot_before"]), ("java_dv", s_after)):
            entry["reads"][label] = measure(
                ["java", "-jar", args.java_jar, "bench-read", "--metadata", after,
                 "--snapshot", str(snap)],
                f"read Java IcebergGenerics ({label[5:]})",
                timeout=timeout,
            )
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)


def machine():
    info = {"platform": platform.platform(), "cpus": os.cpu_count()}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
        with open("/proc/meminfo") as f:
            info["mem_gib"] = round(int(f.readline().split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    try:
        info["rustc"] = subprocess.run(["rustc", "--version"], capture_output=True, text=True,
                                       check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        pass
    info["loadavg_start"] = os.getloadavg()
    return info


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=["quick", "full"], default="quick")
    parser.add_argument("--bin", required=True)
    parser.add_argument("--data", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--java-jar", default=None)
    parser.add_argument("--only", default=None, help="run only layouts whose name contains this")
    parser.add_argument("--keep-reads", action="store_true",
                        help="with --only: keep the previous results' reads of those layouts")
    parser.add_argument("--add-java", action="store_true",
                        help="only add Java's reads to the existing --out results")
    args = parser.parse_args()
    if args.add_java:
        add_java_reads(args)
        return
    os.makedirs(args.data, exist_ok=True)
    m = matrix(args.mode)
    started = time.monotonic()
    kept_reads = {}
    results = {"mode": args.mode, "machine": machine(), "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
               "layouts": {}, "scenarios": [], "memory": None}
    if args.only and os.path.exists(args.out):
        # Re-running some layouts: keep the other layouts' results.
        with open(args.out) as f:
            previous = json.load(f)
        results["layouts"] = {k: v for k, v in previous["layouts"].items() if args.only not in k}
        results["scenarios"] = [s for s in previous["scenarios"] if args.only not in s["layout"]]
        results["memory"] = previous.get("memory")
        results["merged_from"] = previous.get("started")
        if args.keep_reads:
            for s in previous["scenarios"]:
                if args.only in s["layout"] and s.get("reads"):
                    kept_reads[(s["layout"], s["dist"], s["keys"])] = s["reads"]
    warehouses = {}
    for name, layout, scenarios, reps, reader_scenarios, reader_timeout in m["layouts"]:
        if args.only and args.only not in name:
            continue
        t = time.monotonic()
        warehouses[name] = ensure_layout(args, name, layout)
        with open(os.path.join(warehouses[name], "base.done")) as f:
            results["layouts"][name] = dict(layout, **json.load(f))
        for dist, keys in scenarios:
            kept = kept_reads.get((name, dist, keys))
            readers = (dist, keys) in reader_scenarios and kept is None
            entry = run_scenario(args, name, warehouses[name], dist, keys, reps, readers,
                                 reader_timeout)
            if kept is not None:
                entry["reads"] = kept
                entry["reads_from"] = results.get("merged_from")
            results["scenarios"].append(entry)
            with open(args.out, "w") as f:
                json.dump(results, f, indent=1)
        log(f"layout {name} done in {time.monotonic() - t:.0f}s")
    if m["memory"]["layout"] in warehouses:
        results["memory"] = run_memory(args, warehouses, m["memory"])
    results["duration_s"] = time.monotonic() - started
    results["machine"]["loadavg_end"] = os.getloadavg()
    with open(args.out, "w") as f:
        json.dump(results, f, indent=1)
    log(f"done in {results['duration_s']:.0f}s -> {args.out}")


if __name__ == "__main__":
    main()
