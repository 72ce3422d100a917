"""The key index against the scan through S3 latency, on files of realistic size (driven by
benches/key_index_s3, holding the services lock).

Each scenario writes the same history twice, with the same seed, into two Glue + MinIO
tables (direct to MinIO, as a writer would): after every writer commit one table is
converted by `eqdv convert` as today (the baseline) and the other by
`eqdv convert --key-index` (its first conversion builds the index). Both conversions are
cold processes (wait4: wall, CPU, peak RSS) reading S3 through Toxiproxy (a first-byte
latency on every response, an 80 MB/s cap per connection); Glue is direct. MinIO's audit
webhook counts each conversion's S3 requests and bytes by kind (the index's files apart).
At the end both tables must read the same rows (`eqdv rows`) and hold no equality delete.

Scenarios (the base load's data files are 200,000 rows, about 20 MB, with a key column
chunk of 1.6 MB; every commit after it writes small files, as a streaming writer does):
- hashed: hashed long keys (spread over all of i64) without bloom filters, 300 changes a
  commit: bounds rule out no base file;
- zipf: sequential long keys with Zipf-skewed updates (a few hot keys updated again and
  again) and deletes, 300 changes a commit;
- sizes: one 300-change commit of hashed keys converted on tables of 10x apart sizes
  (--sizes), after a first conversion that built the index; the second is recorded.

With --warm-planner-bin, the hashed and zipf histories are converted by warm Lambda
instances instead of cold processes: the planner function behind aws-lambda-rie
(benches/warm_planner.py), one instance per table started once and invoked with a Glue
table-change event after each commit, converting its plan's one shard itself
(EQDV_CONVERT_IN_PLANNER_MAX_MB raised to hold these tables; 2,048 MB of memory, so a
128 MB footer cache) with EQDV_KEY_INDEX false for the scan's table and true for the
index's. What it keeps between invocations (manifests, data file footers, the index's
covered lists, leaf footers and pages) is what a warm instance keeps. `wall_s` is the
invocation's REPORT Duration.
"""

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench import log, machine, measure  # noqa: E402
from key_index import keep_other_scenarios, row  # noqa: E402
from s3_services import BANDWIDTH_KBPS, run_plain, start_services  # noqa: E402
from warm_planner import WarmPlanner, create_fifo_queue, glue_table_change  # noqa: E402

# The warm planner's memory (its footer cache is a sixteenth) and the most it converts
# itself: more than these tables (the stacks deploy 256 MB for streaming commits).
WARM_PLANNER_MB = 2048
WARM_CONVERT_IN_PLANNER_MAX_MB = 65536

ROWS_PER_FILE = 200_000
# Tables larger than this are not read back with `eqdv rows` at the end (see same_rows).
ROWS_READ_BACK_MAX = 20_000_000
SCENARIOS = {
    "hashed": {
        "what": "hashed long keys over all of i64, no bloom filters: 4,000,000 rows in files of "
                "200,000 (about 20 MB), then commits of 300 changes",
        "generate": ["--rows", "4000000", "--hashed-keys", "--changes-per-commit", "300"],
    },
    "zipf": {
        "what": "sequential long keys, Zipf-skewed updates: 4,000,000 rows in files of 200,000 "
                "(about 20 MB), then commits of 300 changes",
        "generate": ["--rows", "4000000", "--zipf-keys", "--changes-per-commit", "300"],
    },
}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", required=True)
    parser.add_argument("--bin-info", default="{}")
    parser.add_argument("--toxiproxy", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--scenarios", default="hashed,zipf,sizes")
    parser.add_argument("--commits", type=int, default=12)
    parser.add_argument("--latency-ms", type=int, default=20)
    parser.add_argument("--sizes", default="1000000,10000000,100000000")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--warm-planner-bin", help="convert the histories with warm planner instances")
    args = parser.parse_args()

    results = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "binary": json.loads(args.bin_info),
        "machine": machine(),
        "storage": {"s3": "MinIO through Toxiproxy v2.5.0", "latency_ms": args.latency_ms,
                    "bandwidth_kbps_per_connection": BANDWIDTH_KBPS, "glue": "direct (not proxied)",
                    "writer": "direct (not proxied)", "processes": "cold: one per conversion"},
        "rows_per_file": ROWS_PER_FILE,
        "warm": {"runtime": "aws-lambda-rie, the planner function converting its one shard",
                 "memory_mb": WARM_PLANNER_MB,
                 "convert_in_planner_max_mb": WARM_CONVERT_IN_PLANNER_MAX_MB}
        if args.warm_planner_bin else None,
        "scenarios": {},
    }
    keep_other_scenarios(results, args.out)
    audit, env, proxy = start_services(args.toxiproxy)
    direct = env["AWS_ENDPOINT_URL_S3"]
    proxy.set_latency(args.latency_ms)
    warehouse = env["EQDV_WAREHOUSE_S3"] + "kis3"

    def common(table):
        return ["--catalog", "glue", "--warehouse", warehouse, "--table", table]

    def write(table, gen, commits):
        os.environ["AWS_ENDPOINT_URL_S3"] = direct
        out = run_plain([args.bin, "generate", *common(table), "--json", "--seed", str(args.seed),
                         "--rows-per-file", str(ROWS_PER_FILE),
                         "--rows-per-row-group", str(ROWS_PER_FILE), *gen,
                         "--commits", str(commits)])
        audit.take(quiet_s=0.3)
        return out

    def convert(table, index, label):
        os.environ["AWS_ENDPOINT_URL_S3"] = proxy.endpoint
        # The baseline turns the index off: by default eqdv uses it where it pays.
        run = measure([args.bin, "convert", *common(table), "--json",
                       "--key-index" if index else "--no-key-index"], label)
        run["s3"] = audit.take(quiet_s=0.3)
        os.environ["AWS_ENDPOINT_URL_S3"] = direct
        if run["exit"] not in (0, 3) or "out" not in run:
            sys.exit(f"{label}: eqdv convert failed: {run.get('stderr', '')[-3000:]}")
        return summarize(run)

    # Table -> its warm planner instance (--warm-planner-bin).
    warm = {}

    def warm_instance(table, index):
        if table not in warm:
            queue = create_fifo_queue(env["AWS_ENDPOINT_URL_SQS"], f"kis3-{table.replace('.', '-')}-{os.getpid()}")
            function_env = {
                "AWS_ENDPOINT_URL_S3": proxy.endpoint, "EQDV_CATALOG": "glue", "EQDV_WAREHOUSE": warehouse,
                "EQDV_ALLOWED_DATABASES": table.split(".")[0], "EQDV_SHARD_QUEUE_URL": queue,
                "EQDV_CONVERT_IN_PLANNER_MAX_MB": str(WARM_CONVERT_IN_PLANNER_MAX_MB),
                "EQDV_KEY_INDEX": "true" if index else "false",
            }
            warm[table] = WarmPlanner(env["EQDV_LAMBDA_RIE"], args.warm_planner_bin, function_env,
                                      table.replace(".", "-"), WARM_PLANNER_MB)
        return warm[table]

    def convert_warm(table, index, label):
        run = warm_instance(table, index).invoke(glue_table_change(table), label)
        run["s3"] = audit.take(quiet_s=0.3)
        conversions = run.get("out", {}).get("conversions", [])
        if "error" in run or len(conversions) != 1:
            sys.exit(f"{label}: the warm planner did not convert the table itself: "
                     f"{run.get('error', run.get('out'))}")
        run["out"] = conversions[0]
        summary = summarize(run)
        summary.update(invocation=run["invocation"], init_ms=run.get("init_ms"),
                       footers_from_cache=conversions[0].get("resolve", {}).get("footers_from_cache", 0),
                       index_leaves_from_cache=conversions[0].get("resolve", {}).get("index_leaves_from_cache", 0))
        return summary

    def same_rows(scan_table, index_table, table_rows=0):
        os.environ["AWS_ENDPOINT_URL_S3"] = direct
        inspection = run_plain([args.bin, "inspect", *common(index_table), "--json"])
        end = {"index_at_end": inspection.get("key_indexes", []),
               "equality_delete_files_at_end": inspection["totals"]["equality_delete_files"]}
        if table_rows > ROWS_READ_BACK_MAX:
            # `eqdv rows` sorts every row as text in memory: past this size the same DVs
            # written (checked at every conversion) stand for the same rows.
            return {**end, "same_rows": None, "rows_read": None}
        digests = [rows_digest([args.bin, "rows", *common(t)]) for t in (scan_table, index_table)]
        return {**end, "same_rows": digests[0] == digests[1], "rows_read": digests[0][1]}

    def save():
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)

    try:
        for name in args.scenarios.split(","):
            log(f"scenario {name}")
            if name == "sizes":
                out = {"what": "one commit of 300 changes (hashed long keys, no bloom filters) "
                               "converted on tables 10x apart in size, the index built by the "
                               "conversion before", "sizes": [], "binary": results["binary"]}
                results["scenarios"]["sizes"] = out
                for rows in [int(x) for x in args.sizes.split(",")]:
                    # The index from the first file on (a table of 5 files of 20 MB reads
                    # them as fast without it: eqdv.key-index.min-files is 16 by default).
                    gen = ["--rows", str(rows), "--hashed-keys", "--changes-per-commit", "300",
                           "--table-property", "eqdv.key-index.min-files=1"]
                    scan_t, index_t = f"kis3.size{rows}_scan", f"kis3.size{rows}_index"
                    t0 = time.monotonic()
                    for t in (scan_t, index_t):
                        write(t, gen, 1)
                    written_s = time.monotonic() - t0
                    first_scan = convert(scan_t, False, f"{rows} rows: first conversion, scan")
                    build = convert(index_t, True, f"{rows} rows: first conversion, index build")
                    for t in (scan_t, index_t):
                        write(t, gen, 1)
                    scan = convert(scan_t, False, f"{rows} rows: scan")
                    index = convert(index_t, True, f"{rows} rows: index")
                    check_same_dvs(f"sizes {rows}", scan, index)
                    end = same_rows(scan_t, index_t, rows)
                    out["sizes"].append({"rows": rows, "write_s": written_s, "first_scan": first_scan,
                                         "build": build, "scan": scan, "index": index, **end})
                    log(f"  {rows:,} rows: wall {scan['wall_s']:.2f} s (scan) vs {index['wall_s']:.2f} s "
                        f"(index); S3 requests {scan['s3_requests']} vs {index['s3_requests']}; build "
                        f"{build['wall_s']:.2f} s against a first scan of {first_scan['wall_s']:.2f} s")
                    if end["same_rows"] is False:
                        sys.exit(f"sizes {rows}: the two tables read different rows")
                    save()
                continue
            spec = SCENARIOS[name]
            scan_t, index_t = f"kis3.{name}_scan", f"kis3.{name}_index"
            out = {"what": spec["what"], "generate": spec["generate"], "conversions": [],
                   "binary": results["binary"]}
            results["scenarios"][name] = out
            out["warm"] = bool(args.warm_planner_bin)
            conversion = convert_warm if args.warm_planner_bin else convert
            for c in range(1, args.commits + 1):
                for t in (scan_t, index_t):
                    write(t, spec["generate"], 1)
                scan = conversion(scan_t, False, f"{name} commit {c}: scan")
                index = conversion(index_t, True, f"{name} commit {c}: index")
                check_same_dvs(f"{name} commit {c}", scan, index)
                out["conversions"].append({"commit": c, "scan": scan, "index": index})
                log(f"  {name} commit {c}: wall {scan['wall_s']:.2f} s (scan) vs {index['wall_s']:.2f} s "
                    f"(index); files opened {scan['files_opened']} vs {index['files_opened']}; S3 "
                    f"requests {scan['s3_requests']} vs {index['s3_requests']}, MB "
                    f"{scan['s3_bytes'] / 1e6:.1f} vs {index['s3_bytes'] / 1e6:.1f}")
                save()
            out.update(same_rows(scan_t, index_t))
            if not out["same_rows"]:
                sys.exit(f"{name}: the two tables read different rows")
            save()
    finally:
        for instance in warm.values():
            instance.stop()
        proxy.stop()
    results["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    save()


def rows_digest(cmd):
    """(SHA-256 of the output of `cmd`, its lines), streamed: a table's rows as text can
    outgrow memory."""
    import hashlib
    import subprocess
    import tempfile
    digest, lines = hashlib.sha256(), 0
    with tempfile.TemporaryFile() as errors:
        with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=errors) as p:
            for chunk in iter(lambda: p.stdout.read(1 << 20), b""):
                digest.update(chunk)
                lines += chunk.count(b"\n")
        errors.seek(0)
        err = errors.read().decode(errors="replace")
    if p.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{err[-3000:]}")
    return digest.hexdigest(), lines


def check_same_dvs(what, scan, index):
    if (scan["dvs_written"], scan["positions_added"]) != (index["dvs_written"], index["positions_added"]):
        sys.exit(f"{what}: the two conversions wrote different DVs: {scan} {index}")


def summarize(run):
    """One conversion's figures: the report's (as the local bench keeps them), the
    process's and S3's."""
    report = run["out"]
    s3 = run["s3"]
    return {
        **row({**report, "wall_s": run["wall_s"]}),
        "cpu_s": round(run["cpu_s"], 4),
        "max_rss_mb": round(run["max_rss_mb"] or 0, 1),
        "phases": report.get("phases", {}),
        "s3_requests": s3["total"],
        "s3_bytes": sum(s3["bytes"].values()),
        "s3": s3,
    }


if __name__ == "__main__":
    main()
