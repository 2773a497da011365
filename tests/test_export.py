"""Exported networks: the variables alone, read back exactly; clear errors; provenance
from c4jax itself, never from the working directory."""

import json
import os
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import jax
import numpy as np
import pytest
from commands import run_main

import c4jax
from c4jax import export
from c4jax.judge import registry
from c4jax.store import checkpoints, exported

ROOT = Path(__file__).resolve().parent.parent


def _export(run, out, *extra, cwd=ROOT):
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    return subprocess.run(
        [sys.executable, "-m", "c4jax.export", "network", str(run), str(out), *extra],
        capture_output=True, text=True, env=env, cwd=cwd, timeout=300,
    )


def _git(cwd, *args) -> str:
    out = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=cwd, capture_output=True, text=True, check=True, timeout=30,
    )
    return out.stdout.strip()


def _git_repository(path: Path) -> str:
    """A new git repository at ``path`` with one commit; returns that commit."""
    path.mkdir(parents=True, exist_ok=True)
    _git(path, "init", "-q")
    (path / "README").write_text("someone else's project\n")
    _git(path, "add", "README")
    _git(path, "commit", "-q", "-m", "init")
    return _git(path, "rev-parse", "HEAD")


def _checkout_commit() -> str | None:
    """The commit of the checkout these tests import c4jax from (None if not one)."""
    out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                         text=True, timeout=30)
    return out.stdout.strip() if out.returncode == 0 and (ROOT / ".git").exists() else None


@pytest.mark.slow
def test_export_writes_the_variables_alone_and_they_load_back_exactly(tiny_run, tmp_path):
    results = tmp_path / "results.json"
    results.write_text(json.dumps({"L1_R1": 0.1}))
    out = _export(tiny_run, tmp_path / "net", "--note", "tiny", "--results", str(results))
    assert out.returncode == 0, out.stderr[-2000:]
    files = sorted(p.name for p in (tmp_path / "net").iterdir())
    assert files == ["checksums.json", "config.json", "info.json", "variables.msgpack"]
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
    assert info["c4jax_version"] == metadata.version("c4jax")


@pytest.mark.slow
def test_the_recorded_commit_is_c4jax_s_own_never_the_working_directory_s(tiny_run, tmp_path):
    users_repo = tmp_path / "project"
    users_commit = _git_repository(users_repo)
    out = _export(tiny_run, tmp_path / "net", cwd=users_repo)
    assert out.returncode == 0, out.stderr[-2000:]
    info = json.loads((tmp_path / "net" / "info.json").read_text())
    assert info["commit"] != users_commit
    assert info["commit"] == _checkout_commit()  # the checkout c4jax runs from (or None)
    assert info["c4jax_version"] == c4jax.__version__


def test_an_installed_c4jax_inside_someone_s_git_repository_records_no_commit(
    tmp_path, monkeypatch
):
    # pip install c4jax into a virtual environment kept in the user's own repository
    users_repo = tmp_path / "project"
    _git_repository(users_repo)
    package = users_repo / ".venv" / "lib" / "python3.11" / "site-packages" / "c4jax"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    monkeypatch.chdir(users_repo)
    assert export._source_commit(package) is None


def test_a_git_checkout_of_c4jax_records_its_own_commit(tmp_path, monkeypatch):
    checkout = tmp_path / "c4jax-src"
    (checkout / "c4jax").mkdir(parents=True)
    (checkout / "c4jax" / "__init__.py").write_text("")
    (checkout / "pyproject.toml").write_text('[project]\nname = "c4jax"\n')
    commit = _git_repository(checkout)
    _git_repository(tmp_path / "elsewhere")
    monkeypatch.chdir(tmp_path / "elsewhere")
    assert export._source_commit(checkout / "c4jax") == commit
    # a folder named c4jax inside another project (no c4jax pyproject.toml at its top)
    (checkout / "pyproject.toml").write_text('[project]\nname = "other"\n')
    assert export._source_commit(checkout / "c4jax") is None
    # and this module's own package: this checkout's commit, or None when installed
    assert export._source_commit() == _checkout_commit()


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
def test_bad_arguments_exit_2_without_a_traceback(tiny_run, tmp_path, capsys):
    """In this process (``export.main``; the tests above start the command line)."""
    huge = f"{tiny_run}:" + "9" * 100_000
    binary = tmp_path / "model.onnx"
    binary.write_bytes(b"\xff\xfe\x00")
    for args in [(f"{tiny_run}:x", tmp_path / "a"), (tmp_path / "nothing", tmp_path / "b"),
                 (f"{tiny_run}:²", tmp_path / "c"), (huge, tmp_path / "d"),
                 (f"{tiny_run}:", tmp_path / "e"),  # an empty STEP is not the best
                 (tiny_run, tmp_path / "f", "--results", binary)]:
        code, _, err = run_main(export.main, ["network", *map(str, args)], capsys)
        assert code == 2 and err.startswith("error:"), err
        assert "Traceback" not in err and err.count("\n") == 1, err[:500]
        if "²" in str(args[0]):
            assert "STEP: got '²', allowed: a whole number" in err
        if args[0] == huge:  # a step no run reaches: refused before any checkpoint is read
            assert "allowed: 0-1000000000" in err, err
        if "--results" in args:
            assert f"--results {binary}" in err, err
    assert not any((tmp_path / name).exists() for name in "abcdef")


@pytest.mark.slow
def test_a_run_directory_named_with_a_colon(tiny_run, tmp_path, capsys):
    """As in agent specs: the whole name when it is a directory, else STEP after the last ':'."""
    run = tmp_path / "exp:1"
    shutil.copytree(tiny_run, run)
    newest = registry.newest_step(run)
    for spec, out in ((str(run), "best"), (f"{run}:last", "last"), (f"{run}:{newest}", "n")):
        code, stdout, err = run_main(export.main, ["network", spec, str(tmp_path / out)], capsys)
        assert code == 0, err
        assert json.loads((tmp_path / out / "info.json").read_text())["source_run"] == "exp:1"
    assert f"(step {newest}," in stdout


@pytest.mark.slow
def test_a_step_may_be_named_last_or_best_as_in_agent_specs(tiny_run, tmp_path, capsys):
    reader = checkpoints.open_for_reading(tiny_run)
    best = checkpoints.best_step(reader)
    reader.close()
    for name, want in (("last", registry.newest_step(tiny_run)), ("best", best)):
        code, out, err = run_main(export.main, ["network", f"{tiny_run}:{name}",
                                                str(tmp_path / name)], capsys)
        assert code == 0, err
        assert f"(step {want}," in out
        assert json.loads((tmp_path / name / "info.json").read_text())["step"] == want
    # A directory without checkpoints: one line, exit 2.
    (tmp_path / "empty").mkdir()
    code, _, err = run_main(export.main, ["network", f"{tmp_path / 'empty'}:last",
                                          str(tmp_path / "x")], capsys)
    assert code == 2 and err.startswith("error:") and err.count("\n") == 1, err


@pytest.mark.slow
@pytest.mark.parametrize("argv0", [["-m", "c4jax.export"], ["-m", "c4jax", "export"]])
def test_ctrl_c_during_an_export_is_one_line_and_130(tiny_run, tmp_path, argv0):
    """Here the export waits on its ``--results`` file (a named pipe no one writes to)
    when the Ctrl-C comes, so the signal arrives while the command runs."""
    import signal
    import time

    fifo = tmp_path / "results.json"
    os.mkfifo(fifo)
    proc = subprocess.Popen(
        [sys.executable, *argv0, "network", str(tiny_run), str(tmp_path / "out"),
         "--results", str(fifo)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        env={**os.environ, "JAX_PLATFORMS": "cpu"})
    try:
        time.sleep(5)
        assert proc.poll() is None
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, err[-2000:]
    assert err.strip() == "Interrupted." and "Traceback" not in err
    assert not (tmp_path / "out").exists()
