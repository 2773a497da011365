"""The start-up breakdown: every phase timed, the cache's part told apart."""

import json

import pytest

from bench import startup


@pytest.mark.slow
def test_every_phase_is_timed_and_a_second_start_reads_the_cache(tmp_path, capsys):
    out = tmp_path / "startup.json"
    assert startup.main(["--config", "tiny", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    for phase in startup.PHASES:
        assert startup.LABELS[phase] in printed
    first = json.loads(out.read_text())
    assert set(first["seconds"]) == set(startup.PHASES)
    assert all(s > 0 for s in first["seconds"].values())
    assert first["config"] == "tiny" and first["device"]["cpu_count"] >= 1
    # The suite's persistent cache keeps every program: the same iteration traced
    # again by a new trainer is read back, not compiled.
    again = startup.measure("tiny")
    assert again["cache_hit"] is True


def test_a_bad_config_is_one_error_line(capsys):
    assert startup.main(["--config", "no-such-preset"]) == 2
    assert capsys.readouterr().err.startswith("error: --config no-such-preset: no such file")
