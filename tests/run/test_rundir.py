"""The run directory: path checks, the lock, and which run ``--resume`` picks."""

import os
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import pytest

from c4jax.run import rundir


def test_prepare_creates_missing_parents(tmp_path):
    path = rundir.prepare(tmp_path / "a" / "b")
    assert path.is_dir()


def test_prepare_names_a_file_in_the_way(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match=r"--workdir .*file: exists and is a file"):
        rundir.prepare(tmp_path / "file")
    with pytest.raises(ValueError, match=r"lies below .*file, which is a file"):
        rundir.prepare(tmp_path / "file" / "run")


def test_prepare_names_an_impossible_path():
    # Not even root may create directories in /proc.
    with pytest.raises(ValueError, match=r"--workdir /proc/c4jax-run: cannot create"):
        rundir.prepare(Path("/proc/c4jax-run"))


NOBODY = 65534


def _prepare_as(user, path):
    """``rundir.prepare(path)``'s error message (or "") in a child running as ``user``.

    A fork, not a new interpreter: the child needs nothing it cannot already
    reach (a Python under /root would be unreadable to nobody)."""
    reader, writer = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # JAX warns about forking a threaded process
        pid = os.fork()
    if pid == 0:  # the child: drop root, try, report, leave without clean-up
        message = b""
        try:
            if user is not None:
                os.setgid(user)
                os.setuid(user)
            rundir.prepare(path)
        except ValueError as err:
            message = str(err).encode()
        except BaseException as err:  # noqa: BLE001 - reported to the parent
            message = f"unexpected {type(err).__name__}: {err}".encode()
        os.write(writer, message)
        os._exit(0)
    os.close(writer)
    with os.fdopen(reader, "rb") as pipe:
        message = pipe.read().decode()
    os.waitpid(pid, 0)
    return message


def test_prepare_names_a_read_only_directory_or_parent():
    """Permission bits do not stop root: as root, the check runs as user nobody."""
    user = NOBODY if os.geteuid() == 0 else None
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        base.chmod(0o755)
        locked = base / "ro"
        locked.mkdir()
        locked.chmod(0o555)
        if user is not None:
            os.chown(locked, user, user)
        message = _prepare_as(user, locked)
        assert message == f"--workdir {locked}: cannot write there (Permission denied)"
        message = _prepare_as(user, locked / "run" / "x")
        expected = f"--workdir {locked}/run/x: cannot create {locked}/run (Permission denied)"
        assert message == expected


_HOLD = """
import sys, time
from pathlib import Path
from c4jax.run import rundir
with rundir.lock(Path(sys.argv[1])):
    print("locked", flush=True)
    time.sleep(600)
"""


@pytest.mark.slow
def test_lock_names_the_holder_and_recovers_after_kill_9(tmp_path):
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(ValueError, match=rf"in use by process {holder.pid} on "), \
                rundir.lock(tmp_path):
            pass
    finally:
        holder.kill()  # SIGKILL: no clean-up runs; the lock file stays behind
        holder.wait()
    assert (tmp_path / rundir.LOCK_FILE).exists()
    with rundir.lock(tmp_path):  # the kernel released the dead holder's lock
        assert (tmp_path / rundir.LOCK_FILE).read_text().split()[0] == str(os.getpid())


def test_lock_is_exclusive_within_one_process_too(tmp_path):
    with rundir.lock(tmp_path), pytest.raises(ValueError, match=f"process {os.getpid()}"), \
            rundir.lock(tmp_path):
        pass
    with rundir.lock(tmp_path):  # released on leaving the block
        pass


def test_newest_run_is_the_one_written_last_not_the_last_name(tmp_path):
    for name in ("b-older", "a-newer", "c-no-config"):
        (tmp_path / name).mkdir()
    (tmp_path / "b-older" / "config.json").write_text("{}")
    (tmp_path / "a-newer" / "config.json").write_text("{}")
    (tmp_path / "a-newer" / "metrics.jsonl").write_text("")
    old = time.time() - 3600
    os.utime(tmp_path / "b-older" / "config.json", (old, old))
    os.utime(tmp_path / "a-newer" / "config.json", (old - 60, old - 60))
    assert rundir.newest_run(tmp_path).name == "a-newer"  # its metrics.jsonl is fresh
    with pytest.raises(ValueError, match="no run directory with a config.json"):
        rundir.newest_run(tmp_path / "c-no-config")
