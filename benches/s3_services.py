"""What the benchmarks through S3 latency share (benches/s3_latency.py and
benches/streaming_day.py): the test services' S3 requests counted by kind from MinIO's
audit webhook, Toxiproxy in front of MinIO (a first-byte latency and a per-connection
bandwidth cap on every response), the services' environment, and running a command
that prints JSON."""

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
    if base.startswith("eqdv-key-index"):
        return "index leaf" if base.endswith(".parquet") else "index json"
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


def comparison_args():
    """The command line of a driver that runs binaries side by side through the proxy
    (benches/s3_latency.py, benches/random_keys.py)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", action="append", required=True, help="NAME=PATH, in run order")
    parser.add_argument("--bin-info", default="{}", help="JSON: per binary name, how it was built")
    parser.add_argument("--toxiproxy", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--floor-bin", help="eqdv-bench, for the S3 floor")
    parser.add_argument("--duckdb-python",
                        help="a Python with DuckDB, its httpfs wheel and PyIceberg (tests/run's venv), "
                             "for DuckDB's conversion through S3")
    return parser.parse_args()


def run_plain(cmd):
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout)


def start_services(toxiproxy):
    """Starts the test services (tests/services/up) with MinIO posting its audit records
    to a new Audit, takes their environment into os.environ, and starts Toxiproxy in
    front of MinIO. Returns (audit, env, proxy); S3 is still direct until a caller points
    AWS_ENDPOINT_URL_S3 at proxy.endpoint."""
    audit = Audit()
    print(f"audit webhook at {audit.url}; starting the test services", file=sys.stderr, flush=True)
    up = subprocess.run([os.path.join(ROOT, "tests/services/up")],
                        env=dict(os.environ, EQDV_MINIO_AUDIT_WEBHOOK=audit.url),
                        capture_output=True, text=True)
    if up.returncode != 0:
        raise SystemExit(f"tests/services/up failed:\n{up.stdout[-2000:]}\n{up.stderr[-2000:]}")
    env = services_env()
    os.environ.update(env)
    proxy = Toxiproxy(toxiproxy, env["AWS_ENDPOINT_URL_S3"].removeprefix("http://"))
    return audit, env, proxy
