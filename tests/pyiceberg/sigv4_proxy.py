#!/usr/bin/env python3
"""A reverse proxy that lets through only requests signed with AWS SigV4, as botocore
computes the signature: the independent check of eqdv's signing of Iceberg REST requests
for AWS's endpoints (Glue's and S3 Tables' Iceberg REST endpoints sign with SigV4; the
test services' REST server does not check signatures, so this stands in front of it).

For every request it recomputes the signature with botocore's SigV4Auth from the
request's own method, path, query, signed headers, body and X-Amz-Date, with the known
credentials (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY), and compares it with the one in
the Authorization header, whose scope must name --service and --region. A match is
forwarded to --upstream; anything else is answered 403 with the reason. `GET
/_sigv4/stats` answers {"verified": N, "rejected": N, "reasons": [...]}.

Prints `listening PORT` once it accepts connections; runs until killed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

AUTH = re.compile(
    r"^AWS4-HMAC-SHA256 Credential=(?P<key>[^/]+)/(?P<day>\d{8})/(?P<region>[^/]+)/(?P<service>[^/]+)/aws4_request,\s*"
    r"SignedHeaders=(?P<signed>[a-z0-9;-]+),\s*Signature=(?P<signature>[0-9a-f]{64})$"
)
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "upgrade", "proxy-connection", "host"}


class Stats:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.verified = 0
        self.rejected = 0
        self.reasons: list[str] = []

    def as_json(self) -> bytes:
        with self.lock:
            return json.dumps({"verified": self.verified, "rejected": self.rejected, "reasons": self.reasons}).encode()


def expected_signature(
    method: str, url: str, headers: dict[str, str], signed: list[str], body: bytes, credentials: Credentials,
    service: str, region: str, amz_date: str,
) -> str:
    """The signature botocore gives the request, at the request's own time."""
    request = AWSRequest(method=method, url=url, data=body, headers={h: headers[h] for h in signed if h in headers})
    request.context["timestamp"] = amz_date
    auth = SigV4Auth(credentials, service, region)
    canonical = auth.canonical_request(request)
    return auth.signature(auth.string_to_sign(request, canonical), request)


def make_handler(args: argparse.Namespace, credentials: Credentials, stats: Stats) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt: str, *a: Any) -> None:  # quiet
            pass

        def answer(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
            self.send_response(status)
            for k, v in (headers or {"content-type": "application/json"}).items():
                self.send_header(k, v)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def reject(self, reason: str) -> None:
            with stats.lock:
                stats.rejected += 1
                stats.reasons.append(f"{self.command} {self.path}: {reason}")
            body = json.dumps({"error": {"message": reason, "type": "SignatureDoesNotMatch", "code": 403}}).encode()
            self.answer(403, body)

        def verify(self, body: bytes) -> str | None:
            headers = {k.lower(): v.strip() for k, v in self.headers.items()}
            match = AUTH.match(headers.get("authorization", ""))
            if not match:
                return "no SigV4 authorization header"
            if match["key"] != credentials.access_key:
                return f"signed with key {match['key']}"
            if (match["service"], match["region"]) != (args.service, args.region):
                return f"scope {match['service']}/{match['region']}, expected {args.service}/{args.region}"
            amz_date = headers.get("x-amz-date", "")
            if not amz_date.startswith(match["day"]):
                return "x-amz-date is not the credential scope's day"
            signed = match["signed"].split(";")
            if "host" not in signed or "x-amz-date" not in signed:
                return f"host and x-amz-date must be signed, signed: {signed}"
            url = f"http://{headers.get('host', '')}{self.path}"
            want = expected_signature(
                self.command, url, headers, signed, body, credentials, args.service, args.region, amz_date
            )
            if want != match["signature"]:
                return "signature does not match botocore's"
            return None

        def forward(self, body: bytes) -> None:
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
            request = urllib.request.Request(
                args.upstream.rstrip("/") + self.path, data=body if body else None, method=self.command, headers=headers
            )
            try:
                with urllib.request.urlopen(request, timeout=60) as r:
                    status, payload, out = r.status, r.read(), dict(r.headers.items())
            except urllib.error.HTTPError as e:
                status, payload, out = e.code, e.read(), dict(e.headers.items())
            out = {k: v for k, v in out.items() if k.lower() not in HOP_BY_HOP | {"content-length"}}
            self.answer(status, payload, out)

        def handle_any(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            body = self.rfile.read(length) if length else b""
            if self.command == "GET" and self.path == "/_sigv4/stats":
                self.answer(200, stats.as_json())
                return
            reason = self.verify(body)
            if reason:
                self.reject(reason)
                return
            with stats.lock:
                stats.verified += 1
            self.forward(body)

        do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = handle_any

    return Handler


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upstream", required=True)
    parser.add_argument("--service", required=True)
    parser.add_argument("--region", required=True)
    args = parser.parse_args()
    credentials = Credentials(
        os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"], os.environ.get("AWS_SESSION_TOKEN")
    )
    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(args, credentials, Stats()))
    print(f"listening {server.server_address[1]}", flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
