"""Batched Connect Four as pure JAX functions over a small pytree state.

Shape glossary used across c4jax: B batch of games, A = 7 actions (columns),
H = 6 rows, W = 7 columns, T time, N search nodes, L = 69 lines of four cells.

Board layout. A bitboard of one set of stones is two uint32 words with an
8-bit stride per row: bit ``8 * r + c`` holds row ``r`` (0 = bottom) and column
``c`` (0 = left). Bit 7 of every byte is an always-empty sentinel, so shifts by
1, 7, 8 and 9 never carry a line from one row into the next. ``lo`` holds rows
0-3 and ``hi`` rows 4-5. Everything stays 32-bit (TPUs have no 64-bit ints).

Every function here is elementwise over leading batch dimensions: ``step``
takes a state of any batch shape ``S`` and actions of shape ``S``; it also
works under ``jax.vmap``. ``legal_action_mask`` and ``observe`` append their
trailing dimensions.

Rules at the edges (the same as pgx):
* A move into a full column of a live game ends it: the mover loses.
* ``step`` on a finished game returns the state unchanged.
* ``legal_action_mask`` of a finished game is all False.
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

NUM_ACTIONS = 7  # A
NUM_ROWS = 6  # H
NUM_COLS = 7  # W
NUM_CELLS = NUM_ROWS * NUM_COLS

_COLUMN_BITS_LO = 0x01010101  # one bit per row of rows 0-3, column 0
_COLUMN_BITS_HI = 0x0101  # rows 4-5, column 0
_TOP_ROW_SHIFT = 8  # row 5 lives in bits 8..14 of ``hi``

# Tables for ``observe``: observation row 0 is the top row, as ``render`` draws.
_OBS_ROW = (NUM_ROWS - 1) - np.arange(NUM_ROWS)[:, None]  # [H, 1] board row
_OBS_SHIFT = (8 * (_OBS_ROW % 4) + np.arange(NUM_COLS)[None, :]).astype(np.uint32)  # [H, W]
_OBS_IN_HI = np.broadcast_to(_OBS_ROW >= 4, (NUM_ROWS, NUM_COLS))  # [H, W] bool
_ACTIONS = np.arange(NUM_ACTIONS, dtype=np.uint32)  # [A]


# --- The 69 lines of four cells where four in a row can be made, built once. ---


def _lines() -> np.ndarray:
    r"""[L, 4, 2] int32 (row, col) cells of every line of four, row 0 at the bottom.

    Direction by direction: horizontal, vertical, then the diagonals ``\`` and
    ``/`` as ``render`` draws them; within one direction the lines, and within
    one line its cells, come in reading order (top row first, left to right).
    Grogu's features (``dqn.qnet``), and so its trained weights, use this order.
    """
    lines = []
    # (d_row, d_col) with rows counted from the top: right, down, down-right, down-left.
    for d_top, d_col in ((0, 1), (1, 0), (1, 1), (1, -1)):
        for top in range(NUM_ROWS):
            for col in range(NUM_COLS):
                cells = [(top + i * d_top, col + i * d_col) for i in range(4)]
                if all(0 <= t < NUM_ROWS and 0 <= c < NUM_COLS for t, c in cells):
                    lines.append([((NUM_ROWS - 1) - t, c) for t, c in cells])
    return np.array(lines, dtype=np.int32)


def _line_words(lines: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """[L, 4, 2] cells -> ([L] lo, [L] hi) uint32 bitboards of each line."""
    shifts = (8 * (lines[..., 0] % 4) + lines[..., 1]).astype(np.uint32)  # [L, 4]
    bits = np.left_shift(np.uint32(1), shifts)
    in_hi = lines[..., 0] >= 4  # rows 4-5
    lo = np.where(in_hi, 0, bits).sum(axis=-1)
    hi = np.where(in_hi, bits, 0).sum(axis=-1)
    return lo.astype(np.uint32), hi.astype(np.uint32)


def _line_planes(lines: np.ndarray) -> np.ndarray:
    """[L, 4, 2] cells -> [L, H, W] bool masks laid out as ``observe``'s planes (row 0 on top)."""
    planes = np.zeros((len(lines), NUM_ROWS, NUM_COLS), dtype=bool)
    planes[np.arange(len(lines))[:, None], (NUM_ROWS - 1) - lines[..., 0], lines[..., 1]] = True
    return planes


LINES = _lines()  # [L = 69, 4, 2] int32 (row, col), row 0 at the bottom
NUM_LINES = LINES.shape[0]  # L = 69: 24 horizontal, 21 vertical, 12 + 12 diagonal
LINE_LO, LINE_HI = _line_words(LINES)  # [L] uint32 each: every line as a bitboard
LINE_PLANES = _line_planes(LINES)  # [L, H, W] bool: every line over observe's planes


@struct.dataclass
class State:
    """A Connect Four position; every field has the batch shape S (``[]`` for one game).

    ``own_*`` are the stones of the player to move, ``all_*`` all stones.
    """

    own_lo: jax.Array  # [S] uint32, rows 0-3
    own_hi: jax.Array  # [S] uint32, rows 4-5
    all_lo: jax.Array  # [S] uint32
    all_hi: jax.Array  # [S] uint32
    num_moves: jax.Array  # [S] int32, stones on the board
    winner: jax.Array  # [S] int32: 0 first player, 1 second player, -1 none or draw
    terminated: jax.Array  # [S] bool

    @property
    def current_player(self) -> jax.Array:
        """[S] int32: 0 if the player who moved first is to move, else 1."""
        return self.num_moves % 2


def init() -> State:
    """The empty board, a single game (vmap or use ``init_batch`` for B)."""
    zero = jnp.uint32(0)
    return State(
        own_lo=zero,
        own_hi=zero,
        all_lo=zero,
        all_hi=zero,
        num_moves=jnp.int32(0),
        winner=jnp.int32(-1),
        terminated=jnp.bool_(False),
    )


def init_batch(batch_size: int) -> State:
    """B empty boards: every field has shape ``[B]``.

    Raises:
        ValueError: ``batch_size`` is not a whole number >= 1.
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int | np.integer) or (
            batch_size < 1):
        raise ValueError(f"batch_size: got {batch_size!r}, allowed: a whole number >= 1")
    return jax.tree.map(lambda x: jnp.broadcast_to(x, (batch_size,)), init())


def result_value(winner: jax.Array, player: jax.Array) -> jax.Array:
    """The game's result for ``player``: the one winner -> value mapping of c4jax.

    Args:
        winner: [S] int32 ``State.winner`` (0 or 1; -1 none or a draw).
        player: [S] int32 player, 0 (moved first) or 1 (broadcasts against ``winner``).

    Returns:
        [S] float32: +1 if ``player`` won, 0 for no winner (a draw, or a game not
        over), -1 otherwise (the other player won).
    """
    return jnp.where(winner == player, 1.0, jnp.where(winner == -1, 0.0, -1.0)).astype(
        jnp.float32
    )


def has_four(lo, hi):
    """[S] bool: whether the bitboard (lo, hi) contains four in a row.

    Works on jax arrays and on numpy uint32 alike (operators only).
    """
    # Horizontal lines stay inside one word; the sentinel bit 7 of every byte
    # stops them wrapping into the next row.
    pairs = lo & (lo >> 1)
    found = pairs & (pairs >> 2)
    pairs = hi & (hi >> 1)
    found = found | (pairs & (pairs >> 2))
    # Vertical (8) and diagonal (7, 9) lines span four rows, so they start in
    # rows 0-2, all in ``lo``; their upper stones are shifted down across the
    # word boundary, bringing rows 4-5 in from ``hi``.
    for s in (7, 8, 9):
        pairs_lo = lo & ((lo >> s) | (hi << (32 - s)))  # bit b: stones at b and b + s
        pairs_hi = hi & (hi >> s)
        found = found | (pairs_lo & ((pairs_lo >> (2 * s)) | (pairs_hi << (32 - 2 * s))))
    return found != 0


def _drop_bits(all_lo, all_hi, column):
    """Bit of the lowest empty cell of ``column`` as (lo, hi); both 0 if full or if
    ``column`` is not one of the board's (a uint32 of 7 or more)."""
    # Row 0 of the column; none for a column off the board, which would otherwise
    # name a spacer bit (7) or a cell of another column (8-31).
    bottom = jnp.where(column < NUM_ACTIONS, jnp.left_shift(jnp.uint32(1), column),
                       jnp.uint32(0))
    # A column's stones are a run from the bottom: sum(2**(8 * i)) for i < k,
    # shifted by the column. Times 255 plus ``bottom`` gives the cell above the
    # run, 2**(8 * k) shifted, which overflows to 0 once rows 0-3 are full.
    free_lo = (all_lo & (_COLUMN_BITS_LO * bottom)) * 255 + bottom
    column_hi = _COLUMN_BITS_HI * bottom
    free_hi = ((all_hi & column_hi) * 255 + bottom) & column_hi  # 0 once row 5 is full
    return free_lo, jnp.where(free_lo == 0, free_hi, jnp.uint32(0))


def step(state: State, action: jax.Array) -> State:
    """Drops a stone of the player to move into column ``action`` (0-based).

    Args:
        state: positions of batch shape S.
        action: [S] integer columns in 0..6.

    Returns:
        The next positions. A full column, or one off the board (an action
        outside 0..6), ends a live game with a loss for the mover (no stone is
        placed); a finished game is returned unchanged.
    """
    # Every output field is an elementwise function of the inputs that XLA
    # fuses on its own (on CPU it recomputes shared terms inside each field's
    # loop), so the update is written with as few operations as possible.
    action = jnp.asarray(action)
    if not jnp.issubdtype(action.dtype, jnp.integer):  # 2.9 played column index 2
        raise TypeError(f"action: integer columns 0..6, got dtype {action.dtype}")
    column = action.astype(jnp.uint32)
    live = ~state.terminated
    bit_lo, bit_hi = _drop_bits(state.all_lo, state.all_hi, column)
    bit_lo = jnp.where(live, bit_lo, jnp.uint32(0))  # a finished game gets no stone
    bit_hi = jnp.where(live, bit_hi, jnp.uint32(0))
    placed = (bit_lo | bit_hi) != 0
    forfeit = live & ~placed  # a live game, a full column

    mover_lo = state.own_lo | bit_lo
    mover_hi = state.own_hi | bit_hi
    all_lo = state.all_lo | bit_lo
    all_hi = state.all_hi | bit_hi
    num_moves = state.num_moves + placed.astype(jnp.int32)
    won = placed & has_four(mover_lo, mover_hi)
    player = state.num_moves & 1  # current_player, for num_moves >= 0
    winner = jnp.where(won, player, jnp.where(forfeit, 1 - player, state.winner))
    return State(
        own_lo=jnp.where(placed, all_lo ^ mover_lo, state.own_lo),  # the opponent moves next
        own_hi=jnp.where(placed, all_hi ^ mover_hi, state.own_hi),
        all_lo=all_lo,
        all_hi=all_hi,
        num_moves=num_moves,
        winner=winner.astype(jnp.int32),
        terminated=state.terminated | won | forfeit | (num_moves == NUM_CELLS),
    )


def legal_action_mask(state: State) -> jax.Array:
    """[S, A] bool: columns that are not full, all False once the game is over."""
    open_columns = ~(state.all_hi >> _TOP_ROW_SHIFT)  # [S] bit c set if column c open
    mask = ((open_columns[..., None] >> _ACTIONS) & 1) == 1
    return mask & ~state.terminated[..., None]


def observe(state: State) -> jax.Array:
    """[S, H, W, 2] float32 planes from the side of the player to move.

    Plane 0 holds the mover's stones, plane 1 the opponent's; row 0 is the top.
    """
    return stone_planes(state.own_lo, state.own_hi, state.all_lo, state.all_hi)


def stone_planes(own_lo, own_hi, all_lo, all_hi) -> jax.Array:
    """[S, H, W, 2] float32 planes of a board given as ``State``'s words ([S]
    uint32 each): plane 0 the ``own`` stones, plane 1 the others."""

    def planes(lo, hi):
        word = jnp.where(_OBS_IN_HI, hi[..., None, None], lo[..., None, None])
        return (word >> _OBS_SHIFT) & 1

    own = planes(own_lo, own_hi)
    opp = planes(own_lo ^ all_lo, own_hi ^ all_hi)
    return jnp.stack([own, opp], axis=-1).astype(jnp.float32)


def threat_planes(obs: jax.Array) -> jax.Array:
    """[..., H, W, 2] -> [..., H, W, 2] float32: the empty cells where a stone would
    complete a line of four, for the mover (plane 0) and the opponent (plane 1).

    ``obs`` holds ``observe``'s planes (mover's stones, opponent's). A cell
    counts whether or not it can be played now (the stones below it may be
    missing): these are Connect Four's threats, whose rows (odd or even)
    decide most games. A line counts for a side when it holds three of that
    side's stones; its fourth cell, if empty, is then a threat.
    """
    lines = jnp.asarray(LINE_PLANES.reshape(NUM_LINES, NUM_CELLS), jnp.float32)  # [L, HW]
    cells = obs.reshape(*obs.shape[:-3], NUM_CELLS, 2).astype(jnp.float32)  # [..., HW, 2]
    counts = jnp.einsum("...pc,lp->...lc", cells, lines)  # [..., L, 2] stones a line holds
    three = (counts == 3).astype(jnp.float32)  # [..., L, 2]
    covered = jnp.einsum("...lc,lp->...pc", three, lines) > 0  # [..., HW, 2]
    empty = (cells.sum(axis=-1) == 0)[..., None]  # [..., HW, 1]
    return (covered & empty).astype(jnp.float32).reshape(obs.shape)


# --- The board's one symmetry: the left-right mirror. ---


def mirror_observation(obs: jax.Array) -> jax.Array:
    """[..., H, W, C] -> the same board reflected left to right."""
    return jnp.flip(obs, axis=-2)


def mirror_policy(policy: jax.Array) -> jax.Array:
    """[..., A] -> probabilities (or logits, masks) of the mirrored board."""
    return jnp.flip(policy, axis=-1)


def mirror_action(action: jax.Array) -> jax.Array:
    """[S] column -> the same column in the mirrored board."""
    return (NUM_ACTIONS - 1) - action


# --- Host-side helpers (plain Python, not jittable). ---


def _as_int(x) -> int:
    return int(np.asarray(x))


def from_moves(moves: str) -> State:
    """Builds the position after a Pons-style move string, e.g. ``"4453"``.

    Args:
        moves: digits 1-7 (column, 1 = left), first player first; may be empty.

    Returns:
        A single-game ``State``.

    Raises:
        ValueError: a character that is not a digit 1-7, a move into a full
            column, or a move after the game has ended.
    """
    if not isinstance(moves, str):
        raise ValueError(f"moves must be a string of digits 1-7, got {type(moves).__name__}")
    heights = [0] * NUM_COLS
    boards = [[np.uint32(0), np.uint32(0)], [np.uint32(0), np.uint32(0)]]  # per player
    winner = -1
    for i, char in enumerate(moves):
        where = f"move {i + 1} of {moves!r}"
        if char not in "1234567":
            raise ValueError(f"{where}: {char!r} is not a column 1-7")
        if winner != -1:
            raise ValueError(f"{where}: the game already ended (player {winner} won)")
        col = int(char) - 1
        row = heights[col]
        if row == NUM_ROWS:
            raise ValueError(f"{where}: column {char} is full")
        heights[col] += 1
        word = 1 if row >= 4 else 0
        player = i % 2
        boards[player][word] |= np.uint32(1 << (8 * (row % 4) + col))
        if bool(has_four(*boards[player])):
            winner = player
    num_moves = len(moves)
    mover = num_moves % 2
    all_lo = boards[0][0] | boards[1][0]
    all_hi = boards[0][1] | boards[1][1]
    state = State(
        own_lo=np.uint32(boards[mover][0]),
        own_hi=np.uint32(boards[mover][1]),
        all_lo=np.uint32(all_lo),
        all_hi=np.uint32(all_hi),
        num_moves=np.int32(num_moves),
        winner=np.int32(winner),
        terminated=np.bool_(winner != -1 or num_moves == NUM_CELLS),
    )
    return jax.device_put(state)  # one transfer of the whole pytree: jax arrays, same dtypes


def stack(states: Sequence[State]) -> State:
    """Stacks single-game states into one batched state of shape ``[B]``.

    Raises:
        ValueError: ``states`` is empty.
    """
    if len(states) == 0:
        raise ValueError("stack: needs at least one state")
    leaves = jax.tree.leaves(states)
    if any(isinstance(x, jax.core.Tracer) for x in leaves):
        return jax.tree.map(lambda *xs: jnp.stack(xs), *states)
    # Concrete values: stacking on the host is far cheaper than B device ops per field.
    return jax.device_put(jax.tree.map(lambda *xs: np.stack([np.asarray(x) for x in xs]), *states))


def render(state: State) -> str:
    """ASCII board of one game, top row first: ``x`` first player, ``o`` second.

    Six lines of seven characters, each ending in a newline (OpenSpiel's layout).
    """
    if np.ndim(state.num_moves) != 0:
        raise ValueError("render draws one game; index the batch first")
    own = (_as_int(state.own_lo), _as_int(state.own_hi))
    every = (_as_int(state.all_lo), _as_int(state.all_hi))
    mover = _as_int(state.num_moves) % 2
    marks = ("x", "o") if mover == 0 else ("o", "x")  # (player to move, other)
    lines = []
    for row in reversed(range(NUM_ROWS)):
        word, shift = (1, 8 * (row - 4)) if row >= 4 else (0, 8 * row)
        line = ""
        for col in range(NUM_COLS):
            bit = 1 << (shift + col)
            if own[word] & bit:
                line += marks[0]
            elif every[word] & bit:
                line += marks[1]
            else:
                line += "."
        lines.append(line + "\n")
    return "".join(lines)
