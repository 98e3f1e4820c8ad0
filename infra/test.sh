#!/usr/bin/env bash
# The test command (CI runs it through .ci/run). It installs what the tests need (idempotent): a venv
# per supported Spark line and per smoked Python (each installed by the run that uses it, but the
# default line's, installed first), Debian's chromium for the HTML report's test (as root). Then
# `make test` runs the matrix, two runs at a time: what runs where, in which order, is in the Makefile.
# With arguments, they go to pytest instead, on the default Spark line (or each line of SPARK_LINES).
#
#   bash infra/test.sh                                  # everything CI runs
#   bash infra/test.sh tests/test_safety.py -x          # only those, on the default line
#   SPARK_LINES=3.5 bash infra/test.sh tests            # the whole suite on the 3.5 line
#   SPARK_LINES=4.2 PYTHON_VERSIONS= bash infra/test.sh # the default line only, no other Pythons
#   TEST_CONCURRENCY=1 bash infra/test.sh               # one run at a time, output as it comes
#
# It needs nothing from the caller's environment but HOME (uv's and pip's caches, the Ivy cache of the jars):
# `env -i HOME=$HOME PATH=/usr/bin:/bin bash infra/test.sh` works; see infra/env.sh for PYTHON and
# JAVA_HOME.
set -euo pipefail
cd "$(dirname "$0")/.."
source infra/env.sh

concurrency=${TEST_CONCURRENCY:-2}
case $concurrency in
  1) make_flags=(-k) ;;
  2) make_flags=(-k -j2 --output-sync=target) ;;
  *) echo "TEST_CONCURRENCY=$concurrency: 1 (one run at a time) or 2 (two side by side)" >&2; exit 2 ;;
esac
command -v make >/dev/null || { echo "the test command needs GNU make (apt-get install make)" >&2; exit 2; }

if [ $# -gt 0 ]; then
  lines=${SPARK_LINES-$DEFAULT_SPARK_LINE}
  pythons=""
  PYTEST_ARGS="$(printf '%q ' "$@")"
  export PYTEST_ARGS
else
  lines=${SPARK_LINES-$SPARK_LINES_SUPPORTED}
  pythons=${PYTHON_VERSIONS-$PYTHON_VERSIONS_SMOKED}
  unset PYTEST_ARGS
fi

# The default line's venv and jars first: its runs may start side by side (default-main and
# own-jvms). Every other venv is installed by the one run that uses it, at its start (run_tests).
failed=()  # reported at the end, each a line saying why
supported=""
for line in $lines; do
  case " $SPARK_LINES_SUPPORTED " in
    *" $line "*) supported="$supported $line" ;;
    *) failed+=("Spark $line: FAILED (not a supported line: $SPARK_LINES_SUPPORTED)") ;;
  esac
done
lines=$supported
case " $lines " in
  *" $DEFAULT_SPARK_LINE "*)
    if ! { ensure_venv "$DEFAULT_SPARK_LINE" && ensure_jars "$DEFAULT_SPARK_LINE"; }; then
      failed+=("Spark $DEFAULT_SPARK_LINE: FAILED (could not install it)")
      lines="$(for line in $lines; do [ "$line" = "$DEFAULT_SPARK_LINE" ] || printf '%s ' "$line"; done)"
    fi
    ensure_chromium ;;
esac
smoked=""
skipped=()  # reported at the end too
for version in $pythons; do
  [ "$version" = "$DEFAULT_PYTHON_VERSION" ] && continue
  if find_python "$version" >/dev/null 2>&1; then
    smoked="$smoked $version"
  else
    skipped+=("Python $version: not on this machine, its smoke tests skipped")
    echo "${skipped[${#skipped[@]}-1]}"
  fi
done

status=0
SPARK_LINES="$(echo $lines)" PYTHON_VERSIONS="${smoked# }" make --no-print-directory "${make_flags[@]}" test || status=$?
for what in ${skipped[@]+"${skipped[@]}"}; do echo "$what"; done
for what in ${failed[@]+"${failed[@]}"}; do
  echo "$what" >&2
  status=1
done
exit "$status"
