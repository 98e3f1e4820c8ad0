# Shared by setup.sh, test.sh and the Makefile: a project-local virtualenv with the pinned stack,
# the Java that Spark 4 needs, and one pytest run of the test matrix. Neither Python nor Java is
# looked up on PATH alone: cron, CI and `env -i` give a bare PATH
# (/usr/bin:/bin) that often lacks pyenv's or Homebrew's python3.11 and a JDK's bin directory.
#
# Choose them explicitly with PYTHON=/path/to/python3.11 (only used to create .venv) and
# JAVA_HOME=/path/to/jdk-17; otherwise PATH and the usual install locations are searched.

# The Spark lines the project supports, each pinned by infra/constraints/spark-<LINE>.txt. The
# default line lives in .venv (setup.sh, the README's commands); another in .venv-spark<LINE>.
DEFAULT_SPARK_LINE=4.2
SPARK_LINES_SUPPORTED="4.2 4.0 3.5"
# The Python the default venvs are made with. The test command smokes the oldest and the newest of
# the others (a break in 3.12 alone, with 3.10, 3.11 and 3.13 passing, is unlikely enough not to pay
# CI three minutes for), each riding on a run the matrix makes anyway (the Makefile);
# PYTHON_VERSIONS="3.10 3.12 3.13" smokes 3.12 too, in a run of its own.
DEFAULT_PYTHON_VERSION=3.11
PYTHON_VERSIONS_SUPPORTED="3.10 3.11 3.12 3.13"
PYTHON_VERSIONS_SMOKED="3.10 3.13"
# The installer of the venvs' packages (ensure_venv)
UV_VERSION=0.13.9

_is_python() {  # _is_python PATH X.Y: PATH runs Python X.Y
  [ -n "$1" ] && [ -x "$1" ] && "$1" -c "import sys; sys.exit(sys.version_info[:2] != tuple(map(int, '$2'.split('.'))))" >/dev/null 2>&1
}

# Print a Python X.Y interpreter (default 3.11): $PYTHON if set (for 3.11), else the first found on
# PATH or in well-known places (pyenv, Homebrew, /opt/python).
find_python() {
  local version=${1:-$DEFAULT_PYTHON_VERSION}
  if [ -n "${PYTHON:-}" ] && [ "$version" = "$DEFAULT_PYTHON_VERSION" ]; then
    _is_python "$PYTHON" "$version" && { echo "$PYTHON"; return 0; }
    echo "PYTHON=$PYTHON is not a Python $version interpreter" >&2; return 1
  fi
  local candidate
  for candidate in "$(command -v "python$version" || true)" "$(command -v python3 || true)" \
      "/usr/bin/python$version" "/usr/local/bin/python$version" "/opt/homebrew/bin/python$version" \
      "${PYENV_ROOT:-${HOME:-}/.pyenv}"/versions/"$version".*/bin/python"$version" \
      /opt/python/"$version".*/bin/python"$version" "${HOME:-}/.local/bin/python$version"; do
    _is_python "$candidate" "$version" && { echo "$candidate"; return 0; }
  done
  echo "inventory-vacuum needs Python $version here: none on PATH or in the usual places; set PYTHON=/path/to/python$version" >&2
  return 1
}

# The version a java prints, e.g. 17.0.9 for 'openjdk version "17.0.9"' (the first line that names
# one: with JAVA_TOOL_OPTIONS set, "Picked up JAVA_TOOL_OPTIONS: ..." comes before it)
_java_version() {
  local printed
  printed="$("$1" -version 2>&1)" || return 0
  sed -nE '/version "[0-9]/{s/.*version "([0-9][^"]*)".*/\1/p;q;}' <<< "$printed"
}

# _java_start_error JAVA: why that java does not start (the first line of its output that is not
# empty or "Picked up ..."; e.g. an option in JAVA_TOOL_OPTIONS it does not know, else its exit
# status), or nothing when it starts
_java_start_error() {
  local printed status line
  printed="$("$1" -version 2>&1)" && return 0
  status=$?
  line="$(grep -v -m 1 -e '^Picked up ' -e '^[[:space:]]*$' <<< "$printed")"
  echo "${line:-exit status $status}"
}

# The JAVA_HOME the caller gave (as env.sh was first sourced: the functions below export others),
# tried first for every line that runs on it.
# Taken again when JAVA_HOME is no longer the one ensure_java last exported: the caller changed it.
if [ -z "${INVENTORY_VACUUM_JAVA_GIVEN+set}" ] || [ "${JAVA_HOME:-}" != "${INVENTORY_VACUUM_JAVA_CHOSEN-}" ]; then
  export INVENTORY_VACUUM_JAVA_GIVEN="${JAVA_HOME:-}"
fi

_java_range() {  # _java_range LINE: the Javas that Spark line runs on, in words (_java_runs_line)
  case $1 in 3.5) echo "17" ;; 4.0) echo "17 or 21" ;; *) echo "17, 21 or 25.0.3 and later" ;; esac
}

# _java_candidates: set JAVA_CANDIDATES to the java executables to try, in order: the given
# JAVA_HOME's, the first on PATH, then the usual install locations
_java_candidates() {
  JAVA_CANDIDATES=(${INVENTORY_VACUUM_JAVA_GIVEN:+"$INVENTORY_VACUUM_JAVA_GIVEN/bin/java"} "$(command -v java || true)" \
    /usr/bin/java /usr/lib/jvm/*/bin/java /opt/homebrew/opt/openjdk*/bin/java /usr/local/opt/openjdk*/bin/java \
    /Library/Java/JavaVirtualMachines/*/Contents/Home/bin/java)
}

# _java_home_of JAVA: the home folder of that java executable, as its JVM reports it (a version
# manager's shim is not in its Java's folder), with a bin/java that Spark's launcher can run
_java_home_of() {
  local printed home
  printed="$("$1" -XshowSettings:properties -version 2>&1)" || return 1
  home="$(sed -nE '/^ *java\.home = /{s/^ *java\.home = //p;q;}' <<< "$printed")"
  [ -n "$home" ] && [ -x "$home/bin/java" ] && (cd "$home" && pwd -P)
}

# _java_runs_line LINE VERSION: the Spark line runs on that Java build (no early-access build; on
# Java 25, 25.0.3 or later)
_java_runs_line() {
  local major=${2%%[.+-]*}
  case $2 in *-ea*) return 1 ;; esac
  case "$1:$major" in
    3.5:17 | 4.0:17 | 4.0:21 | 4.2:17 | 4.2:21) return 0 ;;
    4.2:25) _version_at_least "${2%%[+-]*}" 25.0.3 ;;
    *) return 1 ;;
  esac
}

# ensure_java [LINE]: export JAVA_HOME for a Java the Spark line (default: the default line) runs on
# (_java_runs_line; Spark's launcher runs $JAVA_HOME/bin/java, else java on PATH); a given JAVA_HOME
# the line does not run on, or that does not start, is passed over, with a line saying so and why
# (once for that JAVA_HOME and line: the steps of one test command each ask again).
ensure_java() {
  local line=${1:-$DEFAULT_SPARK_LINE} candidate version java_home="" given_taken="" failed="" i why
  _java_candidates
  for i in "${!JAVA_CANDIDATES[@]}"; do
    candidate=${JAVA_CANDIDATES[i]}
    [ -n "$candidate" ] && [ -x "$candidate" ] || continue
    version="$(_java_version "$candidate")"
    if [ -z "$version" ] && [ -z "$failed" ]; then  # the first java that did not start, and why
      why="$(_java_start_error "$candidate")"
      [ -z "$why" ] || failed="$candidate does not start: $why"
    fi
    if _java_runs_line "$line" "$version" && java_home="$(_java_home_of "$candidate")"; then
      [ "$i" = 0 ] && [ -n "$INVENTORY_VACUUM_JAVA_GIVEN" ] && given_taken=1
      break
    fi
    java_home=""
  done
  [ -n "$java_home" ] || {
    echo "inventory-vacuum needs Java $(_java_range "$line") for Spark $line: none found${failed:+ ($failed)}; set JAVA_HOME=/path/to/jdk" >&2; return 1; }
  if [ -n "$INVENTORY_VACUUM_JAVA_GIVEN" ] && [ -z "$given_taken" ] \
    && [[ "${INVENTORY_VACUUM_JAVA_NOTED:-}" != *"|$line:$INVENTORY_VACUUM_JAVA_GIVEN|"* ]]; then
    if [ ! -x "$INVENTORY_VACUUM_JAVA_GIVEN/bin/java" ]; then
      why="has no bin/java"
    else
      why="$(_java_start_error "$INVENTORY_VACUUM_JAVA_GIVEN/bin/java")"
      why="${why:+does not start ($why)}"
    fi
    echo "Spark $line: JAVA_HOME=$INVENTORY_VACUUM_JAVA_GIVEN ${why:-is not a Java it runs on ($(_java_range "$line"))}: Java $(_java_version "$java_home/bin/java") from $java_home instead" >&2
    export INVENTORY_VACUUM_JAVA_NOTED="${INVENTORY_VACUUM_JAVA_NOTED:-|}$line:$INVENTORY_VACUUM_JAVA_GIVEN|"
  fi
  export JAVA_HOME="$java_home" INVENTORY_VACUUM_JAVA_CHOSEN="$java_home"
}

# find_java_home MAJOR [LEAST]: print the home of a Java of that major release (and at least version
# LEAST, e.g. 25.0.3; not an early-access build), from the places ensure_java tries; status 1 if none.
find_java_home() {
  local major=$1 least=${2:-} candidate version
  _java_candidates
  for candidate in "${JAVA_CANDIDATES[@]}"; do
    [ -n "$candidate" ] && [ -x "$candidate" ] || continue
    version="$(_java_version "$candidate")"
    [ "${version%%[.+-]*}" = "$major" ] || continue
    case $version in *-ea*) continue ;; esac
    if [ -n "$least" ] && ! _version_at_least "${version%%[+-]*}" "$least"; then
      continue
    fi
    _java_home_of "$candidate" && return 0
  done
  return 1
}

# _version_at_least VERSION LEAST: VERSION (dot-separated numbers) is LEAST or later
_version_at_least() {
  local -a have want
  local i
  IFS=. read -r -a have <<< "$1"
  IFS=. read -r -a want <<< "$2"
  for ((i = 0; i < ${#want[@]}; i++)); do
    [ "${have[i]:-0}" -gt "${want[i]}" ] 2>/dev/null && return 0
    [ "${have[i]:-0}" -lt "${want[i]}" ] 2>/dev/null && return 1
  done
  return 0
}

venv_dir() {  # venv_dir LINE [PYTHON_VERSION]: where that Spark line (on that Python) is installed
  local line=${1:-$DEFAULT_SPARK_LINE} version=${2:-$DEFAULT_PYTHON_VERSION} dir=.venv
  [ "$line" = "$DEFAULT_SPARK_LINE" ] || dir="$dir-spark$line"
  [ "$version" = "$DEFAULT_PYTHON_VERSION" ] || dir="$dir-py$version"
  echo "$dir"
}

# spark_wheels VENV PINS: print a folder holding the wheel of the pyspark that PINS name, built there
# once (by VENV's pip) if missing. PyPI serves pyspark as a source archive only, and uv builds it
# again on each install when the package index does not let it revalidate its cached copy: half a
# minute and a new 1.4 GB cache entry for each venv, kept without bound (the test command makes four).
# The folder is $XDG_CACHE_HOME/inventory-vacuum/wheels (else ~/.cache/...), beside the jars' lists.
spark_wheels() {
  local venv=$1 pins=$2 wheels version
  wheels="${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/inventory-vacuum/wheels"
  version="$(sed -n 's/^pyspark==//p' "$pins")"
  [ -n "$version" ] || { echo "$pins pins no pyspark version (a line 'pyspark==X.Y.Z')" >&2; return 1; }
  if [ ! -f "$wheels/pyspark-$version-py2.py3-none-any.whl" ]; then
    mkdir -p "$wheels" || return 1
    local build
    build="$(mktemp -d "$wheels/.build.XXXXXX")" || return 1
    # built aside and moved in whole: a wheel half written by an interrupted build is never taken
    if ! "$venv/bin/python" -m pip wheel --quiet --disable-pip-version-check --no-deps --no-cache-dir \
        -w "$build" "pyspark==$version" >&2 \
      || ! mv "$build"/pyspark-"$version"-*.whl "$wheels/"; then
      rm -rf "$build"
      echo "could not build the wheel of pyspark $version into $wheels" >&2
      return 1
    fi
    rm -rf "$build"
  fi
  echo "$wheels"
}

# ensure_venv [LINE [PYTHON_VERSION]]: create the venv of that Spark line (default the default line, in .venv)
# with that Python (default 3.11) if needed, and install the project into it (editable, with the dev
# extras, the line's pins as constraints); skipped while pyproject.toml and the pins are unchanged.
ensure_venv() {
  local line=${1:-$DEFAULT_SPARK_LINE} version=${2:-$DEFAULT_PYTHON_VERSION}
  local venv pins=infra/constraints/spark-$line.txt
  venv="$(venv_dir "$line" "$version")"
  [ -f "$pins" ] || { echo "unknown Spark line $line: supported are $SPARK_LINES_SUPPORTED" >&2; return 1; }
  ensure_java "$line" || return 1
  if [ -e "$venv/bin/python" ] && ! _is_python "$venv/bin/python" "$version"; then
    echo "$venv/bin/python is not a working Python $version; remove $venv to recreate it" >&2; return 1
  fi
  if [ ! -e "$venv/bin/python" ]; then
    local python
    python="$(find_python "$version")" || return 1
    # a current pip: an old one (3.10's 23.0) builds pyspark's sdist by the deprecated, fragile
    # `setup.py install` when the wheel package is missing, and that failed once in CI
    # a venv left half made (its pip not yet upgraded) would be reused with the old pip: remove it
    "$python" -m venv --upgrade-deps "$venv" || { rm -rf "$venv"; return 1; }
  fi
  local stamp="$venv/.inventory-vacuum-installed" wanted
  wanted="$(cat pyproject.toml "$pins" | cksum) compiled"  # the last word: installed by this recipe
  if [ ! -x "$venv/bin/inventory-vacuum" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$wanted" ]; then
    # uv installs the stack (pip installs uv, pinned): from its cache and the built pyspark wheel it
    # lays a Spark line's packages into a venv in seconds, and the test command makes four venvs.
    # It is told to trust the system's certificates, as pip does. The installers' and the build
    # backend's chatter go to a file, printed only when the install fails.
    # Then the venv's packages and the project's own (installed editable) are compiled to bytecode,
    # as pip does on install and uv does not: a process then reads each module's compiled code
    # rather than compiling its source at every start where it cannot write bytecode
    # (PYTHONDONTWRITEBYTECODE, a read-only image), 0.75 s of a one-table dry run's start. A file
    # that does not compile is left to be compiled on import (some packages ship templates named
    # .py), so compileall's status is not the install's.
    local pip_log wheels
    pip_log="$(mktemp "${TMPDIR:-/tmp}/inventory-vacuum-pip.XXXXXX")"
    wheels="$(spark_wheels "$venv" "$pins")" || { rm -f "$pip_log"; return 1; }
    if ! { "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "uv==$UV_VERSION" \
      && "$venv/bin/uv" pip install --quiet --system-certs --python "$venv/bin/python" \
        --find-links "$wheels" -e '.[dev]' -c "$pins"; } \
      > "$pip_log" 2>&1; then
      cat "$pip_log" >&2
      rm -f "$pip_log"
      return 1
    fi
    rm -f "$pip_log"
    "$venv/bin/python" -m compileall -q -j 0 "$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')" \
      core inventory vacuum chargeback jobs testing > /dev/null 2>&1 || true
    echo "$wanted" > "$stamp"
  fi
}

# run_tests LABEL LINE PYTHON_VERSION PYTEST_ARGS...: one pytest run in that Spark line's venv (on
# that Python), as the Makefile's targets run them. A venv other than .venv is installed (or brought
# up to date) by the run that uses it, at its start: in the matrix each is used by one run, which
# then installs it while the runs before it go on beside it; .venv, which two runs side by side
# use, is installed before (infra/test.sh). Each run has its own temp root, for pytest
# (--basetemp: pytest prunes the numbered directories of a shared one, under a run beside it) and
# for Spark's scratch folders (SPARK_LOCAL_DIRS), and
# no pytest cache (two runs would overwrite it). Spark is the venv's pyspark, run by the venv's
# interpreter, whatever the caller's SPARK_HOME or PYSPARK_* say. Its outcome and time print as one
# line at its end, and go to the file $TEST_SUMMARY too when that is set.
run_tests() {
  local label=$1 line=$2 version=$3 venv started=$SECONDS rc=0 temp outcome
  shift 3
  venv="$(venv_dir "$line" "$version")"
  # (a spark-env.sh in the caller's SPARK_CONF_DIR could set another JAVA_HOME than the run names)
  unset SPARK_HOME SPARK_CONF_DIR PYSPARK_PYTHON PYSPARK_DRIVER_PYTHON PYSPARK_SUBMIT_ARGS
  if [ "$venv" != .venv ] && ! { ensure_venv "$line" "$version" && ensure_jars "$line" "$version"; }; then
    outcome="FAILED (could not install $venv)"
    rc=2
  elif [ ! -x "$venv/bin/python" ]; then
    outcome="FAILED ($venv is not installed: bash infra/test.sh installs it)"
    rc=2
  elif ! ensure_java "$line"; then
    outcome="FAILED (no Java Spark $line runs on)"
    rc=2
  else
    echo "=== $label: $("$venv/bin/python" -c 'import sys, pyspark, importlib.metadata as m; print("Python", sys.version.split()[0], "pyspark", pyspark.__version__, "delta-spark", m.version("delta-spark"), end="")'), Java $(_java_version "$JAVA_HOME/bin/java")"
    temp="$(mktemp -d "${TMPDIR:-/tmp}/inventory-vacuum-pytest.XXXXXX")"
    # pytest's folders and Spark's scratch folders (shuffle blocks, a killed JVM's leftovers) are
    # under the run's own temp root, removed after it
    mkdir -p "$temp/spark"
    SPARK_LOCAL_DIRS="$temp/spark" INVENTORY_VACUUM_SPARK_LINE=$line \
      "$venv/bin/python" -m pytest --basetemp "$temp/pytest" -p no:cacheprovider "$@" || rc=$?
    rm -rf "$temp"
    if [ "$rc" = 0 ]; then outcome=passed; else outcome="FAILED (pytest exit $rc)"; fi
  fi
  outcome="$(printf '%-36s %s in %d min %02d s' "$label:" "$outcome" $(((SECONDS - started) / 60)) $(((SECONDS - started) % 60)))"
  echo "$outcome"
  if [ -n "${TEST_SUMMARY:-}" ]; then echo "$outcome" >> "$TEST_SUMMARY"; fi
  return "$rc"
}

# ensure_jars LINE [PYTHON_VERSION]: that Spark line's Delta and hadoop-aws jars in Ivy's cache, with
# the list of their files that sessions load without Ivy (fetch-jars, without the class-data
# archive), unless the list is there and its files unchanged. The test runs then start on that
# list, without Ivy. Ivy locks nothing between processes, and two resolutions at once would write
# the same files: the test command resolves the default line's jars before its runs start, and a
# run that resolves another line's at its start takes a lock file first (with flock, where the
# machine has it), so two such runs beside each other resolve one after the other.
ensure_jars() {
  local line=$1 venv log rc=0
  venv="$(venv_dir "$line" "${2:-}")"
  [ -x "$venv/bin/python" ] || return 1
  ensure_java "$line" || return 1
  if "$venv/bin/python" -c 'import sys, pyspark; from core.jar_cache import cached_jars; from core.session import jvm_packages; sys.exit(cached_jars(jvm_packages(), pyspark.__version__) is None)' 2>/dev/null; then
    return 0
  fi
  echo "Spark $line: resolving its jars into Ivy's cache (fetch-jars), once"
  log="$(mktemp "${TMPDIR:-/tmp}/inventory-vacuum-fetch-jars.XXXXXX")"
  local lock=() cache="${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/inventory-vacuum"
  if command -v flock >/dev/null 2>&1 && mkdir -p "$cache"; then lock=(flock "$cache/fetch-jars.lock"); fi
  INVENTORY_VACUUM_CLASS_ARCHIVE=0 ${lock[@]+"${lock[@]}"} "$venv/bin/inventory-vacuum" fetch-jars --log-file "$log" \
    >/dev/null 2>>"$log" || rc=$?
  if [ "$rc" != 0 ]; then echo "Spark $line: fetch-jars failed (exit $rc): $(tail -n 1 "$log"); its log: $log" >&2; return 1; fi
  rm -f "$log"
}

# ensure_chromium: Debian's chromium, which the HTML chargeback report's test renders the report in
# (it skips without /usr/bin/chromium). Installed with apt-get when running as root; otherwise one
# line says the test will skip.
ensure_chromium() {
  [ -x /usr/bin/chromium ] && return 0
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "no /usr/bin/chromium (installing it needs root and apt-get): the HTML report's test in headless Chromium will skip"
    return 0
  fi
  echo "installing Debian's chromium (apt-get) for the HTML report's test in headless Chromium"
  if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null 2>&1; then
    apt-get update -qq >/dev/null 2>&1 || true
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null 2>&1 \
      || echo "apt-get could not install chromium: the HTML report's test in headless Chromium will skip"
  fi
  return 0
}
