"""Real faults for the tests: a small file system that is full, or read-only.

    with small_fs(tmp_path / "fs", "256k") as disk:   # a real tmpfs (root only)
        fill(disk)                                     # now every write fails: ENOSPC
        ...

Mounting needs root and mount(8); where either is missing the test is skipped,
with the reason, never passed silently. Importable from any test (``tests/`` is
on pytest's ``pythonpath``).
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import subprocess

import pytest


@contextlib.contextmanager
def small_fs(path, size: str, *, read_only: bool = False):
    """A tmpfs of ``size`` (mount's syntax: ``"256k"``, ``"1500k"``) mounted at ``path``,
    created here; unmounted after."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("a small tmpfs needs root and mount(8)")
    path.mkdir(parents=True)
    options = f"size={size}" + (",ro" if read_only else "")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)],
                             capture_output=True, text=True)
    if mounted.returncode:
        pytest.skip(f"cannot mount a tmpfs: {mounted.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def fill(directory) -> None:
    """Fills the file system of ``directory`` to the last byte with ``directory/filler``."""
    with open(directory / "filler", "wb", buffering=0) as filler:
        try:
            while True:
                filler.write(b"\0" * 4096)
        except OSError as err:
            assert err.errno == errno.ENOSPC, err
        with contextlib.suppress(OSError):  # the last partial page
            while True:
                filler.write(b"\0")
