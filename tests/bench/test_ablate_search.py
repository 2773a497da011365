"""bench.ablate_search: search variants of one network on the same positions."""

import json

import pytest

from bench import ablate_search
from c4jax.alphazero.config import SearchConfig


def test_variants_replace_typed_fields():
    base = SearchConfig(num_simulations=16)
    assert ablate_search.parse_variant("base", base) is base
    v = ablate_search.parse_variant("c_scale=0.3,algorithm=puct,max_num_considered_actions=4", base)
    assert (v.c_scale, v.algorithm, v.max_num_considered_actions) == (0.3, "puct", 4)
    assert v.num_simulations == 16
    with pytest.raises(ValueError, match="c_scael"):
        ablate_search.parse_variant("c_scael=0.3", base)
    with pytest.raises(ValueError, match="c_scale needs a float, got 'high'"):
        ablate_search.parse_variant("c_scale=high", base)


def test_sign_test():
    assert ablate_search.sign_test(0, 0) == 1.0
    assert ablate_search.sign_test(5, 5) == 1.0
    assert ablate_search.sign_test(10, 0) == pytest.approx(2 / 2**10)
    assert ablate_search.sign_test(0, 10) == ablate_search.sign_test(10, 0)


def test_runs_variants_on_pons_and_files_and_reports_pairs(tmp_path, capsys):
    lines = (ablate_search.solver.DATA_DIR / "L1_R3.jsonl").read_text().splitlines()[:30]
    dev = tmp_path / "dev_L1_R3.jsonl"
    dev.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out.json"
    argv = ["--sims", "8", "--positions", "30", "--sets", f"L2_R1,{dev}"]
    argv += ["--variant", "base", "--variant", "c_scale=1.0", "--json", str(out)]
    assert ablate_search.main(argv) == 0
    result = json.loads(out.read_text())
    assert set(result["results"]) == {"base", "c_scale=1.0"}
    assert set(result["results"]["base"]) == {"L2_R1", "dev_L1_R3"}
    for name, by_set in result["mistakes"].items():
        for set_name, wrong in by_set.items():
            rate = result["results"][name][set_name]["mistake_rate"]
            assert rate == pytest.approx(len(wrong) / 30)
    assert "paired against 'base'" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--variant", "c_scale=-1"], "search.c_scale"),
        (["--variant", "c_scale=x"], "c_scale needs a float"),
        (["--sets", "L9_R9"], "L9_R9"),
        (["--sets", "missing/dev.jsonl"], "dev"),
        (["--sims", "-1"], "--sims"),
        (["--positions", "0"], "--positions"),
        (["--checkpoint", "runs/x:last"], "STEP a whole number"),
        (["--checkpoint", "no_such_run:10"], "no_such_run"),
    ],
)
def test_bad_input_is_a_usage_error_naming_it(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        ablate_search.main(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err
