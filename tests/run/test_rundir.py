"""The run directory: path checks, the lock, and which run ``--resume`` picks."""

import errno
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
        private = base / "private"  # a folder this user may not even look into
        private.mkdir(mode=0o700)
        if user is None:
            pytest.skip("a private folder needs another user to be private from")
        message = _prepare_as(user, private / "run")
        assert message == f"--workdir {private}/run: cannot reach {private}/run (Permission denied)"


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
    (tmp_path / "d-exported").mkdir()  # the newest folder, but a network, not a run
    (tmp_path / "d-exported" / "config.json").write_text("{}")
    (tmp_path / "d-exported" / rundir.EXPORTED_VARIABLES).write_bytes(b"")
    assert rundir.newest_run(tmp_path).name == "a-newer"
    with pytest.raises(ValueError, match="no run directory with a config.json"):
        rundir.newest_run(tmp_path / "c-no-config")


# -- someone else's directory -------------------------------------------------------------


def _not_a_config(path):
    """The test's stand-in for the trainers' check: a c4jax config has a train section."""
    return None if '"train"' in path.read_text() else "no train section"


def test_check_ours_accepts_a_new_an_empty_or_a_started_directory_and_a_run(tmp_path):
    rundir.check_ours(tmp_path / "missing", _not_a_config)
    rundir.check_ours(tmp_path, _not_a_config)  # empty
    (tmp_path / rundir.LOCK_FILE).write_text("1 host 2024\n")
    (tmp_path / "checkpoints").mkdir()  # what a trainer leaves before its config.json
    rundir.check_ours(tmp_path, _not_a_config)
    (tmp_path / "notes.txt").write_text("mine")
    (tmp_path / "config.json").write_text('{"train": {}}')
    rundir.check_ours(tmp_path, _not_a_config)  # a run, with the user's notes beside it


def test_check_ours_refuses_an_exported_network_though_its_config_is_ours(tmp_path):
    (tmp_path / "config.json").write_text('{"train": {}}')
    (tmp_path / rundir.EXPORTED_VARIABLES).write_bytes(b"weights")
    with pytest.raises(ValueError) as refused:
        rundir.check_ours(tmp_path, _not_a_config)
    message = str(refused.value)
    assert message.startswith(f"--workdir {tmp_path}: an exported network "
                              f"({rundir.EXPORTED_VARIABLES}), not a run directory")
    assert "--force-workdir" in message and "\n" not in message


def test_the_exported_network_s_file_name_is_the_exporter_s():
    from c4jax.store import exported  # imports JAX, which rundir must not

    assert rundir.EXPORTED_VARIABLES == exported.VARIABLES_FILE


def test_check_ours_refuses_someone_else_s_files_naming_why_and_the_way_out(tmp_path):
    (tmp_path / "metrics.jsonl").write_text('{"epoch": 1}\n')
    (tmp_path / "config.json").write_text('{"model": "resnet"}')
    with pytest.raises(ValueError) as refused:
        rundir.check_ours(tmp_path, _not_a_config)
    message = str(refused.value)
    assert message.startswith(f"--workdir {tmp_path}: not a c4jax run directory (its "
                              "config.json is not a c4jax configuration: no train section)")
    assert "--force-workdir" in message and "\n" not in message
    (tmp_path / "config.json").unlink()
    for name in ("a.txt", "b.txt", "c.txt"):
        (tmp_path / name).write_text("x")
    with pytest.raises(ValueError, match=r"holds files \(a\.txt, b\.txt, c\.txt and 1 more\) "
                                         r"but no config\.json"):
        rundir.check_ours(tmp_path, _not_a_config)
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "x").write_text("")  # not empty: not only what we create
    for name in ("a.txt", "b.txt", "c.txt", "metrics.jsonl"):
        (tmp_path / name).unlink()
    with pytest.raises(ValueError, match=r"holds files \(checkpoints\)"):
        rundir.check_ours(tmp_path, _not_a_config)


# -- whole files, saved checkpoints -------------------------------------------------------


def test_write_atomic_replaces_whole_or_leaves_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "config.json"
    rundir.write_atomic(path, "old\n")
    rundir.write_atomic(path, "new\n")
    assert path.read_text() == "new\n"

    def full(fd):  # the disk fills as the new text is flushed to it
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError) as failed:
        rundir.write_atomic(path, "newer\n")
    assert failed.value.errno == errno.ENOSPC and failed.value.filename == str(path)
    assert path.read_text() == "new\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json"]  # no temporary left


def test_saved_steps_are_the_whole_checkpoints(tmp_path):
    assert rundir.saved_steps(tmp_path) == []
    for name in ("2", "10", "12.orbax-checkpoint-tmp-3", "\u0663"):  # Arabic-Indic 3
        (tmp_path / "checkpoints" / name).mkdir(parents=True)
    assert rundir.saved_steps(tmp_path) == [2, 10]
