"""bench.devset: held-out positions in a Pons set's stage and difficulty band."""

import json

import numpy as np
import pytest

from bench import devset
from c4jax import env
from c4jax.judge import perfect, solver

pytest.importorskip("bitbully", reason="the [solver] extra (bitbully) is not installed")


def test_moves_left_puts_every_pons_position_in_its_own_band():
    for name in solver.SET_NAMES:
        pons_set = solver.load_set(name)
        low, high = devset.BANDS[name.split("_")[1]]
        left = [
            devset.moves_left(len(m), int(s))
            for m, s in zip(pons_set.moves, pons_set.score, strict=True)
        ]
        assert low <= min(left) and max(left) <= high, name


def test_moves_left_of_hand_worked_scores():
    # Empty board, first player wins with its 21st stone at the earliest: score 1.
    assert devset.moves_left(0, 1) == 41
    # A draw fills the board.
    assert devset.moves_left(10, 0) == 32
    # Second player to move (1 stone down) loses to the first player's 4th stone.
    assert devset.moves_left(1, -18) == 6


def test_generated_positions_are_fresh_labelled_and_in_band(tmp_path):
    rows = devset.generate("L1_R3", 12, seed=3)
    reference = solver.load_set("L1_R3")
    lengths = {len(m) for m in reference.moves}
    assert len({r["moves"] for r in rows}) == 12
    for r in rows:
        assert r["moves"] not in reference.moves
        assert len(r["moves"]) in lengths
        assert devset.moves_left(len(r["moves"]), r["score"]) >= 29
        assert r["score"] == max(s for s in r["move_scores"] if s is not None)
    # The file reads back as a Pons set, and its labels agree with the perfect agent's.
    path = tmp_path / "dev.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    loaded = solver.load_set("dev", tmp_path, verify=False)
    scores = perfect.move_scores(loaded.states())
    np.testing.assert_array_equal(np.where(loaded.legal, scores, 0), loaded.move_scores)
    assert not np.asarray(env.legal_action_mask(loaded.states()))[~loaded.legal].any()


def test_a_board_is_one_key_in_any_move_order_and_mirrored():
    assert devset.board_key("361") == devset.board_key("163") == devset.board_key("527")
    assert devset.board_key("361") != devset.board_key("316")  # other stones' colours
    assert devset.board_key("") == ()


def test_no_generated_board_is_a_pons_board_or_repeated(monkeypatch):
    """Excluded by move string only, "361" passed although L1_R3 holds "163", the same
    board (found in the file this tool wrote before): here every draw is a Pons
    board in another order, or a repeat, until the fresh ones."""
    pons = {devset.board_key(m) for n in solver.SET_NAMES for m in solver.load_set(n).moves}
    rows = devset.generate("L1_R3", 200, seed=0)
    keys = [devset.board_key(r["moves"]) for r in rows]
    assert len(set(keys)) == len(keys) and not set(keys) & pons


def test_same_seed_same_positions():
    assert devset.generate("L1_R2", 5, seed=1) == devset.generate("L1_R2", 5, seed=1)


@pytest.mark.parametrize(
    "argv, message",
    [(["--like", "L4_R3"], "--like: unknown set 'L4_R3'"), (["--num", "0"], "--num")],
)
def test_bad_input_is_a_usage_error_naming_it(argv, message, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        devset.main([*argv, "--out", str(tmp_path / "x.jsonl")])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "x.jsonl").exists()


def test_without_the_solver_the_error_says_how_to_install_it(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "bitbully", None)  # import bitbully -> ImportError
    with pytest.raises(perfect.MissingSolverError, match="c4jax\\[solver\\]"):
        devset.generate("L1_R3", 1, seed=0)
