#!/usr/bin/env bash
# The test command: installs what is missing (idempotent), then runs the whole suite (or pytest's
# arguments). It needs nothing from the caller's environment but HOME (the Ivy cache of the jars):
# `env -i HOME=$HOME PATH=/usr/bin:/bin bash infra/test.sh` works; see infra/env.sh for PYTHON
# and JAVA_HOME.
set -euo pipefail
cd "$(dirname "$0")/.."
source infra/env.sh
ensure_venv
# The suite tests the venv's pyspark with its own interpreter, whatever Spark the caller uses.
unset SPARK_HOME PYSPARK_PYTHON PYSPARK_DRIVER_PYTHON PYSPARK_SUBMIT_ARGS
exec .venv/bin/python -m pytest "$@"
