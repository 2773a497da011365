"""Small things every command line shares (the standard library, and tyro on demand)."""

from __future__ import annotations

import contextlib
import io
import re
import warnings


def _one_line(message, category, filename, lineno, line=None) -> str:
    return f"warning: {message}\n"


def one_line_warnings() -> None:
    """Prints Python warnings (e.g. a damaged checkpoint skipped) as ``warning: ...`` lines,
    without the file and source line. For command-line entry points only."""
    warnings.formatwarning = _one_line


_BOX = re.compile(r"[\u2500-\u257f]|-{3,}")  # the frame of tyro's error panels (box or ASCII)


def tyro_cli(cls, **kwargs):
    """``tyro.cli`` whose parse errors become one ValueError line (``--help`` still prints).

    tyro draws a multi-line panel and exits with code 2; the panel's first
    paragraph is the message.
    """
    import tyro

    panel = io.StringIO()
    try:
        with contextlib.redirect_stderr(panel):
            return tyro.cli(cls, **kwargs)
    except SystemExit as stop:
        if not stop.code:
            raise  # --help
        lines = [_BOX.sub("", line).strip() for line in panel.getvalue().splitlines()[1:]]
        message = []
        for line in lines:
            if not line or line.startswith(("For full helptext", "Argument helptext")):
                if message:
                    break
                continue
            message.append(line)
        text = " ".join(message) or "could not parse the command line"
        raise ValueError(f"{text} (see: {kwargs.get('prog', 'the command')} --help)") from None
