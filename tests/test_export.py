"""Exported networks: the variables alone, read back exactly; clear errors."""

import json
import os
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest

from c4jax.store import checkpoints, exported

ROOT = Path(__file__).resolve().parent.parent


def _export(run, out, *extra):
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    return subprocess.run(
        [sys.executable, "-m", "c4jax.export", "network", str(run), str(out), *extra],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=300,
    )


@pytest.mark.slow
def test_export_writes_the_variables_alone_and_they_load_back_exactly(tiny_run, tmp_path):
    results = tmp_path / "results.json"
    results.write_text(json.dumps({"L1_R1": 0.1}))
    out = _export(tiny_run, tmp_path / "net", "--note", "tiny", "--results", str(results))
    assert out.returncode == 0, out.stderr[-2000:]
    files = sorted(p.name for p in (tmp_path / "net").iterdir())
    assert files == ["config.json", "info.json", "variables.msgpack"]
    assert (tmp_path / "net" / "variables.msgpack").stat().st_size < 100_000  # no optimizer
    original = checkpoints.restore_variables(tiny_run)
    loaded = exported.load_exported(tmp_path / "net")
    assert loaded.config == original.config and loaded.step == original.step
    for a, b in zip(
        jax.tree.leaves(original.variables), jax.tree.leaves(loaded.variables), strict=True
    ):
        np.testing.assert_array_equal(a, b)
    info = json.loads((tmp_path / "net" / "info.json").read_text())
    assert info["note"] == "tiny" and info["results"] == {"L1_R1": 0.1}
    assert info["step"] == original.step and info["training_seconds"] > 0


@pytest.mark.slow
def test_damaged_or_missing_exports_give_a_clear_error(tiny_run, tmp_path):
    assert _export(tiny_run, tmp_path / "net").returncode == 0
    with pytest.raises(ValueError, match="not an exported network"):
        exported.load_exported(tmp_path)
    data = (tmp_path / "net" / "variables.msgpack").read_bytes()
    (tmp_path / "net" / "variables.msgpack").write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="variables.msgpack"):
        exported.load_exported(tmp_path / "net")


@pytest.mark.slow
def test_bad_arguments_exit_2_without_a_traceback(tiny_run, tmp_path):
    for args in [(f"{tiny_run}:x", tmp_path / "a"), (tmp_path / "nothing", tmp_path / "b")]:
        out = _export(*args)
        assert out.returncode == 2 and out.stderr.startswith("error:"), out.stderr
        assert "Traceback" not in out.stderr
