#!/usr/bin/env python3
"""The AWS Glue Data Catalog for eqdv's tests: moto's server with an optimistic UpdateTable.

moto (pinned in tests/services/requirements.txt) keeps every Glue table as a list of
versions, but its UpdateTable ignores the request's VersionId and SkipArchive. AWS Glue
does not: UpdateTable with a VersionId that is no longer the table's current version
fails with ConcurrentModificationException. Iceberg's Glue catalogs (Java, PyIceberg,
iceberg-rust) and eqdv rely on exactly that to make the metadata pointer swap a
compare-and-swap, so this launcher patches moto's Glue backend before serving:

- UpdateTable without VersionId, or with the current one, replaces the table input
  and makes a new current version (the version id goes up by one);
- UpdateTable with any other VersionId raises ConcurrentModificationException and
  leaves the table as it was;
- SkipArchive=true still makes a new current version, but drops the one it replaced
  from GetTableVersions (AWS keeps no archived copy then);
- the check and the update run under one lock, so concurrent requests (the server is
  threaded) see a linearizable compare-and-swap.

Everything else is moto as is (in memory, any credentials, every other moto service on
the same port). Usage: glue_emulator.py [--host 127.0.0.1] [--port 5000]
"""

from __future__ import annotations

import argparse
import threading
from typing import Any

from moto import server
from moto.core.responses import EmptyResult
from moto.glue import models, responses
from moto.glue.exceptions import GlueClientError


class ConcurrentModificationException(GlueClientError):
    def __init__(self, message: str) -> None:
        super().__init__("ConcurrentModificationException", message)


_update_lock = threading.Lock()


def _update_table(
    self: models.GlueBackend,
    database_name: str,
    table_name: str,
    table_input: dict[str, Any],
    version_id: str | None = None,
    skip_archive: bool = False,
) -> None:
    with _update_lock:
        table = self.get_table(database_name, table_name)
        current = str(table._current_version)
        if version_id is not None and str(version_id) != current:
            raise ConcurrentModificationException(
                f"Update table failed due to concurrent modifications: table "
                f"{database_name}.{table_name} is at version {current}, the request "
                f"expected version {version_id}"
            )
        table.update(table_input)
        if skip_archive:
            table.versions.pop(current, None)


def _update_table_response(self: responses.GlueResponse) -> EmptyResult:
    database_name = self.parameters.get("DatabaseName")
    table_input = self.parameters.get("TableInput") or {}
    version_id = self.parameters.get("VersionId")
    skip_archive = bool(self.parameters.get("SkipArchive", False))
    self.glue_backend.update_table(
        database_name,
        table_input.get("Name"),
        table_input,
        version_id=version_id,
        skip_archive=skip_archive,
    )
    return EmptyResult()


def patch_moto() -> None:
    """Installs the optimistic UpdateTable into moto's Glue backend and responses."""
    models.GlueBackend.update_table = _update_table  # type: ignore[method-assign]
    responses.GlueResponse.update_table = _update_table_response  # type: ignore[method-assign]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=5000)
    args = parser.parse_args()
    patch_moto()
    server.main(["--host", args.host, "--port", str(args.port)])


if __name__ == "__main__":
    main()
