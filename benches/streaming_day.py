"""The streaming day's driver (benches/streaming_day calls it, holding the services lock):
a CDC writer commits upserts into a bucket[16] table on Glue + MinIO every "five
minutes", and after each commit eqdv converts it the way the serverless trigger does:
the planner (`eqdv plan`, as the planner Lambda) and then one converter per shard
(`eqdv convert --plan --shard-id`, as the converter Lambda), through Toxiproxy's first-byte
latency on every S3 response. Before each conversion, the S3 floor of that conversion's
resolve (`eqdv-bench s3-floor`: the new delete files, the key column spans that truly
hold a key and the DVs to merge, fetched at once, decoded and probed; its preparation
untimed and direct). With --baseline-bin, each commit is also written into a
third table and converted the same way by the baseline's eqdv, side by side. At the end,
the same history (the generator is a pure function of its seed) is written again into a
second table, never converted, and converted once as a backfill.

The writer runs direct to MinIO (what it costs is the writer's, not eqdv's); Glue is not
proxied. Each eqdv run is its own process measured with wait4 (bench.measure), its S3
requests counted by kind from MinIO's audit webhook.

Usage: streaming_day.py --bin PATH --floor-bin PATH --toxiproxy PATH --out RESULTS.json
                        [--commits N] [--latency MS] [--queue-groups N] [--zipf-keys]
                        [--baseline-bin PATH --baseline-info JSON] [--planner-converts]

With --planner-converts, this checkout's conversion after each commit is the planner
converting the plan's one shard itself, as the stacks deploy it (EQDV_CONVERT_IN_PLANNER_MAX_MB):
`eqdv backfill` of the table, which runs the planner function's own code in-process, one
process for the planner's invocation (a shard it does not convert itself is converted by
the same process, as backfill does, and the run says so). The baseline runs as before.

Every table is created with the property eqdv.queue-groups = --queue-groups (the
baseline's eqdv honours it only if it knows it).
"""

import argparse
import json
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench import log, machine, measure  # noqa: E402
from s3_services import BANDWIDTH_KBPS, run_plain, start_services  # noqa: E402
from warm_planner import WarmPlanner, create_fifo_queue, glue_table_change  # noqa: E402

DAY = "stream.day"  # converted after every commit
BACKFILL = "stream.backfill"  # the same history, converted once at the end
BASELINE = "stream.baseline"  # the same history, converted after every commit by the baseline
# The initial load (400,000 rows, 500 rows a file: 800 data files over bucket[16]); each
# CDC commit then makes the generator's 200 changes (mostly updates of keys drawn from
# all of history, some of a hot set; inserts; deletes), one data file and one equality
# delete file per bucket it touches.
CREATE = ["--rows", "400000", "--partition", "bucket:16"]
COMMITS_PER_DAY = 288  # a checkpoint every 5 minutes
# The deployed defaults (template.yaml): the planner's shard target, and the memory of
# the planner and converter functions (what their GB-seconds are billed at).
SHARD_TARGET_BYTES = 256 * 1024 * 1024
PLANNER_MB = 512
CONVERTER_MB = 2048
# With --planner-converts the planner has the converter's memory (template.yaml's
# PlannerMemorySize) and converts shards of up to this many MB itself.
CONVERTING_PLANNER_MB = 2048
CONVERT_IN_PLANNER_MAX_MB = 256
FLOOR_PARALLELISM = 64


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", required=True, help="eqdv")
    parser.add_argument("--bin-info", default="{}", help="JSON: how the binary was built")
    parser.add_argument("--floor-bin", required=True, help="eqdv-bench, for the S3 floor")
    parser.add_argument("--toxiproxy", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--commits", type=int, default=COMMITS_PER_DAY)
    parser.add_argument("--latency", type=int, default=20, help="ms added to every S3 response")
    parser.add_argument("--queue-groups", type=int, default=1,
                        help="the tables' eqdv.queue-groups property")
    parser.add_argument("--zipf-keys", action="store_true",
                        help="updates pick keys by the generator's scrambled Zipf distribution")
    parser.add_argument("--baseline-bin", help="another eqdv, converting a copy of the day")
    parser.add_argument("--baseline-info", default="{}", help="JSON: how the baseline was built")
    parser.add_argument("--planner-converts", action="store_true",
                        help="this checkout's planner converts a plan's one shard itself")
    parser.add_argument("--baseline-planner-converts", action="store_true",
                        help="the baseline's planner too (a revision that knows the variable)")
    parser.add_argument("--warm-planner", action="store_true",
                        help="every converting planner is its function binary (--planner-bin, "
                             "--baseline-planner-bin) behind aws-lambda-rie, started once and "
                             "invoked after each commit, as a warm Lambda instance")
    parser.add_argument("--planner-bin", help="eqdv-planner of this checkout")
    parser.add_argument("--baseline-planner-bin", help="eqdv-planner of the baseline")
    args = parser.parse_args()
    if args.baseline_planner_converts and not (args.planner_converts and args.baseline_bin):
        parser.error("--baseline-planner-converts needs --planner-converts and --baseline-bin")
    if args.warm_planner and not (args.planner_converts and args.planner_bin):
        parser.error("--warm-planner needs --planner-converts and --planner-bin")
    if args.warm_planner and args.baseline_planner_converts and not args.baseline_planner_bin:
        parser.error("--warm-planner with --baseline-planner-converts needs --baseline-planner-bin")
    create = CREATE + ["--table-property", f"eqdv.queue-groups={args.queue_groups}"]
    if args.zipf_keys:
        create.append("--zipf-keys")
    # The section of BENCHMARKS.md these results go to is named after their file.
    name = os.path.splitext(os.path.basename(args.out))[0]
    results = {
        "name": name,
        "machine": machine(),
        "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "binary": json.loads(args.bin_info),
        "baseline_binary": json.loads(args.baseline_info) if args.baseline_bin else None,
        "table": {"day": DAY, "backfill": BACKFILL, "baseline": BASELINE if args.baseline_bin else None,
                  "create": create, "queue_groups": args.queue_groups, "commits": args.commits,
                  "zipf_keys": args.zipf_keys},
        "proxy": {"toxiproxy": "v2.5.0", "bandwidth_kbps_per_connection": BANDWIDTH_KBPS,
                  "latency_ms": args.latency,
                  "latency": "downstream, added to every response's first byte",
                  "glue": "direct (not proxied)", "writer": "direct (not proxied)"},
        "lambda": {"planner_mb": PLANNER_MB, "converter_mb": CONVERTER_MB,
                   "shard_target_bytes": SHARD_TARGET_BYTES},
        "planner_converts": {"planner_mb": CONVERTING_PLANNER_MB,
                             "max_mb": CONVERT_IN_PLANNER_MAX_MB} if args.planner_converts else None,
        "baseline_planner_converts": args.baseline_planner_converts,
        "warm_planner": {"runtime": "aws-lambda-rie", "memory_mb": CONVERTING_PLANNER_MB,
                         "backfill": "cold (eqdv backfill, one process)"} if args.warm_planner else None,
        "commits": [],
    }

    audit, env, proxy = start_services(args.toxiproxy)
    direct = env["AWS_ENDPOINT_URL_S3"]
    proxy.set_latency(args.latency)
    warehouse = env["EQDV_WAREHOUSE_S3"] + "stream"
    plan_dir = tempfile.mkdtemp(prefix="eqdv-streaming-day.")
    # Binary -> its warm planner instance (--warm-planner): S3 through the proxy, the
    # stacks' settings, a shard queue for what it does not convert itself.
    warm = {}
    if args.warm_planner:
        queue = create_fifo_queue(env["AWS_ENDPOINT_URL_SQS"], f"streaming-day-{os.getpid()}")
        function_env = {
            "AWS_ENDPOINT_URL_S3": proxy.endpoint, "EQDV_CATALOG": "glue", "EQDV_WAREHOUSE": warehouse,
            "EQDV_ALLOWED_DATABASES": DAY.split(".")[0], "EQDV_SHARD_QUEUE_URL": queue,
            "EQDV_CONVERT_IN_PLANNER_MAX_MB": str(CONVERT_IN_PLANNER_MAX_MB),
            "EQDV_SHARD_TARGET_MB": str(SHARD_TARGET_BYTES // (1024 * 1024)),
        }
        warm[args.bin] = WarmPlanner(env["EQDV_LAMBDA_RIE"], args.planner_bin, function_env,
                                     "current", CONVERTING_PLANNER_MB)
        if args.baseline_planner_converts:
            warm[args.baseline_bin] = WarmPlanner(env["EQDV_LAMBDA_RIE"], args.baseline_planner_bin,
                                                  function_env, "baseline", CONVERTING_PLANNER_MB)

    def common(table):
        return ["--catalog", "glue", "--warehouse", warehouse, "--table", table, "--json"]

    def writer(table, commits):
        """The writer's commits, direct to MinIO."""
        os.environ["AWS_ENDPOINT_URL_S3"] = direct
        out = run_plain([args.bin, "generate", *common(table), *create, "--commits", str(commits)])
        audit.take(quiet_s=0.2)
        return out

    def floor(table, label):
        os.environ["AWS_ENDPOINT_URL_S3"] = proxy.endpoint
        run = measure([args.floor_bin, "s3-floor", "--warehouse", warehouse, "--table", table,
                       "--parallelism", str(FLOOR_PARALLELISM), "--reps", "1",
                       "--prepare-s3-endpoint", direct], f"floor {label}", timeout=900)
        audit.take(quiet_s=0.2)
        return run

    def convert_in_planner(table, label, binary, cold=False):
        """The planner converting its plan's one shard itself: one process, the planner
        function's code (`eqdv backfill`), or an invocation of the warm instance."""
        if binary in warm and not cold:
            planner = warm[binary].invoke(glue_table_change(table), f"warm planner {label}")
            planner["s3"] = audit.take(quiet_s=0.2)
            shards = planner.get("out", {}).get("plan", {}).get("shards", [])
            planner["queued_shards"] = sum(
                1 for sh in shards if not sh.get("in_planner", {}).get("result") == "converted")
            if "error" in planner:
                log(f"{label}: {planner['error'][:500]}")
            return {"planner": planner, "converters": [], "in_planner": True, "warm": True,
                    "planner_mb": CONVERTING_PLANNER_MB}
        os.environ["AWS_ENDPOINT_URL_S3"] = proxy.endpoint
        database, name = table.split(".")
        extra = {"EQDV_CONVERT_IN_PLANNER_MAX_MB": str(CONVERT_IN_PLANNER_MAX_MB),
                 "EQDV_SHARD_TARGET_MB": str(SHARD_TARGET_BYTES // (1024 * 1024))}
        os.environ.update(extra)
        try:
            planner = measure([binary, "backfill", "--catalog", "glue", "--warehouse", warehouse,
                               "--database", database, "--table", name, "--json"],
                              f"plan and convert {label}", timeout=900)
        finally:
            for k in extra:
                os.environ.pop(k, None)
        planner["s3"] = audit.take(quiet_s=0.2)
        shards = planner.get("out", {}).get("plan", {}).get("shards", [])
        # A shard the planner did not convert itself would be a converter's on Lambda.
        planner["queued_shards"] = sum(1 for sh in shards if not sh.get("in_planner", {}).get("result") == "converted")
        return {"planner": planner, "converters": [], "in_planner": True,
                "planner_mb": CONVERTING_PLANNER_MB}

    def convert(table, label, binary=args.bin, cold=False):
        """The serverless trigger's conversion: the planner, then each shard's converter
        (on Lambda they run at once; here one after another)."""
        if (args.planner_converts and binary == args.bin) or \
                (args.baseline_planner_converts and binary == args.baseline_bin):
            return convert_in_planner(table, label, binary, cold)
        os.environ["AWS_ENDPOINT_URL_S3"] = proxy.endpoint
        plan_file = os.path.join(plan_dir, f"{table}.json")
        planner = measure([binary, "plan", *common(table), "--target-shard-bytes",
                           str(SHARD_TARGET_BYTES), "--output", plan_file], f"plan {label}", timeout=900)
        planner["s3"] = audit.take(quiet_s=0.2)
        converters = []
        if "error" not in planner:
            with open(plan_file) as f:
                shards = json.load(f)["shards"]
            for shard in shards:
                run = measure([binary, "convert", *common(table), "--plan", plan_file,
                               "--shard-id", shard["id"]], f"convert {label} shard {shard['id'][:8]}",
                              timeout=900)
                run["s3"] = audit.take(quiet_s=0.2)
                converters.append(run)
        return {"planner": planner, "converters": converters}

    def save():
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)

    try:
        log(f"creating {DAY} ({' '.join(create)}), direct")
        results["table"]["created"] = writer(DAY, 0)
        if args.baseline_bin:
            log(f"creating {BASELINE} the same way, direct")
            results["table"]["baseline_created"] = writer(BASELINE, 0)
        for commit in range(1, args.commits + 1):
            label = f"commit {commit}/{args.commits}"
            written = writer(DAY, 1)
            written_at = time.monotonic()
            entry = {"commit": commit, "writer": {k: written.get(k) for k in (
                "data_files", "equality_delete_files", "rows_written", "equality_deletes_written",
                "live_rows")}}
            entry["floor"] = floor(DAY, label)
            # The floor's run is not the conversion's: the clock starts again after it.
            floor_s = time.monotonic() - written_at
            entry.update(convert(DAY, label))
            entry["writer_to_converted_s"] = time.monotonic() - written_at - floor_s
            if args.baseline_bin:
                writer(BASELINE, 1)
                entry["baseline"] = convert(BASELINE, f"baseline {label}", args.baseline_bin)
            results["commits"].append(entry)
            save()
        log(f"writing the same history into {BACKFILL} ({args.commits} commits in one call), direct")
        t = time.monotonic()
        results["table"]["backfill_created"] = writer(BACKFILL, args.commits)
        results["table"]["backfill_generate_s"] = time.monotonic() - t
        backfill = {"floor": floor(BACKFILL, "backfill")}
        # A backfill is a manual invocation: a cold process, as before.
        backfill.update(convert(BACKFILL, "backfill", cold=True))
        results["backfill"] = backfill
        os.environ["AWS_ENDPOINT_URL_S3"] = direct
        # Both tables must now hold no equality delete: what is left of each head's deletes.
        for table in (DAY, BACKFILL) + ((BASELINE,) if args.baseline_bin else ()):
            results.setdefault("left", {})[table] = run_plain(
                [args.bin, "inspect", *common(table)])["totals"]
    finally:
        for instance in warm.values():
            instance.stop()
        proxy.stop()
    results["machine"]["loadavg_end"] = os.getloadavg()
    save()
    log(f"done -> {args.out}")


if __name__ == "__main__":
    main()
