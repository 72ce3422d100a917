# shellcheck shell=bash
# Shared by tests/services/up and tests/services/down: versions, ports, paths, helpers.
# Sourced, not run.
# shellcheck disable=SC2034 # the variables are used by the scripts that source this

# --- Pinned versions (bump deliberately; see docs/testing.md, "Test services") -------------
# MinIO has no semver tags (its tags are RELEASE.*), so the Go module proxy serves
# pseudo-versions; this is the newest it served on 2026-11-30.
MINIO_MODULE="github.com/minio/minio"
MINIO_VERSION="v0.0.0-20260212201848-7aac2a2c5b7c"
# AWS's Lambda Runtime Interface Emulator (the Runtime API server Lambda's container
# images use): the end-to-end test runs the real function binaries behind it. No tags
# on the proxy either; this pseudo-version is the newest it served on 2026-11-30.
RIE_MODULE="github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie"
RIE_VERSION="v0.0.0-20261030222936-bef5c4ba774d"
# moto (Glue emulator) and localstack-core: pinned in the requirements files beside
# this file, with every transitive dependency.

# --- Ports and credentials (fixed: docker-compose.yml uses the same) ----------------
HOST="127.0.0.1"
MINIO_PORT=9000
MINIO_CONSOLE_PORT=9001
GLUE_PORT=5000
LOCALSTACK_PORT=4566
REST_PORT=8181
MINIO_ROOT_USER="eqdvminio"
MINIO_ROOT_PASSWORD="eqdvminio-secret"
BUCKET="warehouse"
# LocalStack's services: SQS, EventBridge and Step Functions (its own ASL interpreter,
# on the host) for eqdv, Secrets Manager (a REST catalog's credentials, read at a
# function's cold start), plus cheap in-memory ones a deployment test may touch (STS
# GetCallerIdentity, CloudWatch metrics).
LOCALSTACK_SERVICES="sqs,events,stepfunctions,secretsmanager,sts,cloudwatch"

# --- Paths --------------------------------------------------------------------------
services_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
EQDV_CACHE="${EQDV_CACHE:-$HOME/.cache/eqdv}"
bin_dir="$EQDV_CACHE/bin"
minio_bin="$bin_dir/minio-$MINIO_VERSION"
rie_bin="$bin_dir/aws-lambda-rie-$RIE_VERSION"
state_dir="$EQDV_CACHE/services"
run_dir="$state_dir/run"            # pid files and logs
minio_data="$state_dir/minio-data"  # wiped on every `up`
localstack_dir="$state_dir/localstack"
venv_services="$EQDV_CACHE/venv-services"
venv_localstack="$EQDV_CACHE/venv-localstack"
services_requirements="$services_dir/requirements.txt"
localstack_requirements="$services_dir/requirements-localstack.txt"
# The Iceberg REST catalog server: Iceberg Java's REST fixture, its classpath resolved by
# Maven from rest-catalog/pom.xml once (and again when the pom changes).
rest_pom="$services_dir/rest-catalog/pom.xml"
rest_classpath="$EQDV_CACHE/rest-catalog.classpath"
rest_db="$state_dir/rest-catalog.db"  # wiped on every `up`
env_file="$services_dir/env"
lock_file="$state_dir/lock"

# Services in start order; `down` stops them in reverse.
SERVICES=(minio glue localstack rest)

say() {
    echo "==> services: $*"
}
die() {
    echo "tests/services: error: $*" >&2
    exit 1
}

# A marker that the service's command line contains: `down` only signals a pid whose
# command line still has it, so a pid file left behind never kills an unrelated
# process that reused the pid.
marker() {
    case "$1" in
    minio) echo "minio-$MINIO_VERSION" ;;
    glue) echo "glue_emulator.py" ;;
    localstack) echo "localstack.runtime.main" ;;
    rest) echo "org.apache.iceberg.rest.RESTCatalogServer" ;;
    esac
}

pid_file() {
    echo "$run_dir/$1.pid"
}
log_file() {
    echo "$run_dir/$1.log"
}

# Prints the pid of a running service (from its pid file) or nothing.
running_pid() {
    local pid
    pid="$(cat "$(pid_file "$1")" 2>/dev/null || true)"
    [ -n "$pid" ] || return 0
    if [ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$(marker "$1")"; then
        echo "$pid"
    fi
}

# Stops one service: SIGTERM to its process group (the service runs in its own
# session, so the group is the service and its children), SIGKILL to whatever of the
# group is left once the service exited, or after 20 s. A process that exited but is
# not reaped yet (a zombie) has an empty /proc/PID/cmdline, so running_pid no longer
# sees it: no waiting for the reaper.
stop_service() {
    local name="$1" pid i
    pid="$(running_pid "$name")"
    if [ -n "$pid" ]; then
        kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
        for ((i = 0; i < 200; i++)); do
            [ -n "$(running_pid "$name")" ] || break
            sleep 0.1
        done
        if [ -n "$(running_pid "$name")" ]; then
            echo "tests/services: $name (pid $pid) ignored SIGTERM for 20 s, killing it" >&2
        fi
        kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
        say "stopped $name (pid $pid)"
    fi
    rm -f "$(pid_file "$name")"
}

# Holds the services lock (fd 9) until the calling script exits, so that two runs on
# one machine never restart or stop each other's services (the ports are fixed).
# tests/run holds it for its whole run and sets EQDV_SERVICES_LOCKED=1 for the up and
# down it calls. Fails at once when someone else holds it.
take_lock() {
    [ "${EQDV_SERVICES_LOCKED:-}" = 1 ] && return 0
    command -v flock >/dev/null 2>&1 || die "flock is not on PATH (apt-get install util-linux)"
    mkdir -p "$state_dir"
    exec 9>"$lock_file"
    flock -n 9 ||
        die "the test services are in use by a running tests/run (or another up/down): try again when it has finished (lock: $lock_file)"
}

# Seconds since the epoch, for the timings that `up` prints.
now() {
    date +%s
}

# sha256 of the given files' contents, for install stamps.
fingerprint() {
    cat "$@" | sha256sum | cut -d' ' -f1
}
