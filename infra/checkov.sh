#!/usr/bin/env bash
# Static checks of infra/terraform with checkov (https://www.checkov.io), offline: no plan, no AWS.
#
# checkov pins many packages of its own, so it lives in its own virtualenv, .venv-checkov, created
# here on first use (quietly; without a package cache, about 100 packages are downloaded) and kept
# while its version is the pinned one. uv installs it, as it does the Spark lines' venvs
# (infra/env.sh): 9 s here against pip's 72 s, both from their caches, measured once each.
# Arguments are passed on to checkov. Exit codes: checkov's own (0: no failed check, 1: failed
# checks), or 75 when the virtualenv could not be created (no Python 3.11, no package index).
set -euo pipefail
cd "$(dirname "$0")/.."
source infra/env.sh

CHECKOV_VERSION=3.3.30
VENV=.venv-checkov

if [ "$("$VENV/bin/checkov" --version 2>/dev/null || true)" != "$CHECKOV_VERSION" ]; then
  python="$(find_python)" || exit 75
  rm -rf "$VENV"
  if ! { "$python" -m venv "$VENV" &&
         "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
           "uv==$UV_VERSION" >&2 &&
         "$VENV/bin/uv" pip install --quiet --system-certs --python "$VENV/bin/python" \
           "checkov==$CHECKOV_VERSION" >&2; }; then
    echo "infra/checkov.sh: could not create $VENV with checkov $CHECKOV_VERSION" >&2
    rm -rf "$VENV"
    exit 75
  fi
  echo '*' > "$VENV/.gitignore"  # the virtualenv ignores itself: nothing in it belongs to the repository
fi

# --skip-download: no external modules or platform metadata are fetched; the run is offline.
exec "$VENV/bin/checkov" --quiet --compact --skip-download --framework terraform \
  -d infra/terraform "$@"
