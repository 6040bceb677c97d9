"""Writing run outputs safely: atomic writes, a room check before long work, and a full or read-only disk turned
into one line and its own exit code.

A full disk (ENOSPC, EDQUOT) or a read-only one (EROFS) is not a bug of the program: ``gp`` reports it as
``error: cannot write <path>: no space left on device (<free> free)`` and exits :data:`EXIT_DISK` (5) instead of
printing a traceback and exiting 1. Files a later reader trusts (configs, predictions, reports, trajectories,
plots) are written to a temp file beside them and renamed into place, so a full disk leaves the old file or none,
never a 0-byte or cut one; :func:`remove_stale_temps` removes the temp files a killed writer left.
"""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

#: gp's exit code for a full or read-only output disk (docs/configuration.md, "Exit codes").
EXIT_DISK = 5
#: errno values that mean "the disk cannot take this write", not "the program is wrong".
DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS})
#: Room a run needs in its output directory before it starts long work (configs, metrics, checkpoints of the toy
#: model, trajectories); less than this is refused up front instead of failing after the work is done.
MIN_FREE_BYTES = 64 * 1024 * 1024
#: Room a command that writes only a report (gp grade, gp validate-tasks) needs before it starts grading.
REPORT_ROOM = 1024 * 1024
#: Suffix of the temp files written beside their target (``.<name>.<random>.tmp``).
TMP_SUFFIX = ".tmp"


class DiskError(OSError):
    """The output disk is full or read-only; ``filename`` is the path that could not be written."""


def find_disk_error(exc: BaseException | None) -> OSError | None:
    """The full/read-only-disk OSError behind ``exc`` (itself, its cause/context chain, or an exception group's
    members; one that names its file preferred), else None."""
    seen: set[int] = set()
    stack = [exc]
    found: OSError | None = None
    while stack:
        current = stack.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in DISK_ERRNOS:
            if current.filename:
                return current
            found = found or current
        stack.extend([current.__cause__, current.__context__])
        stack.extend(getattr(current, "exceptions", ()) or ())
    return found


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def existing_ancestor(path: str | Path) -> Path:
    """``path`` or its nearest existing parent (where a write into ``path`` would land)."""
    current = Path(path).absolute()
    while not current.exists() and current != current.parent:
        current = current.parent
    return current


def free_bytes(path: str | Path) -> int | None:
    try:
        return shutil.disk_usage(existing_ancestor(path)).free
    except OSError:
        return None


def disk_error_line(error: OSError) -> str:
    """``cannot write <path>: no space left on device (<free> free)`` (the path the write failed on)."""
    if error.errno == errno.EROFS:
        return f"cannot write {error.filename or '(path not known)'}: read-only file system"
    reason = "disk quota exceeded" if error.errno == errno.EDQUOT else "no space left on device"
    if isinstance(error, DiskError) and str(error.strerror).startswith("needs at least"):
        reason = f"not enough space left on device ({error.strerror})"
    if not error.filename:
        return f"cannot write (path not known): {reason}"
    free = free_bytes(error.filename)
    return f"cannot write {error.filename}: {reason}" + (f" ({human_bytes(free)} free)" if free is not None else "")


def check_output_dir(path: str | Path, min_free: int = MIN_FREE_BYTES) -> Path:
    """Before long work: ``path`` (created if missing) must be writable and have ``min_free`` bytes free; raises
    :class:`DiskError` (ENOSPC / EROFS naming ``path``) otherwise. The probe file is removed again."""
    target = Path(path)
    try:
        target.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".gp-write-check.", suffix=TMP_SUFFIX, dir=target)
        try:
            os.write(fd, b"x")
        finally:
            os.close(fd)
            os.unlink(probe)
    except OSError as exc:
        if exc.errno in DISK_ERRNOS:
            raise DiskError(exc.errno, os.strerror(exc.errno), str(target)) from None
        raise
    free = free_bytes(target)
    if free is not None and free < min_free:
        raise DiskError(errno.ENOSPC, f"needs at least {human_bytes(min_free)} free", str(target))
    return target


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temp path beside ``path``; on success it replaces ``path``, on any error it is removed (for
    writers that want a file name, e.g. matplotlib's savefig)."""
    path = Path(path)
    tmp: str | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=TMP_SUFFIX, dir=path.parent)
        os.close(fd)
        yield Path(tmp)
        os.replace(tmp, path)
    except BaseException as exc:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError) and exc.errno in DISK_ERRNOS and not isinstance(exc, DiskError):
            # a failed write() names no file: name the one the reader would have trusted
            raise DiskError(exc.errno, os.strerror(exc.errno), str(path)) from exc
        raise


def atomic_write_bytes(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` via a temp file in the same dir + rename (readers never see partial files)."""
    path = Path(path)
    with atomic_path(path) as tmp, open(tmp, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    return path


def atomic_write_text(path: str | Path, text: str) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"))


def remove_stale_temps(directory: str | Path) -> list[Path]:
    """Remove the ``*.tmp`` files a killed or disk-full writer left in ``directory`` (not recursive).

    Only the owner of a run directory calls this (it holds the run lock), so no live writer's temp file is taken."""
    root = Path(directory)
    if not root.is_dir():
        return []
    removed = []
    for candidate in root.iterdir():
        if candidate.name.endswith(TMP_SUFFIX) and candidate.is_file() and not candidate.is_symlink():
            candidate.unlink(missing_ok=True)
            removed.append(candidate)
    return removed
