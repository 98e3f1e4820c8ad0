"""The set-up scripts (infra/env.sh): which Java a Spark line gets, and what the install leaves.

No Spark runs here: the Java tests source ``infra/env.sh`` in bash with a stand-in ``java`` that
fails to start the way a JVM does when ``JAVA_TOOL_OPTIONS`` names an option it does not know.
"""

from __future__ import annotations

import importlib.util
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# what a JVM prints, and its exit status, when JAVA_TOOL_OPTIONS holds an option it does not know
NOT_STARTING = """#!/bin/sh
echo "Picked up JAVA_TOOL_OPTIONS: -XX:+NoSuchOption" >&2
echo "Unrecognized VM option 'NoSuchOption'" >&2
echo "Error: Could not create the Java Virtual Machine." >&2
exit 1
"""


def _bash(script: str, **environment: str) -> subprocess.CompletedProcess[str]:
    """``script`` in bash from the repository, with env.sh's exported choices of an enclosing test
    command taken out of the environment (as in a new terminal)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("INVENTORY_VACUUM_JAVA_")}
    env.pop("JAVA_HOME", None)
    env.pop("JAVA_TOOL_OPTIONS", None)
    return subprocess.run(
        ["bash", "-c", script],
        cwd=REPO,
        env={**env, **environment},
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.spark_independent
def test_a_given_java_home_that_does_not_start_is_passed_over_once_saying_why(tmp_path):
    home = tmp_path / "jdk"
    (home / "bin").mkdir(parents=True)
    java = home / "bin" / "java"
    java.write_text(NOT_STARTING)
    java.chmod(java.stat().st_mode | stat.S_IXUSR)
    # three steps of one test command ask for the line's Java: two in this shell, one in a child
    result = _bash(
        "source infra/env.sh && ensure_java 4.2 && ensure_java 4.2"
        " && bash -c 'source infra/env.sh && ensure_java 4.2' && echo \"chosen=$JAVA_HOME\"",
        JAVA_HOME=str(home),
    )
    assert result.returncode == 0, result.stderr
    said = f"JAVA_HOME={home} does not start (Unrecognized VM option 'NoSuchOption')"
    assert result.stderr.count(said) == 1, result.stderr
    chosen = result.stdout.split("chosen=", 1)[1].strip()
    assert chosen and chosen != str(home)


@pytest.mark.spark_independent
def test_no_java_starting_is_an_error_naming_why():
    result = _bash(
        "source infra/env.sh && ensure_java 4.2", JAVA_TOOL_OPTIONS="-XX:+InventoryVacuumNoSuchOption"
    )
    if result.returncode == 0:
        pytest.skip("a Java here starts with an option it does not know (not HotSpot)")
    assert result.returncode == 1
    assert "none found (" in result.stderr
    assert "does not start: Unrecognized VM option 'InventoryVacuumNoSuchOption'" in result.stderr


@pytest.mark.line_sensitive
@pytest.mark.smoke
def test_the_venv_holds_its_packages_compiled_bytecode():
    """The install compiles the packages (a process need not compile them at each start where it
    cannot write bytecode): a module the tool never imports has its bytecode too."""
    spec = importlib.util.find_spec("pyspark.ml.fpm")
    assert spec is not None and spec.origin is not None
    compiled = importlib.util.cache_from_source(spec.origin)
    assert Path(compiled).is_file(), f"{compiled} missing: was the venv installed without compiled bytecode?"
    assert sys.implementation.cache_tag in compiled


def _matrix(**variables: str) -> list[tuple[str, str, str, str]]:
    """The runs ``make test`` makes (``make -n matrix``): each run's label, Spark line, Python and
    markers, in the order they start."""
    import re
    import shutil

    if shutil.which("make") is None:
        pytest.skip("no GNU make on this machine (the test command needs it)")
    assignments = [f"{name}={value}" for name, value in variables.items()]
    # not the choices of the test command running this test, nor its make's flags
    unset = {
        "SPARK_LINES",
        "PYTHON_VERSIONS",
        "PYTEST_ARGS",
        "TEST_SUMMARY",
        "MAKEFLAGS",
        "MFLAGS",
        "MAKELEVEL",
    }
    planned = subprocess.run(
        ["make", "--no-print-directory", "-n", "matrix", *assignments],
        cwd=REPO,
        env={k: v for k, v in os.environ.items() if k not in unset},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    planned = re.sub(r"\\\n\s*", "", planned)  # a recipe's lines joined where they continue
    return re.findall(r'run_tests "([^"]+)" (\S+) (\S+) -m ("[^"]+"|\S+)', planned)


@pytest.mark.spark_independent
def test_each_smoked_python_rides_on_a_run_the_matrix_makes_anyway():
    """Python 3.10's smoke tests run in the 3.5 line's run, on 3.10, and 3.13's in the Java 25
    run, on 3.13 (or alone on the default Java, where the machine has no Java 25): no run of
    their own. A smoked Python with no run to ride on gets one; a rider the machine lacks leaves
    its run on the default Python. (RIDERS_FOUND, the riders the machine has, is given.)"""
    runs = _matrix(RIDERS_FOUND="3.10 3.13")
    by_label = {label: (line, python, markers) for label, line, python, markers in runs}
    assert by_label["Spark 3.5, Python 3.10 (line-sensitive and smoke, generated code)"] == (
        "3.5",
        "3.10",
        '"line_sensitive or smoke"',
    )
    java_25 = "Spark 4.2 on Java 25, Python 3.13 (line-sensitive but not one_java, and smoke)"
    assert by_label[java_25] == ("4.2", "3.13", '"(line_sensitive and not one_java) or smoke"')
    # the recipe's other branch, for a machine without Java 25
    assert by_label["Python 3.13 (smoke)"] == ("4.2", "3.13", "smoke")
    assert "Python 3.10 (smoke)" not in by_label
    assert [python for _, _, python, _ in runs].count("3.13") == 2  # the two branches of one run

    # 3.12 asked for, and 3.10 with its line left out: each a smoke run of its own
    alone = {
        label: (line, python)
        for label, line, python, _ in _matrix(
            SPARK_LINES="4.2 4.0", PYTHON_VERSIONS="3.10 3.12", RIDERS_FOUND="3.10"
        )
    }
    assert alone["Python 3.10 (smoke)"] == ("4.2", "3.10")
    assert alone["Python 3.12 (smoke)"] == ("4.2", "3.12")
    assert alone["Spark 4.0 (line-sensitive)"] == ("4.0", "3.11")
    # 3.10 not on the machine: the 3.5 line's run on the default Python, without smoke tests
    lacking = {label: python for label, _, python, _ in _matrix(RIDERS_FOUND="3.13")}
    assert lacking["Spark 3.5 (line-sensitive, generated code)"] == "3.11"
    assert lacking[java_25] == "3.13"
    # no smoked Pythons: the Java 25 run on the default Python, its smoke branch gone
    bare = {label: python for label, _, python, _ in _matrix(PYTHON_VERSIONS="")}
    assert bare["Spark 4.2 on Java 25 (line-sensitive but not one_java)"] == "3.11"
    assert bare["Spark 3.5 (line-sensitive, generated code)"] == "3.11"
    assert not [label for label in bare if "smoke" in label]
