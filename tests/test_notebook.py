"""notebooks/colab_tpu.ipynb runs from top to bottom: executed with nbclient on the CPU,
its parameters cell replaced by the ``tiny`` preset's (as CI runs it)."""

import importlib.util
import io
import json
import os
import re
import subprocess
import sys
import types
import urllib.request
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "notebooks" / "colab_tpu.ipynb"
KERNEL = "c4jax-notebook-test"


def _parameters_cell(nb) -> int:
    tagged = [i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1, "exactly one cell tagged 'parameters'"
    return tagged[0]


def _install_cell(nb):
    (cell,) = [c for c in nb.cells if c.cell_type == "code" and "def find_checkout" in c.source]
    return cell


def _outputs(cell) -> str:
    parts = []
    for out in cell.get("outputs", []):
        if out.output_type == "stream":
            parts.append(out.text)
        elif out.output_type in ("execute_result", "display_data"):
            parts.append(out.data.get("text/plain", ""))
        elif out.output_type == "error":
            parts.append(f"{out.ename}: {out.evalue}")
    return "".join(parts)


@pytest.mark.slow
def test_the_parameters_cell_sets_every_name_the_ci_run_replaces():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    source = nb.cells[_parameters_cell(nb)].source
    for name in ("REPO_URL", "INSTALL", "REQUIRE_TPU", "PRESET", "ITERATIONS", "WORKDIR",
                 "EVAL_SIMS", "EVAL_GAMES", "OPPONENTS", "SOLVER_POSITIONS", "INTERACTIVE",
                 "DOWNLOAD"):
        assert f"\n{name} = " in "\n" + source, name
    assert 'PRESET = "tpu"' in source and "REQUIRE_TPU = True" in source
    assert nb.metadata["accelerator"] == "TPU"  # Colab opens it on a TPU runtime


@pytest.fixture(scope="module")
def kernel_dir(tmp_path_factory):
    """A kernel spec that runs this interpreter (never a system Python) on the CPU.

    Found through ``JUPYTER_PATH`` under a name of its own, so that no user- or
    system-wide ``python3`` kernel spec can stand in for it.
    """
    root = tmp_path_factory.mktemp("jupyter")
    spec = root / "kernels" / KERNEL
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "c4jax tests (this interpreter)",
        "language": "python",
        "env": {"JAX_PLATFORMS": "cpu"},
    }))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("JUPYTER_PATH", str(root) + os.pathsep + os.environ.get("JUPYTER_PATH", ""))
        yield root


def _execute(nb, cwd: Path):
    client = NotebookClient(
        nb, timeout=900, kernel_name=KERNEL, resources={"metadata": {"path": str(cwd)}}
    )
    return client.execute()


@pytest.fixture(scope="module")
def executed(kernel_dir, tmp_path_factory):
    cwd = tmp_path_factory.mktemp("notebook")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nb.cells[_parameters_cell(nb)].source = "\n".join([
        'REPO_URL = ""',
        "INSTALL = False",
        "REQUIRE_TPU = False",
        'PRESET = "tiny"',
        "ITERATIONS = 2",
        'WORKDIR = "runs/ci"',
        "EVAL_SIMS = 4",
        "EVAL_GAMES = 8",
        'OPPONENTS = ["random", "lookahead", "mcts-8"]',
        "SOLVER_POSITIONS = 20",
        "INTERACTIVE = False",
        "DOWNLOAD = True",
    ])
    nb.cells.insert(0, nbformat.v4.new_code_cell(
        "import sys, c4jax; print(sys.executable); print(c4jax.__file__)"))
    _execute(nb, cwd)
    return nb, cwd


@pytest.mark.slow
def test_the_notebook_runs_this_interpreter_and_the_code_under_test(executed):
    import c4jax

    nb, _ = executed
    executable, package = _outputs(nb.cells[0]).split()
    assert executable == sys.executable
    assert Path(package).resolve() == Path(c4jax.__file__).resolve()


@pytest.mark.slow
def test_on_a_cpu_it_warns_loudly_and_goes_on(executed):
    nb, _ = executed
    text = "".join(_outputs(c) for c in nb.cells)
    assert "WARNING: NO TPU: JAX is running on 'cpu'" in text
    assert "Runtime > Change runtime type > TPU" in text


@pytest.mark.slow
def test_it_trains_evaluates_plays_and_zips_the_run(executed):
    nb, cwd = executed
    text = "".join(_outputs(c) for c in nb.cells)
    assert "c4jax is installed:" in text  # the install cell did nothing
    run = cwd / "runs" / "ci"
    assert (run / "config.json").exists() and any((run / "checkpoints").iterdir())
    assert "done: iteration 2 in runs/ci" in text
    for opponent in ("random", "lookahead", "mcts-8"):
        assert re.search(rf"runs/ci(:2)?@4  vs  {opponent}: 8 games", text), opponent
        assert re.search(rf"\| {opponent} \| 8 \| \d \| \d \| \d \| [0-9.]+ \([0-9.]+-[0-9.]+\) \|",
                         text), opponent  # the summary table
    assert re.search(r"\| runs/ci(:2)?@4 \| [0-9.]+ / [0-9.]+ \|", text)  # the solver table
    assert re.search(r"moves: [1-7]+ -> (x \(your agent\) wins|o \(the shipped agent\) wins"
                     r"|a draw)", text)
    assert "INTERACTIVE is False" in text
    assert "run directory zipped: " in text and (cwd / "ci.zip").stat().st_size > 1000
    assert "not in Colab: view the curves with  tensorboard --logdir runs/ci/tb" in text


@pytest.mark.slow
def test_without_a_tpu_and_require_tpu_it_stops_with_the_fix(kernel_dir, tmp_path):
    nb = nbformat.read(NOTEBOOK, as_version=4)
    i = _parameters_cell(nb)
    nb.cells[i].source = "INSTALL = False\nREQUIRE_TPU = True"
    check = [c for c in nb.cells[i + 1:] if "jax.default_backend()" in c.source]
    nb.cells = nb.cells[: i + 1] + check
    with pytest.raises(CellExecutionError, match="NO TPU"):
        _execute(nb, tmp_path)


def _run_install_cell(monkeypatch, cwd: Path, **params) -> dict:
    """The install cell's namespace after running it in this process (c4jax is installed)."""
    monkeypatch.chdir(cwd)
    namespace = {"INSTALL": False, "REPO_URL": "", **params}
    exec(_install_cell(nbformat.read(NOTEBOOK, as_version=4)).source, namespace)
    return namespace


@pytest.mark.slow
def test_the_install_cell_finds_a_checkout_here_above_or_cloned_below(monkeypatch, tmp_path):
    find = _run_install_cell(monkeypatch, tmp_path)["find_checkout"]
    assert find() is None  # nothing here: the cell would clone REPO_URL or stop
    monkeypatch.chdir(ROOT / "notebooks")  # the notebook opened inside the repository
    assert find() == ROOT
    clone = tmp_path / "c4jax"  # what `!git clone URL` leaves in Colab's /content
    clone.mkdir()
    (clone / "pyproject.toml").write_text('[project]\nname = "c4jax"\n')
    (tmp_path / "other").mkdir()
    monkeypatch.chdir(tmp_path)
    assert find() == clone


class _NoPip:
    """Stands in for subprocess.run in the install cell: records the pip command."""

    def __init__(self):
        self.commands = []

    def __call__(self, command, *args, **kwargs):
        self.commands.append(command)
        return subprocess.CompletedProcess(command, 0)


def _as_if_c4jax_were_missing(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "c4jax" else real(name, *a))
    pip = _NoPip()
    monkeypatch.setattr(subprocess, "run", pip)
    return pip


def _stopped_with(excinfo) -> str:
    """The one line IPython (and Colab) show for the cell's Stop, in place of a traceback."""
    assert excinfo.type.__name__ == "Stop", excinfo.value
    lines = excinfo.value._render_traceback_()
    assert len(lines) == 1 and "\n" not in lines[0], lines
    return lines[0]


def test_with_nowhere_to_install_from_it_says_what_to_set_in_one_line(monkeypatch, tmp_path):
    pip = _as_if_c4jax_were_missing(monkeypatch)
    with pytest.raises(Exception) as excinfo:  # the cell's Stop
        _run_install_cell(monkeypatch, tmp_path, INSTALL=True)
    line = _stopped_with(excinfo)
    assert "set REPO_URL in the parameters cell" in line and "Run all" in line
    assert pip.commands == []


def test_it_installs_from_repo_url_or_the_github_repository_colab_opened(monkeypatch, tmp_path):
    pip = _as_if_c4jax_were_missing(monkeypatch)
    monkeypatch.delitem(sys.modules, "jax")  # a fresh session: JAX not imported yet
    namespace = _run_install_cell(monkeypatch, tmp_path, INSTALL=True,
                                  REPO_URL="https://github.com/someone/c4jax")
    assert pip.commands[-1][-1] == "c4jax[solver,tensorboard] @ git+https://github.com/someone/c4jax"
    assert namespace["c4jax"].__version__

    # in Colab, opened from GitHub: the repository and branch come from the session's path
    monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    sessions = [{"name": "colab_tpu.ipynb", "path": "fileId=https%3A%2F%2Fgithub.com%2Fsomeone"
                 "%2Fc4jax%2Fblob%2Fdev%2Fnotebooks%2Fcolab_tpu.ipynb"}]
    monkeypatch.setattr(urllib.request, "urlopen",
                        lambda *a, **k: io.BytesIO(json.dumps(sessions).encode()))
    _run_install_cell(monkeypatch, tmp_path, INSTALL=True)
    assert pip.commands[-1][-1] == (
        "c4jax[solver,tensorboard,tpu] @ git+https://github.com/someone/c4jax@dev")


def test_the_github_source_is_read_from_colab_s_session_paths(monkeypatch, tmp_path):
    find = _run_install_cell(monkeypatch, tmp_path)["github_source"]
    assert find(["/github/me/c4jax/blob/main/notebooks/colab_tpu.ipynb"]) == (
        "https://github.com/me/c4jax", "main")
    assert find(["fileId=1AbCdEf", "colab_tpu.ipynb"]) is None  # a Drive notebook: unknown


def test_a_runtime_with_an_older_jax_gets_the_fix_in_one_line(monkeypatch, tmp_path):
    import c4jax

    monkeypatch.setattr(c4jax, "_jax_version", lambda: "0.4.33")
    with pytest.raises(Exception) as excinfo:
        _run_install_cell(monkeypatch, tmp_path)
    line = _stopped_with(excinfo)
    assert f"c4jax needs jax>={c4jax.MIN_JAX}; this runtime has jax 0.4.33" in line
    assert "pip install -U" in line
