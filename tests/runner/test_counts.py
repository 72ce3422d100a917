"""tests/runner/counts, which makes tests/run's totals line, on outputs captured from
each runner: every runner's passes and failures must reach the totals, and a runner
that fails without a counted failure must still count as failed.

Run by tests/run with the tests/services pytest (no services needed).
"""

from __future__ import annotations

import pathlib
import subprocess

import pytest

COUNTS = pathlib.Path(__file__).with_name("counts")

CARGO_OK = """\
     Running unittests src/lib.rs (target/debug/deps/eqdv-0123456789abcdef)

running 3 tests
test dv::tests::roundtrip ... ok
test dv::tests::magic ... ok
test plan::tests::empty ... ok

test result: ok. 3 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.01s

     Running tests/convert.rs (target/debug/deps/convert-0123456789abcdef)

running 2 tests
test converts_every_key_type ... ok
test dry_run_commits_nothing ... ignored

test result: ok. 1 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; finished in 4.20s

   Doc-tests eqdv

running 1 test
test shared/src/lib.rs - (line 5) ... ok

test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.30s
"""

CARGO_FAILED = """\
running 4 tests
test a ... ok
test b ... FAILED
test c ... ok
test d ... FAILED

failures:

---- b stdout ----
thread 'b' panicked at tests/glue.rs:10:5:
assertion `left == right` failed: 2 passed, 1 failed
  left: 1
 right: 2

failures:
    b
    d

test result: FAILED. 2 passed; 2 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.20s

error: test failed, to rerun pass `-p eqdv-tests --test glue`

running 5 tests
test result: ok. 5 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.10s

error: 1 target failed:
    `-p eqdv-tests --test glue`
"""

CARGO_DOES_NOT_COMPILE = """\
   Compiling eqdv-tests v0.1.0 (/work/tests)
error[E0425]: cannot find value `x` in this scope
error: could not compile `eqdv-tests` (test "glue") due to 1 previous error
"""

PYTEST_Q_OK = """\
.........                                                                [100%]
9 passed in 3.51s
"""

PYTEST_Q_MIXED = """\
.F.sxE                                                                   [100%]
=========================== short test summary info ============================
FAILED test_x.py::test_b - assert 1 == 2
ERROR test_x.py::test_c - RuntimeError: x
1 failed, 2 passed, 1 skipped, 1 xfailed, 1 error in 0.03s
"""

PYTEST_VERBOSE = """\
============================= test session starts ==============================
collected 12 items

test_glue_emulator.py ............                                       [100%]

======================= 11 passed, 1 failed in 65.20s (0:01:05) ========================
"""

PYTEST_COLLECTION_ERROR = """\
ERROR test_z.py
!!!!!!!!!!!!!!!!!!!! Interrupted: 1 error during collection !!!!!!!!!!!!!!!!!!!!
2 errors in 0.18s
"""

PYTEST_NOTHING = """\

no tests ran in 0.01s
"""

SUREFIRE_REPORTS = """\
-------------------------------------------------------------------------------
Test set: dev.eqdv.interop.CanonicalTest
-------------------------------------------------------------------------------
Tests run: 10, Failures: 0, Errors: 0, Skipped: 0, Time elapsed: 2.479 s -- in dev.eqdv.interop.CanonicalTest
-------------------------------------------------------------------------------
Test set: dev.eqdv.interop.SelfTestTest
-------------------------------------------------------------------------------
Tests run: 4, Failures: 1, Errors: 1, Skipped: 1, Time elapsed: 25.60 s <<< FAILURE! -- in dev.eqdv.interop.SelfTestTest
dev.eqdv.interop.SelfTestTest.badUsageExitsWithTwo -- Time elapsed: 0.01 s <<< FAILURE!
org.opentest4j.AssertionFailedError: expected: <2> but was: <1>
"""

# Maven's console summary (no "Time elapsed") must not count the classes a second time.
SUREFIRE_CONSOLE = """\
[ERROR] Tests run: 3, Failures: 1, Errors: 0, Skipped: 0, Time elapsed: 0.05 s <<< FAILURE! -- in dev.eqdv.interop.SelfTestTest
[INFO] Tests run: 10, Failures: 0, Errors: 0, Skipped: 0, Time elapsed: 0.4 s -- in dev.eqdv.interop.CanonicalTest
[INFO] Results:
[ERROR] Tests run: 13, Failures: 1, Errors: 0, Skipped: 0
"""

INFRA_CHECK = """\
==> tests/infra/check (cache: /root/.cache/eqdv)
ok   venv-cfn                  0 s  up to date (requirements.txt)
ok   jest                     12 s  Tests:       1 failed, 37 passed, 38 total
FAIL cdk-synth                 9 s  (exit 1; log: /root/.cache/eqdv/infra-check/logs/cdk-synth.log)
     | jest: 9 passed, 9 failed (a log line that is not at the start)
==> summary (180 s; logs in /root/.cache/eqdv/infra-check/logs)
infra: 5 passed, 2 failed
jest: 37 passed, 1 failed
"""


def counts(*args: str, stdin: str = "") -> str:
    done = subprocess.run(
        ["bash", str(COUNTS), *args], input=stdin, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize(
    ("kind", "status", "output", "line"),
    [
        ("cargo", 0, CARGO_OK, "5 passed, 0 failed"),
        ("cargo", 101, CARGO_FAILED, "7 passed, 2 failed"),
        ("cargo", 101, CARGO_DOES_NOT_COMPILE, "0 passed, 1 failed"),
        ("pytest", 0, PYTEST_Q_OK, "9 passed, 0 failed"),
        ("pytest", 1, PYTEST_Q_MIXED, "2 passed, 2 failed"),
        ("pytest", 1, PYTEST_VERBOSE, "11 passed, 1 failed"),
        ("pytest", 2, PYTEST_COLLECTION_ERROR, "0 passed, 2 failed"),
        ("pytest", 5, PYTEST_NOTHING, "0 passed, 1 failed"),
        ("surefire", 1, SUREFIRE_REPORTS, "11 passed, 2 failed"),
        ("surefire", 1, SUREFIRE_CONSOLE, "12 passed, 1 failed"),
        ("surefire", 1, "", "0 passed, 1 failed"),
        ("surefire", 0, "", "0 passed, 0 failed"),
    ],
)
def test_one_runner(kind: str, status: int, output: str, line: str) -> None:
    assert counts(kind, "r", str(status), stdin=output) == f"r: {line}\n"


def test_a_failed_run_with_its_failures_counted_adds_none() -> None:
    # cargo's FAILED binaries make cargo exit 101: the two failures are the whole story.
    assert counts("cargo", "cargo", "101", stdin=CARGO_FAILED) == "cargo: 7 passed, 2 failed\n"


def test_lines_pass_through_every_runner() -> None:
    assert counts("lines", "infra", "1", stdin=INFRA_CHECK) == (
        "infra: 5 passed, 2 failed\njest: 37 passed, 1 failed\n"
    )


def test_lines_without_a_counted_failure_add_the_runner() -> None:
    # tests/infra/check stopped before its summary (node missing, say).
    out = "tests/infra/check: error: node and npm are not on PATH\n"
    assert counts("lines", "infra", "1", stdin=out) == "infra: 0 passed, 1 failed\n"
    assert counts("lines", "junit", "1", stdin="junit: 13 passed, 0 failed\n") == (
        "junit: 13 passed, 0 failed\njunit: 0 passed, 1 failed\n"
    )
    assert counts("lines", "junit", "0", stdin="junit: 13 passed, 0 failed\n") == (
        "junit: 13 passed, 0 failed\n"
    )


def test_files_instead_of_stdin(tmp_path: pathlib.Path) -> None:
    a = tmp_path / "a.txt"
    b = tmp_path / "b.txt"
    a.write_text(SUREFIRE_REPORTS)
    b.write_text(SUREFIRE_REPORTS)
    assert counts("surefire", "junit", "1", str(a), str(b)) == "junit: 22 passed, 4 failed\n"


def test_total_sums_and_names_the_failed_runners() -> None:
    lines = (
        "pytest: 9 passed, 0 failed\n"
        "infra: 5 passed, 2 failed\n"
        "jest: 37 passed, 1 failed\n"
        "junit: 13 passed, 0 failed\n"
        "cargo: 600 passed, 0 failed\n"
    )
    assert counts("total", stdin=lines) == (
        "failed: infra, jest\neqdv tests: 664 passed, 3 failed\n"
    )
    assert counts("total", stdin="pytest: 9 passed, 0 failed\n") == (
        "eqdv tests: 9 passed, 0 failed\n"
    )


def test_bad_usage_is_refused() -> None:
    for args in (["nosuchkind", "r", "0"], ["cargo", "r"], ["cargo", "two words", "0"],
                 ["cargo", "r", "x"]):
        done = subprocess.run(["bash", str(COUNTS), *args], input="", capture_output=True,
                              text=True, check=False)
        assert done.returncode == 2, args
