#!/usr/bin/env bash
# Build the zip that spark-submit ships to a cluster's executors with --py-files: the packages
# core/, inventory/, vacuum/, chargeback/ and jobs/ with their data files (the price file, the analysts' SQL), built
# by the same function the jobs use when they ship themselves (core.session.package_zip).
# Usage: bash infra/package.sh [OUT_DIR]   (default dist/; needs .venv: bash infra/setup.sh, or the
# Python of another of the project's venvs in INVENTORY_VACUUM_PYTHON)
#
#   spark-submit --master spark://HOST:7077 --py-files dist/inventory_vacuum.zip \
#       jobs/vacuum_tables.py --inventory-table ... --tables tables.yaml
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-dist}"
mkdir -p "$out"
"${INVENTORY_VACUUM_PYTHON:-.venv/bin/python}" -c 'import sys; from pathlib import Path; from core.session import package_zip; print(package_zip(Path(sys.argv[1])))' "$out"
