"""Local files a command writes whole (a report, a candidate list, the jar list): written beside
their name and renamed onto it only once complete, so that an error or an interrupt (Ctrl-C)
midway leaves the file as it was, or absent, never cut short.

Where a rename cannot replace the file as the user has it, the file is written in place, as
``open(path, "w")`` would: a path under ``/dev`` or ``/proc`` (``/dev/stderr``, which may be a
pipe or the command's own log), the file the command's output goes to, anything but a regular
file, a file of another owner, with other hard links, an access list or extended attributes (a
new file would have another owner, be split from its links, or lose them), a group the new file
cannot take, a folder that takes no new file or makes it unwritable (a umask or default access
list), and a rename the file system refuses (a file bind-mounted into a container, a sticky
folder, a mount that cannot rename).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import secrets
import shutil
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

log = logging.getLogger("inventory_vacuum")

# the copy of its standard output the command line shows results on, while it runs
# (jobs.cli.main points descriptor 1 at its log)
_RESULTS_DESCRIPTORS: list[int] = []


@contextmanager
def results_shown_on(descriptor: int) -> Iterator[None]:
    """While the block runs, ``descriptor`` is where the command shows its results
    (:func:`is_results_output`)."""
    _RESULTS_DESCRIPTORS.append(descriptor)
    try:
        yield
    finally:
        _RESULTS_DESCRIPTORS.remove(descriptor)


def is_results_output(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is where the command shows its results: a name of the standard output
    (:func:`names_standard_output`), or the very file the results go to (``--report out.json >
    out.json``). Written to by its own open, it would be emptied and written from its start, and
    the results written after it over the report; the command writes it on the results' stream."""
    if names_standard_output(path):
        return True
    try:
        status = os.stat(path)
    except OSError:
        return False
    return any(_same_file(descriptor, status) for descriptor in _RESULTS_DESCRIPTORS)


def _same_file(descriptor: int, status: os.stat_result) -> bool:
    try:
        shown = os.fstat(descriptor)
    except OSError:
        return False
    return stat.S_ISREG(status.st_mode) and (shown.st_dev, shown.st_ino) == (status.st_dev, status.st_ino)


@contextmanager
def written_whole(path: str | os.PathLike[str]) -> Iterator[str]:
    """Yield the path to write the file to: a new file beside ``path``, ending as its name does
    (``.csv``, ``.parquet``: a writer that picks its format by the name picks the same). When the
    block ends without an exception it is flushed to disk and renamed onto ``path`` (a reader sees
    the old file or the new one) with the old file's permissions and group, or a new file's here;
    a symbolic link at ``path`` stays one, its target replaced. When the block raises (anything,
    ``KeyboardInterrupt`` too), the new file is removed and ``path`` is untouched. Where no rename
    can do that (see the module's text), ``path`` itself is yielded, or the file is copied onto it."""
    target = _replaceable(path)
    if target is None:
        yield os.fspath(path)
        return
    made: list[str] = []  # the new file, named before it is made: an interrupt cannot leave it
    try:
        temporary = _new_file_beside(target, _suffix(path), made)
        if temporary is None:
            yield os.fspath(path)
            return
        yield temporary
        flush_to_disk(temporary)
        try:
            _take_permissions(temporary, target)
            os.replace(temporary, target)
        except OSError as error:
            log.info("%s is written in place: it cannot be renamed onto (%s)", path, error.strerror)
            shutil.copyfile(temporary, target)
    finally:
        for name in made:
            Path(name).unlink(missing_ok=True)


def names_standard_output(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` names this process's standard output: ``/dev/stdout``, ``/dev/fd/1``,
    ``/proc/self/fd/1`` (or this process's number for ``self``), or a symbolic link to one of
    them. Read from the names alone, not from where the descriptor points: the command line
    points descriptor 1 at its log (:func:`jobs.cli.main`) and shows the result on a copy of it,
    so such a path is to be written to that copy, not opened."""
    own = re.compile(rf"/proc/{os.getpid()}(?:/task/\d+)?/fd/1")
    current = os.path.abspath(path)
    for _ in range(40):  # the kernel's own bound on links followed
        # the folder as it resolves (/dev/fd is /proc/self/fd, /proc/self is /proc/<pid>), the name
        # as given: the name itself is a link to the descriptor's file, not to be followed
        current = os.path.join(os.path.realpath(os.path.dirname(current)), os.path.basename(current))
        if current == "/dev/stdout" or own.fullmatch(current):
            return True
        # a descriptor's link under /proc names its file, never another name of descriptor 1
        if current.startswith("/proc/") or not os.path.islink(current):
            return False
        try:
            current = os.path.join(os.path.dirname(current), os.readlink(current))
        except OSError:
            return False
    return False


def _replaceable(path: str | os.PathLike[str]) -> Path | None:
    """The file a rename replaces for ``path`` (a link's target), or None when it is to be written
    in place (see the module's text)."""
    given = os.path.abspath(path)
    target = Path(os.path.realpath(path))
    if any(str(p).startswith(("/dev/", "/proc/")) for p in (given, target)):
        return None
    try:
        status = target.stat()
    except FileNotFoundError:
        return target
    if not target.is_file() or status.st_uid != os.geteuid() or status.st_nlink > 1:
        return None
    # the command's own output (a link to /dev/stdout, say): replaced, what it prints after is lost
    for descriptor in (1, 2, *_RESULTS_DESCRIPTORS):
        with contextlib.suppress(OSError):
            output = os.fstat(descriptor)
            if (output.st_dev, output.st_ino) == (status.st_dev, status.st_ino):
                return None
    # an access list or extended attributes, which a new file would not have
    with contextlib.suppress(OSError):
        if any(not name.startswith("security.") for name in os.listxattr(target)):
            return None
    return target


def _suffix(path: str | os.PathLike[str]) -> str:
    name = Path(path).name
    return Path(name).suffix or (name if name.startswith(".") else "")


def _new_file_beside(target: Path, suffix: str, made: list[str]) -> str | None:
    """A new, empty file in ``target``'s folder, hidden, made as ``open`` makes one (the umask
    and the folder's default ACL apply), its name in ``made`` from before it is made; None (and
    none left) when the folder takes no new file or the new file cannot be written to."""
    for _ in range(10):
        name = str(target.parent / f".{target.name}.{secrets.token_hex(4)}.partial{suffix}")
        made.append(name)
        try:
            descriptor = os.open(name, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666)
        except FileExistsError:
            made.remove(name)  # another's
            continue
        except OSError as error:
            made.remove(name)
            log.info("%s is written in place: no new file in its folder (%s)", target, error.strerror)
            return None
        os.close(descriptor)
        if not os.access(name, os.W_OK):  # a umask or default ACL that takes the owner's write
            log.info("%s is written in place: a new file in its folder is not writable", target)
            return None
        return name
    log.info("%s is written in place: no free temporary name in its folder", target)
    return None


def _take_permissions(temporary: str, target: Path) -> None:
    """The old file's mode and group on the new one (a new file keeps its own); ``OSError`` when
    the group cannot be given (the file is then written in place, keeping it)."""
    try:
        status = target.stat()
    except FileNotFoundError:
        return
    if status.st_gid != os.stat(temporary).st_gid:
        os.chown(temporary, -1, status.st_gid)
    os.chmod(temporary, status.st_mode & 0o7777)


def flush_to_disk(path: str) -> None:
    """Flush a file's (or a folder's) written data to disk (``fsync``)."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
