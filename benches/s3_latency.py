"""The S3 latency benchmark's driver (benches/s3_latency calls it, holding the services
lock): `eqdv convert --dry-run` on a Glue + MinIO table, direct and through Toxiproxy
(first-byte latency and a per-connection bandwidth cap on every S3 response), for the
binary under test and a baseline binary side by side. Each run is its own process
measured with wait4 (bench.measure); MinIO's audit webhook counts its S3 requests by
kind. Glue is reached directly: only S3 goes through the proxy.

With --floor-bin (eqdv-bench), also the S3 floor of the first table's resolve at each
latency (`eqdv-bench s3-floor`: the delete files and the key column chunks that truly
hold a key fetched at once, decoded and probed; timed in-process, its preparation not).
With --duckdb-python, also DuckDB's conversion of the first table at each latency
(benches/duckdb_s3_convert.py: httpfs through the same proxy; timed in-process, its
listing of the table's files not, and end to end).

Usage: s3_latency.py --bin NAME=PATH [--bin NAME=PATH ...] --toxiproxy PATH --out RESULTS.json
                     [--floor-bin PATH] [--duckdb-python PATH]
"""

import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench import log, machine, measure  # noqa: E402
from s3_services import BANDWIDTH_KBPS, comparison_args, run_plain, start_services  # noqa: E402

# The table of issue 13: 1,000 data files in bucket[16], 192 equality delete files.
TABLE = "s3lat.events"
GENERATE = ["--rows", "400000", "--commits", "12", "--partition", "bucket:16"]
# The same table once converted, then 4 more CDC commits: as a streaming table is when the
# serverless trigger converts it again, most files the new deletes touch already have a
# DV to merge with.
STREAMED = "s3lat.streamed"
STREAMED_MORE = ["--rows", "400000", "--commits", "4", "--partition", "bucket:16"]
LATENCIES_MS = [None, 20, 50]  # None: direct to MinIO, no proxy
PARALLELISMS = [None, 64]  # None: eqdv's default
# The streamed table runs at 64 only: both binaries then read as many files at once, and
# what differs is how they read the DVs they merge with.
STREAMED_PARALLELISMS = [64]
# DuckDB as it comes (a thread per core) and as a user tunes it for S3: threads well past
# the cores (each waits on its own round trip) and httpfs's metadata cache; 64 is eqdv's
# default parallelism, the reads it keeps in flight.
DUCKDB_SETTINGS = [
    ("default", []),
    ("16 threads", ["--threads", "16", "--metadata-cache"]),
    ("64 threads", ["--threads", "64", "--metadata-cache"]),
]
# The floor's requests in flight: as many as eqdv's default, so that the floor is what
# eqdv's own setting could reach at best.
FLOOR_PARALLELISM = 64


def main():
    args = comparison_args()
    binaries = [tuple(b.split("=", 1)) for b in args.bin]
    results = {"machine": machine(), "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
               "binaries": json.loads(args.bin_info), "table": {"name": TABLE, "generate": GENERATE},
               "proxy": {"toxiproxy": "v2.5.0", "bandwidth_kbps_per_connection": BANDWIDTH_KBPS,
                         "latency": "downstream, added to every response's first byte",
                         "glue": "direct (not proxied)"},
               "runs": []}

    audit, env, proxy = start_services(args.toxiproxy)
    direct = env["AWS_ENDPOINT_URL_S3"]
    try:
        warehouse = env["EQDV_WAREHOUSE_S3"] + "s3lat"

        def common(table):
            return ["--catalog", "glue", "--warehouse", warehouse, "--table", table, "--json"]

        def use_latency(latency):
            """S3 for the next runs: direct (None), or through the proxy at `latency` ms."""
            if latency is None:
                os.environ["AWS_ENDPOINT_URL_S3"] = direct
            else:
                proxy.set_latency(latency)
                os.environ["AWS_ENDPOINT_URL_S3"] = proxy.endpoint

        first = binaries[-1][1]
        t = time.monotonic()
        log(f"generating {TABLE} ({' '.join(GENERATE)}), direct")
        results["table"]["generated"] = run_plain([first, "generate", *common(TABLE), *GENERATE])
        results["table"]["generate_s"] = time.monotonic() - t
        results["table"]["generate_requests"] = audit.take()
        # The streamed table: the same history, converted for real by the binary under test
        # (so both binaries merge with the same DVs), then more commits.
        log(f"generating {STREAMED}: {' '.join(GENERATE)}, converted, then {' '.join(STREAMED_MORE)}")
        streamed = {"name": STREAMED, "generate": GENERATE, "then_convert": True,
                    "then_generate": STREAMED_MORE}
        run_plain([first, "generate", *common(STREAMED), *GENERATE])
        streamed["converted"] = run_plain([first, "convert", *common(STREAMED)])
        streamed["generated"] = run_plain([first, "generate", *common(STREAMED), *STREAMED_MORE])
        results["streamed"] = streamed
        audit.take()
        # The bucket is only read from here on: every timed convert is a dry run.
        if args.floor_bin:
            results["floor"] = []
            for latency in LATENCIES_MS:
                use_latency(latency)
                label = f"floor {TABLE} {'direct' if latency is None else f'{latency} ms'}"
                run = measure([args.floor_bin, "s3-floor", "--warehouse", warehouse, "--table", TABLE,
                               "--parallelism", str(FLOOR_PARALLELISM), "--reps", str(args.reps)],
                              label, timeout=900)
                run.update(table=TABLE, latency_ms=latency)
                results["floor"].append(run)
                audit.take(quiet_s=0.2)
        if args.duckdb_python:
            results["duckdb"] = []
            script = os.path.join(HERE, "duckdb_s3_convert.py")
            for rep in range(args.reps):
                for latency in LATENCIES_MS:
                    use_latency(latency)
                    for setting, flags in DUCKDB_SETTINGS:
                        label = (f"duckdb {TABLE} {'direct' if latency is None else f'{latency} ms'} "
                                 f"{setting} #{rep + 1}")
                        audit.take(quiet_s=0.2)
                        run = measure([args.duckdb_python, script, "--table", TABLE, "--list-endpoint", direct,
                                       *flags], label, timeout=900)
                        run.update(table=TABLE, latency_ms=latency, rep=rep, setting=setting,
                                   s3=audit.take(quiet_s=0.2))
                        results["duckdb"].append(run)
        for rep in range(args.reps):
            for latency in LATENCIES_MS:
                use_latency(latency)
                for table, parallelisms in ((TABLE, PARALLELISMS), (STREAMED, STREAMED_PARALLELISMS)):
                    for parallelism in parallelisms:
                        for name, path in binaries:
                            extra = [] if parallelism is None else ["--parallelism", str(parallelism)]
                            label = (f"{name} {table} {'direct' if latency is None else f'{latency} ms'} "
                                     f"p={parallelism or 'default'} #{rep + 1}")
                            audit.take(quiet_s=0.2)  # anything left over goes elsewhere
                            run = measure([path, "convert", *common(table), "--dry-run", *extra],
                                          label, timeout=600)
                            run.update(binary=name, table=table, latency_ms=latency,
                                       parallelism=parallelism, rep=rep, s3=audit.take())
                            results["runs"].append(run)
                            with open(args.out, "w") as f:
                                json.dump(results, f, indent=1)
        results["audit_sample"] = audit.sample
    finally:
        proxy.stop()
    results["machine"]["loadavg_end"] = os.getloadavg()
    with open(args.out, "w") as f:
        json.dump(results, f, indent=1)
    log(f"done -> {args.out}")


if __name__ == "__main__":
    main()
