# Shared by setup.sh and test.sh: a project-local virtualenv with the pinned stack, and the Java
# that Spark 4 needs. Neither is looked up on PATH alone: cron, CI and `env -i` give a bare PATH
# (/usr/bin:/bin) that often lacks pyenv's or Homebrew's python3.11 and a JDK's bin directory.
#
# Choose them explicitly with PYTHON=/path/to/python3.11 (only used to create .venv) and
# JAVA_HOME=/path/to/jdk-17; otherwise PATH and the usual install locations are searched.

_is_python311() {
  [ -n "$1" ] && [ -x "$1" ] && "$1" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' >/dev/null 2>&1
}

# Print a Python 3.11 interpreter: $PYTHON if set, else the first found on PATH or in well-known places.
find_python311() {
  if [ -n "${PYTHON:-}" ]; then
    _is_python311 "$PYTHON" && { echo "$PYTHON"; return 0; }
    echo "PYTHON=$PYTHON is not a Python 3.11 interpreter" >&2; return 1
  fi
  local candidate
  for candidate in "$(command -v python3.11 || true)" "$(command -v python3 || true)" \
      /usr/bin/python3.11 /usr/local/bin/python3.11 /opt/homebrew/bin/python3.11 \
      "${PYENV_ROOT:-${HOME:-}/.pyenv}"/versions/3.11*/bin/python3.11 \
      /opt/python/3.11*/bin/python3.11 "${HOME:-}/.local/bin/python3.11"; do
    _is_python311 "$candidate" && { echo "$candidate"; return 0; }
  done
  echo "inventory-vacuum needs Python 3.11: none on PATH or in the usual places; set PYTHON=/path/to/python3.11" >&2
  return 1
}

_java_major() {  # 17 for 'openjdk version "17.0.9"', 1 for Java 8's "1.8.0_392"
  "$1" -version 2>&1 | sed -nE '1s/.*version "([0-9]+).*/\1/p'
}

# Export JAVA_HOME for a Java 17+ (Spark's launcher runs $JAVA_HOME/bin/java, else java on PATH).
ensure_java() {
  local candidate java_home="" major
  for candidate in ${JAVA_HOME:+"$JAVA_HOME/bin/java"} "$(command -v java || true)" /usr/bin/java \
      /usr/lib/jvm/*/bin/java /opt/homebrew/opt/openjdk*/bin/java /usr/local/opt/openjdk*/bin/java \
      /Library/Java/JavaVirtualMachines/*/Contents/Home/bin/java; do
    [ -n "$candidate" ] && [ -x "$candidate" ] || continue
    major="$(_java_major "$candidate")"
    if [ -n "$major" ] && [ "$major" -ge 17 ]; then
      java_home="$(cd "$(dirname "$(readlink -f "$candidate")")/.." && pwd)"
      break
    fi
  done
  [ -n "$java_home" ] || {
    echo "inventory-vacuum needs Java 17+ for Spark 4: none found; set JAVA_HOME=/path/to/jdk" >&2; return 1; }
  export JAVA_HOME="$java_home"
}

# Create .venv with Python 3.11 if needed and install the project into it (editable, with the dev
# extras); the install is skipped while pyproject.toml is unchanged since the last one.
ensure_venv() {
  ensure_java || return 1
  if [ -e .venv/bin/python ] && ! _is_python311 .venv/bin/python; then
    echo ".venv/bin/python is not a working Python 3.11; remove .venv to recreate it" >&2; return 1
  fi
  if [ ! -e .venv/bin/python ]; then
    local python
    python="$(find_python311)" || return 1
    "$python" -m venv .venv || return 1
  fi
  local stamp=.venv/.inventory-vacuum-installed
  if [ ! -x .venv/bin/inventory-vacuum ] || [ "$(cat "$stamp" 2>/dev/null)" != "$(cksum < pyproject.toml)" ]; then
    .venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[dev]' || return 1
    cksum < pyproject.toml > "$stamp"
  fi
}
