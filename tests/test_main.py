"""``c4jax COMMAND ...`` and ``python -m c4jax COMMAND ...``: one entry for every command line."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from c4jax import __main__ as entry

ROOT = Path(__file__).resolve().parent.parent


def test_help_lists_every_command_with_one_line(capsys):
    assert entry.main(["--help"]) == 0
    out = capsys.readouterr().out
    for name in ("train", "dqn-train", "evaluate", "play", "serve", "export", "plot"):
        lines = [line for line in out.splitlines() if line.split()[:1] == [name]]
        assert len(lines) == 1 and len(lines[0].split()) > 2, (name, out)


def test_no_command_prints_the_usage_and_exits_2(capsys):
    assert entry.main([]) == 2
    assert "usage: c4jax COMMAND" in capsys.readouterr().err


def test_an_unknown_command_is_one_error_line(capsys):
    assert entry.main(["trian", "--config", "tiny"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: unknown command 'trian' (did you mean train?)")
    assert err.count("\n") == 1


def test_every_command_module_has_a_main():
    for module_name, _, _ in entry.COMMANDS.values():
        assert (ROOT / (module_name.replace(".", "/") + ".py")).is_file(), module_name


@pytest.mark.parametrize("argv, algorithm", [
    (["train", "--config", "tiny"], None),
    (["dqn-train", "--config", "grogu"], "dqn"),
    (["train", "--config", "dqn/grogu"], "dqn"),
])
def test_a_command_gets_the_arguments_after_it(argv, algorithm, tmp_path, capsys):
    assert entry.main([*argv, "--workdir", str(tmp_path / "x"), "--print-config"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed.get("algorithm") == algorithm
    assert not (tmp_path / "x").exists()


def test_a_command_s_exit_code_comes_back(capsys):
    assert entry.main(["train", "--config", "tiny", "--seed", "x"]) == 2
    assert capsys.readouterr().err.startswith("error: --seed: ")


def _python(*args):
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=120)


@pytest.mark.slow
def test_python_dash_m_c4jax_help_imports_no_command():
    out = _python("-m", "c4jax", "--help")
    assert out.returncode == 0, out.stderr
    assert "train" in out.stdout and "dqn-train" in out.stdout
    code = ("import sys; from c4jax.__main__ import main; main(['--help']); "
            "print(sorted(m for m in sys.modules if m.startswith(('jax', 'c4jax.'))))")
    out = _python("-c", code)
    assert out.stdout.strip().splitlines()[-1] == "['c4jax.__main__']", out.stdout


@pytest.mark.slow
def test_python_dash_m_c4jax_runs_a_command():
    out = _python("-m", "c4jax", "train", "--config", "tiny", "--train.num-iteration", "3")
    assert out.returncode == 2
    assert "perhaps you meant --train.num-iterations?" in out.stderr
    assert out.stderr.count("\n") == 1, out.stderr


@pytest.mark.slow
def test_the_console_script_where_installed():
    script = shutil.which("c4jax", path=os.path.dirname(sys.executable))
    if script is None:
        pytest.skip("no c4jax script beside this Python: pip install -e . installs it")
    out = subprocess.run([script, "--help"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "dqn-train" in out.stdout
