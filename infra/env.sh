# Shared by setup.sh and test.sh: a project-local virtualenv with the pinned stack.
ensure_venv() {
  local python="${PYTHON:-python3.11}"
  command -v "$python" >/dev/null 2>&1 || python=python3
  "$python" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' || {
    echo "inventory-vacuum needs Python 3.11 (found $("$python" --version 2>&1))" >&2; return 1; }
  command -v java >/dev/null 2>&1 || { echo "inventory-vacuum needs Java 17+ for Spark 4 (java not found)" >&2; return 1; }
  [ -x .venv/bin/python ] || "$python" -m venv .venv
  .venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
}
