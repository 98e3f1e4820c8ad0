"""Local files a command writes whole (a report, a candidate list, the jar list): written beside
their name and renamed onto it only once complete, so that an error or an interrupt (Ctrl-C)
midway leaves the file as it was, or absent, never cut short."""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def written_whole(path: str | os.PathLike[str]) -> Iterator[str]:
    """Yield a temporary path in ``path``'s folder, with ``path``'s suffix, to write the file to;
    when the block ends without an exception, the file is renamed onto ``path`` (a reader sees the
    old file or the new one), with ``path``'s permissions when it existed, else those a new file
    gets here (the umask's). When the block raises (anything, ``KeyboardInterrupt`` too), the
    temporary file is removed and ``path`` is untouched. A symbolic link at ``path`` stays one:
    its target is replaced. A ``path`` that is no regular file (``/dev/stdout``, a named pipe)
    cannot be replaced: it is yielded itself, and written in place."""
    target = _replaceable(path)
    if target is None:
        yield os.fspath(path)
        return
    temporary = _temporary_beside(target)
    try:
        yield temporary
        try:
            mode = stat.S_IMODE(target.stat().st_mode)
        except FileNotFoundError:
            mode = 0o666 & ~_umask()
        os.chmod(temporary, mode)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def check_writable_whole(path: str | os.PathLike[str]) -> None:
    """Raise ``OSError`` unless :func:`written_whole` can write ``path``: its folder must take a
    new file (the temporary one), made and removed here."""
    target = _replaceable(path)
    if target is not None:
        os.unlink(_temporary_beside(target))


def _replaceable(path: str | os.PathLike[str]) -> Path | None:
    """The file a rename replaces for ``path`` (a link's target), or None when ``path`` is there
    and is no regular file."""
    target = Path(os.path.realpath(path))
    if target.exists() and not target.is_file():
        return None
    return target


def _temporary_beside(target: Path) -> str:
    # ending as the name does (.csv, .parquet): a writer that picks its format by the name picks the same
    descriptor, temporary = tempfile.mkstemp(
        dir=target.parent, prefix=f".{target.name}.", suffix=f".partial{target.suffix}"
    )
    os.close(descriptor)
    return temporary


def _umask() -> int:
    current = os.umask(0)  # the only way to read it: set it back at once
    os.umask(current)
    return current
