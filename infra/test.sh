#!/usr/bin/env bash
# The test command (CI runs it through .ci/run). It installs what the tests need (idempotent): a venv
# per supported Spark line, one per other Python of the smoke runs, Debian's chromium for the HTML
# report's test (as root). Then `make test` runs the matrix, two runs at a time: what runs where, in
# which order, is in the Makefile.
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

not_installed=()  # reported at the end, as failed
installed=""
install_line() { if ensure_venv "$1"; then installed="$installed $1"; else not_installed+=("Spark $1"); fi; }
case " $lines " in *" $DEFAULT_SPARK_LINE "*) install_line "$DEFAULT_SPARK_LINE" ;; esac
for line in $lines; do [ "$line" = "$DEFAULT_SPARK_LINE" ] || install_line "$line"; done
smoked=""
for version in $pythons; do
  [ "$version" = "$DEFAULT_PYTHON_VERSION" ] && continue
  if ! find_python "$version" >/dev/null 2>&1; then
    echo "Python $version: not on this machine, its smoke run is skipped"
  elif ensure_venv "$DEFAULT_SPARK_LINE" "$version"; then
    smoked="$smoked $version"
  else
    not_installed+=("Python $version")
  fi
done
case " $lines " in *" $DEFAULT_SPARK_LINE "*) ensure_chromium ;; esac
# each line's jars resolved once, before runs that may start side by side (the default line's two)
for line in $installed; do ensure_jars "$line" || not_installed+=("Spark $line's jars"); done

status=0
SPARK_LINES="${installed# }" PYTHON_VERSIONS="${smoked# }" make --no-print-directory "${make_flags[@]}" test || status=$?
for what in ${not_installed[@]+"${not_installed[@]}"}; do
  echo "$what: FAILED (could not install it)" >&2
  status=1
done
exit "$status"
