"""Multi-process runs: the flags, and two real training processes on localhost.

The ``multiprocess`` tests start two processes of the training command line
(``train.main``, one forced CPU device each) that join through
``jax.distributed`` on 127.0.0.1 and train over one global mesh, with gloo for
the collectives; one more process runs the same training on two devices alone,
for comparison. Then: a resume by two processes, a process killed, a Ctrl-C.
Every process is bounded by a timeout and killed on failure. On a 2-core CPU
they take a few minutes, mostly compiling (process 1 cannot use the persistent
compilation cache: JAX writes it from process 0 only, for process 0's devices).
"""

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import xla_env

from c4jax import train
from c4jax.run import distributed, train_alphazero, train_command
from c4jax.run.distributed import Cluster
from c4jax.store import checkpoints

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 600  # seconds any one training process may take (compiling included)
# Fields of metrics.jsonl that measure time, not the run.
_TIMING = {"seconds", "positions_per_second"}

# The child process: python -m c4jax.train, which also saves the final learner
# state (params, batch_stats, optimizer) as this process holds it, to compare.
_WORKER = """
import sys
import jax
import numpy as np
from c4jax import train
from c4jax.run import train_alphazero

out, argv = sys.argv[1], sys.argv[2:]
run = train_alphazero.train_and_evaluate

def keep_learner(*args, **kwargs):
    summary = run(*args, **kwargs)
    leaves = jax.tree.leaves(summary["state"].learner)
    np.savez(out, *[np.asarray(x.addressable_data(0)) for x in leaves])
    return summary

train_alphazero.train_and_evaluate = keep_learner
sys.exit(train.main(argv))
"""


# -- the flags ------------------------------------------------------------------


def test_flags_are_taken_out_of_the_command_line():
    argv = ["--config", "tiny", "--coordinator", "10.0.0.1:1234", "--num-processes=4",
            "--process-id", "3", "--seed", "2"]
    cluster, rest = distributed.parse_flags(argv)
    assert cluster == Cluster(coordinator="10.0.0.1:1234", num_processes=4, process_id=3)
    assert rest == ["--config", "tiny", "--seed", "2"]
    assert distributed.parse_flags(["--config", "tiny"]) == (None, ["--config", "tiny"])


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--coordinator", "10.0.0.1"], "--coordinator: got '10.0.0.1', allowed: HOST:PORT"),
        (["--coordinator", "host:70000"], "--coordinator: got 'host:70000', allowed: HOST:PORT"),
        (["--num-processes", "0"], "--num-processes: got 0, allowed: an integer >= 1"),
        (["--num-processes", "two"], "--num-processes: got 'two', allowed: an integer"),
        (["--process-id", "-1"], "--process-id: got -1, allowed: an integer >= 0"),
        (["--num-processes", "2", "--process-id", "2"], "--process-id: got 2, allowed: 0..1"),
        (["--process-id"], "--process-id: expected a value"),
    ],
)
def test_bad_flags_are_rejected_naming_the_flag(argv, message):
    with pytest.raises(ValueError) as err:
        distributed.parse_flags(argv)
    assert str(err.value).startswith(message)


def test_cluster_flags_imply_distributed_and_stay_out_of_the_config(tmp_path, capsys):
    argv = ["--config", "tiny", "--workdir", str(tmp_path), "--coordinator", "127.0.0.1:9",
            "--num-processes", "2", "--process-id", "1"]
    call = train.parse_args(argv)
    assert call.config.distributed
    assert call.cluster == Cluster("127.0.0.1:9", 2, 1)
    assert train.main([*argv, "--print-config"]) == 0  # prints without joining anyone
    printed = json.loads(capsys.readouterr().out)
    assert printed["distributed"] is True and "coordinator" not in json.dumps(printed)


def test_bad_flags_exit_2_with_one_error_line(capsys):
    assert train.main(["--config", "tiny", "--process-id", "x"]) == 2
    assert capsys.readouterr().err == "error: --process-id: got 'x', allowed: an integer\n"


def test_runtime_failures_are_told_from_c4jax_errors():
    """A collective with a dead process fails with XLA's status text, which
    reaches Python as a JaxRuntimeError or, through NumPy, a ValueError."""
    gloo = "UNKNOWN: Gloo AllGather failed: [pair.cc:538] Read error: Connection reset by peer"
    assert train_command.peer_failure(ValueError(gloo))
    assert not train_command.peer_failure(ValueError("config field train.sgd_steps: got 0"))
    assert not train_command.peer_failure(train_alphazero.NonFiniteError("the loss became NaN/inf"))


# -- two processes on localhost ---------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(out: Path, args, *, devices: int) -> subprocess.Popen:
    """One worker process; ``out`` receives its final learner state, ``out.stdout``
    and ``out.stderr`` its output (files: a pipe nobody reads could fill and block)."""
    env = {
        **os.environ,
        "JAX_PLATFORMS": "cpu",
        "XLA_FLAGS": xla_env.with_devices(devices),
        "PYTHONPATH": str(ROOT),
    }
    with open(f"{out}.stdout", "w") as stdout, open(f"{out}.stderr", "w") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-c", _WORKER, str(out), *args],
            stdout=stdout, stderr=stderr, text=True, env=env, cwd=ROOT,
        )
    proc.out = out
    return proc


def _start_pair(workdir: Path, outs: Path, args) -> list[subprocess.Popen]:
    """Processes 0 and 1 of a 2-process run (one device each) on ``workdir``."""
    coordinator = f"127.0.0.1:{_free_port()}"
    return [
        _start(outs / f"learner{i}.npz", [*args, "--workdir", str(workdir),
               "--coordinator", coordinator, "--num-processes", "2", "--process-id", str(i)],
               devices=1)
        for i in range(2)
    ]


def _finish(procs, timeout=TIMEOUT, *, after_failure=60) -> list[tuple[int, str, str]]:
    """``(returncode, stdout, stderr)`` of each process, once all have ended.

    Raises:
        AssertionError: after ``timeout`` seconds, or ``after_failure`` seconds
            after one of them failed, with the output of those still running,
            which are killed (none is left behind, whatever happens).
    """
    deadline = time.monotonic() + timeout
    try:
        while any(p.poll() is None for p in procs):
            if any(p.returncode for p in procs):
                deadline = min(deadline, time.monotonic() + after_failure)
            if time.monotonic() > deadline:
                hung = [str(p.out) for p in procs if p.poll() is None]
                raise AssertionError(f"still running: {hung}; " + repr(_outputs(procs))[-3000:])
            time.sleep(0.1)
    finally:
        _kill(procs)
    return _outputs(procs)


def _kill(procs) -> None:
    """kill -9 of those still running."""
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _outputs(procs) -> list[tuple[int | None, str, str]]:
    read = lambda p, kind: Path(f"{p.out}.{kind}").read_text()  # noqa: E731
    return [(p.returncode, read(p, "stdout"), read(p, "stderr")) for p in procs]


def _learner(path: Path) -> list[np.ndarray]:
    with np.load(path) as data:
        return [data[f"arr_{i}"] for i in range(len(data.files))]


def _metrics(workdir: Path) -> list[dict]:
    lines = (workdir / "metrics.jsonl").read_text().splitlines()
    return [{k: v for k, v in json.loads(line).items() if k not in _TIMING} for line in lines]


def _checkpoint_steps(workdir: Path) -> list[str]:
    return sorted(p.name for p in (workdir / "checkpoints").iterdir())


# The tiny preset with one SGD step an iteration: these tests are about processes that
# train together, not about learning.
_SMALL = ["--config", "tiny", "--no-progress", "--train.sgd-steps", "1"]
# 4 iterations, checkpoints at 2 and 4, and a short evaluation at 2 and 4 (which runs
# on each process's own copy of the network).
_ARGS = [*_SMALL, "--train.num-iterations", "4", "--eval.games", "2"]


def _train_pair_and_single(root: Path) -> None:
    """A 2-process run of 4 iterations and the same run by one process on 2 devices,
    run side by side; then the 2-process run resumed to 6 iterations (without the
    evaluations, compared in the first part already). Every process must succeed;
    what the tests read of the state between the two parts goes to ``between.json``."""
    pair_dir, outs = root / "pair", root / "outs"
    (outs / "resumed").mkdir(parents=True)
    started = time.monotonic()
    procs = _start_pair(pair_dir, outs, _ARGS)
    procs.append(_start(outs / "single.npz", [*_ARGS, "--workdir", str(root / "single")],
                        devices=2))
    for code, _, err in _finish(procs):
        assert code == 0, err[-3000:]
    (root / "between.json").write_text(json.dumps({
        "checkpoints_after_first": _checkpoint_steps(pair_dir),
        "metrics_after_first": _metrics(pair_dir),
        "event_files_after_first": len(list((pair_dir / "tb").glob("events.out.tfevents.*"))),
    }))
    resumed = _finish(
        _start_pair(pair_dir, outs / "resumed",
                    [*_ARGS, "--train.num-iterations", "6", "--eval.every", "0"])
    )
    for code, _, err in resumed:
        assert code == 0, err[-3000:]
    print(f"the multi-process runs took {time.monotonic() - started:.0f} s")


@pytest.fixture(scope="module")
def runs(train_once):
    """``_train_pair_and_single`` once per session, also when pytest-xdist gives the
    tests that read it to two workers; its outputs as ``(returncode, stdout, stderr)``
    of each process (all succeeded)."""
    root = train_once("distributed", _train_pair_and_single)
    outs = root / "outs"

    def said(out: Path) -> tuple[int, str, str]:
        return 0, Path(f"{out}.stdout").read_text(), Path(f"{out}.stderr").read_text()

    return {
        "pair": root / "pair", "single": root / "single", "outs": outs,
        "first": [said(outs / "learner0.npz"), said(outs / "learner1.npz"),
                  said(outs / "single.npz")],
        "resumed": [said(outs / "resumed" / f"learner{i}.npz") for i in range(2)],
        **json.loads((root / "between.json").read_text()),
    }


@pytest.mark.slow
@pytest.mark.multiprocess
def test_both_processes_end_with_the_parameters_of_a_one_process_run(runs):
    """Bit for bit: the two processes' copies agree, and equal a single process on
    two devices. The program is the same (one SPMD partition per device); only
    the transport of its collectives differs (gloo over TCP, or memory), and an
    all-reduce over two devices adds two numbers, which no order changes.
    (Measured with two devices per process, four in all: the processes still
    agree bit for bit, but one process on four devices differs by up to 2e-6,
    as gloo and the in-process all-reduce add four numbers in other orders.)"""
    outs = runs["outs"]
    process0, process1 = _learner(outs / "learner0.npz"), _learner(outs / "learner1.npz")
    single = _learner(outs / "single.npz")
    assert len(process0) == len(single) > 0
    for a, b, c in zip(process0, process1, single, strict=True):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, c)
    assert runs["metrics_after_first"] == _metrics(runs["single"])[:4]  # losses, evaluations


@pytest.mark.slow
@pytest.mark.multiprocess
def test_only_process_0_logs_and_the_checkpoints_are_written_once(runs):
    (_, out0, err0), (_, out1, err1), _ = runs["first"]
    assert "iterations on 2 x cpu in 2 processes" in out0
    assert "iteration 4/4  loss" in out0 and "finished iteration 4" in out0
    # Process 1 prints nothing of its own (gloo's native library says it connected).
    assert [line for line in out1.splitlines() if not line.startswith("[Gloo]")] == []
    assert "Traceback" not in err0 + err1
    assert [m["step"] for m in runs["metrics_after_first"]] == [1, 2, 3, 4]
    assert runs["event_files_after_first"] == 1
    assert runs["checkpoints_after_first"] == ["2", "4"]  # one directory per step, no leftovers
    # The checkpoint holds the trained network (written by both processes' shards).
    saved = checkpoints.restore_variables(runs["pair"], step=4)
    single = checkpoints.restore_variables(runs["single"], step=4)
    for a, b in zip(_leaves(saved.variables), _leaves(single.variables), strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.slow
@pytest.mark.multiprocess
def test_both_processes_resume_past_a_damaged_checkpoint_and_save_it_again(runs, tmp_path):
    """Process 0 moves the damaged newest checkpoint aside; the other must stop
    listing it too, or it alone deletes that step before saving it again, and the
    processes' checkpoint barriers no longer match (both crashed)."""
    import shutil

    workdir = tmp_path / "pair"
    shutil.copytree(runs["pair"], workdir)
    newest = max(int(step) for step in _checkpoint_steps(workdir))
    (workdir / "checkpoints" / str(newest) / "state" / "_METADATA").unlink()
    outs = tmp_path / "outs"
    outs.mkdir()
    done = _finish(_start_pair(workdir, outs, [*_ARGS, "--train.num-iterations",
                                               str(newest + 2), "--eval.every", "0"]))
    for code, _, err in done:
        assert code == 0, err[-3000:]
    assert str(newest) in _checkpoint_steps(workdir)  # saved again, whole
    assert str(newest + 2) in _checkpoint_steps(workdir)
    assert (workdir / "damaged-checkpoints" / str(newest)).is_dir()


def _leaves(tree):
    import jax

    return [np.asarray(x) for x in jax.tree.leaves(tree)]


@pytest.mark.slow
@pytest.mark.multiprocess
def test_a_second_invocation_resumes_from_the_checkpoint(runs):
    (_, out0, _), (_, out1, _) = runs["resumed"]
    assert f"resuming {runs['pair']} from iteration 4 of 6" in out0
    assert "resuming" not in out1
    assert [m["step"] for m in _metrics(runs["pair"])] == [1, 2, 3, 4, 5, 6]
    assert _checkpoint_steps(runs["pair"]) == ["4", "6"]  # tiny keeps the latest 2
    resumed0 = _learner(runs["outs"] / "resumed" / "learner0.npz")
    resumed1 = _learner(runs["outs"] / "resumed" / "learner1.npz")
    for a, b in zip(resumed0, resumed1, strict=True):
        np.testing.assert_array_equal(a, b)


def _training_pair(tmp_path: Path) -> tuple[Path, list[subprocess.Popen]]:
    """A 2-process run with no end in sight, returned once it has logged 2 iterations."""
    workdir, outs = tmp_path / "run", tmp_path / "outs"
    outs.mkdir()
    procs = _start_pair(workdir, outs, [
        *_SMALL, "--eval.every", "0", "--train.num-iterations", "100000",
        "--checkpoint-every", "100000",
    ])
    try:
        deadline = time.monotonic() + TIMEOUT
        metrics = workdir / "metrics.jsonl"
        while not (metrics.exists() and len(metrics.read_text().splitlines()) >= 2):
            assert all(p.poll() is None for p in procs), _finish(procs, 1)
            assert time.monotonic() < deadline, "the run did not start"
            time.sleep(0.1)
    except BaseException:
        _kill(procs)
        raise
    return workdir, procs


@pytest.mark.slow
@pytest.mark.multiprocess
@pytest.mark.parametrize("victim", [1, 0])
def test_when_one_process_dies_the_other_exits_with_an_error(tmp_path, victim):
    """kill -9 of one process in the middle of training: the other one stops within
    seconds (a bounded wait here), not at the 100 s heartbeat timeout, and says why.

    Process 0 hosts the coordinator: when it dies, JAX's own watchdog may end
    process 1 first (its message names the dead task), else our error line does.
    """
    _, procs = _training_pair(tmp_path)
    try:
        procs[victim].send_signal(signal.SIGKILL)
        killed = time.monotonic()
        survivor = procs[1 - victim]
        survivor.wait(timeout=60)
        waited = time.monotonic() - killed
    finally:
        _kill(procs)
    err = _outputs(procs)[1 - victim][2]
    assert waited < 30, f"the survivor took {waited:.0f} s to exit"
    assert survivor.returncode != 0
    ours = f"error: process {1 - victim} of 2 lost contact with the others"
    if victim == 1:
        assert ours in err and survivor.returncode == 1
        assert "Traceback" not in err
    else:
        assert ours in err or "another task died" in err, err[-3000:]


@pytest.mark.slow
@pytest.mark.multiprocess
@pytest.mark.parametrize(("signum", "victim", "code", "said"), [
    (signal.SIGINT, 1, 130, "Ctrl-C: finishing this iteration"),
    (signal.SIGTERM, 0, 143, "SIGTERM: finishing this iteration"),
], ids=["ctrl-c-on-1", "sigterm-on-0"])
def test_a_signal_on_one_process_stops_all_at_the_same_iteration(tmp_path, signum, victim,
                                                                 code, said):
    """Ctrl-C or a preemption's SIGTERM reaches one process only: the processes agree
    at the end of the iteration, save one checkpoint together and all exit with the
    signal's code (130, 143); process 0 says how to go on."""
    workdir, procs = _training_pair(tmp_path)
    try:
        procs[victim].send_signal(signum)
        (code0, out0, err0), (code1, _, err1) = _finish(procs, 120)
    finally:
        _kill(procs)
    assert (code0, code1) == (code, code), err0[-2000:] + err1[-2000:]
    assert said in (err0, err1)[victim]
    last = _metrics(workdir)[-1]["step"]
    assert f"stopped at iteration {last} of 100000" in out0
    assert _checkpoint_steps(workdir) == [str(last)]
    assert not list(workdir.rglob("*.orbax-checkpoint-tmp*"))
    assert "Traceback" not in err0 + err1


@pytest.mark.slow
def test_sigterm_after_joining_a_cluster_still_ends_the_process_with_one_line():
    """JAX's preemption service, on by default, installs a C-level SIGTERM handler in
    jax.distributed.initialize that only notes the signal: a trainer starting up
    (or loading a checkpoint) then went on as if nothing had happened. With it off,
    the command line's own handler ends the process: code 143 and one line."""
    code = f"""
import time
from c4jax.run import distributed, interrupt
interrupt.exit_on_interrupt("Interrupted before training started.")
distributed.initialize(distributed.Cluster("127.0.0.1:{_free_port()}", 1, 0))
print("joined", flush=True)
time.sleep(60)
print("still running", flush=True)
"""
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    try:
        assert proc.stdout.readline() == "joined\n", proc.stderr.read()[-3000:]
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 143, err[-3000:]
    assert out == "" and err.strip().splitlines()[-1] == (
        "Interrupted before training started. (SIGTERM)")
    assert "SIGTERM caught" not in err


@pytest.mark.slow
def test_a_distributed_run_resumed_alone_without_a_coordinator_says_what_to_give(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"distributed": True, "train": {}}))
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(ROOT)}
    env.pop("JAX_COORDINATOR_ADDRESS", None)
    out = subprocess.run(
        [sys.executable, "-m", "c4jax.train", "--workdir", str(tmp_path)],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=120,
    )
    assert out.returncode == 2
    assert out.stderr.startswith("error: --distributed: jax.distributed.initialize() failed")
    assert "--coordinator HOST:PORT" in out.stderr and "--no-distributed" in out.stderr
    assert "Traceback" not in out.stderr
