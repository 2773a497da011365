"""The wheel, installed as a user installs it: built from the source, installed (not
editable) into a fresh virtual environment, and run from a directory outside the source
tree: the console script, a command line's --help, the shipped agent, a short training
run and a solver evaluation of it. Whatever the wheel lacks (a preset, the shipped
network, a Pons set, a page's file) fails here, not on a user's machine.

The fresh environment borrows this one's installed dependencies (a path in a .pth
file, so no network is needed) but never its c4jax: the tests check that c4jax is
imported from the wheel's files.
"""

import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow


def _run(command, cwd, timeout=300, **kwargs) -> subprocess.CompletedProcess:
    # Never this checkout's c4jax: no PYTHONPATH; the working directory is elsewhere.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(JAX_PLATFORMS="cpu", NO_COLOR="1")
    return subprocess.run([str(c) for c in command], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=env, **kwargs)


def _ok(out: subprocess.CompletedProcess) -> str:
    assert out.returncode == 0, (out.args, out.stdout[-3000:], out.stderr[-3000:])
    return out.stdout


def _package_files(root: Path) -> set[str]:
    """The package's files as a wheel holds them (no byte code, no tests)."""
    return {
        p.relative_to(root).as_posix() for p in (root / "c4jax").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    }


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel, built from a copy of the source (the checkout stays untouched)."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    shutil.copytree(ROOT / "c4jax", src / "c4jax",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, src / name)
    _ok(_run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
              "--no-index", "-w", tmp / "dist", src], cwd=tmp))
    (built,) = (tmp / "dist").glob("c4jax-*.whl")
    return built


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory) -> Path:
    """A fresh virtual environment with the wheel installed; returns its bin/ folder."""
    tmp = tmp_path_factory.mktemp("venv")
    root = tmp / "venv"
    _ok(_run([sys.executable, "-m", "venv", "--without-pip", root], cwd=tmp))
    python = root / "bin" / "python"
    site = Path(_ok(_run([python, "-c", "import sysconfig; print(sysconfig.get_paths()"
                          "['purelib'])"], cwd=tmp)).strip())
    # This environment's libraries, as a plain path: its .pth files (the editable
    # c4jax among them) are not processed there.
    paths = dict.fromkeys(sysconfig.get_paths()[k] for k in ("purelib", "platlib"))
    (site / "zz_c4jax_test_dependencies.pth").write_text("\n".join(paths) + "\n")
    # -I: install even though a c4jax of the same version is visible on that path.
    _ok(_run([python, "-m", "pip", "install", "-q", "-I", "--no-deps", "--no-index", wheel],
             cwd=tmp))
    return root / "bin"


@pytest.fixture(scope="module")
def outside(tmp_path_factory) -> Path:
    """A working directory outside the source tree."""
    return tmp_path_factory.mktemp("user")


def test_the_wheel_holds_every_package_file_its_license_and_metadata(wheel):
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        (meta,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        metadata = Parser().parsestr(z.read(meta).decode())
        (license_file,) = [n for n in names if n.endswith(".dist-info/licenses/LICENSE")]
        assert z.read(license_file) == (ROOT / "LICENSE").read_bytes()
    packaged = {n for n in names if n.startswith("c4jax/")}
    assert packaged == _package_files(ROOT)  # presets, the shipped agent, Pons sets, pages...
    for needed in ("c4jax/py.typed", "c4jax/pretrained/variables.msgpack",
                   "c4jax/configs/timings/cpu.json", "c4jax/web/common/board.js"):
        assert needed in packaged, needed
    assert metadata["License-Expression"] == "Apache-2.0"
    classifiers = metadata.get_all("Classifier")
    assert "Programming Language :: Python :: 3.11" in classifiers
    assert "Topic :: Scientific/Engineering :: Artificial Intelligence" in classifiers
    assert not any(n.startswith("tests/") for n in names)


def test_c4jax_is_imported_from_the_wheel_with_its_version(venv, outside):
    out = _ok(_run([venv / "python", "-c", "import c4jax; print(c4jax.__file__); "
                    "print(c4jax.__version__)"], cwd=outside))
    package, version = out.split()
    assert Path(package).resolve().is_relative_to(venv.parent.resolve()), package
    assert not Path(package).resolve().is_relative_to(ROOT)
    assert version == tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def test_the_console_script_and_a_command_line_s_help(venv, outside):
    out = _ok(_run([venv / "c4jax", "--help"], cwd=outside))
    for command in ("train", "evaluate", "play", "serve", "export"):
        assert command in out
    assert "usage" in _ok(_run([venv / "python", "-m", "c4jax.play", "--help"],
                               cwd=outside)).lower()


def test_the_shipped_agent_plays(venv, outside):
    out = _ok(_run([venv / "python", "-c", "from c4jax import Player; "
                    "print(Player.pretrained(num_simulations=16).best_move('4453').column)"],
                   cwd=outside))
    assert out.strip() in {str(c) for c in range(1, 8)}


def test_a_short_training_run_and_its_solver_evaluation(venv, outside):
    run = outside / "runs" / "tiny"
    _ok(_run([venv / "python", "-m", "c4jax.train", "--config", "tiny",
              "--train.num-iterations", "2", "--workdir", run, "--no-progress"],
             cwd=outside, timeout=600))
    assert (run / "config.json").is_file() and any((run / "checkpoints").iterdir())
    out = _ok(_run([venv / "python", "-m", "c4jax.evaluate", "solver", "--checkpoint", run,
                    "--positions", "50", "--sims", "0", "--sets", "L1_R1", "--baselines", ""],
                   cwd=outside))
    assert "L1_R1" in out
