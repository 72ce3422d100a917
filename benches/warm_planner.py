"""The planner function as Lambda runs it warm: its release binary behind aws-lambda-rie
(the Runtime API server of Lambda's container images), started once and invoked with a
Glue table-change event after each writer commit. Lambda keeps an instance warm for
events minutes apart, so a streaming table's conversions run in one process, one
invocation each; what Lambda bills for one is the emulator's REPORT Duration.

Used by benches/streaming_day.py --warm-planner.
"""

import json
import os
import re
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

from s3_services import free_port

REPORT = re.compile(r"^REPORT RequestId: (\S+)\s+(?:Init Duration: ([\d.]+) ms\s+)?Duration: ([\d.]+) ms"
                    r"\s+Billed Duration: (\d+) ms", re.M)
INIT_REPORT = re.compile(r"INIT REPORT\(durationMs: ([\d.]+)\)")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def create_fifo_queue(sqs_endpoint, name):
    """A FIFO queue on LocalStack's SQS (the planner function needs one for the shards it
    does not convert itself); returns its URL."""
    body = urllib.parse.urlencode({
        "Action": "CreateQueue", "QueueName": f"{name}.fifo",
        "Attribute.1.Name": "FifoQueue", "Attribute.1.Value": "true",
        "Attribute.2.Name": "ContentBasedDeduplication", "Attribute.2.Value": "true",
    }).encode()
    with urllib.request.urlopen(urllib.request.Request(sqs_endpoint, data=body), timeout=30) as r:
        text = r.read().decode()
    m = re.search(r"<QueueUrl>([^<]+)</QueueUrl>", text)
    if not m:
        raise SystemExit(f"CreateQueue {name}.fifo answered: {text[:500]}")
    return m.group(1)


def glue_table_change(table):
    database, name = table.split(".")
    return {
        "version": "0", "id": "00000000-0000-4000-8000-000000000000",
        "detail-type": "Glue Data Catalog Table State Change", "source": "aws.glue",
        "account": "000000000000", "region": "us-east-1",
        "resources": [f"arn:aws:glue:us-east-1:000000000000:table/{database}/{name}"],
        "detail": {"databaseName": database, "tableName": name, "typeOfChange": "UpdateTable",
                   "changedPartitions": []},
    }


class WarmPlanner:
    def __init__(self, rie, binary, env, label, memory_mb):
        self.dir = tempfile.mkdtemp(prefix=f"eqdv-warm-planner-{label}.")
        self.log_path = os.path.join(self.dir, "function.log")
        self.port, api = free_port(), free_port()
        self.memory_mb = memory_mb
        full = dict(os.environ, **env, AWS_LAMBDA_FUNCTION_NAME="eqdv-planner",
                    AWS_LAMBDA_FUNCTION_TIMEOUT="900", AWS_LAMBDA_FUNCTION_MEMORY_SIZE=str(memory_mb),
                    RUST_LOG="info", RUST_BACKTRACE="0")
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [rie, "--runtime-interface-emulator-address", f"127.0.0.1:{self.port}",
             "--runtime-api-address", f"127.0.0.1:{api}", binary],
            env=full, stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True)
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise SystemExit(f"aws-lambda-rie did not listen: {self.logs()[-2000:]}")
                time.sleep(0.05)
        self.invocations = 0

    def logs(self, start=0):
        with open(self.log_path, errors="replace") as f:
            f.seek(start)
            return f.read()

    def function_pid(self):
        """The function's process: the emulator's child, once the first invocation started it."""
        out = subprocess.run(["pgrep", "-P", str(self.proc.pid)], capture_output=True, text=True)
        pids = [int(p) for p in out.stdout.split()]
        return pids[0] if pids else None

    @staticmethod
    def cpu_s(pid):
        if pid is None:
            return 0.0
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime, stime

    @staticmethod
    def peak_rss_mb(pid):
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
        return None

    def invoke(self, event, label):
        """One invocation, shaped as bench.measure's result: `wall_s` is the REPORT
        Duration (what Lambda bills; a first invocation's includes the init phase, also
        given apart as `init_ms`), `client_wall_s` the request's round trip, `cpu_s` the
        function process's CPU during it, `max_rss_mb` its peak so far; `out` holds the
        planner's response and, as `eqdv backfill` prints them, the conversions."""
        start = os.path.getsize(self.log_path)
        pid = self.function_pid()
        cpu_before = self.cpu_s(pid)
        url = f"http://127.0.0.1:{self.port}/2015-03-31/functions/function/invocations"
        request = urllib.request.Request(url, data=json.dumps(event).encode(),
                                         headers={"Content-Type": "application/json"})
        t = time.monotonic()
        try:
            with urllib.request.urlopen(request, timeout=900) as r:
                text = r.read().decode()
        except urllib.error.HTTPError as e:
            text = e.read().decode()
        client_wall = time.monotonic() - t
        self.invocations += 1
        result = {"label": label, "cmd": ["eqdv-planner (aws-lambda-rie)"], "client_wall_s": client_wall,
                  "invocation": self.invocations}
        report = None
        deadline = time.monotonic() + 10
        while report is None and time.monotonic() < deadline:
            report = REPORT.search(self.logs(start))
            if report is None:
                time.sleep(0.02)
        if report is None:
            result["error"] = "no REPORT line from the emulator"
            result["wall_s"] = client_wall
        else:
            result["wall_s"] = float(report.group(3)) / 1000.0
            result["billed_ms"] = int(report.group(4))
        init = INIT_REPORT.search(self.logs(start))
        if init:
            result["init_ms"] = float(init.group(1))
        pid = pid or self.function_pid()
        result["cpu_s"] = self.cpu_s(pid) - cpu_before
        result["max_rss_mb"] = self.peak_rss_mb(pid) if pid else None
        try:
            response = json.loads(text)
        except json.JSONDecodeError:
            response = None
        if not isinstance(response, dict) or "shards" not in response:
            result["error"] = f"the planner answered: {text[:2000]}"
            result["exit"] = 1
            return result
        result["exit"] = 0
        conversions = [s["in_planner"] for s in response["shards"]
                       if s.get("in_planner", {}).get("result") == "converted"]
        result["out"] = {"plan": {"shards": response["shards"], "tables": response.get("tables")},
                         "conversions": conversions}
        return result

    def stop(self):
        try:
            os.killpg(self.proc.pid, 9)
        except ProcessLookupError:
            pass
        self.proc.wait()
        self.log.close()
