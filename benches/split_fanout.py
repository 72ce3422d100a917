"""The split fan-out benchmark's driver (benches/split_fanout calls it, holding the
services lock): one shard converted by one invocation, against the same shard split into
N data ranges, each range its own process (`eqdv split range`), then the fan-in
(`eqdv split commit`), on a Glue + MinIO table whose equality deletes are global (one
group, one shard), through Toxiproxy (first-byte latency and a per-connection bandwidth
cap on every S3 response). Each process is measured with wait4 (bench.measure); MinIO's
audit webhook counts its S3 requests by kind. Glue is reached directly.

The runs are real conversions. After each, the table's Glue pointer is set back to the
metadata it had before, so every run converts the same table state (their files stay
behind as orphans; the split's own files are overwritten by the next split of the same
job, whose id is the same).

The ranges run one after another on this 2-core machine; on Lambda they run at once,
each with its own CPU, so the report estimates the split's wall time as the slowest
range plus the fan-in, and its Lambda-seconds as the sum of all its processes' walls.

Usage: split_fanout.py --bin PATH --toxiproxy PATH --out RESULTS.json [--reps N]
                       [--ranges N ...] [--latency MS] [--rows N] [--hashed-keys]
                       [--baseline-bin PATH --baseline-info JSON]

With --baseline-bin, each split runs with that binary too, on the same table state (the
same job file: a job is the planner's, not the binary's).
"""

import argparse
import json
import os
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench import log, machine, measure  # noqa: E402
from s3_services import BANDWIDTH_KBPS, run_plain, start_services  # noqa: E402

# The shape of issue 13's S3 latency table (bucket[16], 12 CDC commits), its deletes
# written under the unpartitioned spec (global), at --rows rows (500 a data file): a
# split is for a shard that takes one invocation long, so the default is fifty times
# that table (about 40,000 data files).
TABLE = "fanout.events"
DEFAULT_ROWS = 20_000_000


def generate_args(rows, hashed_keys):
    args = ["--rows", str(rows), "--commits", "12", "--partition", "bucket:16", "--global-deletes"]
    # Hashed ids spread over all of i64 (as CDC keys often are): file bounds prune nothing,
    # so every deleted key is probed in every data file, the shards splits are made for.
    return args + ["--hashed-keys"] if hashed_keys else args


def glue(target, body):
    """One call of the Glue emulator's JSON API (it does not check signatures)."""
    request = urllib.request.Request(
        os.environ["AWS_ENDPOINT_URL_GLUE"],
        data=json.dumps(body).encode(),
        headers={
            "Content-Type": "application/x-amz-json-1.1",
            "X-Amz-Target": f"AWSGlue.{target}",
            "Authorization": "AWS4-HMAC-SHA256 Credential=bench/20260101/us-east-1/glue/aws4_request, "
                             "SignedHeaders=host, Signature=0",
        },
    )
    with urllib.request.urlopen(request) as response:
        return json.loads(response.read() or b"{}")


def pointer(database, table):
    return glue("GetTable", {"DatabaseName": database, "Name": table})["Table"]["Parameters"]["metadata_location"]


def set_pointer(database, table, location):
    """Sets the table's Glue pointer back to `location`, as before a conversion."""
    current = glue("GetTable", {"DatabaseName": database, "Name": table})["Table"]
    params = dict(current["Parameters"])
    params["previous_metadata_location"] = params["metadata_location"]
    params["metadata_location"] = location
    table_input = {k: current[k] for k in ("Name", "TableType", "StorageDescriptor", "Description")
                   if k in current}
    table_input["Parameters"] = params
    glue("UpdateTable", {"DatabaseName": database, "TableInput": table_input})
    if pointer(database, table) != location:
        raise SystemExit(f"the pointer of {database}.{table} did not go back to {location}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", required=True, help="eqdv")
    parser.add_argument("--bin-info", default="{}", help="JSON: how it was built")
    parser.add_argument("--toxiproxy", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--ranges", type=int, nargs="+", default=[4, 8])
    parser.add_argument("--latency", type=int, default=20)
    parser.add_argument("--rows", type=int, default=DEFAULT_ROWS)
    parser.add_argument("--hashed-keys", action="store_true")
    parser.add_argument("--baseline-bin", help="another eqdv whose splits run beside (same table)")
    parser.add_argument("--baseline-info", default="{}", help="JSON: how the baseline was built")
    args = parser.parse_args()
    GENERATE = generate_args(args.rows, args.hashed_keys)
    eqdv = args.bin
    database, name = TABLE.split(".")
    results = {"machine": machine(), "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
               "binary": json.loads(args.bin_info), "table": {"name": TABLE, "generate": GENERATE},
               "baseline": json.loads(args.baseline_info) if args.baseline_bin else None,
               "latency_ms": args.latency, "ranges": args.ranges,
               "proxy": {"toxiproxy": "v2.5.0", "bandwidth_kbps_per_connection": BANDWIDTH_KBPS,
                         "latency": "downstream, added to every response's first byte",
                         "glue": "direct (not proxied)"},
               "runs": []}

    def save():
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)

    audit, env, proxy = start_services(args.toxiproxy)
    direct = env["AWS_ENDPOINT_URL_S3"]
    jobs = tempfile.mkdtemp(prefix="eqdv-split-fanout-")
    try:
        warehouse = env["EQDV_WAREHOUSE_S3"] + "fanout"
        catalog = ["--catalog", "glue", "--warehouse", warehouse, "--json"]
        table = [*catalog, "--table", TABLE]
        os.environ["AWS_ENDPOINT_URL_S3"] = direct
        t = time.monotonic()
        log(f"generating {TABLE} ({' '.join(GENERATE)}), direct")
        results["table"]["generated"] = run_plain([eqdv, "generate", *table, *GENERATE])
        results["table"]["generate_s"] = time.monotonic() - t
        plan = run_plain([eqdv, "plan", *table])
        results["table"]["shards"] = len(plan["shards"])
        base = pointer(database, name)
        results["table"]["base_metadata"] = base
        audit.take()

        proxy.set_latency(args.latency)
        os.environ["AWS_ENDPOINT_URL_S3"] = proxy.endpoint

        def timed(cmd, label, **fields):
            audit.take(quiet_s=0.2)  # anything left over belongs elsewhere
            run = measure(cmd, label, timeout=900)
            run.update(fields, s3=audit.take())
            if "error" in run:
                raise SystemExit(f"{label} failed: {run['error']}")
            results["runs"].append(run)
            save()
            return run

        for rep in range(args.reps):
            timed([eqdv, "convert", *table], f"one invocation #{rep + 1}", mode="single", ranges=1, rep=rep)
            set_pointer(database, name, base)
            binaries = [("current", eqdv)] + ([("baseline", args.baseline_bin)] if args.baseline_bin else [])
            for n in args.ranges:
                for which, binary in binaries:
                    job = os.path.join(jobs, f"job-{n}.json")
                    # The planner's part, in neither side's time: the single invocation
                    # is handed a shard as well.
                    run_plain([binary, "split", "job", *table, "--ranges", str(n), "--output", job])
                    tag = "" if which == "current" else f" ({which})"
                    for index in range(n):
                        timed([binary, "split", "range", *catalog, "--job", job, "--range", str(index)],
                              f"split {n}{tag}: range {index} #{rep + 1}", mode="range", ranges=n,
                              range=index, rep=rep, binary=which)
                    timed([binary, "split", "commit", *catalog, "--job", job],
                          f"split {n}{tag}: fan-in #{rep + 1}", mode="commit", ranges=n, rep=rep, binary=which)
                    set_pointer(database, name, base)
        results["audit_sample"] = audit.sample
    finally:
        proxy.stop()
    results["machine"]["loadavg_end"] = os.getloadavg()
    save()
    log(f"done -> {args.out}")


if __name__ == "__main__":
    main()
