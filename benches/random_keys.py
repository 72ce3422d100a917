"""The random keys benchmark's driver (benches/random_keys calls it, holding the services
lock): tables whose keys are random (UUIDs, or long ids hashed over all of i64), so no
data file's bounds rule out any deleted key, with and without writer-side Parquet bloom
filters (before the footer, as Java writes them; for UUIDs also after each row group);
`eqdv convert --dry-run` on each through Toxiproxy (first-byte latency and a
per-connection bandwidth cap on every S3 response), for the binary under test and a
baseline binary side by side, and the binary under test with pruning off.

Each table is `eqdv generate` on Glue + MinIO: 2,000 data files of 1,000 rows in two row
groups, 30 columns (24 of them filler), then CDC commits of 300 changes (about 200
deleted keys each: updates and deletes of keys drawn from all of history). The runs
happen after 1, 10 and 100 such commits, so a conversion meets about 200, 2,000 and
20,000 deleted keys. Each run is its own process measured with wait4 (bench.measure);
MinIO's audit webhook counts its S3 requests by kind. With --floor-bin, the S3 floor of
each resolve runs first (`eqdv-bench s3-floor`: the delete files and the key column
chunks that truly hold a key fetched at once, decoded and probed; timed in-process).

Usage: random_keys.py --bin NAME=PATH [--bin NAME=PATH ...] --toxiproxy PATH --out RESULTS.json
                      [--floor-bin PATH] [--reps N]
"""

import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench import log, machine, measure  # noqa: E402
from s3_services import BANDWIDTH_KBPS, comparison_args, run_plain, start_services  # noqa: E402

BASE = ["--rows", "2000000", "--rows-per-file", "1000", "--rows-per-row-group", "500",
        "--extra-columns", "24", "--changes-per-commit", "300"]
# (table, key options)
KEYS = [("uuid", ["--key", "uuid"]), ("hashed", ["--key", "long", "--hashed-keys"])]
# (name, generate options, where the filters are): filters before the footer as Java's
# Parquet writer places them; for UUID keys also after each row group (the Rust writer's
# default), where they are reads of their own.
BLOOM = [("nobloom", [], None), ("bloom", ["--bloom-filters"], "end")]
UUID_ONLY = [("bloom_rg", ["--bloom-filters", "--bloom-filters-after-row-groups"],
              "after row groups")]
# CDC commits done before each step's runs (cumulative): 1, 10, 100.
STEPS = [1, 10, 100]
LATENCY_MS = 20
# The floor's requests in flight: eqdv's default parallelism.
FLOOR_PARALLELISM = 64


def main():
    args = comparison_args()
    binaries = [tuple(b.split("=", 1)) for b in args.bin]
    current = binaries[-1]
    results = {"machine": machine(), "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
               "binaries": json.loads(args.bin_info), "base": BASE, "steps": STEPS,
               "proxy": {"toxiproxy": "v2.5.0", "latency_ms": LATENCY_MS,
                         "bandwidth_kbps_per_connection": BANDWIDTH_KBPS,
                         "latency": "downstream, added to every response's first byte",
                         "glue": "direct (not proxied)"},
               "tables": [], "runs": [], "floor": []}

    def save():
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)

    audit, env, proxy = start_services(args.toxiproxy)
    direct = env["AWS_ENDPOINT_URL_S3"]
    try:
        warehouse = env["EQDV_WAREHOUSE_S3"] + "rk"
        proxy.set_latency(LATENCY_MS)
        for key_name, key_args in KEYS:
            for bloom_name, bloom_args, placement in BLOOM + (UUID_ONLY if key_name == "uuid" else []):
                table = f"rk.{key_name}_{bloom_name}"
                common = ["--catalog", "glue", "--warehouse", warehouse, "--table", table, "--json"]
                info = {"name": table, "key": key_name, "bloom": placement is not None,
                        "bloom_placement": placement,
                        "generate": [*BASE, *key_args, *bloom_args], "steps": []}
                results["tables"].append(info)
                done = -1  # commits so far; -1: no table yet
                for step in STEPS:
                    # Generation goes direct: it is not what is measured.
                    os.environ["AWS_ENDPOINT_URL_S3"] = direct
                    t = time.monotonic()
                    commits = step if done < 0 else step - done
                    log(f"generating {table}: {commits} more commit(s), to {step}")
                    generated = run_plain([current[1], "generate", *common, *info["generate"],
                                           "--commits", str(commits)])
                    info["steps"].append({"commits": step, "generate_s": time.monotonic() - t,
                                          "generated": generated})
                    done = step
                    audit.take()
                    os.environ["AWS_ENDPOINT_URL_S3"] = proxy.endpoint
                    if args.floor_bin:
                        run = measure([args.floor_bin, "s3-floor", "--warehouse", warehouse,
                                       "--table", table, "--parallelism", str(FLOOR_PARALLELISM),
                                       "--reps", str(args.reps)],
                                      f"floor {table} after {step}", timeout=900)
                        run.update(table=table, commits=step)
                        results["floor"].append(run)
                        audit.take(quiet_s=0.2)
                    for rep in range(args.reps):
                        runs = [(name, path, []) for name, path in binaries]
                        runs.append(("no pruning", current[1], ["--no-pruning"]))
                        for name, path, extra in runs:
                            label = f"{name} {table} after {step} #{rep + 1}"
                            audit.take(quiet_s=0.2)  # anything left over goes elsewhere
                            run = measure([path, "convert", *common, "--dry-run", *extra],
                                          label, timeout=900)
                            run.update(binary=name, table=table, key=key_name,
                                       bloom=placement is not None, commits=step, rep=rep,
                                       s3=audit.take())
                            results["runs"].append(run)
                            save()
        results["audit_sample"] = audit.sample
    finally:
        os.environ["AWS_ENDPOINT_URL_S3"] = direct
        proxy.stop()
    results["machine"]["loadavg_end"] = os.getloadavg()
    save()
    log(f"done -> {args.out}")


if __name__ == "__main__":
    main()
