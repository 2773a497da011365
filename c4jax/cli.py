"""Small things every command line shares (only the standard library)."""

from __future__ import annotations

import warnings


def _one_line(message, category, filename, lineno, line=None) -> str:
    return f"warning: {message}\n"


def one_line_warnings() -> None:
    """Prints Python warnings (e.g. a damaged checkpoint skipped) as ``warning: ...`` lines,
    without the file and source line. For command-line entry points only."""
    warnings.formatwarning = _one_line
