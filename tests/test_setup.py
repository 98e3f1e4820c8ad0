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
