"""Behaviour of the batched bitboard env (c4jax/env.py).

Golden positions are drawn as ASCII boards (top row first, ``x`` first player,
``o`` second), the way ``env.render`` and OpenSpiel print them. The rules are
cross-checked against OpenSpiel over thousands of random games, against the
solver-labelled Pons positions, and against a small pure-Python reference in
the property tests.
"""

from __future__ import annotations

import hashlib
import json
import textwrap
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from c4jax import env

PONS_DIR = Path(env.__file__).resolve().parent / "data" / "pons"
FIELDS = ("own_lo", "own_hi", "all_lo", "all_hi", "num_moves", "winner", "terminated")

# Hypothesis: reproducible runs, no example database written into the tree.
PROPERTY = settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)

_step = jax.jit(env.step)
_mask = jax.jit(env.legal_action_mask)
_observe = jax.jit(env.observe)


def board(text: str) -> str:
    """An indented triple-quoted ASCII board -> ``render``'s exact layout."""
    lines = textwrap.dedent(text).strip().splitlines()
    assert len(lines) == env.NUM_ROWS and all(len(line) == env.NUM_COLS for line in lines)
    return "".join(line + "\n" for line in lines)


def to_numpy(state: env.State) -> env.State:
    """The same state with numpy fields (cheap to index and render on the host)."""
    return jax.tree.map(np.asarray, state)


def index(state: env.State, i) -> env.State:
    """Game ``i`` of a batched state."""
    return jax.tree.map(lambda x: x[i], state)


def assert_same_state(a: env.State, b: env.State) -> None:
    for name in FIELDS:
        np.testing.assert_array_equal(
            np.asarray(getattr(a, name)), np.asarray(getattr(b, name)), err_msg=name
        )


def mirror_moves(moves: str) -> str:
    """Column c -> 8 - c: the same game on the left-right mirrored board."""
    return "".join(str(8 - int(c)) for c in moves)


class Reference:
    """A plain-Python Connect Four: a 6 x 7 grid scanned for fours after each move."""

    def __init__(self) -> None:
        self.grid = [[None] * env.NUM_COLS for _ in range(env.NUM_ROWS)]  # [row][col], row 0 bottom
        self.heights = [0] * env.NUM_COLS
        self.num_moves = 0
        self.winner = -1

    @property
    def over(self) -> bool:
        return self.winner != -1 or self.num_moves == env.NUM_CELLS

    def legal(self) -> list[int]:
        if self.over:
            return []
        return [c for c in range(env.NUM_COLS) if self.heights[c] < env.NUM_ROWS]

    def play(self, col: int) -> None:
        player = self.num_moves % 2
        self.grid[self.heights[col]][col] = player
        self.heights[col] += 1
        self.num_moves += 1
        if self._has_four(player):
            self.winner = player

    def _has_four(self, player: int) -> bool:
        for r in range(env.NUM_ROWS):
            for c in range(env.NUM_COLS):
                for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
                    cells = [(r + i * dr, c + i * dc) for i in range(4)]
                    if all(
                        0 <= rr < env.NUM_ROWS
                        and 0 <= cc < env.NUM_COLS
                        and self.grid[rr][cc] == player
                        for rr, cc in cells
                    ):
                        return True
        return False

    def render(self) -> str:
        marks = {None: ".", 0: "x", 1: "o"}
        return "".join(
            "".join(marks[v] for v in self.grid[r]) + "\n" for r in reversed(range(env.NUM_ROWS))
        )


@st.composite
def games(draw, max_moves: int = env.NUM_CELLS) -> str:
    """A legal move string: random choices among the legal columns until the game ends."""
    choices = draw(st.lists(st.integers(0, env.NUM_COLS - 1), max_size=max_moves))
    ref = Reference()
    moves = ""
    for choice in choices:
        legal = ref.legal()
        if not legal:
            break
        col = legal[choice % len(legal)]
        ref.play(col)
        moves += str(col + 1)
    return moves


def random_move_strings(num: int, seed: int) -> list[str]:
    """``num`` move strings of random play, cut at random lengths (finished games included)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(num):
        ref = Reference()
        moves = ""
        stop = rng.integers(0, env.NUM_CELLS + 1)
        while ref.legal() and len(moves) < stop:
            col = int(rng.choice(ref.legal()))
            ref.play(col)
            moves += str(col + 1)
        out.append(moves)
    return out


# --- Golden positions. ---


@pytest.mark.parametrize(
    ("moves", "expected", "winner"),
    [
        pytest.param(
            "1122334",
            """
            .......
            .......
            .......
            .......
            ooo....
            xxxx...
            """,
            0,
            id="horizontal",
        ),
        pytest.param(
            "1212121",
            """
            .......
            .......
            x......
            xo.....
            xo.....
            xo.....
            """,
            0,
            id="vertical",
        ),
        pytest.param(
            "12233434544",
            """
            .......
            .......
            ...x...
            ..xo...
            .xxo...
            xooox..
            """,
            0,
            id="diagonal-up-right",
        ),
        pytest.param(
            "76655454344",
            """
            .......
            .......
            ...x...
            ...ox..
            ...oxx.
            ..xooox
            """,
            0,
            id="diagonal-up-left",
        ),
        pytest.param(
            "71212121",
            """
            .......
            .......
            o......
            ox.....
            ox.....
            ox....x
            """,
            1,
            id="second-player-vertical",
        ),
        pytest.param(
            "634622357364446374122717245762511631755315",
            """
            xooooox
            oxxoxxo
            xxoooxo
            oooxxxo
            xoxoxox
            xxoxoxx
            """,
            1,
            id="win-on-42nd-stone",
        ),
    ],
)
def test_wins(moves, expected, winner):
    state = env.from_moves(moves)
    assert env.render(state) == board(expected)
    assert int(state.winner) == winner
    assert bool(state.terminated)
    assert int(state.num_moves) == len(moves)
    assert not np.asarray(env.legal_action_mask(state)).any()
    # One stone earlier the game was still on, and stepping the last move wins it.
    before = env.from_moves(moves[:-1])
    assert not bool(before.terminated) and int(before.winner) == -1
    assert_same_state(env.step(before, int(moves[-1]) - 1), state)


def test_win_on_42nd_stone_is_a_win_not_a_draw():
    before = env.from_moves("63462235736444637412271724576251163175531")
    assert env.render(before) == board(
        """
        xooo.ox
        oxxoxxo
        xxoooxo
        oooxxxo
        xoxoxox
        xxoxoxx
        """
    )
    assert np.asarray(env.legal_action_mask(before)).tolist() == [0, 0, 0, 0, 1, 0, 0]
    after = env.step(before, 4)
    assert int(after.winner) == 1 and bool(after.terminated) and int(after.num_moves) == 42


def test_full_board_draw():
    moves = "472424756645422154157737216635626711335331"
    state = env.from_moves(moves)
    assert env.render(state) == board(
        """
        ooxoxxo
        oxoxoxo
        xxoxooo
        ooxoxxx
        xxxooox
        oxxxoxo
        """
    )
    assert int(state.num_moves) == env.NUM_CELLS
    assert int(state.winner) == -1
    assert bool(state.terminated)
    assert not np.asarray(env.legal_action_mask(state)).any()
    before = env.from_moves(moves[:-1])
    assert not bool(before.terminated)
    assert_same_state(env.step(before, int(moves[-1]) - 1), state)


def test_empty_board():
    state = env.init()
    assert env.render(state) == board(
        """
        .......
        .......
        .......
        .......
        .......
        .......
        """
    )
    assert_same_state(state, env.from_moves(""))
    assert int(state.current_player) == 0 and int(state.winner) == -1
    assert not bool(state.terminated)
    assert np.asarray(env.legal_action_mask(state)).all()


@pytest.mark.parametrize(("moves", "loser"), [("111111", 0), ("4444441", 1), ("11111123", 0)])
def test_move_into_full_column_loses(moves, loser):
    state = env.from_moves(moves)
    full = int(moves[0]) - 1
    assert not bool(state.terminated)
    assert not bool(np.asarray(env.legal_action_mask(state))[full])
    assert int(state.current_player) == loser

    after = env.step(state, full)
    assert bool(after.terminated)
    assert int(after.winner) == 1 - loser
    # No stone was placed: the board, the move count and the side to move stay.
    assert env.render(after) == env.render(state)
    for name in ("own_lo", "own_hi", "all_lo", "all_hi", "num_moves"):
        assert int(getattr(after, name)) == int(getattr(state, name)), name
    assert not np.asarray(env.legal_action_mask(after)).any()
    # And the forfeited game is finished: further steps change nothing.
    for action in range(env.NUM_ACTIONS):
        assert_same_state(env.step(after, action), after)


@pytest.mark.parametrize("action", [7, 8, 15, 31, 32, -1])
def test_a_column_off_the_board_is_a_forfeit_not_a_stone(action):
    """Column 7 would name a spacer bit, 8-31 cells of other columns: the mover's three
    in row 0 (columns 5-7) must not become a four, nor a stone float anywhere."""
    state = env.from_moves("516171")
    assert env.render(state) == board(
        """
        .......
        .......
        .......
        o......
        o......
        o...xxx
        """
    )
    after = env.step(state, jnp.int32(action))
    assert bool(after.terminated) and int(after.winner) == 1  # the mover (x) loses
    assert env.render(after) == env.render(state)
    assert int(after.num_moves) == int(state.num_moves)


def test_full_column_golden():
    state = env.from_moves("111111")
    assert env.render(state) == board(
        """
        o......
        x......
        o......
        x......
        o......
        x......
        """
    )
    assert np.asarray(env.legal_action_mask(state)).tolist() == [0, 1, 1, 1, 1, 1, 1]
    after = env.step(state, 0)
    assert (int(after.winner), bool(after.terminated)) == (1, True)


@pytest.mark.parametrize(
    "moves",
    ["1122334", "76655454344", "472424756645422154157737216635626711335331"],
    ids=["won", "won-diagonal", "draw"],
)
def test_step_on_finished_game_is_identity(moves):
    state = env.from_moves(moves)
    assert bool(state.terminated)
    for action in range(env.NUM_ACTIONS):
        assert_same_state(env.step(state, action), state)
        assert_same_state(_step(state, jnp.int32(action)), state)


# --- The 69 lines of four (env.LINES and its masks), and has_four on arbitrary bitboards. ---

# Reading-order steps (top row first, left to right; row 0 is the bottom) of the
# four directions, and how many lines of four fit each on a 6 x 7 board.
LINE_STEPS = {
    "horizontal": (0, 1), "vertical": (-1, 0), "diagonal \\": (-1, 1), "diagonal /": (-1, -1)
}
LINE_COUNTS = {"horizontal": 6 * 4, "vertical": 3 * 7, "diagonal \\": 3 * 4, "diagonal /": 3 * 4}

# A few lines drawn by hand (``x``: the line's cells), top row first.
DRAWN_LINES = [
    """
    .......
    .......
    .......
    .......
    .......
    xxxx...
    """,
    """
    ......x
    ......x
    ......x
    ......x
    .......
    .......
    """,
    """
    .......
    .......
    ...x...
    ..x....
    .x.....
    x......
    """,
    """
    x......
    .x.....
    ..x....
    ...x...
    .......
    .......
    """,
    """
    .......
    ..xxxx.
    .......
    .......
    .......
    .......
    """,
    """
    .......
    ...x...
    ....x..
    .....x.
    ......x
    .......
    """,
]


def _cells_of(picture: str) -> set[tuple[int, int]]:
    """The ``x`` cells of an ASCII board as (row, col), row 0 at the bottom."""
    rows = board(picture).splitlines()
    return {
        (env.NUM_ROWS - 1 - top, col)
        for top, line in enumerate(rows)
        for col, mark in enumerate(line)
        if mark == "x"
    }


def _line_board(i: int) -> env.State:
    """Line ``i`` of ``env.LINES`` as the first player's stones, first player to move."""
    lo, hi = env.LINE_LO[i], env.LINE_HI[i]
    return env.State(
        own_lo=lo, own_hi=hi, all_lo=lo, all_hi=hi, num_moves=np.int32(0),
        winner=np.int32(-1), terminated=np.bool_(False),
    )


def test_lines_are_the_69_lines_of_four_of_the_board():
    assert env.LINES.shape == (env.NUM_LINES, 4, 2) == (69, 4, 2)
    lines = [tuple(map(tuple, line)) for line in env.LINES.tolist()]
    assert len({frozenset(line) for line in lines}) == 69
    directions = []
    for line in lines:
        assert all(0 <= r < env.NUM_ROWS and 0 <= c < env.NUM_COLS for r, c in line), line
        steps = {(r1 - r0, c1 - c0) for (r0, c0), (r1, c1) in zip(line[:-1], line[1:], strict=True)}
        assert len(steps) == 1, line  # four adjacent cells in one direction, in reading order
        (direction,) = [name for name, step in LINE_STEPS.items() if step in steps]
        directions.append(direction)
    # As many as fit in each direction, so these are all of them; direction by
    # direction, each line in reading order of its first cell.
    assert directions == [name for name, count in LINE_COUNTS.items() for _ in range(count)]
    reading = [(env.NUM_ROWS - 1 - r, c) for (r, c), *_ in lines]
    for name in LINE_COUNTS:
        firsts = [at for at, d in zip(reading, directions, strict=True) if d == name]
        assert firsts == sorted(firsts), name


@pytest.mark.parametrize("picture", DRAWN_LINES)
def test_drawn_lines_are_in_the_table_and_its_masks(picture):
    cells = _cells_of(picture)
    (i,) = [i for i, line in enumerate(env.LINES.tolist()) if {tuple(x) for x in line} == cells]
    assert env.render(_line_board(i)) == board(picture)  # the bitboard words
    planes = np.where(env.LINE_PLANES[i], "x", ".")  # observe's layout, row 0 on top
    assert "".join("".join(row) + "\n" for row in planes) == board(picture)


def test_line_masks_agree_with_the_cells():
    lo, hi = _words(env.LINES.tolist())
    np.testing.assert_array_equal(env.LINE_LO, lo)
    np.testing.assert_array_equal(env.LINE_HI, hi)
    assert env.LINE_LO.dtype == env.LINE_HI.dtype == np.uint32
    for i, line in enumerate(env.LINES.tolist()):
        planes = np.zeros((env.NUM_ROWS, env.NUM_COLS), bool)
        for r, c in line:
            planes[env.NUM_ROWS - 1 - r, c] = True
        np.testing.assert_array_equal(env.LINE_PLANES[i], planes)


def _words(cells) -> tuple[np.ndarray, np.ndarray]:
    """[N] lists of (row, col) cells -> ([N] lo, [N] hi) uint32 bitboards."""
    lo = np.zeros(len(cells), np.uint32)
    hi = np.zeros(len(cells), np.uint32)
    for i, group in enumerate(cells):
        for r, c in group:
            if r < 4:
                lo[i] |= np.uint32(1 << (8 * r + c))
            else:
                hi[i] |= np.uint32(1 << (8 * (r - 4) + c))
    return lo, hi


def test_has_four_on_every_line():
    lines = env.LINES.tolist()
    lo, hi = _words(lines)
    assert np.asarray(env.has_four(jnp.asarray(lo), jnp.asarray(hi))).all()
    assert np.asarray(env.has_four(lo, hi)).all()  # numpy works too
    three = [line[:k] + line[k + 1 :] for line in lines for k in range(4)]
    lo, hi = _words(three)
    assert not np.asarray(env.has_four(jnp.asarray(lo), jnp.asarray(hi))).any()


def test_has_four_matches_line_scan_on_random_boards():
    rng = np.random.default_rng(11)
    cells = rng.random((4000, env.NUM_ROWS, env.NUM_COLS)) < rng.uniform(0.2, 0.6, (4000, 1, 1))
    expected = np.zeros(4000, bool)
    for line in env.LINES:  # win detection fires exactly when a line is full
        expected |= np.all([cells[:, r, c] for r, c in line], axis=0)
    lo, hi = _words([list(zip(*np.nonzero(board), strict=True)) for board in cells])
    assert 0.2 < expected.mean() < 0.9
    np.testing.assert_array_equal(env.has_four(jnp.asarray(lo), jnp.asarray(hi)), expected)
    np.testing.assert_array_equal(env.has_four(lo, hi), expected)


# --- from_moves errors. ---


@pytest.mark.parametrize(
    ("moves", "message"),
    [
        ("0", r"move 1 of '0': '0' is not a column 1-7"),
        ("448", r"move 3 of '448': '8' is not a column 1-7"),
        ("4a", r"'a' is not a column 1-7"),
        ("4 4", r"' ' is not a column 1-7"),
        ("1111111", r"move 7 of '1111111': column 1 is full"),
        ("12121217", r"move 8 of '12121217': the game already ended \(player 0 won\)"),
        ("712121212", r"move 9 of '712121212': the game already ended \(player 1 won\)"),
    ],
)
def test_from_moves_errors(moves, message):
    with pytest.raises(ValueError, match=message):
        env.from_moves(moves)


def test_from_moves_rejects_non_strings():
    with pytest.raises(ValueError, match="must be a string"):
        env.from_moves([4, 4])  # type: ignore[arg-type]


def test_from_moves_full_board_then_more_moves():
    draw = "472424756645422154157737216635626711335331"
    with pytest.raises(ValueError, match="column 4 is full"):
        env.from_moves(draw + "4")


def test_render_rejects_batches():
    with pytest.raises(ValueError, match="one game"):
        env.render(env.init_batch(2))


# --- OpenSpiel cross-check. ---


def _play_random_batch(num_games: int, seed: int):
    """Random legal play of ``num_games`` games at once with the jitted batched env.

    Returns:
        actions: [T, B] int, -1 once a game is over; T = 42.
        states: T + 1 numpy snapshots of the batched state (before each move, and the end).
        masks: [T + 1, B, A] bool legal moves of each snapshot.
        observations: [T + 1, B, H, W, 2] float32.
    """
    rng = np.random.default_rng(seed)
    state = env.init_batch(num_games)
    actions, states, masks, observations = [], [], [], []
    for _ in range(env.NUM_CELLS):
        mask = np.asarray(_mask(state))
        states.append(to_numpy(state))
        masks.append(mask)
        observations.append(np.asarray(_observe(state)))
        scores = rng.random(mask.shape) + mask  # a uniform legal move where one exists
        action = np.where(mask.any(-1), scores.argmax(-1), -1)
        actions.append(action)
        state = _step(state, jnp.asarray(np.maximum(action, 0), jnp.int32))
    states.append(to_numpy(state))
    masks.append(np.asarray(_mask(state)))
    observations.append(np.asarray(_observe(state)))
    return np.stack(actions), states, np.stack(masks), np.stack(observations)


def test_matches_open_spiel_on_random_games():
    pyspiel = pytest.importorskip("pyspiel")
    game = pyspiel.load_game("connect_four")
    num_games = 2000
    actions, states, masks, observations = _play_random_batch(num_games, seed=20240501)
    lengths = (actions >= 0).sum(0)
    assert lengths.min() >= 7 and lengths.max() == env.NUM_CELLS  # includes full boards

    outcomes = {"x": 0, "o": 0, "draw": 0}
    for b in range(num_games):
        spiel = game.new_initial_state()
        for t in range(env.NUM_CELLS + 1):
            ours = index(states[t], b)
            where = f"game {b} after {t} moves"
            assert env.render(ours) == str(spiel), where
            assert np.flatnonzero(masks[t, b]).tolist() == sorted(spiel.legal_actions()), where
            assert bool(ours.terminated) == spiel.is_terminal(), where
            # Planes from the mover's side vs OpenSpiel's [x, o, empty] planes (row 0 bottom).
            planes = np.asarray(spiel.observation_tensor(0)).reshape(3, env.NUM_ROWS, env.NUM_COLS)
            mover = t % 2
            np.testing.assert_array_equal(observations[t, b, ..., 0], planes[mover][::-1], where)
            np.testing.assert_array_equal(
                observations[t, b, ..., 1], planes[1 - mover][::-1], where
            )
            if spiel.is_terminal():
                returns = spiel.returns()
                expected = 0 if returns[0] > 0 else 1 if returns[1] > 0 else -1
                assert int(ours.winner) == expected, where
                assert lengths[b] == t, where
                assert t == env.NUM_CELLS or actions[t, b] == -1, where
                outcomes[{0: "x", 1: "o", -1: "draw"}[expected]] += 1
                break
            assert int(ours.winner) == -1, where
            spiel.apply_action(int(actions[t, b]))
        else:
            pytest.fail(f"game {b} did not end")
    assert min(outcomes.values()) > 0, outcomes  # both players won some, some drew


def test_from_moves_matches_batched_play():
    actions, states, _, _ = _play_random_batch(200, seed=7)
    for b in range(200):
        moves = "".join(str(a + 1) for a in actions[:, b] if a >= 0)
        assert_same_state(env.from_moves(moves), index(states[-1], b))
        cut = len(moves) // 2
        assert_same_state(env.from_moves(moves[:cut]), index(states[cut], b))


# --- Pons solver positions. ---


def _md5sums() -> dict[str, str]:
    entries = (PONS_DIR / "MD5SUMS").read_text().split("\n")
    return {name: digest for digest, name in (line.split() for line in entries if line.strip())}


def test_pons_md5sums():
    sums = _md5sums()
    assert set(sums) >= {"L1_R1.jsonl", "L1_R2.jsonl", "L2_R1.jsonl", "L2_R2.jsonl", "L3_R1.jsonl"}
    for name, digest in sums.items():
        assert hashlib.md5((PONS_DIR / name).read_bytes()).hexdigest() == digest, name


def test_pons_legal_moves_match_move_scores():
    files = sorted(PONS_DIR.glob("*.jsonl"))
    assert len(files) == 6
    states, expected, count = [], [], 0
    for path in files:
        for line in path.read_text().splitlines():
            record = json.loads(line)
            state = env.from_moves(record["moves"])
            assert not bool(state.terminated), record["moves"]
            assert int(state.num_moves) == len(record["moves"])
            states.append(state)
            expected.append([score is not None for score in record["move_scores"]])
            count += 1
    assert count >= 5000
    mask = np.asarray(_mask(env.stack(states)))
    mismatched = np.flatnonzero((mask != np.asarray(expected)).any(-1))
    assert mismatched.size == 0, f"{mismatched.size} positions differ, first {mismatched[:5]}"


# --- Batch shapes, vmap and jit. ---


@pytest.fixture(scope="module")
def mixed_batch():
    """[G] varied positions (live, won, drawn, forfeited, full columns) and each action.

    Returns:
        (states, actions): states with batch shape [G * A], actions [G * A] int32,
        every position paired with every column.
    """
    moves = random_move_strings(60, seed=3) + [
        "111111",
        "4444441",
        "1122334",
        "472424756645422154157737216635626711335331",
        "63462235736444637412271724576251163175531",
    ]
    positions = [env.from_moves(m) for m in moves]
    positions.append(env.step(env.from_moves("111111"), 0))  # forfeited
    batch = env.stack(positions)
    num = len(positions)
    states = jax.tree.map(lambda x: jnp.repeat(x, env.NUM_ACTIONS), batch)
    actions = jnp.tile(jnp.arange(env.NUM_ACTIONS, dtype=jnp.int32), num)
    return states, actions


def test_native_vmap_single_and_jit_agree(mixed_batch):
    states, actions = mixed_batch
    native = env.step(states, actions)
    assert_same_state(jax.vmap(env.step)(states, actions), native)
    assert_same_state(_step(states, actions), native)
    np.testing.assert_array_equal(
        jax.vmap(env.legal_action_mask)(states), env.legal_action_mask(states)
    )
    np.testing.assert_array_equal(_mask(states), env.legal_action_mask(states))
    np.testing.assert_array_equal(jax.vmap(env.observe)(states), env.observe(states))
    np.testing.assert_array_equal(_observe(states), env.observe(states))

    native_mask = np.asarray(env.legal_action_mask(states))
    native_obs = np.asarray(env.observe(states))
    size = actions.shape[0]
    for n, i in enumerate(np.random.default_rng(0).choice(size, 40, replace=False)):
        single = index(states, i)
        assert_same_state(_step(single, actions[i]), index(native, i))
        np.testing.assert_array_equal(_mask(single), native_mask[i])
        np.testing.assert_array_equal(_observe(single), native_obs[i])
        if n < 8:  # eager (no jit) single-game calls, a Python int action included
            assert_same_state(env.step(single, int(actions[i])), index(native, i))
            np.testing.assert_array_equal(env.legal_action_mask(single), native_mask[i])
            np.testing.assert_array_equal(env.observe(single), native_obs[i])


def test_two_dimensional_batch(mixed_batch):
    states, actions = mixed_batch
    rows = actions.shape[0] // env.NUM_ACTIONS
    shaped = jax.tree.map(lambda x: x.reshape(rows, env.NUM_ACTIONS), states)
    out = env.step(shaped, actions.reshape(rows, env.NUM_ACTIONS))
    flat = jax.tree.map(lambda x: x.reshape(-1), out)
    assert_same_state(flat, env.step(states, actions))
    assert env.legal_action_mask(shaped).shape == (rows, env.NUM_ACTIONS, env.NUM_ACTIONS)
    assert env.observe(shaped).shape == (rows, env.NUM_ACTIONS, env.NUM_ROWS, env.NUM_COLS, 2)
    np.testing.assert_array_equal(
        env.observe(shaped).reshape(-1, env.NUM_ROWS, env.NUM_COLS, 2), env.observe(states)
    )


def test_shapes_and_dtypes():
    state = env.init_batch(5)
    for name in FIELDS:
        assert getattr(state, name).shape == (5,), name
    assert state.own_lo.dtype == jnp.uint32 and state.num_moves.dtype == jnp.int32
    assert state.winner.dtype == jnp.int32 and state.terminated.dtype == jnp.bool_
    after = env.step(state, jnp.zeros(5, jnp.int32))
    for name in FIELDS:
        assert getattr(after, name).dtype == getattr(state, name).dtype, name
    assert env.legal_action_mask(state).dtype == jnp.bool_
    assert env.observe(state).dtype == jnp.float32
    assert_same_state(state, env.stack([env.init()] * 5))


def test_step_accepts_any_integer_action_dtype():
    state = env.init_batch(3)
    expected = env.step(state, jnp.array([0, 3, 6], jnp.int32))
    for dtype in (jnp.uint8, jnp.int8, jnp.uint32):
        assert_same_state(env.step(state, jnp.array([0, 3, 6], dtype)), expected)


# --- Properties. ---


@PROPERTY
@given(games())
def test_counts_and_outcome_match_reference(moves):
    ref = Reference()
    for c in moves:
        ref.play(int(c) - 1)
    state = env.from_moves(moves)
    n = len(moves)
    assert int(state.num_moves) == n
    assert int(state.current_player) == n % 2
    obs = np.asarray(_observe(state))
    assert obs[..., 0].sum() == n // 2  # the mover has placed one stone fewer, or as many
    assert obs[..., 1].sum() == (n + 1) // 2
    assert not (obs[..., 0] * obs[..., 1]).any()
    assert env.render(state) == ref.render()
    assert int(state.winner) == ref.winner
    assert bool(state.terminated) == ref.over
    legal = np.asarray(_mask(state))
    assert np.flatnonzero(legal).tolist() == ref.legal()


@PROPERTY
@given(games())
def test_stepping_matches_from_moves(moves):
    state = env.init()
    for i, c in enumerate(moves):
        state = _step(state, jnp.int32(int(c) - 1))
        if i in (0, len(moves) // 2):
            assert_same_state(state, env.from_moves(moves[: i + 1]))
    assert_same_state(state, env.from_moves(moves))


@PROPERTY
@given(games(), st.integers(0, env.NUM_ACTIONS - 1))
def test_mirror_symmetry(moves, action):
    state = env.from_moves(moves)
    mirrored = env.from_moves(mirror_moves(moves))
    np.testing.assert_array_equal(_observe(mirrored), env.mirror_observation(_observe(state)))
    np.testing.assert_array_equal(_mask(mirrored), env.mirror_policy(_mask(state)))
    assert int(mirrored.winner) == int(state.winner)
    assert bool(mirrored.terminated) == bool(state.terminated)
    # Stepping commutes with the mirror, full columns and finished games included.
    after = _step(state, jnp.int32(action))
    after_mirrored = _step(mirrored, env.mirror_action(jnp.int32(action)))
    np.testing.assert_array_equal(_observe(after_mirrored), env.mirror_observation(_observe(after)))
    assert int(after_mirrored.winner) == int(after.winner)
    assert bool(after_mirrored.terminated) == bool(after.terminated)


@PROPERTY
@given(
    st.lists(
        st.lists(st.floats(-1e6, 1e6), min_size=env.NUM_ACTIONS, max_size=env.NUM_ACTIONS),
        min_size=1,
        max_size=4,
    )
)
def test_mirror_policy_and_action_are_involutions(rows):
    policy = jnp.asarray(rows, jnp.float32)  # [B, A]
    np.testing.assert_array_equal(env.mirror_policy(env.mirror_policy(policy)), policy)
    actions = jnp.arange(env.NUM_ACTIONS)
    np.testing.assert_array_equal(env.mirror_action(env.mirror_action(actions)), actions)
    # The mirrored policy puts on column mirror_action(a) what the policy put on a.
    np.testing.assert_array_equal(env.mirror_policy(policy)[:, env.mirror_action(actions)], policy)


def test_mirror_observation_is_an_involution():
    obs = env.observe(env.from_moves("1122334"))
    np.testing.assert_array_equal(env.mirror_observation(env.mirror_observation(obs)), obs)
    assert not np.array_equal(env.mirror_observation(obs), obs)


def test_result_value_maps_the_winner_to_a_value_for_each_player():
    winner = jnp.array([0, 0, 1, 1, -1, -1], jnp.int32)
    player = jnp.array([0, 1, 0, 1, 0, 1], jnp.int32)
    values = env.result_value(winner, player)
    assert values.dtype == jnp.float32
    np.testing.assert_array_equal(values, [1.0, -1.0, -1.0, 1.0, 0.0, 0.0])
    # Broadcasting: one player against a batch of winners.
    np.testing.assert_array_equal(env.result_value(winner[:3], 1), [-1.0, -1.0, 1.0])


def test_bad_arguments_are_named():
    """A float action played its integer part (2.9: column index 2); a batch size of
    -1 was a TypeError from inside JAX, 0 an empty batch; stack([]) a TypeError about
    map()."""
    state = env.init()
    with pytest.raises(TypeError, match="action: integer columns 0..6, got dtype float"):
        env.step(state, 2.9)
    with pytest.raises(TypeError, match="got dtype bool"):
        env.step(state, True)
    assert int(env.step(state, np.int64(2)).num_moves) == 1
    for bad in (0, -1, 2.0, True):
        with pytest.raises(ValueError, match="batch_size: got .*, allowed: a whole number >= 1"):
            env.init_batch(bad)
    assert env.init_batch(np.int64(3)).num_moves.shape == (3,)
    with pytest.raises(ValueError, match="stack: needs at least one state"):
        env.stack([])


# --- Threat planes ---

_threats = jax.jit(env.threat_planes)


def threats_drawn(moves: str) -> tuple[str, str]:
    """The mover's and the opponent's threat planes of ``from_moves(moves)``, drawn
    as ``render`` draws a board (``#`` a threat)."""
    planes = np.asarray(_threats(_observe(env.from_moves(moves))))
    return tuple(
        "".join("".join("#" if v else "." for v in row) + "\n" for row in planes[..., side])
        for side in (0, 1))


def test_threat_planes_mark_the_cell_that_completes_three():
    # x (to move) has three on the bottom row, o three on the row above.
    assert env.render(env.from_moves("112233")) == board("""
        .......
        .......
        .......
        .......
        ooo....
        xxx....""")
    mover, opponent = threats_drawn("112233")
    assert mover == board("""
        .......
        .......
        .......
        .......
        .......
        ...#...""")
    # Not playable yet (the cell below is empty): still a threat.
    assert opponent == board("""
        .......
        .......
        .......
        .......
        ...#...
        .......""")


def test_a_gap_inside_a_line_is_a_threat_and_a_blocked_line_is_none():
    # o to move: its three in the first column are capped by x; x has x x . x below.
    assert env.render(env.from_moves("1121411")) == board("""
        .......
        x......
        o......
        o......
        o......
        xx.x...""")
    mover, opponent = threats_drawn("1121411")
    assert mover == board("""
        .......
        .......
        .......
        .......
        .......
        .......""")
    assert opponent == board("""
        .......
        .......
        .......
        .......
        .......
        ..#....""")


def _reference_threats(moves: str) -> np.ndarray:
    """[H, W, 2] bool by brute force: a stone of each side put on each empty cell,
    four in a row looked for through that cell in the four directions."""
    ref = Reference()
    for c in moves:
        ref.play(int(c) - 1)
    mover = len(moves) % 2
    out = np.zeros((env.NUM_ROWS, env.NUM_COLS, 2), bool)
    for row in range(env.NUM_ROWS):
        for col in range(env.NUM_COLS):
            if ref.grid[row][col] is not None:
                continue
            for plane, side in ((0, mover), (1, 1 - mover)):
                for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
                    run = 1
                    for sign in (1, -1):
                        r, c = row + sign * dr, col + sign * dc
                        while (0 <= r < env.NUM_ROWS and 0 <= c < env.NUM_COLS
                               and ref.grid[r][c] == side):
                            run, r, c = run + 1, r + sign * dr, c + sign * dc
                    out[(env.NUM_ROWS - 1) - row, col, plane] |= run >= 4
    return out


@PROPERTY
@given(games())
def test_threat_planes_match_a_brute_force_search(moves):
    planes = np.asarray(_threats(_observe(env.from_moves(moves))))
    assert planes.dtype == np.float32
    np.testing.assert_array_equal(planes.astype(bool), _reference_threats(moves))
    # The mirror's threats are the threats' mirror.
    mirrored = np.asarray(_threats(env.mirror_observation(_observe(env.from_moves(moves)))))
    np.testing.assert_array_equal(mirrored, env.mirror_observation(planes))


def test_threat_planes_keep_any_batch_shape():
    obs = env.observe(env.stack([env.from_moves(m) for m in ("112233", "1121411", "")]))
    planes = env.threat_planes(obs.reshape(3, 1, *obs.shape[1:]))
    assert planes.shape == (3, 1, env.NUM_ROWS, env.NUM_COLS, 2)
    assert planes[1, 0, -1, 2, 1] == 1 and planes[1].sum() == 1 and planes[2].sum() == 0
