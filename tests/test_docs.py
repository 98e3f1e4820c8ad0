"""The documentation site builds cleanly, and the user-facing text stays a description of the product."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README_MAX_LINES = 250
# User-facing text describes the product as it is now; how the work was organised lives in git.
WORK_REFERENCE = re.compile(r"\b(stop|issue) \d+\b", re.IGNORECASE)


def _user_facing_files() -> list[Path]:
    return [ROOT / "README.md", ROOT / "benchmarks" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


@pytest.mark.spark_independent
def test_docs_site_builds_strictly(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "index.html").is_file()


@pytest.mark.spark_independent
def test_readme_is_a_front_page_and_text_names_no_work_items() -> None:
    readme_lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(readme_lines) <= README_MAX_LINES, f"README.md has {len(readme_lines)} lines"
    offenders = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in _user_facing_files()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if WORK_REFERENCE.search(line)
    ]
    assert not offenders, "\n".join(offenders)
