"""Shared test set-up: faster compiles, and one tiny training run for the tests that
need a checkpoint."""

import fcntl
import os
import shutil
import signal
import tempfile
from pathlib import Path

import jax
import pytest
import xla_env

from c4jax.alphazero import config as config_lib
from c4jax.dqn import config as dqn_config
from c4jax.run import compile_cache, train_alphazero, train_dqn, xla_flags

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
# Bounded, so that JAX locks the folder: a process that reads an entry while another
# writes it then never sees half of one. The folder outlives a session: repair what a
# test that killed a process mid-write left there, before anything compiles.
os.environ.setdefault("JAX_COMPILATION_CACHE_MAX_SIZE", str(8 * 1024**3))
jax.config.update("jax_compilation_cache_dir", _CACHE)
jax.config.update("jax_compilation_cache_max_size",
                  int(os.environ["JAX_COMPILATION_CACHE_MAX_SIZE"]))
compile_cache.repair(_CACHE, bounded=True)
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
jax.config.update("jax_threefry_partitionable", False)
# The code path the command lines use (YNNPACK fusion on XLA:CPU, where this jaxlib
# has it), compiled at LLVM optimisation level 0 (``xla_env``): set before any test
# starts JAX's backend, inherited by the subprocesses.
xla_env.add_fast_compile()
xla_flags.enable_fast_cpu()

# Under ``nohup`` SIGHUP arrives ignored, and an ignored signal stays ignored in every
# process a test starts (c4jax keeps it so, as it should): the tests of a closed
# terminal would see nothing. A handler that does nothing keeps this process deaf to
# a hang-up, while the processes it starts begin with the default, as under a terminal.
if hasattr(signal, "SIGHUP") and signal.getsignal(signal.SIGHUP) == signal.SIG_IGN:
    signal.signal(signal.SIGHUP, lambda *_: None)

# What makes a test slow here: it starts processes, trains a run or opens a browser.
# Those are marked ``@pytest.mark.slow`` where they are written; a test that asks for
# one of these fixtures (which train or open a browser) is marked here as well, so the
# rule stays true for new tests. ``pytest -m "not slow"`` is the quick loop (about 3 min
# in one process).
_SLOW_FIXTURES = {"tiny_run", "tiny_run_copy", "tiny_dqn_run", "browser"}


# The files whose tests take longest (minutes of CPU on a 2-core CPU, most of it in
# processes they start), longest first. They run before all others, each file's tests
# still together (module fixtures are set up once): with pytest-xdist, a worker that
# runs out of tests takes tests from the end of another's queue, so the suite ends on
# short tests instead of one worker running, say, the notebook while the other waits.
LONGEST_FIRST = (
    "tests/run/test_distributed.py",
    "tests/test_train.py",
    "tests/test_notebook.py",
    "tests/bench/test_train.py",
    "tests/judge/test_uct.py",
    "tests/run/test_train_command.py",
    "tests/run/test_xla_flags.py",
    "tests/test_train_fuzz.py",
    "tests/run/test_loop.py",
)


def pytest_collection_modifyitems(config, items):
    for item in items:
        if _SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    # A stable sort: every other file keeps its place, and the order within each file.
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))


def shared_run(tmp_path_factory, name: str, train) -> Path:
    """``train(run_dir)`` once per test session, also when pytest-xdist runs the tests in
    several worker processes: the first worker to ask trains (under a file lock), the
    others wait for it and share the directory. Tests must only read it."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        run_dir = tmp_path_factory.mktemp(name)
        train(run_dir)
        return run_dir
    root = tmp_path_factory.getbasetemp().parent  # this session's folder, shared by workers
    run_dir, done = root / name, root / f"{name}.done"
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not done.exists():
            shutil.rmtree(run_dir, ignore_errors=True)
            train(run_dir)
            done.touch()
    return run_dir


@pytest.fixture(scope="session")
def train_once(tmp_path_factory):
    """``train_once(name, train) -> run_dir``: ``shared_run`` for session fixtures elsewhere."""
    return lambda name, train: shared_run(tmp_path_factory, name, train)


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory):
    """A run directory trained with the ``tiny`` preset (about 1-2 minutes on a CPU).

    Trained once per test session and shared: tests must only read it.
    """
    return shared_run(
        tmp_path_factory, "tiny_run",
        lambda run_dir: train_alphazero.train_and_evaluate(
            config_lib.load("tiny"), run_dir, progress=False
        ),
    )


@pytest.fixture(scope="session")
def tiny_dqn_run(tmp_path_factory):
    """A run directory trained with the ``tiny`` value-based preset (seconds after compiling).

    Trained once per test session and shared: tests must only read it.
    """
    return shared_run(
        tmp_path_factory, "tiny_dqn_run",
        lambda run_dir: train_dqn.train_and_evaluate(
            dqn_config.load("tiny"), run_dir, progress=False
        ),
    )


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
