"""A command line's ``main`` run in the test's own process, as the tests that need no
process start call it (importable from any test: ``tests/`` is on pytest's ``pythonpath``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence


def run_main(main: Callable[[list[str]], int], argv: Sequence[str], capsys) -> tuple[int, str, str]:
    """``(exit code, stdout, stderr)`` of ``main(argv)`` in this process, counting only
    what it printed (``capsys``: pytest's fixture); an argument parser's own exit gives
    its code."""
    capsys.readouterr()
    try:
        code = main(list(argv))
    except SystemExit as stop:  # tyro's or argparse's own parse errors
        code = stop.code
    out = capsys.readouterr()
    return code, out.out, out.err
