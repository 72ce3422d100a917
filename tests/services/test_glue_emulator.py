"""The Glue emulator's UpdateTable is a compare-and-swap on VersionId, as AWS Glue's is.

Runs against the emulator that tests/services/up started (AWS_ENDPOINT_URL_GLUE, read
from the environment or from tests/services/env). Every test uses its own database.
"""

from __future__ import annotations

import os
import pathlib
import threading
import uuid

import boto3
import pytest
from botocore.exceptions import ClientError

ENV_FILE = pathlib.Path(__file__).with_name("env")


def _endpoint() -> str:
    if os.environ.get("AWS_ENDPOINT_URL_GLUE"):
        return os.environ["AWS_ENDPOINT_URL_GLUE"]
    if ENV_FILE.exists():
        for line in ENV_FILE.read_text().splitlines():
            if line.startswith("export AWS_ENDPOINT_URL_GLUE="):
                return line.split("=", 1)[1].strip().strip("'\"")
    pytest.fail("AWS_ENDPOINT_URL_GLUE is not set: run tests/services/up first")


@pytest.fixture(scope="module")
def glue():
    return boto3.client(
        "glue",
        endpoint_url=_endpoint(),
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
    )


@pytest.fixture
def table(glue):
    """A fresh database with one Iceberg-style table; yields (database, name)."""
    database = f"eqdv_test_{uuid.uuid4().hex[:12]}"
    glue.create_database(DatabaseInput={"Name": database})
    glue.create_table(
        DatabaseName=database,
        TableInput={
            "Name": "t",
            "TableType": "EXTERNAL_TABLE",
            "Parameters": {
                "table_type": "ICEBERG",
                "metadata_location": "s3://warehouse/t/metadata/00000-a.metadata.json",
            },
        },
    )
    yield database, "t"
    glue.delete_database(Name=database)


def _table_input(metadata_location: str, previous: str) -> dict:
    return {
        "Name": "t",
        "TableType": "EXTERNAL_TABLE",
        "Parameters": {
            "table_type": "ICEBERG",
            "metadata_location": metadata_location,
            "previous_metadata_location": previous,
        },
    }


def _get(glue, database: str, name: str) -> dict:
    return glue.get_table(DatabaseName=database, Name=name)["Table"]


def test_update_with_current_version_succeeds_and_bumps_it(glue, table):
    database, name = table
    before = _get(glue, database, name)
    v0 = before["VersionId"]
    old = before["Parameters"]["metadata_location"]

    glue.update_table(
        DatabaseName=database,
        TableInput=_table_input("s3://warehouse/t/metadata/00001-b.metadata.json", old),
        VersionId=v0,
    )

    after = _get(glue, database, name)
    assert after["VersionId"] != v0
    assert int(after["VersionId"]) == int(v0) + 1
    assert after["Parameters"]["metadata_location"].endswith("00001-b.metadata.json")
    assert after["Parameters"]["previous_metadata_location"] == old


def test_update_with_stale_version_fails_and_keeps_the_table(glue, table):
    database, name = table
    v0 = _get(glue, database, name)["VersionId"]
    glue.update_table(
        DatabaseName=database,
        TableInput=_table_input("s3://warehouse/t/metadata/00001-b.metadata.json", "a"),
        VersionId=v0,
    )
    winner = _get(glue, database, name)

    with pytest.raises(ClientError) as raised:
        glue.update_table(
            DatabaseName=database,
            TableInput=_table_input("s3://warehouse/t/metadata/00001-c.metadata.json", "a"),
            VersionId=v0,
        )
    assert raised.value.response["Error"]["Code"] == "ConcurrentModificationException"
    assert raised.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    # The modeled exception class is raised too, as code that catches it expects.
    assert isinstance(raised.value, glue.exceptions.ConcurrentModificationException)

    after = _get(glue, database, name)
    assert after["VersionId"] == winner["VersionId"]
    assert after["Parameters"] == winner["Parameters"]


def test_update_without_version_always_succeeds(glue, table):
    database, name = table
    v0 = _get(glue, database, name)["VersionId"]
    for i in (1, 2):
        glue.update_table(
            DatabaseName=database,
            TableInput=_table_input(f"s3://warehouse/t/metadata/0000{i}.metadata.json", "x"),
        )
    after = _get(glue, database, name)
    assert int(after["VersionId"]) == int(v0) + 2
    assert after["Parameters"]["metadata_location"].endswith("00002.metadata.json")


def test_skip_archive_keeps_no_old_version(glue, table):
    database, name = table
    v0 = _get(glue, database, name)["VersionId"]
    glue.update_table(
        DatabaseName=database,
        TableInput=_table_input("s3://warehouse/t/metadata/00001.metadata.json", "x"),
        VersionId=v0,
        SkipArchive=True,
    )
    current = _get(glue, database, name)["VersionId"]
    assert current != v0
    versions = glue.get_table_versions(DatabaseName=database, TableName=name)["TableVersions"]
    assert [v["VersionId"] for v in versions] == [current]

    glue.update_table(
        DatabaseName=database,
        TableInput=_table_input("s3://warehouse/t/metadata/00002.metadata.json", "y"),
        VersionId=current,
    )
    versions = glue.get_table_versions(DatabaseName=database, TableName=name)["TableVersions"]
    assert len(versions) == 2


def test_concurrent_updates_with_one_version_have_one_winner(glue, table):
    database, name = table
    v0 = _get(glue, database, name)["VersionId"]
    barrier = threading.Barrier(8)
    outcomes: list[str] = []

    def attempt(i: int) -> None:
        client = boto3.client(
            "glue",
            endpoint_url=_endpoint(),
            region_name="us-east-1",
            aws_access_key_id="test",
            aws_secret_access_key="test",
        )
        barrier.wait(timeout=30)
        try:
            client.update_table(
                DatabaseName=database,
                TableInput=_table_input(f"s3://warehouse/t/metadata/{i}.metadata.json", "a"),
                VersionId=v0,
            )
            outcomes.append(f"won:{i}")
        except ClientError as e:
            outcomes.append(e.response["Error"]["Code"])

    threads = [threading.Thread(target=attempt, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)

    winners = [o for o in outcomes if o.startswith("won:")]
    assert len(outcomes) == 8
    assert len(winners) == 1, outcomes
    assert outcomes.count("ConcurrentModificationException") == 7, outcomes
    after = _get(glue, database, name)
    assert int(after["VersionId"]) == int(v0) + 1
    assert after["Parameters"]["metadata_location"].endswith(f"/{winners[0][4:]}.metadata.json")
