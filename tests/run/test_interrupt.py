"""c4jax.run.interrupt: Ctrl-C, SIGTERM and SIGHUP, sent for real.

In this process (the StopRequest of a long job) with ``os.kill(os.getpid(), ...)``,
the handlers from before put back after each test; and to real subprocesses: a
bare command line waiting in ``exit_on_interrupt``, ``python -m c4jax.play`` at its
prompt and ``python -m c4jax.evaluate`` in the middle of a match.
"""

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from c4jax.run import interrupt

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(ROOT)}


def _wait(condition, timeout=10.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


@pytest.fixture
def handlers():
    """Puts back this process's handlers and wakeup fd, whatever a test leaves."""
    names = list(interrupt.NAMES)
    before = {signum: signal.getsignal(signum) for signum in names}
    yield
    for signum, handler in before.items():
        signal.signal(signum, handler)
    signal.set_wakeup_fd(-1)


def test_a_pipe_whose_reader_is_gone_is_pointed_at_dev_null():
    """``| tee`` in a closed terminal: tee dies, and every later write to the pipe
    fails with EPIPE, although an empty write still succeeds."""
    reader, writer = os.pipe()
    try:
        assert interrupt.leave_lost_terminal((writer,)) is False  # its reader is there
        os.close(reader)
        reader = None
        with pytest.raises(BrokenPipeError):
            os.write(writer, b"x")
        assert interrupt.leave_lost_terminal((writer,)) is True
        assert os.write(writer, b"still writable") == len(b"still writable")
    finally:
        for fd in (reader, writer):
            if fd is not None:
                os.close(fd)


def test_a_file_and_a_closed_descriptor_are_left_alone(tmp_path):
    with open(tmp_path / "log", "w") as log:
        assert interrupt.leave_lost_terminal((log.fileno(),)) is False
    reader, writer = os.pipe()
    os.close(reader)
    os.close(writer)
    assert interrupt.leave_lost_terminal((writer,)) is False  # EBADF: nothing to move


_STUCK_WRITING = """
import sys
from c4jax.run import interrupt
interrupt.exit_on_interrupt("Interrupted.")
print("x" * 10**7, flush=True)  # more than a pipe holds: the write waits for a reader
"""


def test_ctrl_c_ends_a_process_stuck_writing_to_a_pipe_no_one_reads():
    """Output piped to a pager left open: the main thread waits in a write holding
    stdout's lock, and a flush from the signal's thread would wait behind it."""
    proc = subprocess.Popen([sys.executable, "-c", _STUCK_WRITING], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=ENV, cwd=ROOT)
    try:
        time.sleep(3)  # started, and stuck in the write
        assert proc.poll() is None
        proc.send_signal(signal.SIGINT)
        code = proc.wait(20)  # as found: never
        err = proc.stderr.read().decode()
    finally:
        proc.kill()
    assert code == 130 and err.strip() == "Interrupted.", err


def test_exit_codes_are_128_plus_the_signal():
    assert interrupt.exit_code(signal.SIGINT) == 130
    assert interrupt.exit_code(signal.SIGTERM) == 143
    assert interrupt.exit_code(signal.SIGHUP) == 129


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_signal_asks_a_stop_request_once_with_the_signal_named(handlers, signum, capfd):
    asked = []
    with interrupt.StopRequest(asked=lambda s: asked.append(s) or f"asked by {s}",
                               aborted="aborted") as stop:
        assert not stop.requested and stop.exit_code is None
        os.kill(os.getpid(), signum)
        assert _wait(lambda: stop.requested), "the signal was not seen"
    assert stop.signal == signum and asked == [signum]
    assert stop.exit_code == 128 + signum
    assert capfd.readouterr().err == f"\nasked by {signum}\n"
    # Released: the handlers from before are back (pytest's own, Python's default).
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL


def test_a_string_message_and_the_sigint_code_given(handlers, capfd):
    with interrupt.StopRequest(asked="stopping", aborted="aborted", code=3) as stop:
        os.kill(os.getpid(), signal.SIGINT)
        assert _wait(lambda: stop.requested)
    assert stop.exit_code == 3
    assert capfd.readouterr().err == "\nstopping\n"


def test_an_ignored_sighup_stays_ignored(handlers):
    """nohup: the job outlives its terminal, and a StopRequest does not undo that."""
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    with interrupt.StopRequest(asked="asked", aborted="aborted") as stop:
        assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
        os.kill(os.getpid(), signal.SIGHUP)
        time.sleep(0.3)
        assert not stop.requested
        os.kill(os.getpid(), signal.SIGTERM)
        assert _wait(lambda: stop.requested)
    assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN


def test_outside_the_main_thread_a_stop_request_does_nothing(handlers):
    seen = []

    def enter():
        with interrupt.StopRequest(asked="asked", aborted="aborted") as stop:
            seen.append(stop.requested)

    thread = threading.Thread(target=enter)
    thread.start()
    thread.join()
    assert seen == [False]
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL


# -- a closed stdout pipe (``| head``) -------------------------------------------------

_PIPED = """
import sys
from c4jax.run import interrupt
interrupt.exit_on_interrupt("Interrupted.")
print("ready", flush=True)
sys.stdin.readline()  # the reader of stdout has gone by now
{then}
"""


def _reader_gone(then: str, unbuffered: bool) -> tuple[int, str]:
    """Runs ``then`` after the reader of the child's stdout closed it, as ``head``
    does after its lines; returns the exit code and stderr."""
    env = {k: v for k, v in ENV.items() if k != "PYTHONUNBUFFERED" or unbuffered}
    proc = subprocess.Popen([sys.executable, "-c", _PIPED.format(then=then)], env=env,
                            cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline() == "ready\n"
        proc.stdout.close()
        proc.stdin.write("go\n")
        proc.stdin.close()
        code = proc.wait(30)
        return code, proc.stderr.read()
    finally:
        proc.kill()


@pytest.mark.slow
def test_a_write_after_the_reader_has_gone_ends_quietly_with_141():
    """As a C tool ends on SIGPIPE: no BrokenPipeError traceback (as found)."""
    code, err = _reader_gone('for i in range(10**5):\n    print("line", i)', unbuffered=True)
    assert (code, err) == (141, "")


@pytest.mark.slow
def test_output_still_buffered_when_the_reader_has_gone_is_dropped_at_exit():
    """The command finished; only its last flush fails: exit 0, nothing on stderr
    (as found: "Exception ignored ... BrokenPipeError" and exit 120)."""
    code, err = _reader_gone('print("the last lines")', unbuffered=False)
    assert (code, err) == (0, "")


@pytest.mark.slow
def test_other_errors_still_print_their_traceback():
    code, err = _reader_gone('raise RuntimeError("a real fault")', unbuffered=True)
    assert code == 1 and "RuntimeError: a real fault" in err and "Traceback" in err
    # A fault whose handler then prints to the closed stdout: the fault is shown.
    code, err = _reader_gone('try:\n    raise RuntimeError("the fault")\n'
                             'finally:\n    print("x" * 10**6)', unbuffered=True)
    assert code == 1 and "RuntimeError: the fault" in err


@pytest.mark.slow
def test_a_broken_pipe_to_another_process_is_not_hidden():
    """stdout is fine; a pipe to a child (here a bare pipe) lost its reader."""
    code = """
    import os
    from c4jax.run import interrupt
    interrupt.exit_on_interrupt("Interrupted.")
    reader, writer = os.pipe()
    os.close(reader)
    os.write(writer, b"to a child that died")
    """
    proc = _python(code)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 1 and "BrokenPipeError" in err and "Traceback" in err


# -- real subprocesses ---------------------------------------------------------------

_WAITING = """
import sys, time
from c4jax.run import interrupt
interrupt.{setup}
print("ready", flush=True)
time.sleep(60)
print("never", flush=True)
"""


def _python(code: str, **kwargs) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], env=ENV, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs)


@pytest.mark.slow
@pytest.mark.parametrize(
    "signum, code, line",
    [(signal.SIGINT, 130, "Interrupted."), (signal.SIGTERM, 143, "Interrupted. (SIGTERM)"),
     (signal.SIGHUP, 129, "Interrupted. (SIGHUP)")],
    ids=["SIGINT", "SIGTERM", "SIGHUP"],
)
def test_exit_on_interrupt_ends_with_one_line_and_the_conventional_code(signum, code, line):
    proc = _python(_WAITING.format(setup='exit_on_interrupt("Interrupted.")'))
    try:
        assert proc.stdout.readline() == "ready\n"
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == code
    assert out == "" and err == f"\n{line}\n"


@pytest.mark.slow
def test_a_second_signal_aborts_a_stop_request_with_its_own_code():
    """SIGTERM asks; a SIGHUP then ends the process at once with 129 and ``aborted``,
    while the main thread is still busy."""
    code = """
    import time
    from c4jax.run import interrupt
    with interrupt.StopRequest(asked="asked", aborted="aborted") as stop:
        print("ready", flush=True)
        while True:
            time.sleep(0.01)
    """
    proc = _python(code)
    try:
        assert proc.stdout.readline() == "ready\n"
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        assert proc.poll() is None
        proc.send_signal(signal.SIGHUP)
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 129
    assert err == "\nasked\n\naborted\n"


def _ended_by(args, marker, signum, *, timeout=180) -> tuple[int, str]:
    """Starts ``python -m ARGS``, sends ``signum`` once ``marker`` is in its output
    (``""``: after a few seconds); returns (exit code, output after the marker)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, env=ENV, cwd=ROOT,
    )
    chunks, seen = [], threading.Event()

    def read():  # by chunks: a prompt ends without a newline
        while chunk := os.read(proc.stdout.fileno(), 4096).decode():
            chunks.append(chunk)
            if marker in "".join(chunks):
                seen.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        if marker:
            assert seen.wait(timeout), f"never printed {marker!r}: {''.join(chunks)}"
        time.sleep(0.5 if marker else 5)  # "": loading, compiling or playing
        assert proc.poll() is None, "".join(chunks)
        proc.send_signal(signum)
        code = proc.wait(30)
    finally:
        proc.kill()
    reader.join(10)
    output = "".join(chunks)
    return code, output.split(marker, 1)[1] if marker else output


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_play_at_its_prompt_ends_with_one_line(signum):
    code, after = _ended_by(["c4jax.play", "--first", "human", "--sims", "0"], "your move",
                            signum)
    name = interrupt.NAMES[signum]
    assert code == 128 + signum, after
    assert after.strip().splitlines()[-1] == f"Interrupted. Bye. ({name})", after
    assert "Traceback" not in after and len(after.strip().splitlines()) <= 2, after


@pytest.mark.slow
def test_evaluate_in_the_middle_of_a_match_ends_with_one_line():
    code, after = _ended_by(
        ["c4jax.evaluate", "match", "mcts-4096", "minimax-8", "--games", "400"], "",
        signal.SIGTERM)
    assert code == 143, after
    assert after.strip().splitlines()[-1] == "Interrupted. (SIGTERM)", after
    assert "Traceback" not in after
