"""Files that must never be left half-written: an atomic replace and an exclusive lock.

Student work lives in these files, so a crash, a full disk or two notebooks writing at
once must leave either the old content or the new one, never a mixture.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from filelock import FileLock


def exclusive_lock(path: Path) -> FileLock:
    """An exclusive lock on `<path>.lock`, shared by every process writing `path`
    (filelock: flock on POSIX, msvcrt on Windows, so student laptops are covered)."""
    return FileLock(path.with_name(path.name + ".lock"))


def atomic_write(path: Path, text: str) -> None:
    """Write a temporary file beside `path`, fsync it, then rename it over `path`:
    a crash at any point leaves either the old file or the new one, never half."""
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o644
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_directory(path.parent)


def _fsync_directory(directory: Path) -> None:
    """Make the rename itself durable (best effort: not every platform allows it)."""
    with contextlib.suppress(OSError, AttributeError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
