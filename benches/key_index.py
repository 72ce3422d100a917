"""The key index against the scan, side by side in one run (driven by benches/key_index).

Each scenario generates the same history twice, with the same seed, into two local
warehouses (SQLite catalog, files on disk): after every writer commit, one table is
converted by `eqdv convert` as today (the baseline: no index) and the other by
`eqdv convert --key-index` (the index built by its first conversion and kept by every
one after). Both are cold processes. Recorded per conversion, from each report: data
files opened (footer or key columns read), files with a new DV, bytes read, the index's
lookups, leaves, bytes and the files it ruled out or left to the delta, the upkeep
(files folded in, runs merged, bytes written, its time), and wall time. At the end both
tables must read the same rows (`eqdv rows`) and hold no equality delete.

Scenarios:
- zipf: a streaming upsert table (Zipf-skewed updates over the whole key range, so every
  new file's bounds span almost every key), many commits;
- hashed: hashed long keys (spread over all of i64) without bloom filters, the shape
  where bounds prune nothing from the first commit on.

Counts do not depend on the build profile; times do (the results name the profile).
"""

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time

TABLE = "bench.events"

# The streaming day's table (benches/streaming_day.py: 400,000 rows in files of 500 over
# bucket[16], 200 changes a commit, Zipf-skewed updates) and the random-keys bench's
# hashed long keys without bloom filters (benches/random_keys.py), at 400,000 rows.
SCENARIOS = {
    "zipf": {
        "what": "the streaming day's table: 400,000 rows, 500 a file, bucket[16], "
                "200 changes a commit, Zipf-skewed updates, no bloom filters",
        "generate": ["--rows", "400000", "--rows-per-file", "500", "--rows-per-row-group", "500",
                     "--partition", "bucket:16", "--changes-per-commit", "200", "--zipf-keys"],
    },
    "hashed": {
        "what": "hashed long keys spread over all of i64, no bloom filters: 400,000 rows, "
                "1,000 a file in row groups of 500, 300 changes a commit",
        "generate": ["--rows", "400000", "--rows-per-file", "1000", "--rows-per-row-group", "500",
                     "--changes-per-commit", "300", "--hashed-keys"],
    },
}


def run(cmd, **kw):
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    return p, time.monotonic() - t0


def eqdv(args, binary, warehouse, *rest):
    return run([binary, *rest, "--warehouse", warehouse, "--table", TABLE, *args])


def generate(binary, warehouse, seed, extra):
    p, _ = eqdv(["--seed", str(seed), *extra], binary, warehouse, "generate", "--json")
    if p.returncode != 0:
        sys.exit(f"eqdv generate failed: {p.stderr}")
    return json.loads(p.stdout)


def convert(binary, warehouse, index):
    # The baseline turns the index off: by default eqdv uses it where it pays.
    args = ["--key-index"] if index else ["--no-key-index"]
    p, wall = eqdv(args, binary, warehouse, "--json", "convert")
    if p.returncode not in (0, 3):
        sys.exit(f"eqdv convert failed: {p.stderr}")
    report = json.loads(p.stdout)
    report["wall_s"] = wall
    return report


def row(report):
    """One conversion's figures from its JSON report (with the process's `wall_s`)."""
    r = report.get("resolve", {})
    upkeep = report.get("key_index", [])
    return {
        "outcome": report.get("outcome"),
        "dvs_written": report.get("dvs_written", 0),
        "positions_added": report.get("positions_added", 0),
        "wall_s": round(report["wall_s"], 4),
        "duration_ms": report.get("duration_ms"),
        "read_table_ms": report.get("phases", {}).get("read_table_ms"),
        "resolve_ms": report.get("phases", {}).get("resolve_ms"),
        "write_commit_ms": report.get("phases", {}).get("write_commit_ms"),
        "live_data_files": r.get("live_data_files", 0),
        "candidate_files": r.get("candidate_files", 0),
        "files_opened": r.get("files_opened", 0),
        "files_with_matches": r.get("files_with_matches", 0),
        "files_holding_deleted_values": r.get("files_holding_deleted_values", 0),
        "bytes_read": r.get("bytes_read", 0),
        "footer_bytes_read": r.get("footer_bytes_read", 0),
        "delete_keys": r.get("delete_keys", 0),
        "index_lookups": r.get("index_lookups", 0),
        "index_leaves_read": r.get("index_leaves_read", 0),
        "index_row_groups_read": r.get("index_row_groups_read", 0),
        "index_bytes_read": r.get("index_bytes_read", 0),
        "pruned_by_index": r.get("pruned_by_index", 0),
        "pruned_by_index_dvs": r.get("pruned_by_index_dvs", 0),
        "index_dvs_read": r.get("index_dvs_read", 0),
        "index_delta_files": r.get("index_delta_files", 0),
        "index_bypassed": r.get("index_bypassed", 0),
        "files_read_by_position": r.get("files_read_by_position", 0),
        "offset_indexes_read": r.get("offset_indexes_read", 0),
        "rows_scanned": r.get("rows_scanned", 0),
        "resolve_steps_ms": r.get("steps_ms", {}),
        "upkeep": upkeep,
    }


def keep_other_scenarios(results, path):
    """A run of some scenarios keeps the others' results from the file at `path` (each
    scenario records the binary that ran it)."""
    if os.path.exists(path):
        with open(path) as f:
            before = json.load(f)
        for name, kept in before.get("scenarios", {}).items():
            kept.setdefault("binary", before.get("binary", {}))
            results["scenarios"][name] = kept


def scenario(name, binary, seed, commits):
    spec = SCENARIOS[name]
    out = {"what": spec["what"], "generate": spec["generate"], "seed": seed, "commits": commits,
           "conversions": []}
    with tempfile.TemporaryDirectory(prefix=f"eqdv-key-index-{name}-") as tmp:
        base = os.path.join(tmp, "scan")
        indexed = os.path.join(tmp, "index")
        os.makedirs(base)
        os.makedirs(indexed)
        # The initial load and its first commit, then one commit at a time.
        for wh in (base, indexed):
            generate(binary, wh, seed, [*spec["generate"], "--commits", "1"])
        for c in range(1, commits + 1):
            if c > 1:
                for wh in (base, indexed):
                    generate(binary, wh, seed, [*spec["generate"], "--commits", "1"])
            scan = row(convert(binary, base, False))
            index = row(convert(binary, indexed, True))
            out["conversions"].append({"commit": c, "scan": scan, "index": index})
            if scan["dvs_written"] != index["dvs_written"] or scan["positions_added"] != index["positions_added"]:
                sys.exit(f"{name} commit {c}: the two conversions wrote different DVs: {scan} {index}")
            print(f"  {name} commit {c}: files opened {scan['files_opened']} (scan) vs "
                  f"{index['files_opened']} (index; {index['dvs_written']} new DVs, "
                  f"{index['files_holding_deleted_values']} holding a deleted key, "
                  f"{index['index_delta_files']} in the delta), wall {scan['wall_s']:.2f} vs "
                  f"{index['wall_s']:.2f} s", file=sys.stderr, flush=True)
        rows = []
        for wh in (base, indexed):
            p, _ = eqdv([], binary, wh, "rows")
            if p.returncode != 0:
                sys.exit(f"eqdv rows failed: {p.stderr}")
            rows.append(p.stdout)
        out["same_rows"] = rows[0] == rows[1]
        out["rows"] = rows[0].count("\n")
        p, _ = eqdv([], binary, indexed, "--json", "inspect")
        inspection = json.loads(p.stdout)
        out["index_at_end"] = inspection.get("key_indexes", [])
        out["equality_delete_files_at_end"] = inspection["totals"]["equality_delete_files"]
        if not out["same_rows"]:
            sys.exit(f"{name}: the two tables read different rows")
    return out


def sizes_scenario(binary, seed, sizes):
    """The same kind of commit (300 changes of hashed long keys, no bloom filters)
    converted on tables of several sizes: per size, the table is loaded and given one
    commit, converted (the indexed table builds its index), given one more commit and
    converted again; that second conversion is recorded."""
    out = {"what": "one commit of 300 changes (hashed long keys, no bloom filters) converted on "
                   "tables 10x apart in size, the index already built",
           "sizes": []}
    for rows in sizes:
        gen = ["--rows", str(rows), "--rows-per-file", "1000", "--rows-per-row-group", "500",
               "--changes-per-commit", "300", "--hashed-keys"]
        with tempfile.TemporaryDirectory(prefix="eqdv-key-index-size-") as tmp:
            base = os.path.join(tmp, "scan")
            indexed = os.path.join(tmp, "index")
            os.makedirs(base)
            os.makedirs(indexed)
            for wh in (base, indexed):
                generate(binary, wh, seed, [*gen, "--commits", "1"])
            build = row(convert(binary, indexed, True))
            row(convert(binary, base, False))
            for wh in (base, indexed):
                generate(binary, wh, seed, [*gen, "--commits", "1"])
            scan = row(convert(binary, base, False))
            index = row(convert(binary, indexed, True))
            if scan["dvs_written"] != index["dvs_written"] or scan["positions_added"] != index["positions_added"]:
                sys.exit(f"sizes {rows}: the two conversions wrote different DVs")
            out["sizes"].append({"rows": rows, "build": build, "scan": scan, "index": index})
            print(f"  {rows:,} rows: files opened {scan['files_opened']} (scan) vs {index['files_opened']} "
                  f"(index), wall {scan['wall_s']:.2f} vs {index['wall_s']:.2f} s; build "
                  f"{build['wall_s']:.2f} s", file=sys.stderr, flush=True)
    return out


def measured_convert(binary, warehouse, index, key_memory_mb):
    """`convert`, as its own process measured with wait4 (peak RSS)."""
    cmd = [binary, "--json", "convert", "--warehouse", warehouse, "--table", TABLE,
           "--key-memory-mb", str(key_memory_mb), "--key-index" if index else "--no-key-index"]
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate()
    wall = time.monotonic() - t0
    # communicate() reaped the process: its rusage is the children's, taken per run.
    rss_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024.0
    if proc.returncode not in (0, 3):
        sys.exit(f"eqdv convert failed: {err}")
    report = json.loads(out)
    report["wall_s"] = wall
    return row(report), rss_mb


def million_scenario(binary, seed, keys):
    """`keys` deleted keys looked up in one conversion: a table of hashed long keys whose
    index the first conversion built, then one commit of `keys` changes, converted with
    the index under a 256 MiB key budget; its peak RSS against the issue's 512 MiB. Each
    measured conversion runs in a fresh Python child so that RUSAGE_CHILDREN's peak is its
    own."""
    rows = 2 * keys
    # Every commit of a history has the same number of changes (the generator replays
    # its stored spec): the first builds the index, the second is looked up.
    gen = ["--rows", str(rows), "--rows-per-file", "10000", "--rows-per-row-group", "10000",
           "--hashed-keys", "--changes-per-commit", str(keys), "--commits", "1"]
    out = {"what": f"{keys:,} changes of hashed long keys in one commit on a table of {rows:,} rows "
                   "(files of 10,000), converted with the index the conversion of the commit "
                   "before built",
           "keys": keys, "key_memory_mb": 256}
    with tempfile.TemporaryDirectory(prefix="eqdv-key-index-million-") as tmp:
        generate(binary, tmp, seed, gen)
        build = row(convert(binary, tmp, True))
        generate(binary, tmp, seed, gen)
        child = subprocess.run(
            [sys.executable, __file__, "--measure-one", binary, tmp],
            capture_output=True, text=True)
        if child.returncode != 0:
            sys.exit(f"million: the measured conversion failed: {child.stderr}")
        index, rss = json.loads(child.stdout)
    out.update(build=build, index=index, max_rss_mb=round(rss, 1))
    print(f"  {index['delete_keys']:,} deleted keys looked up ({index['index_lookups']:,} hashes): "
          f"peak RSS {rss:.0f} MB, wall {index['wall_s']:.2f} s", file=sys.stderr, flush=True)
    return out


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--measure-one":
        print(json.dumps(measured_convert(sys.argv[2], sys.argv[3], True, 256)))
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", required=True)
    parser.add_argument("--bin-info", default="{}")
    parser.add_argument("--out", required=True)
    parser.add_argument("--scenarios", default="zipf,hashed,sizes")
    parser.add_argument("--commits", type=int, default=96)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--sizes", default="200000,2000000,20000000",
                        help="table sizes (rows) of the sizes scenario")
    args = parser.parse_args()
    results = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "binary": json.loads(args.bin_info),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "storage": "local disk (SQLite catalog, files on disk); no S3 latency",
        "scenarios": {},
    }
    keep_other_scenarios(results, args.out)
    for name in args.scenarios.split(","):
        print(f"==> scenario {name}", file=sys.stderr, flush=True)
        if name == "million":
            # About 55% of a commit's changes delete a key: 1,800,000 delete 1,000,000.
            results["scenarios"][name] = million_scenario(args.bin, args.seed, 1_800_000)
        elif name == "sizes":
            results["scenarios"][name] = sizes_scenario(
                args.bin, args.seed, [int(x) for x in args.sizes.split(",")])
        else:
            results["scenarios"][name] = scenario(name, args.bin, args.seed, args.commits)
        results["scenarios"][name]["binary"] = results["binary"]
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)
    results["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    with open(args.out, "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
