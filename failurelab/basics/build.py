"""The torch build the lab's bitwise promise is stated for, and one notice per process
when the lab runs on another.

The Monitor and the diagnosis attach to any recent torch (the package requires a range);
only the lab's promise — same recipe and seed, bitwise-identical history — is tied to
one build, because kernels and their summation order change between releases.  So
another build is said once, not refused: signatures must still reproduce there, while
fingerprints may differ.  Standard library only: the installed version is read from the
package metadata, without importing torch.
"""

from __future__ import annotations

import warnings
from importlib import metadata

LAB_TORCH = "2.13.0"  # the `lab` extra's pin (pyproject.toml; tests/test_packaging.py)

_noticed = False


class OtherBuildWarning(UserWarning):
    """The lab runs on a torch build other than the one its fingerprints were made on."""


def installed_torch() -> str:
    """The installed torch's release, without a local tag: "2.13.0+cpu" -> "2.13.0"."""
    try:
        return metadata.version("torch").split("+")[0]
    except metadata.PackageNotFoundError:
        return "none"


def other_build_note(installed: str | None = None) -> str | None:
    """One sentence when `installed` (default: this environment's torch) is not the lab's
    build; None when it is."""
    installed = installed_torch() if installed is None else installed.split("+")[0]
    if installed == LAB_TORCH:
        return None
    return (f"torch {installed} is installed; the lab's bitwise-identical histories are "
            f"stated for torch {LAB_TORCH} (pip install -e \".[lab]\"). Every fault's "
            f"signature should still reproduce here, but fingerprints may differ.")


def notice_other_build(stream=None) -> None:
    """Say once per process when the lab trains on another torch build: a warning, or
    one plain line on `stream` (the CLI's stderr).  Worker processes forked afterwards
    inherit that it was said."""
    global _noticed
    note = None if _noticed else other_build_note()
    _noticed = True
    if note and stream is not None:
        print(f"note: {note}", file=stream)
    elif note:
        warnings.warn(note, OtherBuildWarning, stacklevel=3)
