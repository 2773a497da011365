"""Ctrl-C for interactive command lines: a short message and exit code 130, at once.

    interrupt.exit_on_interrupt("Interrupted.")   # first thing in a command's entry point

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
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable

EXIT_CODE = 130  # 128 + SIGINT, what a shell reports for a Ctrl-C


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


def exit_now(message: str, code: int = EXIT_CODE, terminal=None) -> None:
    """Flushes stdout, prints ``message`` on stderr and ends the process (no teardown)."""
    if terminal is not None:
        import termios

        with contextlib.suppress(Exception):
            termios.tcsetattr(terminal[0], termios.TCSANOW, terminal[1])
    with contextlib.suppress(Exception):
        sys.stdout.flush()
    with contextlib.suppress(Exception):
        os.write(2, f"\n{message}\n".encode())
    os._exit(code)


def _on_sigint(callback: Callable[[], None]) -> Callable[[], None]:
    """Calls ``callback()`` from a daemon thread for every SIGINT, at once.

    The C-level handler writes the signal to a socket (``signal.set_wakeup_fd``)
    that the thread waits on, so this works while the main thread is inside
    XLA or Orbax. Main thread only.

    Returns:
        ``release()``: puts back the handler and wakeup fd that were there before.
    """
    reader, writer = socket.socketpair()
    writer.setblocking(False)
    # A Python-level handler must be installed for the wakeup fd to be written;
    # it does nothing: the thread does the work.
    previous_handler = signal.signal(signal.SIGINT, lambda signum, frame: None)
    previous_fd = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)

    def wait() -> None:
        del_guard = writer  # noqa: F841 - the socket must live as long as the thread
        while True:
            try:
                data = reader.recv(64)
            except OSError:
                return
            if not data:
                return
            for _ in range(data.count(signal.SIGINT)):
                callback()

    thread = threading.Thread(target=wait, name="c4jax-interrupt", daemon=True)
    thread.start()

    def release() -> None:
        signal.set_wakeup_fd(previous_fd)
        signal.signal(signal.SIGINT, previous_handler)
        writer.close()  # the thread sees the end of the socket and returns
        thread.join(timeout=1.0)
        reader.close()

    return release


def exit_on_interrupt(
    message: str = "Interrupted.", code: int = EXIT_CODE
) -> Callable[[], None]:
    """Makes every later SIGINT end the process with ``message`` (stderr) and ``code``.

    Must be called from the main thread (``signal`` requires it). Intended for
    command-line entry points, not for library code or tests.

    Returns:
        ``release()``: puts the Ctrl-C handling from before back (Python's usual
        one, for a part that handles it itself, such as a web server's
        graceful shutdown).
    """
    terminal = _terminal_settings()
    return _on_sigint(lambda: exit_now(message, code, terminal))


class StopRequest:
    """Ctrl-C for a long job that stops cleanly: the first asks, the second aborts.

        with interrupt.StopRequest(asked="...", aborted="...") as stop:
            while not stop.requested:
                ...  # one unit of work, then save

    The first SIGINT sets ``requested`` and prints ``asked`` at once, even while
    XLA compiles (as ``exit_on_interrupt`` does). The second ends the process
    at once with ``aborted`` and exit code 130. Outside the main thread it does
    nothing (``requested`` stays False): signals can only be handled there.
    """

    def __init__(self, *, asked: str, aborted: str, code: int = EXIT_CODE):
        self.asked = asked
        self.aborted = aborted
        self.code = code
        self.requested = False
        self._release: Callable[[], None] | None = None

    def request(self) -> None:
        """What a Ctrl-C does (the first sets the flag, the second exits)."""
        if self.requested:
            exit_now(self.aborted, self.code)
        self.requested = True
        with contextlib.suppress(Exception):
            os.write(2, f"\n{self.asked}\n".encode())

    def __enter__(self) -> StopRequest:
        if threading.current_thread() is threading.main_thread():
            self._release = _on_sigint(self.request)
        return self

    def __exit__(self, *exc) -> bool:
        if self._release is not None:
            self._release()
            self._release = None
        return False
