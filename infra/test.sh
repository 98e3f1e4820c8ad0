#!/usr/bin/env bash
# The test command. It installs what is missing (idempotent), then runs the whole suite on the
# default Spark line (4.2, in .venv) and the line-sensitive part of it on each other supported line
# (4.0 and 3.5, in .venv-spark4.0 and .venv-spark3.5; see the markers below), then a smoke subset on the oldest and newest
# other supported Python found on this machine: the manifest and registry parsers, and the installed
# command end to end (an ingest, then a vacuum whose batch delete runs in Spark's Python workers).
# With arguments, they go to pytest, on each Spark line, and the Python smoke is left out.
#
# Two streams, each run in its own JVM, moto server and pytest temp directory: in the foreground
# the default line, then the other Pythons' smoke runs; beside them, one after another, the default
# line's cluster and fault tests, then the other Spark lines, whose output is printed when they
# end. One run's driver JVM keeps about one of this machine's two cores busy, so the two streams
# take little more than the longer of them.
# TEST_CONCURRENCY=1 runs everything one after another (the default line, the cluster and fault
# tests, the other lines, the other Pythons), output as it comes.
#
#   bash infra/test.sh                                  # everything CI runs
#   SPARK_LINES=4.2 bash infra/test.sh tests/test_safety.py -x
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
concurrency=${TEST_CONCURRENCY:-2}
case $concurrency in
  1 | 2) ;;
  *) echo "TEST_CONCURRENCY=$concurrency: 1 (in turn) or 2 (the other runs beside the default line's)" >&2; exit 2 ;;
esac
# What runs where is marked in the tests (pyproject.toml lists the markers):
# - line_sensitive: what the other Spark lines run, the tests whose outcome turns on what differs
#   between the lines, which is where a wrong deletion would come from: Delta's log reading, its
#   VACUUM planner and its RETAIN (3.3 against 4.0 against 4.4), the table features each Delta
#   supports, S3A and its AWS SDK (v1 against v2: listings, ETags, deletes), and the jars and
#   package that spark-submit and a cluster's executors get. Parsing, ingest, chargeback and the
#   fault tests run once, on the default line: the whole suite on every line would take CI past
#   its time.
# - smoke: what the other Pythons run, the parsers, and the installed command end to end on the
#   local S3 (an ingest in the test's process, then the command's vacuum with a batch delete in
#   Spark's Python workers).
# - cluster, faults: on a full run, these tests of the default line run beside it, first, in a
#   pytest run of their own: a standalone cluster and processes SIGKILLed mid-write, JVMs of their
#   own that share nothing with the default line's session (about 10 minutes).
line_sensitive=(tests -m line_sensitive)
smoke=(tests -m smoke)
default_beside=(tests -m "cluster or faults")
default_rest=(tests -m "not cluster and not faults")
work="$(mktemp -d "${TMPDIR:-/tmp}/inventory-vacuum-tests.XXXXXX")"
no_cache=()
beside=""  # the process group of the runs beside the default line's, while they go on
cleanup() {  # on any exit; when cut short, the runs beside are stopped and what they printed shown
  if [ -n "$beside" ]; then
    kill -TERM -- "-$beside" 2>/dev/null || true
    kill -CONT -- "-$beside" 2>/dev/null || true
    echo "=== stopped; the runs beside printed (last 200 lines):" >&2
    tail -n 200 "$work/others.log" >&2 || true
    cat "$summary" >&2 || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM  # Ctrl-C stops the runs beside too (they are in a process group of their own)
summary="$work/summary"  # one line per run, in the order they end
: > "$summary"

run() {  # run LABEL VENV PYTEST_ARGS...: one pytest run; its outcome and time go to the summary
  local label=$1 venv=$2 started=$SECONDS rc=0 temp
  shift 2
  echo "=== $label: $("$venv/bin/python" -c 'import sys, pyspark, importlib.metadata as m; print("Python", sys.version.split()[0], "pyspark", pyspark.__version__, "delta-spark", m.version("delta-spark"))')" >&2
  # its own temp root: pytest's numbered directories under /tmp are pruned by whichever run starts
  temp="$(mktemp -d "$work/pytest.XXXXXX")"
  # the runs beside the default line's keep no pytest cache: two runs would overwrite each other's
  "$venv/bin/python" -m pytest --basetemp "$temp" ${no_cache[@]+"${no_cache[@]}"} "$@" || rc=$?
  rm -rf "$temp"
  echo "$label: $([ "$rc" = 0 ] && echo passed || echo "FAILED (pytest exit $rc)") in $((SECONDS - started)) s" >> "$summary"
}

run_line() {  # run_line LINE [PYTEST_ARGS...]: the whole suite on the default line, else its line-sensitive part
  local line=$1
  shift
  local tests=("$@")
  ensure_venv "$line" || { echo "Spark $line: FAILED (could not install it)" >> "$summary"; return 0; }
  if [ $# -eq 0 ] && [ "$line" = "$DEFAULT_SPARK_LINE" ]; then
    tests=("${default_rest[@]}")
  elif [ $# -eq 0 ]; then
    tests=("${line_sensitive[@]}")
  fi
  INVENTORY_VACUUM_SPARK_LINE=$line run "Spark $line" "$(venv_dir "$line")" ${tests[@]+"${tests[@]}"}
}

other_lines() {  # the default line's cluster and fault tests (with no pytest arguments), then the other Spark lines
  local line
  if [ $# -eq 0 ] && $default; then
    INVENTORY_VACUUM_SPARK_LINE=$DEFAULT_SPARK_LINE run "Spark $DEFAULT_SPARK_LINE (cluster and faults)" \
      "$(venv_dir "$DEFAULT_SPARK_LINE")" "${default_beside[@]}"
  fi
  for line in $lines; do
    [ "$line" = "$DEFAULT_SPARK_LINE" ] || run_line "$line" "$@"
  done
}

smoke_pythons() {  # with no pytest arguments: the other Pythons' smoke runs, on the default line
  local version
  [ $# -eq 0 ] || return 0
  for version in $pythons; do
    [ "$version" = "$DEFAULT_PYTHON_VERSION" ] && continue
    if ! find_python "$version" >/dev/null 2>&1; then
      echo "Python $version: not on this machine, skipped" >> "$summary"
      continue
    fi
    ensure_venv "$DEFAULT_SPARK_LINE" "$version" \
      || { echo "Python $version: FAILED (could not install it)" >> "$summary"; continue; }
    run "Python $version" "$(venv_dir "$DEFAULT_SPARK_LINE" "$version")" "${smoke[@]}"
  done
}

default=false
for line in $lines; do [ "$line" = "$DEFAULT_SPARK_LINE" ] && default=true; done
if $default; then
  # installed before anything starts beside it: the other runs' installs then only add their own
  ensure_venv "$DEFAULT_SPARK_LINE"
fi
if [ "$concurrency" -gt 1 ] && $default; then
  # two streams of about the same length: the default line, then the other Pythons' smoke runs;
  # beside them the cluster and fault tests, then the other Spark lines
  echo "=== the other Spark lines go on beside Spark $DEFAULT_SPARK_LINE; their output follows it" >&2
  set -m  # job control for this one job: its own process group, which cleanup can stop whole
  (no_cache=(-p no:cacheprovider) && other_lines "$@") < /dev/null > "$work/others.log" 2>&1 &
  beside=$!
  set +m
  run_line "$DEFAULT_SPARK_LINE" "$@"
  smoke_pythons "$@"
  wait "$beside" || echo "the other runs: FAILED (exit $?)" >> "$summary"
  beside=""
  cat "$work/others.log" >&2
else
  if $default; then run_line "$DEFAULT_SPARK_LINE" "$@"; fi
  other_lines "$@"
  smoke_pythons "$@"
fi
if ! grep -qE ": (passed|FAILED)" "$summary"; then
  echo "nothing ran: no Spark line in SPARK_LINES and no other Python found or chosen (supported: $SPARK_LINES_SUPPORTED; $PYTHON_VERSIONS_SUPPORTED)" >&2
  exit 2
fi
cat "$summary" >&2
! grep -q FAILED "$summary"
