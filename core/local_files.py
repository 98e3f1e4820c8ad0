"""Local files a command writes whole (a report, a candidate list, the jar list): written beside
their name and renamed onto it only once complete, so that an error or an interrupt (Ctrl-C)
midway leaves the file as it was, or absent, never cut short."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def written_whole(path: str | os.PathLike[str]) -> Iterator[str]:
    """Yield a temporary path in ``path``'s folder, with ``path``'s suffix, to write the file to; when the block ends
    without an exception, the file is renamed onto ``path`` (a reader sees the old file or the
    new one), with ``path``'s permissions when it existed, else those a new file gets here (the
    umask's). When the block raises (anything, ``KeyboardInterrupt`` too), the temporary file is
    removed and ``path`` is untouched. A symbolic link at ``path`` stays one: its target is
    replaced."""
    target = Path(os.path.realpath(path))
    # ending as the name does (.csv, .parquet): a writer that picks its format by the name picks the same
    descriptor, temporary = tempfile.mkstemp(
        dir=target.parent, prefix=f".{target.name}.", suffix=f".partial{target.suffix}"
    )
    os.close(descriptor)
    try:
        yield temporary
        try:
            mode = target.stat().st_mode & 0o7777
        except FileNotFoundError:
            mode = 0o666 & ~_umask()
        os.chmod(temporary, mode)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _umask() -> int:
    current = os.umask(0)  # the only way to read it: set it back at once
    os.umask(current)
    return current
