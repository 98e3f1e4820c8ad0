#!/usr/bin/env bash
# The test command: installs what is missing (idempotent), then runs the whole suite.
set -euo pipefail
cd "$(dirname "$0")/.."
source infra/env.sh
ensure_venv
exec .venv/bin/python -m pytest "$@"
