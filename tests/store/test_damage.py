"""Damage diagnostics without Orbax: missing files, short error lines, moving aside.
(Real damaged checkpoints of a training run are in test_checkpoints.py.)"""

import asyncio
import gc
import sys
import threading

from c4jax.store import damage as damage


def _fake_checkpoint(root, step=5):
    step_dir = root / str(step)
    for name in ("_CHECKPOINT_METADATA", "config/metadata", "state/_METADATA",
                 "state/manifest.ocdbt", "state/d/abc"):
        (step_dir / name).parent.mkdir(parents=True, exist_ok=True)
        (step_dir / name).write_text("x")
    return step_dir


def test_check_damage_names_the_missing_or_empty_file(tmp_path):
    step_dir = _fake_checkpoint(tmp_path)
    assert damage.check_damage(tmp_path, 5) is None
    (step_dir / "state" / "d" / "abc").write_text("")
    assert damage.check_damage(tmp_path, 5) == "an empty data file: state/d/abc"
    (step_dir / "state" / "_METADATA").unlink()
    assert damage.check_damage(tmp_path, 5) == "state/_METADATA is missing"
    assert damage.check_damage(tmp_path, 6) == "its directory is missing"


def test_short_error_finds_the_tensorstore_status_under_orbax_wrappers(tmp_path):
    inner = ValueError(
        f'OUT_OF_RANGE: Error reading "w/.zarray" in OCDBT database at local file "{tmp_path}/":'
        f' Error reading local file "{tmp_path}/state/d/ab" [tensorstore_spec=...]'
    )
    try:
        try:
            raise inner
        except ValueError as err:
            raise Exception("Error restoring:\n{'driver': 'zarr',\n ...}") from err
    except Exception as outer:
        line = damage.short_error(outer, tmp_path)
    assert line.startswith('OUT_OF_RANGE: Error reading "w/.zarray": Error reading local file')
    assert "state/d/ab" in line and str(tmp_path) not in line
    assert len(damage.short_error(ValueError("x" * 400))) <= 150


def test_move_aside_never_overwrites(tmp_path):
    for _ in range(2):
        _fake_checkpoint(tmp_path / "checkpoints")
        damage.move_aside(tmp_path / "checkpoints" / "5", tmp_path / "damaged")
    assert sorted(p.name for p in (tmp_path / "damaged").iterdir()) == ["5", "5-1"]
    assert (tmp_path / "damaged" / "5-1" / "state" / "_METADATA").is_file()


def test_seal_and_check_files_find_a_flipped_bit_and_a_missing_file(tmp_path):
    step_dir = _fake_checkpoint(tmp_path)
    damage.seal(step_dir)
    listing = (step_dir / damage.FILE_DIGESTS).read_text()
    assert "  state/d/abc\n" in listing and "_CHECKPOINT_METADATA" not in listing
    assert damage.check_files(step_dir) is None
    (step_dir / "state" / "d" / "abc").write_text("y")
    reason = damage.check_files(step_dir)
    assert reason.startswith("state/d/abc does not match its SHA-256 in files.sha256")
    assert damage.check_files(step_dir, ("config",)) is None  # only the folders asked for
    (step_dir / "config" / "metadata").unlink()
    assert damage.check_files(step_dir, ("config",)) == "config/metadata is missing"
    (step_dir / damage.FILE_DIGESTS).write_text("not a listing\n")
    assert damage.check_files(step_dir) == "files.sha256 is unreadable"
    (step_dir / damage.FILE_DIGESTS).unlink()
    assert damage.check_files(step_dir) is None  # never sealed: nothing to compare
    damage.seal(tmp_path / "gone")  # a step deleted since: left alone


def test_os_error_reads_tensorstore_s_write_errors():
    try:
        try:
            raise ValueError(
                'RESOURCE_EXHAUSTED: Error writing "a/0" in OCDBT database at local file '
                '"/x/1.orbax-checkpoint-tmp/state/": Failed writing: '
                '"/x/1.orbax-checkpoint-tmp/state/d/ab": Failed to write 9 bytes to file 7: '
                "No space left on device [os_error_code='28']"
            )
        except ValueError as err:
            raise RuntimeError("Error in background save thread") from err
    except RuntimeError as outer:
        found = damage.os_error(outer)
    assert (found.errno, found.filename) == (28, "/x/1.orbax-checkpoint-tmp/state/d/ab")
    assert damage.os_error(PermissionError(13, "Permission denied", "/ro/f")).filename == "/ro/f"
    assert damage.os_error(ValueError("OUT_OF_RANGE: Error reading")) is None


def test_remove_unfinished_removes_only_orbax_s_unfinished_folders(tmp_path):
    _fake_checkpoint(tmp_path, 3)
    (tmp_path / "4.orbax-checkpoint-tmp" / "state").mkdir(parents=True)
    (tmp_path / "5.orbax-checkpoint-tmp-1795603604").mkdir()
    removed = damage.remove_unfinished(tmp_path)
    assert [p.name for p in removed] == ["4.orbax-checkpoint-tmp",
                                         "5.orbax-checkpoint-tmp-1795603604"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["3"]


class _LateCallback:
    """Does what TensorStore's callback does when a write ends after Orbax closed its
    loop: ``call_soon_threadsafe`` on the closed loop, its error unraisable."""

    def __init__(self, loop):
        self.loop = loop

    def __del__(self):
        self.loop.call_soon_threadsafe(print)


class _OtherLeftover:
    def __del__(self):
        raise ValueError("not Orbax's")


def test_quiet_orbax_leftovers_drops_only_the_closed_loop_callbacks(monkeypatch):
    seen = []
    monkeypatch.setattr(sys, "unraisablehook", lambda unraisable: seen.append(
        repr(unraisable.exc_value)))
    loop = asyncio.new_event_loop()
    loop.close()

    def late_callbacks():  # from another thread, as TensorStore's are
        _LateCallback(loop)
        gc.collect()

    thread = threading.Thread(target=late_callbacks)
    thread.start()
    thread.join()
    assert seen == ["RuntimeError('Event loop is closed')"]  # the default: a traceback

    damage.quiet_orbax_leftovers()
    damage.quiet_orbax_leftovers()  # installs once
    thread = threading.Thread(target=late_callbacks)
    thread.start()
    thread.join()
    _OtherLeftover()
    gc.collect()
    assert seen == ["RuntimeError('Event loop is closed')", "ValueError(\"not Orbax's\")"]
