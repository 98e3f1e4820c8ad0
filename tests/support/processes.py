"""Child processes started the way a scheduler starts the installed command: a bare environment."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

BARE_PATH = "/usr/bin:/bin"  # what cron, CI runners and `env -i` give: no virtualenv, no pyenv


def java_home() -> str | None:
    """The JDK the tests run with, for a child whose PATH may not reach it."""
    if os.environ.get("JAVA_HOME"):
        return os.environ["JAVA_HOME"]
    java = shutil.which("java")
    return str(Path(java).resolve().parent.parent) if java else None


def bare_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """A minimal environment, as a scheduler gives it: HOME (Ivy's jar cache), a bare PATH, the
    S3 settings of the test server, and JAVA_HOME (the tests' JDK may not be on that PATH).

    The child's scratch folders are the test's own: TMPDIR for Python, SPARK_LOCAL_DIRS for Spark's
    and LOCAL_DIRS for S3A's upload buffers (``fs.s3a.buffer.dir`` is ``${env.LOCAL_DIRS}/s3a``
    when it is set). The JVM reads neither TMPDIR nor, outside a YARN container, LOCAL_DIRS for
    anything else; without them a child the test kills leaves its block manager's folders and a
    half-uploaded block in /tmp."""
    scratch = tmp_path / "spark-local"
    scratch.mkdir(exist_ok=True)
    env = {
        "HOME": os.environ["HOME"],
        "PATH": BARE_PATH,
        "TMPDIR": str(tmp_path),
        "SPARK_LOCAL_DIRS": str(scratch),
        "LOCAL_DIRS": str(scratch),
    }
    env.update({k: v for k, v in os.environ.items() if k.startswith("AWS_")})
    home = java_home()
    if home:
        env["JAVA_HOME"] = home
    env.update(extra)
    return env


def errors_in(stderr: str) -> str:
    """What a failed child's stderr says went wrong (a Spark job's last lines are its shutdown)."""
    lines = [
        line
        for line in stderr.splitlines()
        if ("Error" in line or "Exception" in line) and not line.lstrip().startswith("at ")
    ]
    return "\n".join(lines[:30]) or stderr[-3000:]
