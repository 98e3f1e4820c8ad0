#!/usr/bin/env bash
# The test command. It installs what is missing (idempotent), then runs the whole suite on the
# default Spark line (4.0, in .venv) and the line-sensitive part of it on each other supported line
# (3.5, in .venv-spark3.5; see `line_sensitive` below), then a smoke subset on the oldest and newest
# other supported Python found on this machine: the manifest and registry parsers, and the installed
# command end to end (a vacuum, and a batch delete run by Spark's Python workers on the local S3).
# With arguments, they go to pytest, on each Spark line, and the Python smoke is left out.
#
#   bash infra/test.sh                                  # everything CI runs
#   SPARK_LINES=4.0 bash infra/test.sh tests/test_safety.py -x
#   SPARK_LINES=3.5 bash infra/test.sh tests            # the whole suite on the 3.5 line
#   PYTHON_VERSIONS= bash infra/test.sh                 # no other Pythons
#
# It needs nothing from the caller's environment but HOME (pip's cache, the Ivy cache of the jars):
# `env -i HOME=$HOME PATH=/usr/bin:/bin bash infra/test.sh` works; see infra/env.sh for PYTHON and
# JAVA_HOME.
set -euo pipefail
cd "$(dirname "$0")/.."
source infra/env.sh
# The suite tests the venv's pyspark with its own interpreter, whatever Spark the caller uses.
unset SPARK_HOME PYSPARK_PYTHON PYSPARK_DRIVER_PYTHON PYSPARK_SUBMIT_ARGS

lines=${SPARK_LINES-$SPARK_LINES_SUPPORTED}
pythons=${PYTHON_VERSIONS-$PYTHON_VERSIONS_SMOKED}
# What the other Spark lines run: the tests whose outcome turns on what differs between the lines,
# which is where a wrong deletion would come from. That is Delta's log reading and VACUUM planner
# (3.3 against 4.0: the safety suite, the S3 vacuum, delta-rs and Delta-Spark tables with table
# features), S3A and its AWS SDK (v1 against v2: listings, ETags, deletes), and the jars and package
# that spark-submit and a cluster's executors get. Parsing, ingest, chargeback and the fault tests
# run once, on the default line: the whole suite on both lines took CI past its 90 minutes.
line_sensitive=(tests/test_safety.py tests/test_vacuum_s3.py tests/test_cross_writer.py tests/test_installed.py)
# What the other Pythons run: the installed command end to end on the local S3 (ingest, vacuum).
smoke=(tests/test_manifest.py tests/test_registry.py
  tests/test_vacuum_local.py::test_short_retention_deletes_exactly_the_unreferenced_files
  tests/test_installed.py::test_installed_command_batch_deletes_with_a_bare_path)
summary=()
failed=0
ran=0

run() {  # run LABEL VENV PYTEST_ARGS...: one pytest run, its outcome and time kept for the summary
  local label=$1 venv=$2 started=$SECONDS rc=0
  shift 2
  echo "=== $label: $("$venv/bin/python" -c 'import sys, pyspark, importlib.metadata as m; print("Python", sys.version.split()[0], "pyspark", pyspark.__version__, "delta-spark", m.version("delta-spark"))')" >&2
  "$venv/bin/python" -m pytest "$@" || rc=$?
  summary+=("$label: $([ "$rc" = 0 ] && echo passed || echo "FAILED (pytest exit $rc)") in $((SECONDS - started)) s")
  [ "$rc" = 0 ] || failed=1
  ran=$((ran + 1))
}

for line in $lines; do
  ensure_venv "$line"
  tests=("$@")
  [ $# -gt 0 ] || [ "$line" = "$DEFAULT_SPARK_LINE" ] || tests=("${line_sensitive[@]}")
  INVENTORY_VACUUM_SPARK_LINE=$line run "Spark $line" "$(venv_dir "$line")" ${tests[@]+"${tests[@]}"}
done
if [ $# -eq 0 ]; then
  for version in $pythons; do
    [ "$version" = "$DEFAULT_PYTHON_VERSION" ] && continue
    if ! find_python "$version" >/dev/null 2>&1; then
      summary+=("Python $version: not on this machine, skipped")
      continue
    fi
    ensure_venv "$DEFAULT_SPARK_LINE" "$version"
    run "Python $version" "$(venv_dir "$DEFAULT_SPARK_LINE" "$version")" "${smoke[@]}"
  done
fi
if [ "$ran" -eq 0 ]; then
  echo "nothing ran: no Spark line in SPARK_LINES and no other Python found or chosen (supported: $SPARK_LINES_SUPPORTED; $PYTHON_VERSIONS_SUPPORTED)" >&2
  exit 2
fi
printf '%s\n' "${summary[@]}" >&2
exit "$failed"
