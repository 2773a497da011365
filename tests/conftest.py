"""Shared test set-up: faster compiles, and one tiny training run for the tests that
need a checkpoint."""

import os
import shutil
import tempfile
from pathlib import Path

import jax
import pytest

from c4jax.alphazero import config as config_lib
from c4jax.run import train_alphazero, xla_flags

# Compiling dominates this suite's time on a CPU, and many tests compile the same
# programs (every Trainer re-jits the tiny preset's step). A persistent cache,
# shared with the command-line subprocesses through the environment, compiles
# each program once per session. The non-partitionable threefry compiles its
# random-number code about 4x faster on CPU; it only changes which numbers are
# drawn, and no test depends on particular ones.
_CACHE = os.environ.setdefault(
    "JAX_COMPILATION_CACHE_DIR", os.path.join(tempfile.gettempdir(), "c4jax-test-jax-cache")
)
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
os.environ.setdefault("JAX_THREEFRY_PARTITIONABLE", "false")
jax.config.update("jax_compilation_cache_dir", _CACHE)
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
jax.config.update("jax_threefry_partitionable", False)
# The code path the command lines use (YNNPACK fusion on XLA:CPU, where this jaxlib
# has it): set before any test starts JAX's backend, inherited by the subprocesses.
xla_flags.enable_fast_cpu()

# What makes a test slow here: it starts processes, trains a run or opens a browser.
# Those are marked ``@pytest.mark.slow`` where they are written; a test that asks for
# one of these fixtures (which train or open a browser) is marked here as well, so the
# rule stays true for new tests. ``pytest -m "not slow"`` is the quick loop (~1 min).
_SLOW_FIXTURES = {"tiny_run", "tiny_run_copy", "tiny_dqn_run", "browser"}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if _SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory):
    """A run directory trained with the ``tiny`` preset (about 1-2 minutes on a CPU).

    Trained once per test session and shared: tests must only read it.
    """
    run_dir = tmp_path_factory.mktemp("tiny_run")
    train_alphazero.train_and_evaluate(config_lib.load("tiny"), run_dir, progress=False)
    return run_dir


@pytest.fixture
def tiny_run_copy(tiny_run, tmp_path):
    """``(run_dir, best_step)``: a private copy of the tiny run, which a test may damage."""
    from c4jax.store import checkpoints

    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    reader = checkpoints.open_for_reading(run)
    best = checkpoints.best_step(reader)
    reader.close()
    return run, best


# Debian's chromium, driven by playwright (never `playwright install`: no downloads here).
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]


@pytest.fixture(scope="session")
def browser():
    """A headless Chromium for the browser tests; skipped, with the reason, without one."""
    if not Path(CHROMIUM).is_file():
        pytest.skip(
            f"no Chromium at {CHROMIUM}: install Debian's chromium package"
            " (apt-get install -y chromium) to run the browser test"
        )
    from playwright.sync_api import sync_playwright  # only the browser tests need it

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def usage_error(capsys):
    """``usage_error(parse_args, argv) -> stderr``: argparse must exit 2 on ``argv``."""

    def check(parse_args, argv) -> str:
        with pytest.raises(SystemExit) as exit_info:
            parse_args(argv)
        assert exit_info.value.code == 2
        return capsys.readouterr().err

    return check
