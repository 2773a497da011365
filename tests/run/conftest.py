"""Shared by the command-line tests of ``c4jax.run``."""

import pytest


@pytest.fixture
def error_line(capsys):
    """``error_line(main, argv) -> stderr``: ``main(argv)`` must exit 2 with one ``error:``
    line, no traceback and no tyro panel."""

    def check(main, argv) -> str:
        code = main(argv)
        err = capsys.readouterr().err
        assert code == 2, err
        assert err.startswith("error: ") and err.count("\n") == 1, err
        assert "Traceback" not in err and "\u2500" not in err  # no tyro panel
        return err

    return check
