"""c4jax.run.loop: the host loop's stop on a signal, and its clean-up.

In this process, ``run_iterations`` over a stand-in iteration (no JAX program)
gets real signals from ``os.kill(os.getpid(), ...)`` and real-looking failures
from a stand-in checkpoint manager; then ``python -m c4jax.train`` on the tiny
preset gets a real SIGTERM while it compiles, and a real hang-up of its terminal
(a pty whose other end is closed), and is resumed.
"""

import errno
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from unittest import mock

import pytest

from c4jax.run import interrupt, loop

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def handlers():
    """Puts back this process's handlers and wakeup fd, whatever a test leaves."""
    before = {signum: signal.getsignal(signum) for signum in interrupt.NAMES}
    yield
    for signum, handler in before.items():
        signal.signal(signum, handler)
    signal.set_wakeup_fd(-1)


# -- the message ---------------------------------------------------------------------


def test_ctrl_c_keeps_its_message():
    assert loop.stop_message(signal.SIGINT, seconds=None, saved=None) == (
        "Ctrl-C: finishing this iteration, saving a checkpoint, then stopping "
        "(Ctrl-C again aborts at once).")


def test_a_sigterm_warns_of_the_sigkill_only_when_an_iteration_may_outlast_the_grace_period():
    quick = loop.stop_message(signal.SIGTERM, seconds=2.0, saved=4)
    assert quick == ("SIGTERM: finishing this iteration, saving a checkpoint, then stopping "
                     "(a second signal aborts at once).")
    slow = loop.stop_message(signal.SIGTERM, seconds=45.0, saved=20)
    assert slow.startswith(quick)
    assert "An iteration has taken up to 45 s: if a SIGKILL comes first" in slow
    assert "the run continues from checkpoint 20; a longer grace period" in slow
    compiling = loop.stop_message(signal.SIGTERM, seconds=None, saved=None)
    assert "The first iteration is still compiling" in compiling
    assert "continues from the start (no checkpoint yet)" in compiling
    for message in (quick, slow, compiling):
        assert "\n" not in message


def test_a_sighup_says_the_terminal_closed_and_nothing_of_a_sigkill():
    message = loop.stop_message(signal.SIGHUP, seconds=None, saved=None)
    assert message == ("SIGHUP (the terminal closed): finishing this iteration, saving a "
                       "checkpoint, then stopping (a second signal aborts at once).")


# -- run_iterations with stand-ins ---------------------------------------------------


class FakeManager:
    """What run_iterations asks of an Orbax manager; ``failures`` names the calls
    that raise (as a full disk would)."""

    def __init__(self, failures=()):
        self.failures = set(failures)
        self.calls = []

    def _call(self, name):
        self.calls.append(name)
        if name in self.failures:
            raise OSError(errno.ENOSPC, f"No space left on device ({name})")

    def latest_step(self):
        return None

    def wait_until_finished(self):
        self._call("wait_until_finished")

    def close(self):
        self._call("close")


class FakeLog:
    def __init__(self, fail_close=False):
        self.steps, self.closed, self.fail_close = [], False, fail_close

    def compiling(self, message):
        pass

    def log(self, step, metrics):
        self.steps.append(step)

    def set_total(self, total):
        self.steps.append(f"total {total}")

    def close(self):
        self.closed = True
        if self.fail_close:
            raise RuntimeError("the log's writer thread died")


def _run(manager, log, *, signal_at=None, signum=signal.SIGTERM, total=100, saves=None):
    """run_iterations over a stand-in iteration that sends ``signum`` to this process
    during iteration ``signal_at``; returns (summary, what it said)."""
    said = []
    asked = threading.Event()  # set once the stop request has taken the signal
    request = interrupt.StopRequest.request

    def request_and_tell(self, signum=signal.SIGINT):
        request(self, signum)
        asked.set()

    def iterate(state, step):
        if step + 1 == signal_at:
            os.kill(os.getpid(), signum)
            # The request is taken while the iteration still runs (however late
            # a loaded machine schedules the signal's thread).
            assert asked.wait(60), "the stop request never saw the signal"
        return state + 1, {"loss": 1.0}

    with mock.patch.object(interrupt.StopRequest, "request", request_and_tell):
        summary = loop.run_iterations(
            state=0, step=0, total=total, iterate=iterate, evaluate=None, eval_every=0,
            manager=manager, config=None, checkpoint_every=1000, log=log,
            positions_per_iteration=10, resume_hint="python -m c4jax.train --workdir RUN",
            say=said.append,
        )
    return summary, said


class Saves(list):
    """The ``(step, state)`` checkpoints.save was asked for; ``fail``: it raises ENOSPC."""

    fail = False


@pytest.fixture
def saves(monkeypatch):
    saved = Saves()

    def save(manager, step, state, config, score):
        if saved.fail:
            raise OSError(errno.ENOSPC, "No space left on device", "RUN/checkpoints")
        saved.append((step, state))

    monkeypatch.setattr(loop.checkpoints, "save", save)
    return saved


@pytest.mark.parametrize(
    "signum, code", [(signal.SIGTERM, 143), (signal.SIGHUP, 129), (signal.SIGINT, 130)],
    ids=["SIGTERM", "SIGHUP", "SIGINT"],
)
def test_a_signal_finishes_the_iteration_saves_and_says_how_to_continue(
        handlers, saves, capfd, signum, code):
    manager, log = FakeManager(), FakeLog()
    summary, said = _run(manager, log, signal_at=3, signum=signum)
    assert summary["interrupted"] and summary["exit_code"] == code
    assert summary["step"] == 3 and summary["state"] == 3 and log.steps == [1, 2, 3]
    assert saves == [(3, 3)]
    assert manager.calls == ["wait_until_finished", "close"] and log.closed
    assert said == ["stopped at iteration 3 of 100 (checkpoint saved); "
                    "continue with: python -m c4jax.train --workdir RUN"]
    assert capfd.readouterr().err == f"\n{loop.stop_message(signum, seconds=0, saved=None)}\n"
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL  # released


@pytest.mark.parametrize("signal_at, took", [(1, "The first iteration is still compiling"),
                                             (2, "An iteration has taken up to 0 s")])
def test_the_sigterm_message_says_what_the_loop_has_measured(
        handlers, saves, capfd, monkeypatch, signal_at, took):
    monkeypatch.setattr(loop, "GRACE_SECONDS", -1.0)  # every iteration outlasts it
    summary, _ = _run(FakeManager(), FakeLog(), signal_at=signal_at)
    assert summary["step"] == signal_at and summary["exit_code"] == 143
    err = capfd.readouterr().err
    assert f" {took}: if a SIGKILL comes first" in err
    assert "the run continues from the start (no checkpoint yet)" in err


def test_an_uninterrupted_run_has_no_exit_code(handlers, saves):
    summary, said = _run(FakeManager(), FakeLog(), total=4)
    assert not summary["interrupted"] and summary["exit_code"] is None
    assert summary["step"] == 4 and saves == [(4, 4)] and said == []


def test_a_failed_save_stays_the_error_when_the_clean_up_fails_too(handlers, saves):
    """A full disk during the save: the OSError that names the path is raised, not
    what the manager's wait or the log's close then say; both are still tried and
    their failures are attached as notes."""
    saves.fail = True
    manager = FakeManager(failures={"wait_until_finished", "close"})
    log = FakeLog(fail_close=True)
    with pytest.raises(OSError) as raised:
        _run(manager, log, total=1)
    assert raised.value.errno == errno.ENOSPC and raised.value.filename == "RUN/checkpoints"
    assert manager.calls == ["wait_until_finished", "close"] and log.closed
    notes = raised.value.__notes__
    assert len(notes) == 3
    assert notes[0].startswith("then writing the checkpoint failed too: OSError")
    assert notes[2] == ("then closing the logs failed too: RuntimeError: "
                        "the log's writer thread died")


def test_a_failure_while_closing_is_raised_after_everything_was_closed(handlers, saves):
    manager, log = FakeManager(failures={"wait_until_finished"}), FakeLog()
    with pytest.raises(OSError, match=r"No space left on device \(wait_until_finished\)"):
        _run(manager, log, total=2)
    assert manager.calls == ["wait_until_finished", "close"] and log.closed


def test_an_io_error_of_the_log_with_its_terminal_still_there_is_raised(handlers, saves):
    """Only a terminal that hung up excuses a failed progress line (here stdout and
    stderr are pytest's files, which still take writes)."""

    class BrokenLog(FakeLog):
        def log(self, step, metrics):
            raise OSError(errno.EIO, "Input/output error", "RUN/metrics.jsonl")

    manager, log = FakeManager(), BrokenLog()
    with pytest.raises(OSError, match="Input/output error"):
        _run(manager, log, total=3)
    assert saves == [] and log.closed


def test_a_progress_line_lost_to_a_dead_pipe_is_excused(handlers, saves):
    """``| tee`` in a closed terminal: tee can die after the SIGHUP was taken, and
    the next progress line then fails with EPIPE: the run goes on (its output sent
    to /dev/null) and saves."""

    class PipedLog(FakeLog):
        def log(self, step, metrics):
            super().log(step, metrics)
            if step == 2:
                raise BrokenPipeError(errno.EPIPE, "Broken pipe")

    manager, log = FakeManager(), PipedLog()
    with mock.patch.object(interrupt, "leave_lost_terminal", return_value=True) as left:
        summary, _ = _run(manager, log, total=3)
    assert left.called and log.steps == [1, 2, 3] and summary["step"] == 3
    assert [step for step, _ in saves] == [3] and log.closed


def test_a_nan_is_raised_and_everything_is_closed(handlers, saves):
    manager, log = FakeManager(failures={"close"}), FakeLog()
    summary = {}

    def iterate(state, step):
        return state, {"loss": float("nan")}

    with pytest.raises(loop.NonFiniteError) as raised:
        summary = loop.run_iterations(
            state=0, step=0, total=5, iterate=iterate, evaluate=None, eval_every=0,
            manager=manager, config=None, checkpoint_every=1, log=log,
            positions_per_iteration=1, resume_hint="", say=print)
    assert summary == {} and saves == []
    assert manager.calls == ["wait_until_finished", "close"] and log.closed
    assert "then closing the checkpoints failed too" in raised.value.__notes__[0]
    assert "Lower --train.learning-rate" in str(raised.value)


def test_a_nan_right_after_a_resume_suspects_the_checkpoint_too(handlers, saves):
    def iterate(state, step):
        return state, {"loss": float("nan") if step == 7 else 1.0}

    suspected = "resuming from checkpoint 7: if the run was healthy before, that checkpoint"
    for started, blamed in [(7, suspected), (6, "Lower --train")]:
        with pytest.raises(loop.NonFiniteError) as raised:
            loop.run_iterations(
                state=0, step=started, total=9, iterate=iterate, evaluate=None, eval_every=0,
                manager=FakeManager(), config=None, checkpoint_every=100, log=FakeLog(),
                positions_per_iteration=1, resume_hint="", say=print)
        assert "NaN/inf at iteration 8" in str(raised.value)
        assert blamed in str(raised.value), raised.value


@pytest.mark.parametrize("planned, ends", [(6, 6), (2, 3), (3, 3)],
                         ids=["longer", "shorter than done", "ends at once"])
def test_a_replan_moves_the_end_and_the_checkpoints_save_its_config(handlers, planned, ends):
    """A time budget measured again after iteration 3 of 4: the run ends at its new
    count (never before the iteration just done), evaluated and saved there with the
    new config; the log counts to it from then on."""
    saved, asked = [], []

    def save(manager, step, state, config, score):
        saved.append((step, config, score))

    def replan(step, total):
        asked.append((step, total))
        return (planned, "new config") if step == 3 else None

    log = FakeLog()
    with mock.patch.object(loop.checkpoints, "save", save):
        summary = loop.run_iterations(
            state=0, step=0, total=4, iterate=lambda state, step: (state + 1, {"loss": 1.0}),
            evaluate=lambda state, step: (state, {"score": float(step)}), eval_every=2,
            manager=FakeManager(), config="old config", checkpoint_every=2, log=log,
            positions_per_iteration=1, resume_hint="", say=print, replan=replan)
    assert asked[:3] == [(1, 4), (2, 4), (3, 4)]
    assert summary["step"] == ends and summary["state"] == ends
    assert log.steps[:3] == [1, 2, f"total {ends}"]
    between = [(4, "new config", 4.0)] if ends == 6 else []
    assert saved == [(2, "old config", 2.0), *between, (ends, "new config", float(ends))]


# -- the trainer, for real ---------------------------------------------------------


def _expected_code(signum: int) -> int:
    """What ``python -m c4jax.train`` ends with: 128 + the signal (130 for Ctrl-C)."""
    return 128 + signum


_TRAIN = ["-m", "c4jax.train", "--config", "tiny", "--no-progress", "--eval.every", "0",
          "--train.num-iterations", "100000", "--checkpoint-every", "100000"]


def _logged(workdir: Path) -> list[int]:
    path = workdir / "metrics.jsonl"
    return [json.loads(line)["step"] for line in path.open()] if path.exists() else []


def _leftovers(workdir: Path) -> list[str]:
    return [p.name for p in (workdir / "checkpoints").iterdir() if not p.name.isdigit()]


def _env(**extra) -> dict:
    return {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONUNBUFFERED": "1",
            "PYTHONPATH": str(ROOT), **extra}


@pytest.mark.slow
def test_sigterm_while_compiling_saves_the_first_iteration_and_a_resume_continues(tmp_path):
    """The SIGTERM comes as the trainer says it compiles: the first iteration then
    takes seconds (compiling, or loading the programs from the suite's cache)."""
    workdir, env = tmp_path / "run", _env()
    proc = subprocess.Popen(
        [sys.executable, *_TRAIN, "--workdir", str(workdir)], cwd=ROOT, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        lines = []
        while "compiling the training step" not in (lines[-1] if lines else ""):
            lines.append(proc.stdout.readline())
            assert lines[-1] or proc.poll() is None, "".join(lines)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=300)
    finally:
        proc.kill()
    assert proc.returncode == _expected_code(signal.SIGTERM), err[-3000:]
    assert _logged(workdir) == [1], out
    assert err.strip() == loop.stop_message(signal.SIGTERM, seconds=None, saved=None), err
    assert "The first iteration is still compiling" in err
    assert out.strip().splitlines()[-1] == (
        f"stopped at iteration 1 of 100000 (checkpoint saved); "
        f"continue with: python -m c4jax.train --workdir {workdir}")
    assert sorted(p.name for p in (workdir / "checkpoints").iterdir()) == ["1"]
    resumed = subprocess.run(
        [sys.executable, "-m", "c4jax.train", "--workdir", str(workdir), "--no-progress",
         "--train.num-iterations", "2"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"resuming {workdir} from iteration 1 of 2" in resumed.stdout
    assert _logged(workdir) == [1, 2]
    assert "Traceback" not in err + resumed.stderr


@pytest.mark.slow
def test_a_sighup_after_the_pipe_reader_died_saves_and_exits_129(tmp_path):
    """``python -m c4jax.train ... 2>&1 | tee LOG`` in a terminal that closes: tee
    dies, then the SIGHUP arrives; every later write to the pipe would fail."""
    workdir = tmp_path / "run"
    proc = subprocess.Popen(
        [sys.executable, *_TRAIN, "--workdir", str(workdir)], cwd=ROOT, env=_env(),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 300
        while not _logged(workdir):
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        proc.stdout.close()  # the reader is gone
        proc.send_signal(signal.SIGHUP)
        code = proc.wait(120)
    finally:
        proc.kill()
    steps = _logged(workdir)
    assert code == _expected_code(signal.SIGHUP)
    assert steps == list(range(1, len(steps) + 1))
    assert sorted(p.name for p in (workdir / "checkpoints").iterdir()) == [str(steps[-1])]
    assert _leftovers(workdir) == []


# Makes the pty on stdin the controlling terminal of this new session, then becomes
# the trainer: closing the pty's other end then hangs the trainer's terminal up.
_WITH_TERMINAL = (
    "import fcntl, os, sys, termios; fcntl.ioctl(0, termios.TIOCSCTTY, 0); "
    "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])"
)


@pytest.mark.slow
def test_a_closed_terminal_saves_a_checkpoint_and_exits_129(tmp_path):
    import pty

    workdir = tmp_path / "run"
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-c", _WITH_TERMINAL, *_TRAIN, "--workdir", str(workdir)],
        stdin=slave, stdout=slave, stderr=slave, start_new_session=True, close_fds=True,
        cwd=ROOT, env=_env())
    os.close(slave)
    output = bytearray()

    def read():  # keeps the terminal's buffer from filling until it is closed
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                return
            if not chunk:
                return
            output.extend(chunk)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 300
        while not _logged(workdir):
            assert proc.poll() is None and time.monotonic() < deadline, output.decode()
            time.sleep(0.05)
        os.close(master)  # the terminal hangs up: the kernel sends SIGHUP
        code = proc.wait(120)
    finally:
        proc.kill()
    steps = _logged(workdir)
    assert code == _expected_code(signal.SIGHUP), output.decode()[-3000:]
    assert steps == list(range(1, len(steps) + 1))
    assert sorted(p.name for p in (workdir / "checkpoints").iterdir()) == [str(steps[-1])]
    assert _leftovers(workdir) == []
    assert "Traceback" not in output.decode()
