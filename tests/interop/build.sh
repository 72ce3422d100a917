#!/usr/bin/env bash
# Builds tests/interop/target/eqdv-interop.jar (the Apache Iceberg Java reference as a CLI, see
# docs/java-interop.md) with Maven, quietly, and prints the jar's path. Skips the build
# when the jar is newer than pom.xml and every file under src/. A build runs the JUnit tests
# (surefire) unless EQDV_INTEROP_SKIP_TESTS=1 (tests/interop/junit sets it: it runs them
# itself, whether or not the jar was rebuilt).
#
# Environment: EQDV_CACHE (default ~/.cache/eqdv): Maven's local repository is $EQDV_CACHE/m2.
# Extra arguments go to mvn (e.g. -DskipTests, -o) and force a build.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
jar="$here/target/eqdv-interop.jar"
cache="${EQDV_CACHE:-$HOME/.cache/eqdv}"

die() {
    echo "tests/interop/build.sh: error: $*" >&2
    exit 1
}

up_to_date() {
    [ -f "$jar" ] || return 1
    [ "$here/pom.xml" -nt "$jar" ] && return 1
    [ -n "$(find "$here/src" -newer "$jar" -print -quit)" ] && return 1
    return 0
}

if [ "$#" -eq 0 ] && up_to_date; then
    echo "$jar"
    exit 0
fi

command -v java >/dev/null 2>&1 || die "java is not on PATH: install a JDK 17 or later"
command -v mvn >/dev/null 2>&1 || die "mvn is not on PATH: install Maven 3.8 or later"
mkdir -p "$cache/m2"

cd "$here"
skip=()
if [ "${EQDV_INTEROP_SKIP_TESTS:-0}" = 1 ]; then
    skip=(-DskipTests)
fi
# Maven's output (errors only, with -q) goes to stderr so that stdout is just the jar's path;
# lines that are nothing but colour resets (Maven 3.8 prints them even in batch mode) go.
if ! mvn -B -q -Dmaven.repo.local="$cache/m2" -Dstyle.color=never package "${skip[@]}" "$@" 2>&1 |
    sed -e $'s/\e\\[[0-9;]*m//g' -e '/^$/d' >&2; then
    die "the Maven build failed (see above)"
fi
[ -f "$jar" ] || die "the build finished but $jar is missing"
touch "$jar"
echo "$jar"
