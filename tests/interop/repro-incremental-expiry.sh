#!/usr/bin/env bash
# Java only (no eqdv), run with the test services up and EQDV_INTEROP_JAR set: Java's DV writer
# puts the DVs of five data files in one Puffin file; a Java compaction (RewriteFiles) of one
# of them removes its DV; after one more commit, expiry with the incremental file cleanup
# deletes the Puffin file that still holds four live DVs (check-dvs fails), the reachable
# cleanup does not. Found by tests/random_histories.rs (seed 127, 20 operations).
set -u
J="java -jar $EQDV_INTEROP_JAR"
u=repro_$$_$(date +%s)
for incremental in true false; do
T="--warehouse $EQDV_WAREHOUSE_S3/$u$incremental --database $u$incremental --table t"
$J write-cdc $T --commits 4 --rows 100 >/dev/null || exit 1
$J write-dvs $T --files 100 --positions 3 || exit 1
$J check-dvs $T || exit 1
$J rewrite $T --largest || exit 1
$J write-cdc $T --commits 5 --rows 100 >/dev/null || exit 1
echo "before expiry:"; $J check-dvs $T || exit 1
printf '{"op":"expire","retain":1,"incremental":%s}\n{"op":"check-dvs"}\n' $incremental | $J serve $T
done
