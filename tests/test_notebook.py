"""notebooks/colab_tpu.ipynb runs from top to bottom: executed with nbclient on the CPU,
its parameters cell replaced by the ``tiny`` preset's (as CI runs it)."""

import re
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "colab_tpu.ipynb"


def _parameters_cell(nb) -> int:
    tagged = [i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1, "exactly one cell tagged 'parameters'"
    return tagged[0]


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


def test_the_parameters_cell_sets_every_name_the_ci_run_replaces():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    source = nb.cells[_parameters_cell(nb)].source
    for name in ("INSTALL", "REQUIRE_TPU", "PRESET", "ITERATIONS", "WORKDIR", "EVAL_SIMS",
                 "EVAL_GAMES", "SOLVER_POSITIONS", "INTERACTIVE", "DOWNLOAD"):
        assert f"\n{name} = " in "\n" + source, name
    assert 'PRESET = "tpu"' in source and "REQUIRE_TPU = True" in source


def _execute(nb, cwd: Path):
    client = NotebookClient(
        nb, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(cwd)}}
    )
    return client.execute()


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    cwd = tmp_path_factory.mktemp("notebook")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nb.cells[_parameters_cell(nb)].source = "\n".join([
        "INSTALL = False",
        "REQUIRE_TPU = False",
        'PRESET = "tiny"',
        "ITERATIONS = 2",
        'WORKDIR = "runs/ci"',
        "EVAL_SIMS = 4",
        "EVAL_GAMES = 8",
        "SOLVER_POSITIONS = 20",
        "INTERACTIVE = False",
        "DOWNLOAD = True",
        'REPO_URL = ""',
    ])
    nb.cells.insert(0, nbformat.v4.new_code_cell("import sys; print(sys.executable)"))
    _execute(nb, cwd)
    return nb, cwd


def test_the_notebook_runs_on_the_kernel_of_this_interpreter(executed):
    nb, _ = executed
    assert _outputs(nb.cells[0]).strip() == sys.executable


def test_on_a_cpu_it_warns_loudly_and_goes_on(executed):
    nb, _ = executed
    text = "".join(_outputs(c) for c in nb.cells)
    assert "WARNING: NO TPU: JAX is running on 'cpu'" in text
    assert "Runtime > Change runtime type > TPU" in text


def test_it_trains_evaluates_plays_and_zips_the_run(executed):
    nb, cwd = executed
    text = "".join(_outputs(c) for c in nb.cells)
    run = cwd / "runs" / "ci"
    assert (run / "config.json").exists() and any((run / "checkpoints").iterdir())
    assert "done: iteration 2 in runs/ci" in text
    for opponent in ("random", "lookahead"):
        assert re.search(rf"runs/ci(:2)?@4  vs  {opponent}: 8 games", text), opponent
    assert re.search(r"\| runs/ci(:2)?@4 \| [0-9.]+ / [0-9.]+ \|", text)  # the solver table
    assert re.search(r"moves: [1-7]+ -> (x \(your agent\) wins|o \(the shipped agent\) wins"
                     r"|a draw)", text)
    assert (cwd / "ci.zip").stat().st_size > 1000
    assert "not in Colab: view the curves with  tensorboard --logdir runs/ci/tb" in text


def test_without_a_tpu_and_require_tpu_it_stops_with_the_fix(tmp_path):
    nb = nbformat.read(NOTEBOOK, as_version=4)
    i = _parameters_cell(nb)
    nb.cells[i].source = "INSTALL = False\nREQUIRE_TPU = True"
    check = [c for c in nb.cells[i + 1:] if "jax.default_backend()" in c.source]
    nb.cells = nb.cells[: i + 1] + check
    with pytest.raises(CellExecutionError, match="NO TPU"):
        _execute(nb, tmp_path)
