"""Checkpoints: scores on disk, the best kept across processes and rotations, the
network variables restored alone, damage found (checksums, NaN) and full disks."""

import dataclasses
import errno
import json
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
import pytest
from faults import small_fs  # a real tmpfs: read-only, or full

from c4jax.alphazero import config as config_lib
from c4jax.alphazero import trainer
from c4jax.run import train_alphazero
from c4jax.store import checkpoints

ROOT = Path(__file__).resolve().parents[2]


def test_best_checkpoint_is_known_to_later_processes_and_survives_resume(tmp_path):
    """Scores reach disk: a new manager finds the best step, and a resumed run's
    rotation of the latest checkpoints keeps it."""
    cfg = config_lib.load("tiny")
    state = trainer.Trainer(cfg).init(trainer.run_keys(0)[0])
    manager = checkpoints.make_manager(tmp_path, keep=1)
    for step, score in [(1, 0.9), (2, None), (3, 0.2)]:
        checkpoints.save(manager, step, state, cfg, score)
    manager.wait_until_finished()
    manager.close()
    reader = checkpoints.open_for_reading(tmp_path)
    assert checkpoints.best_step(reader) == 1
    reader.close()
    manager = checkpoints.make_manager(tmp_path, keep=1)  # as a resumed run does
    for step in (4, 5):
        checkpoints.save(manager, step, state, cfg, None)
    manager.wait_until_finished()
    assert sorted(manager.all_steps()) == [1, 5]
    manager.close()


def _assert_trees_equal(a, b):
    assert jax.tree.structure(a) == jax.tree.structure(b)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


@pytest.mark.slow
def test_restore_variables_reads_the_network_alone(tmp_path):
    """The optimizer and replay parts of the checkpoint are damaged (another
    structure, other shapes): resuming training fails, playing still loads."""
    cfg = config_lib.load("tiny")
    run = trainer.Trainer(cfg)
    state = run.init(trainer.run_keys(0)[0])
    damaged = state.replace(
        learner=state.learner.replace(opt_state={"junk": jnp.zeros(3)}),
        replay={"junk": jnp.ones((2, 2))},
        selfplay=None,
    )
    manager = checkpoints.make_manager(tmp_path, keep=3)
    checkpoints.save(manager, 4, state, cfg, 0.1)
    checkpoints.save(manager, 7, damaged, cfg, 0.9)
    manager.wait_until_finished()
    manager.close()

    reader = checkpoints.open_for_reading(tmp_path)
    with pytest.raises(ValueError, match="does not match"):
        checkpoints.restore_state(reader, 7, run.abstract_state())
    reader.close()

    restored = checkpoints.restore_variables(tmp_path)  # the best: step 7
    assert restored.step == 7 and restored.config == cfg
    _assert_trees_equal(restored.variables, trainer.Trainer.variables(state))
    assert checkpoints.restore_variables(tmp_path, step=4).step == 4


def test_restore_variables_errors(tmp_path):
    with pytest.raises(ValueError, match="not a run directory"):
        checkpoints.restore_variables(tmp_path / "nope")
    (tmp_path / "checkpoints").mkdir()
    with pytest.raises(ValueError, match="no checkpoint saved yet"):
        checkpoints.restore_variables(tmp_path)


# Damaged checkpoints: a real tiny run with checkpoints 1, 2 and 3, its newest damaged.

_NEWEST, _PREVIOUS = 3, 2


def _run_config() -> config_lib.Config:
    cfg = config_lib.load("tiny")
    return dataclasses.replace(
        cfg,
        train=dataclasses.replace(cfg.train, num_iterations=_NEWEST),
        eval=dataclasses.replace(cfg.eval, every=0),
        checkpoint_every=1,
        keep_checkpoints=_NEWEST,
    )


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A pristine run directory (copy it before damaging) and the state of step 2."""
    workdir = tmp_path_factory.mktemp("run")
    train_alphazero.train_and_evaluate(_run_config(), workdir, progress=False)
    reader = checkpoints.open_for_reading(workdir)
    assert sorted(reader.all_steps()) == [1, 2, 3]
    previous = checkpoints.restore_state(reader, _PREVIOUS, _abstract_state())
    reader.close()
    return workdir, previous


def _abstract_state():
    return trainer.Trainer(_run_config()).abstract_state()


def _data_files(step_dir: Path) -> list[Path]:
    """The data files of a checkpoint, largest first."""
    files = [p for p in (step_dir / "state").glob("**/d/*") if p.is_file()]
    return sorted(files, key=lambda p: -p.stat().st_size)


def _halve(path: Path) -> None:
    os.truncate(path, path.stat().st_size // 2)


def _flip_a_shape(path: Path) -> None:
    """Flips the lowest bit of the first digit of the first non-empty stored shape."""
    data = bytearray(path.read_bytes())
    at = data.index(b'"write_shape": [') + len(b'"write_shape": [')
    while not chr(data[at]).isdigit():
        at = data.index(b'"write_shape": [', at) + len(b'"write_shape": [')
    data[at] ^= 1
    path.write_bytes(bytes(data))


# How to damage a checkpoint directory, and words the reason must contain.
DAMAGES = {
    "half a data file": (lambda d: _halve(_data_files(d)[0]), "OUT_OF_RANGE"),
    "half a state/d file": (lambda d: _halve(next((d / "state/d").iterdir())), "OUT_OF_RANGE"),
    "half every data file": (lambda d: [_halve(p) for p in _data_files(d)], "OUT_OF_RANGE"),
    "empty a data file": (lambda d: os.truncate(_data_files(d)[0], 0), "an empty data file"),
    "no state/_METADATA": (
        lambda d: (d / "state/_METADATA").unlink(),
        "state/_METADATA is missing",
    ),
    "no manifest": (
        lambda d: (d / "state/manifest.ocdbt").unlink(),
        "state/manifest.ocdbt is missing",
    ),
    "no state/": (lambda d: shutil.rmtree(d / "state"), "state/ is missing"),
    "no _CHECKPOINT_METADATA": (
        lambda d: (d / "_CHECKPOINT_METADATA").unlink(),
        "_CHECKPOINT_METADATA is missing",
    ),
    "bad config JSON": (
        lambda d: (d / "config/metadata").write_text('{"seed": 0,'),
        "config/metadata is unreadable",
    ),
    # One bit of a stored shape: the tree then looks like another version's (Orbax
    # reads on; the seal finds it), and with a data file cut short as well, the
    # failed read must still be damage, not "another version of c4jax".
    "bad bit in state/_METADATA": (
        lambda d: _flip_a_shape(d / "state/_METADATA"),
        "state/_METADATA does not match its SHA-256",
    ),
    "bad bit in state/_METADATA and half a data file": (
        lambda d: (_flip_a_shape(d / "state/_METADATA"), _halve(_data_files(d)[0])),
        "OUT_OF_RANGE",
    ),
}
# Found by check_damage, without Orbax (the others only by reading).
LISTED_DAMAGES = [k for k in DAMAGES if not k.startswith(("half", "bad"))]
# Which data file holds the network is Orbax's choice: halving one may spare it. A
# network read finds its arrays by their keys' other record: a renamed key spares it.
NETWORK_DAMAGES = [k for k in DAMAGES if k not in (
    "half a data file", "half a state/d file", "bad bit in state/_METADATA",
    "bad bit in state/_METADATA and half a data file")]


def _damaged_copy(run, tmp_path, damage: str, steps=(_NEWEST,)) -> Path:
    workdir = tmp_path / "run"
    shutil.copytree(run[0], workdir)
    for step in steps:
        DAMAGES[damage][0](workdir / "checkpoints" / str(step))
    return workdir


def _one_damage_warning(caught, workdir: Path, step: int, reason: str, used: int) -> str:
    """The one damage warning in ``caught``: a single line, short once the run's own
    paths (as long as the machine's temporary folder makes them) are set aside."""
    damaged = [w for w in caught if issubclass(w.category, checkpoints.DamagedCheckpointWarning)]
    assert len(damaged) == 1, [str(w.message) for w in caught]
    message = str(damaged[0].message)
    assert "\n" not in message and len(message.replace(str(workdir), "RUN")) < 300, message
    assert f"checkpoint {step} in " in message and f"using checkpoint {used}" in message
    assert reason in message
    assert damaged[0].filename == __file__  # points at the caller
    return message


@pytest.mark.slow
@pytest.mark.parametrize("damage", list(DAMAGES))
def test_resume_skips_and_quarantines_a_damaged_newest_checkpoint(run, tmp_path, damage):
    workdir = _damaged_copy(run, tmp_path, damage)
    reason = DAMAGES[damage][1]
    found = checkpoints.check_damage(workdir / "checkpoints", _NEWEST)
    assert (reason in found) if damage in LISTED_DAMAGES else found is None
    assert checkpoints.check_damage(workdir / "checkpoints", _PREVIOUS) is None
    quarantine = workdir / "damaged-checkpoints"
    manager = checkpoints.make_manager(workdir, keep=_NEWEST)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        resumed = checkpoints.restore_latest_good(manager, _abstract_state(), quarantine=quarantine)
    message = _one_damage_warning(caught, workdir, _NEWEST, reason, _PREVIOUS)
    assert str(quarantine / str(_NEWEST)) in message
    assert resumed.step == _PREVIOUS and resumed.config == _run_config()
    assert [step for step, _ in resumed.skipped] == [_NEWEST]
    _assert_trees_equal(resumed.state, run[1])
    # Moved, not deleted; and no manager lists it any more.
    assert not (workdir / "checkpoints" / str(_NEWEST)).exists()
    assert any((quarantine / str(_NEWEST)).iterdir())
    assert sorted(manager.all_steps()) == [1, 2] and manager.latest_step() == _PREVIOUS
    manager.close()
    later = checkpoints.make_manager(workdir, keep=_NEWEST)
    assert sorted(later.all_steps()) == [1, 2]
    later.close()


@pytest.mark.slow
def test_resume_without_quarantine_leaves_files_and_a_second_damage_gets_a_suffix(run, tmp_path):
    workdir = _damaged_copy(run, tmp_path, "no state/_METADATA", steps=(2, 3))
    manager = checkpoints.make_manager(workdir, keep=_NEWEST)
    with pytest.warns(checkpoints.DamagedCheckpointWarning) as caught:
        resumed = checkpoints.restore_latest_good(manager, _abstract_state(), quarantine=None)
    assert resumed.step == 1 and [s for s, _ in resumed.skipped] == [3, 2]
    assert [str(w.message).split(" in ")[0] for w in caught] == ["checkpoint 3", "checkpoint 2"]
    assert all("using checkpoint 1" in str(w.message) for w in caught)
    assert sorted(manager.all_steps()) == [1, 2, 3]  # nothing moved
    quarantine = workdir / "damaged-checkpoints"
    (quarantine / "3").mkdir(parents=True)
    with pytest.warns(checkpoints.DamagedCheckpointWarning):
        checkpoints.restore_latest_good(manager, _abstract_state(), quarantine=quarantine)
    assert sorted(p.name for p in quarantine.iterdir()) == ["2", "3", "3-1"]
    assert manager.all_steps() == [1]
    manager.close()


@pytest.mark.slow
def test_resume_when_every_checkpoint_is_damaged_or_none_exists(run, tmp_path):
    workdir = _damaged_copy(run, tmp_path, "no state/", steps=(1, 2, 3))
    manager = checkpoints.make_manager(workdir, keep=_NEWEST)
    with pytest.raises(ValueError, match="every checkpoint in .* is damaged") as raised:
        checkpoints.restore_latest_good(
            manager, _abstract_state(), quarantine=workdir / "damaged-checkpoints"
        )
    message = str(raised.value)
    assert "3: state/ is missing; 2: state/ is missing; 1: state/ is missing" in message
    assert "move" in message and "--workdir" in message
    assert sorted(manager.all_steps()) == [1, 2, 3]  # nothing moved: the next run must not
    manager.close()  # start over silently
    empty = checkpoints.make_manager(tmp_path / "empty", keep=1)
    assert checkpoints.restore_latest_good(empty, _abstract_state(), quarantine=None) is None
    empty.close()


@pytest.mark.slow
def test_a_stored_tree_that_no_longer_fits_with_changed_files_is_damage(
        run, tmp_path, monkeypatch):
    """Where a flipped bit in state/_METADATA makes the stored tree read as another
    version's (here: the tree check told so) and the read fails, files that differ
    from their seal make it damage, with a fallback, not a refusal to resume."""
    workdir = _damaged_copy(run, tmp_path, "half a data file")
    monkeypatch.setattr(checkpoints.damage, "stored_tree_fits", lambda *a, **k: False)
    manager = checkpoints.make_manager(workdir, keep=_NEWEST)
    with pytest.warns(checkpoints.DamagedCheckpointWarning, match="does not match its SHA-256"):
        resumed = checkpoints.restore_latest_good(manager, _abstract_state(), quarantine=None)
    assert resumed.step == _PREVIOUS
    manager.close()


@pytest.mark.slow
def test_another_version_is_not_damage(run, tmp_path):
    """Whole files that describe another state tree: the old wording, no fallback."""
    workdir = _damaged_copy(run, tmp_path, "no state/", steps=())
    cfg = _run_config()
    wider = dataclasses.replace(cfg, network=dataclasses.replace(cfg.network, channels=16))
    manager = checkpoints.make_manager(workdir, keep=_NEWEST)
    with warnings.catch_warnings():
        warnings.simplefilter("error", checkpoints.DamagedCheckpointWarning)
        with pytest.raises(ValueError, match="does not match this version of c4jax's training"):
            checkpoints.restore_latest_good(
                manager, trainer.Trainer(wider).abstract_state(), quarantine=tmp_path / "q"
            )
    assert sorted(manager.all_steps()) == [1, 2, 3] and not (tmp_path / "q").exists()
    manager.close()


@pytest.mark.slow
@pytest.mark.parametrize("damage", NETWORK_DAMAGES)
def test_restore_variables_falls_back_past_a_damaged_checkpoint(run, tmp_path, damage):
    workdir = _damaged_copy(run, tmp_path, damage)
    reason = DAMAGES[damage][1]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        restored = checkpoints.restore_variables(workdir)
    _one_damage_warning(caught, workdir, _NEWEST, reason, _PREVIOUS)
    assert restored.step == _PREVIOUS
    _assert_trees_equal(restored.variables, trainer.Trainer.variables(run[1]))
    with pytest.raises(ValueError, match=rf"checkpoint {_NEWEST} in .* is damaged \(") as raised:
        checkpoints.restore_variables(workdir, step=_NEWEST)
    assert reason in str(raised.value)
    assert (workdir / "checkpoints" / str(_NEWEST)).is_dir()  # readers never move files


@pytest.mark.slow
def test_restore_variables_when_every_checkpoint_is_damaged(run, tmp_path):
    workdir = _damaged_copy(run, tmp_path, "bad config JSON", steps=(1, 2, 3))
    with pytest.raises(ValueError, match="every checkpoint in .* is damaged"):
        checkpoints.restore_variables(workdir)


_QUIET_RESTORE = """
import sys, warnings
from c4jax.alphazero import trainer
from c4jax.store import checkpoints
workdir, cfg = sys.argv[1], checkpoints.config_lib.load(sys.argv[2])
manager = checkpoints.make_manager(workdir, keep=3)
with warnings.catch_warnings(record=True):
    warnings.simplefilter("always")
    assert checkpoints.restore_latest_good(
        manager, trainer.Trainer(cfg).abstract_state(), quarantine=None).step == 2
    try:
        checkpoints.restore_state(manager, 3, trainer.Trainer(cfg).abstract_state())
    except ValueError as err:
        print(err)
    manager.close()
    assert checkpoints.restore_variables(workdir).step == 2
import time, gc
gc.collect()
time.sleep(1)  # TensorStore's late callbacks
print("done")
"""


@pytest.mark.slow
def test_a_failed_restore_leaves_stderr_clean(run, tmp_path):
    """Orbax's leftovers of a failed read ("Event loop is closed") print no traceback."""
    workdir = _damaged_copy(run, tmp_path, "half a state/d file")
    config_lib.save(_run_config(), tmp_path / "config.json")
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(ROOT)}
    result = subprocess.run(
        [sys.executable, "-c", _QUIET_RESTORE, str(workdir), str(tmp_path / "config.json")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "damaged (OUT_OF_RANGE" in result.stdout and "done" in result.stdout
    assert "Traceback" not in result.stderr and "Event loop is closed" not in result.stderr, (
        result.stderr[-3000:]
    )


# Integrity: checksums of every array and file, NaN/inf network variables, full disks.


def _flip(path: Path, bit: int) -> None:
    data = bytearray(path.read_bytes())
    data[bit // 8] ^= 1 << (bit % 8)
    path.write_bytes(bytes(data))


def _random_bits(step_dir: Path, count: int, seed: int = 0):
    """``count`` (file, bit) pairs drawn uniformly over every bit of the checkpoint's
    data files (seeded)."""
    files = sorted(_data_files(step_dir))
    sizes = [p.stat().st_size * 8 for p in files]
    rng = np.random.default_rng(seed)
    picks = rng.choice(sum(sizes), size=count, replace=False)
    ends = np.cumsum(sizes)
    for pick in picks:
        index = int(np.searchsorted(ends, pick, side="right"))
        yield files[index], int(pick - (ends[index] - sizes[index]))


@pytest.mark.slow
def test_every_flipped_bit_in_the_data_files_is_found_on_resume(run, tmp_path):
    """A sample of single-bit flips anywhere in the newest checkpoint's data files
    (array chunks and index nodes alike): each one is damage, and the resume
    falls back to the checkpoint before it."""
    workdir = _damaged_copy(run, tmp_path, "no state/", steps=())
    step_dir = workdir / "checkpoints" / str(_NEWEST)
    assert (step_dir / "files.sha256").is_file() and (step_dir / "checksums").is_dir()
    manager, abstract = checkpoints.make_manager(workdir, keep=_NEWEST), _abstract_state()
    for path, bit in _random_bits(step_dir, 16):
        _flip(path, bit)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            resumed = checkpoints.restore_latest_good(manager, abstract, quarantine=None)
        where = f"bit {bit} of {path.relative_to(step_dir)}"
        assert resumed.step == _PREVIOUS, where
        _one_damage_warning(caught, workdir, _NEWEST, "damaged", _PREVIOUS)
        _flip(path, bit)  # back as it was, for the next flip
    assert checkpoints.restore_latest_good(manager, abstract).step == _NEWEST
    manager.close()


@pytest.mark.slow
def test_the_array_checksums_alone_guard_what_a_network_read_reads(run, tmp_path):
    """Without files.sha256 (a process stopped before sealing it), every flip either
    is found by the checksum of an array the read reads, or changed none of the
    network's values (it hit the replay buffer, say). A recorded checksum that
    differs names the array."""
    workdir = _damaged_copy(run, tmp_path, "no state/", steps=())
    step_dir = workdir / "checkpoints" / str(_NEWEST)
    (step_dir / "files.sha256").unlink()
    good = trainer.Trainer.variables(
        checkpoints.restore_state(checkpoints.open_for_reading(workdir), _NEWEST, _abstract_state())
    )
    found = 0
    for path, bit in _random_bits(step_dir, 24, seed=1):
        _flip(path, bit)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            restored = checkpoints.restore_variables(workdir)
        if restored.step == _NEWEST:
            assert not caught
            _assert_trees_equal(restored.variables, good)
        else:
            _one_damage_warning(caught, workdir, _NEWEST, "damaged", _PREVIOUS)
            found += 1
        _flip(path, bit)
    assert found >= 3  # the network is a good share of a tiny checkpoint's bytes
    sums = json.loads((step_dir / "checksums" / "metadata").read_text())
    sums["leaves"]["learner/params/Dense_0/bias"] = "0" * 64
    (step_dir / "checksums" / "metadata").write_text(json.dumps(sums))
    with pytest.warns(checkpoints.DamagedCheckpointWarning,
                      match="the checksum of learner/params/Dense_0/bias does not match"):
        assert checkpoints.restore_variables(workdir).step == _PREVIOUS


def _tiny_state(cfg, poison: bool = False):
    state = trainer.Trainer(cfg).init(trainer.run_keys(0)[0])
    if not poison:
        return state
    params = state.learner.params
    dense = {**params["Dense_0"], "bias": params["Dense_0"]["bias"] * jnp.nan}
    params = {**params, "Dense_0": dense}
    return state.replace(learner=state.learner.replace(params=params))


def test_nan_network_variables_are_damage_even_with_matching_checksums(tmp_path):
    """The best-scored checkpoint holds NaN parameters (saved as they were, so its
    checksums match): playing takes the next best, resuming the one before."""
    cfg = config_lib.load("tiny")
    manager = checkpoints.make_manager(tmp_path, keep=3)
    checkpoints.save(manager, 1, _tiny_state(cfg), cfg, 0.2)
    checkpoints.save(manager, 2, _tiny_state(cfg, poison=True), cfg, 0.9)
    manager.wait_until_finished()
    nan = r"checkpoint 2 .*\(learner/params/Dense_0/bias holds NaN or infinity\)"
    with pytest.warns(checkpoints.DamagedCheckpointWarning, match=nan):
        resumed = checkpoints.restore_latest_good(
            manager, trainer.Trainer(cfg).abstract_state(), quarantine=None
        )
    assert resumed.step == 1
    manager.close()
    with pytest.warns(checkpoints.DamagedCheckpointWarning, match="using checkpoint 1"):
        assert checkpoints.restore_variables(tmp_path).step == 1


def _save_as_before_checksums(workdir: Path, step: int, state, cfg) -> None:
    """A checkpoint as c4jax wrote them before checksums: state and config only."""
    manager = ocp.CheckpointManager(
        workdir / "checkpoints", item_names=("state", "config"),
        options=ocp.CheckpointManagerOptions(create=True, best_fn=lambda m: m["score"]),
    )
    manager.save(step, args=ocp.args.Composite(
        state=ocp.args.StandardSave(state),
        config=ocp.args.JsonSave(config_lib.to_dict(cfg)),
    ), metrics={"score": 0.5})
    manager.wait_until_finished()
    manager.close()


def test_a_checkpoint_saved_before_checksums_still_loads(tmp_path):
    cfg = config_lib.load("tiny")
    state = _tiny_state(cfg)
    _save_as_before_checksums(tmp_path, 4, state, cfg)
    names = {p.name for p in (tmp_path / "checkpoints" / "4").iterdir()}
    assert {"state", "config"} <= names and not {"checksums", "files.sha256"} & names
    with warnings.catch_warnings():
        warnings.simplefilter("error", checkpoints.DamagedCheckpointWarning)
        restored = checkpoints.restore_variables(tmp_path)
        manager = checkpoints.make_manager(tmp_path, keep=3)
        resumed = checkpoints.restore_latest_good(manager, trainer.Trainer(cfg).abstract_state())
        manager.close()
    assert restored.step == 4 and resumed.step == 4
    _assert_trees_equal(resumed.state, state)


def test_a_deleted_checksums_item_is_damage_not_an_older_checkpoint(tmp_path):
    cfg = config_lib.load("tiny")
    manager = checkpoints.make_manager(tmp_path, keep=3)
    for step in (1, 2):
        checkpoints.save(manager, step, _tiny_state(cfg), cfg, None)
    manager.close()
    shutil.rmtree(tmp_path / "checkpoints" / "2" / "checksums")
    assert checkpoints.check_damage(tmp_path / "checkpoints", 2) == "checksums/metadata is missing"
    with pytest.warns(checkpoints.DamagedCheckpointWarning, match="checksums/metadata is missing"):
        assert checkpoints.restore_variables(tmp_path).step == 1


def test_a_save_on_a_full_disk_leaves_nothing_partial_and_names_the_path(tmp_path):
    """A real full filesystem (a 256 KiB tmpfs; root only): one OSError
    whose filename is the path that failed, and no unfinished folder left for a
    resume to trip on."""
    cfg = config_lib.load("tiny")
    state = _tiny_state(cfg)
    with small_fs(tmp_path / "small", "256k") as small:
        manager = checkpoints.make_manager(small, keep=3)
        with pytest.raises(OSError) as raised:
            checkpoints.save(manager, 1, state, cfg, None)
            manager.wait_until_finished()
        assert raised.value.errno == errno.ENOSPC
        assert raised.value.filename.startswith(str(small)), raised.value.filename
        assert not list((small / "checkpoints").glob("*orbax-checkpoint-tmp*"))
        reader = checkpoints.make_manager(small, keep=3)
        assert reader.all_steps() == []
        reader.close()
        # A folder an async writer left after the failure was raised (the race a
        # full disk met in a tiny run): swept once the manager's writes end.
        late = small / "checkpoints" / "2.orbax-checkpoint-tmp-1"
        late.mkdir()
        manager.wait_until_finished()
        assert not late.exists()
        late.mkdir()
        manager.close()
        assert not late.exists()


def test_a_save_that_fails_at_once_leaves_nothing_partial(tmp_path, monkeypatch):
    cfg = config_lib.load("tiny")
    manager = checkpoints.make_manager(tmp_path, keep=3)
    unfinished = tmp_path / "checkpoints" / "1.orbax-checkpoint-tmp"

    def full_disk(*args, **kwargs):
        (unfinished / "state").mkdir(parents=True)
        raise ValueError(
            'RESOURCE_EXHAUSTED: Error writing "a/0" in OCDBT database at local file '
            f'"{unfinished}/state/": Failed writing: "{unfinished}/state/d/ab": '
            "Failed to write 429225 bytes to file 7: No space left on device "
            "[os_error_code='28']"
        )

    monkeypatch.setattr(ocp.CheckpointManager, "save", full_disk)
    with pytest.raises(OSError) as raised:
        checkpoints.save(manager, 1, _tiny_state(cfg), cfg, None)
    assert raised.value.errno == errno.ENOSPC
    assert raised.value.filename == f"{unfinished}/state/d/ab"
    assert not unfinished.exists()
    monkeypatch.undo()
    manager.close()


def test_a_writer_removes_the_unfinished_folders_of_a_killed_save(tmp_path):
    cfg = config_lib.load("tiny")
    leftover = tmp_path / "checkpoints" / "7.orbax-checkpoint-tmp-1795603604"
    (leftover / "state").mkdir(parents=True)
    reader = checkpoints.open_for_reading(tmp_path)
    assert reader.all_steps() == []  # never listed, and readers change nothing
    reader.close()
    assert leftover.exists()
    manager = checkpoints.make_manager(tmp_path, keep=3)
    checkpoints.save(manager, 1, _tiny_state(cfg), cfg, None)
    manager.close()
    assert not leftover.exists()
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["1"]


def test_a_run_of_the_other_kind_is_named_as_such(tiny_run, tiny_dqn_run):
    """Not "unknown config field 'algorithm'": the message says which kind each is."""
    from c4jax.dqn import player as dqn_player

    with pytest.raises(ValueError) as refused:
        checkpoints.restore_variables(tiny_dqn_run)  # what export and --checkpoint read
    assert str(refused.value) == (
        f"{tiny_dqn_run} is a value-based run (python -m c4jax.dqn.train), not an AlphaZero "
        "run (python -m c4jax.train), which this needs")
    with pytest.raises(ValueError) as refused:
        dqn_player.restore_q(tiny_run)  # what dqn:RUN reads
    assert str(refused.value) == (
        f"{tiny_run} is an AlphaZero run (python -m c4jax.train), not a value-based run "
        "(python -m c4jax.dqn.train), which this needs")
