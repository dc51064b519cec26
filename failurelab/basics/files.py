"""Files that must never be lost, left half-written or written where they do not belong.

Student work lives in worksheet files, so a crash, a full disk or two notebooks writing
at once must leave either the old content or the new one, never a mixture
(`atomic_write`, `exclusive_lock`).  And no command or export may replace a file it
reads, a worksheet, or a file of another format: `check_output` is the one guard every
writer of a path the user named goes through (`check_output_folder` for a folder).
Standard library only: every floor of the package may use it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Iterable

from filelock import FileLock

WORKSHEET_SUFFIX = ".worksheet.json"  # how a worksheet is named
WORKSHEET_FORMAT = "failurelab-worksheet"  # the marker inside it (see course/records.py)

PathLike = str | os.PathLike


class OutputRefused(ValueError):
    """A path that must not be written: the message is one line saying why."""


# --- where a command may write ---------------------------------------------------------

def check_output(path: PathLike, suffixes: Iterable[str], *, inputs: Iterable[PathLike] = (),
                 what: str = "output") -> Path:
    """`path`, if writing the `what` there is safe; else OutputRefused, before any work.

    Safe means: its name ends in one of `suffixes` (the format it will hold), its folder
    exists and may be written, and it is not a folder, not a worksheet (by name or by
    content), not one of `inputs`, and not inside a folder among `inputs`."""
    path, suffixes = Path(path), tuple(s.lower() for s in suffixes)

    def refuse(why: str) -> OutputRefused:
        return OutputRefused(f"cannot write the {what} to {path}: {why}")

    if path.name.lower().endswith(WORKSHEET_SUFFIX) or is_worksheet(path):
        raise refuse(f"it is a worksheet, a student's work; give a new file name ending "
                     f"in {_either(suffixes)}")
    if path.is_dir():
        raise refuse(f"it is a folder; give a file name ending in {_either(suffixes)}")
    if not path.name.lower().endswith(suffixes):
        raise refuse(f"a {what} file's name must end in {_either(suffixes)}")
    _check_not_an_input(path, inputs, refuse)
    folder = path.parent
    if not folder.is_dir():
        raise refuse(f"the folder {folder} does not exist")
    if not os.access(folder, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise refuse(f"no permission to write in {path if path.exists() else folder}")
    return path


def check_output_folder(path: PathLike, *, inputs: Iterable[PathLike] = (),
                        what: str = "output") -> Path:
    """The folder `path`, created if missing, once a file could really be written in
    it (tried, not guessed: permission bits do not stop root, a read-only disk does)."""
    path = Path(path)

    def refuse(why: str) -> OutputRefused:
        return OutputRefused(f"cannot write the {what} into {path}: {why}")

    if path.exists() and not path.is_dir():
        raise refuse("it is a file, not a folder; give a folder name (it is created if "
                     "missing)")
    _check_not_an_input(path, inputs, refuse)
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except PermissionError:
        raise refuse(f"no permission to write in {path}") from None
    except OSError as err:
        raise refuse(err.strerror or str(err)) from None
    return path


def check_inputs(paths: Iterable[PathLike], what: str = "input") -> list[Path]:
    """The paths, each of which must exist: FileNotFoundError naming the first that does
    not (a typo must not read as an empty class)."""
    paths = [Path(p) for p in paths]
    for path in paths:
        if not path.exists():
            raise FileNotFoundError(f"no such {what}: {path}")
    return paths


def is_worksheet(path: PathLike) -> bool:
    """Whether `path` is an existing file holding a worksheet, whatever its name."""
    path = Path(path)
    try:
        if not path.is_file():
            return False
        with path.open("rb") as file:
            if file.read(1).strip() not in (b"{", b""):  # not JSON: no need to read it all
                return False
            file.seek(0)
            doc = json.loads(file.read().decode("utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(doc, dict) and doc.get("format") == WORKSHEET_FORMAT


def _check_not_an_input(path: Path, inputs: Iterable[PathLike], refuse) -> None:
    real = Path(os.path.realpath(path))
    for given in inputs:
        source = Path(os.path.realpath(given))
        if real == source or (path.exists() and _same_file(path, given)):
            raise refuse("it is an input of this command, and writing it would replace it")
        if Path(given).is_dir() and real.is_relative_to(source):
            raise refuse(f"it is inside {given}, a folder this command reads; write it "
                         f"elsewhere")


def _same_file(a: PathLike, b: PathLike) -> bool:
    with contextlib.suppress(OSError):
        return os.path.samefile(a, b)
    return False


def _either(suffixes: tuple[str, ...]) -> str:
    return " or ".join(suffixes)


# --- writing a student's file ------------------------------------------------------------

def exclusive_lock(path: Path) -> FileLock:
    """An exclusive lock shared by every process writing `path` (filelock: flock on
    POSIX, msvcrt on Windows).  The lock file lives in the temporary folder, keyed by
    `path`'s resolved name, so nothing is left beside the worksheet and a folder the
    user may only read can still be read."""
    key = hashlib.sha256(os.path.realpath(path).encode("utf-8", "surrogateescape"))
    return FileLock(_lock_folder() / f"{key.hexdigest()[:32]}.lock")


def _lock_folder() -> Path:
    """A folder of this user's locks in the system's temporary folder (one per user, so
    another user's folder can never block or spoof ours)."""
    user = os.getuid() if hasattr(os, "getuid") else os.environ.get("USERNAME", "user")
    folder = Path(tempfile.gettempdir()) / f"failurelab-locks-{user}"
    folder.mkdir(mode=0o700, exist_ok=True)
    return folder


def atomic_write(path: Path, text: str) -> None:
    """Write a temporary file beside `path`, fsync it, then rename it over `path`:
    a crash at any point leaves either the old file or the new one, never half."""
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o644
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except PermissionError:
        raise PermissionError(f"cannot write {path}: no permission to write in the folder "
                              f"{path.parent}") from None
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
