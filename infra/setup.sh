#!/usr/bin/env bash
# One command on a fresh machine: install everything, pre-fetch the JVM jars, run the demo.
set -euo pipefail
cd "$(dirname "$0")/.."
source infra/env.sh
echo "== installing inventory-vacuum into .venv" >&2
ensure_venv
echo "== fetching the Delta and hadoop-aws jars (Maven Central, via Spark's Ivy) into ~/.ivy2.5.2" >&2
.venv/bin/inventory-vacuum fetch-jars
echo "== demo: local Spark + embedded S3 (moto on 127.0.0.1) + generated Delta tables" >&2
.venv/bin/inventory-vacuum demo --workdir .demo
