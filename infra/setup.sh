#!/usr/bin/env bash
# One command on a fresh machine: install everything, pre-fetch the JVM jars, run the demo.
# The JVM's own chatter (Ivy's resolution report, SLF4J and log4j lines) goes to .demo/jvm.log;
# the terminal shows the steps, the demo's stages and its result, and real errors.
set -euo pipefail
cd "$(dirname "$0")/.."
source infra/env.sh
mkdir -p .demo
export INVENTORY_VACUUM_JVM_LOG="$PWD/.demo/jvm.log"
: > "$INVENTORY_VACUUM_JVM_LOG"
started=$SECONDS
trap 'echo "set-up failed; the JVM log is .demo/jvm.log (last lines below)" >&2; tail -n 20 "$INVENTORY_VACUUM_JVM_LOG" >&2' ERR

step() {  # step N TEXT: announce a step and remember when it began
  step_started=$SECONDS
  echo "[$1/3] $2" >&2
}
step_done() {
  echo "      done in $((SECONDS - step_started)) s" >&2
}

step 1 "installing inventory-vacuum and its pinned stack (pyspark, delta-spark, boto3, ...) into .venv; the first time takes minutes"
ensure_venv
step_done
step 2 "fetching the Delta and hadoop-aws jars from Maven Central into the Ivy cache (~/.ivy2.5.2), and archiving the JVM's classes"
.venv/bin/inventory-vacuum fetch-jars
step_done
step 3 "demo: local Spark + embedded S3 (moto on 127.0.0.1) + generated Delta tables"
.venv/bin/inventory-vacuum demo --workdir .demo
step_done
echo "set-up done in $((SECONDS - started)) s; the demo's files are in .demo/ (chargeback.html: the cost report)" >&2
