"""Damage diagnostics without Orbax: missing files, short error lines, moving aside.
(Real damaged checkpoints of a training run are in test_checkpoints.py.)"""

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
