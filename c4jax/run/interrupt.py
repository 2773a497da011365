"""Ctrl-C, SIGTERM and SIGHUP for command lines: a short message and the conventional
exit code (128 + the signal: 130, 143, 129), at once.

    interrupt.exit_on_interrupt("Interrupted.")   # first thing in a command's entry point

SIGTERM is what Colab, TPU VMs, SLURM, Kubernetes and ``docker stop`` send
before they end a process (a SIGKILL follows after a grace period: often 30 s,
10 s for ``docker stop``), SIGHUP what a closed terminal sends. An ignored
SIGTERM or SIGHUP (``nohup``) stays ignored.

Why not ``except KeyboardInterrupt``: Python runs signal handlers only between
bytecodes of the main thread, so a Ctrl-C while XLA compiles or runs waits for
it, and the ``KeyboardInterrupt`` then raised somewhere inside JAX or Orbax
(or during interpreter teardown, with their threads still running) printed
hundreds of lines of tracebacks, or crashed with a segmentation fault.

Instead the C-level signal handler writes the signal number to a socket
(``signal.set_wakeup_fd``) that a daemon thread waits on. That thread restores
the terminal's settings, prints the message and ends the process with
``os._exit``, which skips the teardown. Only the standard library is imported
here, so it can be installed before JAX loads.

A closed stdout pipe (``| head``) ends a command quietly with 141, as SIGPIPE
ends a C tool (``quiet_closed_pipe``): Python ignores SIGPIPE, and the write
then raises ``BrokenPipeError``.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable

EXIT_CODE = 130  # 128 + SIGINT, what a shell reports for a Ctrl-C

# The signals handled, with the name a message gives them. SIGHUP does not exist
# on Windows.
NAMES: dict[int, str] = {int(signal.SIGINT): "Ctrl-C", int(signal.SIGTERM): "SIGTERM"}
if hasattr(signal, "SIGHUP"):
    NAMES[int(signal.SIGHUP)] = "SIGHUP"


def exit_code(signum: int) -> int:
    """The code a shell reports for a process ended by ``signum``: 128 + its number
    (130 for SIGINT, 143 for SIGTERM, 129 for SIGHUP)."""
    return 128 + int(signum)


def _terminal_settings():
    """``(fd, termios attributes)`` of stdin if it is a terminal, else None."""
    try:
        import termios

        fd = sys.stdin.fileno()
        if os.isatty(fd):
            return fd, termios.tcgetattr(fd)
    except (ImportError, OSError, ValueError, AttributeError):
        pass
    return None


def exit_now(message: str, code: int = EXIT_CODE, terminal=None, *, quiet: bool = False) -> None:
    """Removes the temporary files of output files being written, flushes stdout,
    prints ``message`` on stderr (nothing if ``quiet``) and ends the process (no
    teardown)."""
    # os._exit skips write_whole's cleanup. Looked up, not imported: this module
    # loads before the rest of the package, and a process that never imported
    # the outputs module has no such file.
    outputs = sys.modules.get("c4jax.store.outputs")
    if outputs is not None:
        with contextlib.suppress(Exception):
            outputs.remove_temporary()
    if terminal is not None:
        import termios

        with contextlib.suppress(Exception):
            termios.tcsetattr(terminal[0], termios.TCSANOW, terminal[1])
    with contextlib.suppress(Exception):
        sys.stdout.flush()
    if not quiet:
        with contextlib.suppress(Exception):
            os.write(2, f"\n{message}\n".encode())
    os._exit(code)


def _lost(fd: int) -> bool:
    """Whether writes to ``fd`` fail: a terminal that hung up (a write gives EIO) or a
    pipe or socket whose reader is gone (``| tee`` in a closed terminal; a write
    gives EPIPE). An empty write to such a pipe succeeds, so ``poll`` asks."""
    try:
        os.write(fd, b"")
    except OSError as err:
        return err.errno != errno.EBADF
    try:
        import select

        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        events = dict(poller.poll(0)).get(fd, 0)
    except (ImportError, AttributeError, OSError, ValueError):
        return False  # no poll (Windows): only the empty write can tell
    return bool(events & select.POLLERR) and not events & select.POLLNVAL


def leave_lost_terminal(fds: tuple[int, ...] = (1, 2)) -> bool:
    """Points stdout and stderr (``fds``) at /dev/null where a write to them fails (a
    terminal that hung up, where ``isatty`` is then False and every write gives
    EIO, or a pipe whose reader has gone, as ``| tee`` in a closed terminal, where
    every write gives EPIPE), so that later prints do not fail, as ``nohup``
    would have arranged.

    Returns:
        True if one of them was pointed away.
    """
    moved = False
    for fd in fds:
        if not _lost(fd):
            continue
        with contextlib.suppress(OSError):
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, fd)
            os.close(null)
            moved = True
    return moved


def _on_signals(callback: Callable[[int], None]) -> Callable[[], None]:
    """Calls ``callback(signum)`` from a daemon thread for every SIGINT, SIGTERM and
    SIGHUP, at once (an ignored SIGTERM or SIGHUP stays ignored).

    The C-level handler writes the signal to a socket (``signal.set_wakeup_fd``)
    that the thread waits on, so this works while the main thread is inside
    XLA or Orbax. Main thread only.

    Returns:
        ``release()``: puts back the handlers and wakeup fd that were there before.
    """
    reader, writer = socket.socketpair()
    writer.setblocking(False)
    # A Python-level handler must be installed for the wakeup fd to be written;
    # it does nothing: the thread does the work.
    previous: dict[int, object] = {}
    for signum in NAMES:
        if signum != signal.SIGINT and signal.getsignal(signum) == signal.SIG_IGN:
            continue  # nohup, or a parent that wants this process to outlive it
        previous[signum] = signal.signal(signum, lambda signum, frame: None)
    previous_fd = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
    handled = bytes(previous)

    def wait() -> None:
        del_guard = writer  # noqa: F841 - the socket must live as long as the thread
        while True:
            try:
                data = reader.recv(64)
            except OSError:
                return
            if not data:
                return
            for signum in data:
                if signum in handled:
                    callback(signum)

    thread = threading.Thread(target=wait, name="c4jax-interrupt", daemon=True)
    thread.start()

    def release() -> None:
        signal.set_wakeup_fd(previous_fd)
        for signum, handler in previous.items():
            # None: a handler not installed from Python; the default is the safe guess.
            signal.signal(signum, signal.SIG_DFL if handler is None else handler)
        writer.close()  # the thread sees the end of the socket and returns
        thread.join(timeout=1.0)
        reader.close()

    return release


PIPE_EXIT_CODE = 141  # 128 + SIGPIPE, what a shell reports for a C tool in ``| head``


def _is_closed_pipe(err: BaseException) -> bool:
    return isinstance(err, BrokenPipeError) or (
        isinstance(err, OSError) and err.errno == errno.EPIPE)


def quiet_closed_pipe() -> None:
    """Makes stdout's reader going away (``c4jax evaluate ... | head``) end the process
    quietly with code 141, as a C tool ends on SIGPIPE, instead of Python's
    ``BrokenPipeError`` traceback (or its "Exception ignored" lines at exit).

    Python ignores SIGPIPE, so a write to such a pipe raises. Two places see it:
    an exception that reaches the top (``sys.excepthook``), and the last flush
    of stdout after the command returned (an ``atexit`` flush: registered before
    the libraries load, it runs after theirs but before the interpreter's own).
    Only a broken pipe while stdout's reader is gone is quiet: one to another
    pipe or socket, or one raised while handling another error, still prints
    its traceback. Output files being written have their temporary files
    removed (as for a Ctrl-C); a training's progress line handles a closed
    pipe itself and trains on. For command-line entry points only;
    ``exit_on_interrupt`` calls it.
    """
    previous = sys.excepthook

    def hook(kind, value, traceback) -> None:
        context = value.__context__
        if (_is_closed_pipe(value) and _stdout_lost()
                and (context is None or _is_closed_pipe(context))):
            _drop_stdout()
            exit_now("", PIPE_EXIT_CODE, quiet=True)
        previous(kind, value, traceback)

    def flush() -> None:
        try:
            sys.stdout.flush()
        except (OSError, ValueError) as err:  # ValueError: stdout already closed
            if isinstance(err, OSError) and _is_closed_pipe(err):
                _drop_stdout()

    sys.excepthook = hook
    atexit.register(flush)


def _stdout_lost() -> bool:
    """Whether stdout is a pipe or terminal that writes fail on (``_lost``)."""
    try:
        return _lost(sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # closed, or not a real file
        return False


def _drop_stdout() -> None:
    """Points stdout's descriptor at /dev/null, so that what Python still holds of
    it (its buffer, flushed at exit) goes nowhere."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)


def exit_on_interrupt(
    message: str = "Interrupted.", code: int = EXIT_CODE
) -> Callable[[], None]:
    """Makes every later SIGINT, SIGTERM or SIGHUP end the process with ``message``
    (stderr; the signal named after it unless it is a Ctrl-C) and ``code`` for a
    SIGINT, 128 + the signal otherwise (143 for SIGTERM, 129 for SIGHUP); and a
    closed stdout pipe end it quietly with 141 (``quiet_closed_pipe``).

    Must be called from the main thread (``signal`` requires it). Intended for
    command-line entry points, not for library code or tests.

    Returns:
        ``release()``: puts the signal handling from before back (Python's usual
        one, for a part that handles them itself, such as a web server's
        graceful shutdown).
    """
    terminal = _terminal_settings()
    quiet_closed_pipe()

    def end(signum: int) -> None:
        if signum == signal.SIGINT:
            exit_now(message, code, terminal)
        exit_now(f"{message} ({NAMES[signum]})", exit_code(signum), terminal)

    return _on_signals(end)


class StopRequest:
    """Ctrl-C, SIGTERM or SIGHUP for a long job that stops cleanly: the first asks,
    the second aborts.

        with interrupt.StopRequest(asked="...", aborted="...") as stop:
            while not stop.requested:
                ...  # one unit of work, then save
        return stop.exit_code  # 130, 143 or 129 (None: not stopped by a signal)

    The first signal sets ``requested`` and ``signal`` and prints ``asked`` at
    once (``asked(signum)`` if it is a function), even while XLA compiles (as
    ``exit_on_interrupt`` does). The second ends the process at once with
    ``aborted`` and the code of that second signal (130 for SIGINT, 143 for
    SIGTERM, 129 for SIGHUP). After a SIGHUP, stdout and stderr are pointed at
    /dev/null where their terminal is gone, so that the job can still save.
    Outside the main thread it does nothing (``requested`` stays False):
    signals can only be handled there.
    """

    def __init__(
        self, *, asked: str | Callable[[int], str], aborted: str, code: int = EXIT_CODE
    ):
        self.asked = asked
        self.aborted = aborted
        self.code = code
        self.requested = False
        self.signal: int | None = None  # the first signal received
        self._release: Callable[[], None] | None = None

    @property
    def exit_code(self) -> int | None:
        """The code for the first signal (``code`` for SIGINT, 128 + the signal
        otherwise), None before any."""
        if self.signal is None:
            return None
        return self.code if self.signal == signal.SIGINT else exit_code(self.signal)

    def request(self, signum: int = signal.SIGINT) -> None:
        """What a signal does (the first sets the flag, the second exits)."""
        signum = int(signum)
        if self.requested:
            code = self.code if signum == signal.SIGINT else exit_code(signum)
            exit_now(self.aborted, code)
        self.signal = signum
        self.requested = True
        asked = self.asked(signum) if callable(self.asked) else self.asked
        with contextlib.suppress(Exception):
            os.write(2, f"\n{asked}\n".encode())
        if signum == getattr(signal, "SIGHUP", None):
            leave_lost_terminal()

    def __enter__(self) -> StopRequest:
        if threading.current_thread() is threading.main_thread():
            self._release = _on_signals(self.request)
        return self

    def __exit__(self, *exc) -> bool:
        if self._release is not None:
            self._release()
            self._release = None
        return False
