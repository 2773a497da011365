"""bench.compare_checkpoints: several networks on the same positions."""

import json

import pytest

from bench import compare_checkpoints


@pytest.mark.slow
def test_the_shipped_agent_beats_a_tiny_run_on_the_same_positions(tiny_run, tmp_path, capsys):
    out = tmp_path / "out.json"
    tiny = f"{tiny_run}:4"
    argv = [tiny, "pretrained", "--sims", "8", "--sets", "L2_R1", "--positions", "60"]
    assert compare_checkpoints.main(argv + ["--json", str(out)]) == 0
    result = json.loads(out.read_text())
    rates = {name: rows["L2_R1"]["mistake_rate"] for name, rows in result["results"].items()}
    for name, by_set in result["mistakes"].items():
        assert rates[name] == pytest.approx(len(by_set["L2_R1"]) / 60)
    assert rates["pretrained"] < rates[tiny]
    wrong = {name: set(by_set["L2_R1"]) for name, by_set in result["mistakes"].items()}
    fixed, broken = len(wrong[tiny] - wrong["pretrained"]), len(wrong["pretrained"] - wrong[tiny])
    assert fixed > broken
    printed = capsys.readouterr().out
    assert f"paired against {tiny!r}" in printed and f"L2_R1 {fixed}/{broken}" in printed


@pytest.mark.slow
def test_saved_results_serve_as_the_reference(tiny_run, tmp_path, capsys):
    """A run evaluated earlier (its checkpoints since deleted) is compared from its JSON:
    the same rates and the same paired counts as evaluating both together."""
    tiny, both, saved = f"{tiny_run}:4", tmp_path / "both.json", tmp_path / "saved.json"
    common = ["--sims", "8", "--sets", "L2_R1", "--positions", "40"]
    assert compare_checkpoints.main([tiny, "pretrained", *common, "--json", str(both)]) == 0
    together = capsys.readouterr().out.splitlines()[-1]
    assert compare_checkpoints.main([tiny, *common, "--json", str(saved)]) == 0
    capsys.readouterr()
    out = tmp_path / "later.json"
    argv = ["pretrained", "--reference", str(saved), *common, "--json", str(out)]
    assert compare_checkpoints.main(argv) == 0
    assert capsys.readouterr().out.splitlines()[-1] == together  # tiny fixed / broken
    assert json.loads(out.read_text()) == json.loads(both.read_text())
    # The saved results only stand for the same positions at the same simulations.
    for bad, message in [
        (["--sims", "16", "--sets", "L2_R1", "--positions", "40"], "not 16 simulations"),
        ([*common, "--seed", "1"], "with seed 0, not 8 simulations with seed 1"),
        (["--sims", "8", "--sets", "L2_R1", "--positions", "50"], "50 positions of L2_R1"),
        (["--sims", "8", "--sets", "L1_R1", "--positions", "40"], "positions of L1_R1"),
    ]:
        with pytest.raises(SystemExit):
            compare_checkpoints.main(["pretrained", "--reference", str(saved), *bad])
        assert message in capsys.readouterr().err
    with pytest.raises(SystemExit):
        compare_checkpoints.main([tiny, "--reference", str(saved), *common])
    assert "named twice" in capsys.readouterr().err
    broken = tmp_path / "broken.json"
    record = json.loads(saved.read_text())
    del record["mistakes"][tiny]
    broken.write_text(json.dumps(record))
    with pytest.raises(SystemExit):
        compare_checkpoints.main(["pretrained", "--reference", str(broken), *common])
    err = capsys.readouterr().err
    assert "not a --json of this tool" in err and "Traceback" not in err


@pytest.mark.parametrize(
    "argv, message",
    [
        (["pretrained", "pretrained"], "named twice"),
        (["pretrained", "--sims", "-1"], "--sims"),
        (["pretrained", "--positions", "0"], "--positions"),
        (["pretrained", "--sets", "L9_R9"], "L9_R9"),
        (["no_such_run:10"], "no_such_run"),
        (["runs/x:last"], "STEP a whole number"),
        (["pretrained", "--reference", "no_such.json"], "no_such.json"),
    ],
)
def test_bad_input_is_a_usage_error_naming_it(argv, message, usage_error):
    assert message in usage_error(compare_checkpoints.main, argv)


def test_a_reference_on_other_positions_of_the_same_name_and_size_is_refused(tmp_path):
    """A held-out set made again with another seed has the same name and size: its
    saved mistakes were paired with other positions, without a word."""
    from bench.ablate_search import load_positions

    l2 = load_positions("L2_R1").head(5)
    row = {"L2_R1": {"positions": 5, "mistake_rate": 0.2}}

    def reference(ids):
        path = tmp_path / "ref.json"
        path.write_text(json.dumps({"sims": 8, "seed": 0, **ids, "results": {"old": row},
                                    "mistakes": {"old": {"L2_R1": [3]}}}))
        return [path]

    right = {"positions_sha256": {"L2_R1": compare_checkpoints.positions_id(l2)}}
    for ids in (right, {}):  # files written before the ids: by name and size
        rows, mistakes = compare_checkpoints.load_references(reference(ids), [l2], 8, 0)
        assert rows == {"old": row} and mistakes == {"old": {"L2_R1": [3]}}
    other = load_positions("L2_R1").head(6).head(5)  # the same positions: the same id
    assert compare_checkpoints.positions_id(other) == compare_checkpoints.positions_id(l2)
    with pytest.raises(ValueError, match="its L2_R1 holds other positions than the L2_R1"):
        compare_checkpoints.load_references(
            reference({"positions_sha256": {"L2_R1": "0" * 64}}), [l2], 8, 0)
