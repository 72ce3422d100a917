"""The S3 latency benchmark's driver (benches/s3_latency calls it, holding the services
lock): `eqdv convert --dry-run` on a Glue + MinIO table, direct and through Toxiproxy
(first-byte latency and a per-connection bandwidth cap on every S3 response), for the
binary under test and a baseline binary side by side. Each run is its own process
measured with wait4 (bench.measure); MinIO's audit webhook counts its S3 requests by
kind. Glue is reached directly: only S3 goes through the proxy.

With --floor-bin (eqdv-bench), also the S3 floor of the first table's resolve at each
latency (`eqdv-bench s3-floor`: the delete files and the key column chunks that truly
hold a key fetched at once, decoded and probed; timed in-process, its preparation not).

Usage: s3_latency.py --bin NAME=PATH [--bin NAME=PATH ...] --toxiproxy PATH --out RESULTS.json
                     [--floor-bin PATH]
"""

import argparse
import http.server
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from bench import log, machine, measure  # noqa: E402

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
# The floor's requests in flight: as many as eqdv's default, so that the floor is what
# eqdv's own setting could reach at best.
FLOOR_PARALLELISM = 64
BANDWIDTH_KBPS = 80_000  # Toxiproxy's rate is in KB/s: 80 MB/s per connection


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- S3 requests by kind, from MinIO's audit webhook ------------------------------------
CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+)")


def classify(entry):
    """The kind of one S3 request: by API, then by object key (the generator's and
    eqdv's file names) and, for data files, by whether the range ends at the file's end
    (the footer) or not (a column chunk)."""
    api = entry.get("api", {})
    name = api.get("name", "")
    key = api.get("object", "")
    if name in ("PutObject", "CompleteMultipartUpload", "PutObjectPart", "NewMultipartUpload",
                "DeleteObject", "DeleteMultipleObjects", "CopyObject"):
        return "write"
    if name.startswith("ListObjects"):
        return "list"
    if name == "HeadObject":
        return "head"
    if name != "GetObject":
        return name or "other"
    base = key.rsplit("/", 1)[-1]
    if base.endswith(".metadata.json"):
        return "metadata"
    if base.endswith(".avro"):
        return "manifest list" if base.startswith("snap-") else "manifest"
    if base.endswith(".puffin"):
        return "dv"
    if base.endswith(".parquet"):
        if "delete" in base:
            return "delete file"
        m = CONTENT_RANGE.search(entry.get("responseHeader", {}).get("Content-Range", ""))
        if m and int(m.group(2)) + 1 == int(m.group(3)):
            return "data footer"
        return "data chunk"
    return "other"


class Audit:
    """Counts the audit records MinIO posts (newline-delimited JSON), by kind."""

    def __init__(self):
        self.lock = threading.Lock()
        self.counts = {}
        self.bytes = {}
        self.received = 0
        self.ranges = 0
        self.last = time.monotonic()
        self.sample = None
        audit = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                for line in body.splitlines():
                    if line.strip():
                        audit.add(json.loads(line))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def add(self, entry):
        if entry.get("api", {}).get("bucket") != "warehouse":
            return  # MinIO's own housekeeping
        kind = classify(entry)
        with self.lock:
            self.received += 1
            self.counts[kind] = self.counts.get(kind, 0) + 1
            tx = entry.get("api", {}).get("tx", 0) or 0
            self.bytes[kind] = self.bytes.get(kind, 0) + max(tx, 0)
            if "Range" in entry.get("requestHeader", {}):
                self.ranges += 1
            if self.sample is None and kind == "data footer":
                self.sample = entry
            self.last = time.monotonic()

    def take(self, quiet_s=1.0, max_wait_s=15.0):
        """The counts since the last take, once no record arrived for quiet_s."""
        started = time.monotonic()
        while time.monotonic() - max(self.last, started) < quiet_s:
            if time.monotonic() - started > max_wait_s:
                break
            time.sleep(0.1)
        with self.lock:
            out = {"requests": dict(sorted(self.counts.items())),
                   "bytes": dict(sorted(self.bytes.items())),
                   "total": self.received, "ranged": self.ranges}
            self.counts, self.bytes, self.received, self.ranges = {}, {}, 0, 0
        return out


# --- Toxiproxy ------------------------------------------------------------------------------
class Toxiproxy:
    def __init__(self, binary, upstream):
        self.api_port = free_port()
        self.api = f"http://127.0.0.1:{self.api_port}"
        self.proc = subprocess.Popen([binary, "-host", "127.0.0.1", "-port", str(self.api_port)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(self.api + "/version", timeout=2).read()
                break
            except OSError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise SystemExit("toxiproxy-server did not start")
                time.sleep(0.2)
        try:
            self.setup(upstream)
        except BaseException:
            self.stop()
            raise

    def setup(self, upstream):
        self.port = free_port()
        self.call("POST", "/proxies", {"name": "minio", "listen": f"127.0.0.1:{self.port}",
                                       "upstream": upstream, "enabled": True})
        # Per connection (each toxic runs per link): every response is capped.
        self.call("POST", "/proxies/minio/toxics", {
            "name": "bandwidth", "type": "bandwidth", "stream": "downstream",
            "toxicity": 1.0, "attributes": {"rate": BANDWIDTH_KBPS}})
        self.call("POST", "/proxies/minio/toxics", {
            "name": "latency", "type": "latency", "stream": "downstream",
            "toxicity": 1.0, "attributes": {"latency": 0, "jitter": 0}})
        self.endpoint = f"http://127.0.0.1:{self.port}"

    def call(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.api + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            return json.loads(resp.read() or b"null")

    def set_latency(self, ms):
        self.call("POST", "/proxies/minio/toxics/latency", {"attributes": {"latency": ms, "jitter": 0}})

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=10)


def services_env():
    env = {}
    with open(os.path.join(ROOT, "tests/services/env")) as f:
        for line in f:
            m = re.match(r"export (\w+)=(.*)", line.strip())
            if m:
                env[m.group(1)] = m.group(2)
    return env


def run_plain(cmd):
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", action="append", required=True, help="NAME=PATH, in run order")
    parser.add_argument("--bin-info", default="{}", help="JSON: per binary name, how it was built")
    parser.add_argument("--toxiproxy", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--floor-bin", help="eqdv-bench, for the S3 floor")
    args = parser.parse_args()
    binaries = [tuple(b.split("=", 1)) for b in args.bin]
    results = {"machine": machine(), "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
               "binaries": json.loads(args.bin_info), "table": {"name": TABLE, "generate": GENERATE},
               "proxy": {"toxiproxy": "v2.5.0", "bandwidth_kbps_per_connection": BANDWIDTH_KBPS,
                         "latency": "downstream, added to every response's first byte",
                         "glue": "direct (not proxied)"},
               "runs": []}

    audit = Audit()
    log(f"audit webhook at {audit.url}; starting the test services")
    up = subprocess.run([os.path.join(ROOT, "tests/services/up")],
                        env=dict(os.environ, EQDV_MINIO_AUDIT_WEBHOOK=audit.url),
                        capture_output=True, text=True)
    if up.returncode != 0:
        raise SystemExit(f"tests/services/up failed:\n{up.stdout[-2000:]}\n{up.stderr[-2000:]}")
    env = services_env()
    os.environ.update(env)
    direct = env["AWS_ENDPOINT_URL_S3"]
    proxy = Toxiproxy(args.toxiproxy, direct.removeprefix("http://"))
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
