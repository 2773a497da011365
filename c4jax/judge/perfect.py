"""The perfect player: exact move scores from the ``bitbully`` solver.

``bitbully`` (PyPI; a C++ MTD(f) solver whose wheel brings opening books) is an
optional extra, ``pip install 'c4jax[solver]'`` (included in ``[dev]``). It
scores any position exactly, in Pons' convention: positive when the player to
move wins, the larger the sooner; 0 for a draw; negative when they lose.

* ``move_scores(state)``: [B, A] exact scores of every legal move.
* ``make_perfect_agent()``: a ``protocol.HostAgent`` that plays a best move,
  uniformly at random among equally scored ones. It never makes a mistake
  in the solver's sense (it never turns a win into a draw or loss, nor a draw
  into a loss) and, among winning moves, wins as fast as possible.
* ``MoveJudge``: an arena observer that collects one agent's moves in real
  games and judges each with the exact scores (the mistake rate on the
  positions an agent actually meets, not only on the fixed Pons sets).

Nothing is imported or loaded until first use; without the extra, both raise
``MissingSolverError`` saying how to install it.

Shapes: B batch of positions, A = 7 actions, H x W = 6 x 7 board.
"""

from __future__ import annotations

import functools
import itertools

import jax
import numpy as np

from c4jax import env
from c4jax.judge import solver
from c4jax.judge.protocol import HostAgent

INSTALL_HINT = "pip install 'c4jax[solver]'  (or: pip install bitbully)"
ILLEGAL = np.iinfo(np.int32).min  # score of a full column in ``move_scores``


class MissingSolverError(ValueError):
    """The optional ``bitbully`` solver is not installed."""


@functools.cache
def _solver():
    """The one ``bitbully.BitBully`` instance, with its default opening book."""
    try:
        import bitbully  # optional extra: imported only when a perfect agent is used
    except ImportError:
        raise MissingSolverError(
            f"the perfect agent needs the bitbully solver, which is not installed: {INSTALL_HINT}"
        ) from None
    return bitbully, bitbully.BitBully()


def boards(state: env.State) -> np.ndarray:
    """[B, H, W] int8 boards: 1 first player's stones, 2 second player's, 0 empty;
    row 0 is the top (bitbully's 6 x 7 layout)."""
    planes = np.asarray(env.observe(jax.tree.map(np.asarray, state)))  # [B, H, W, 2] mover first
    mover = np.where(np.asarray(state.num_moves) % 2 == 0, 1, 2).astype(np.int8)[:, None, None]
    other = 3 - mover
    return np.where(planes[..., 0] > 0, mover, np.where(planes[..., 1] > 0, other, 0)).astype(
        np.int8
    )


def move_scores(state: env.State) -> np.ndarray:
    """[B, A] int32 exact score of each move for the player to move (``ILLEGAL``
    for full columns and in finished games).

    Raises:
        MissingSolverError: bitbully is not installed.
    """
    bitbully, solver = _solver()
    legal = np.asarray(env.legal_action_mask(state))
    terminated = np.asarray(state.terminated)
    out = np.full(legal.shape, ILLEGAL, np.int32)
    for i, board in enumerate(boards(state)):
        if terminated[i]:
            continue
        scores = solver.score_all_moves(bitbully.Board(board.tolist()))
        for column, score in scores.items():
            if legal[i, column]:
                out[i, column] = score
    return out


def _perfect_act(key: jax.Array, state: env.State) -> np.ndarray:
    scores = move_scores(state)
    best = scores == scores.max(axis=1, keepdims=True)
    seed = np.asarray(jax.random.key_data(key)).ravel()
    rng = np.random.default_rng(seed.astype(np.uint64).tolist())
    noise = rng.random(best.shape)
    # A finished game scores every column alike, so it gets a random one (played by no one).
    return np.argmax(np.where(best, noise, -1.0), axis=1).astype(np.int32)


def make_perfect_agent() -> HostAgent:
    """The perfect player (a host agent; see the module docstring).

    Raises:
        MissingSolverError: bitbully is not installed (checked here, at once).
    """
    _solver()
    return HostAgent(_perfect_act)


def make_move_judge() -> MoveJudge:
    """A fresh ``MoveJudge``.

    Raises:
        MissingSolverError: bitbully is not installed (checked here, at once).
    """
    _solver()
    return MoveJudge()


class MoveJudge:
    """Collects agent_a's moves in a match and judges them with the exact solver.

    Pass it as ``observer`` to ``arena.play_games`` / ``play_match``; then
    ``summary()`` gives ``solver.summarize``'s rates over every position in
    which agent_a moved (live games only), ``by_stage()`` where those mistakes fell.
    """

    def __init__(self):
        self._states: list[env.State] = []  # each [b] numpy
        self._moves: list[np.ndarray] = []  # each [b] int32
        self._cache = None  # (moves seen, _judged()'s arrays)

    def __call__(self, state: env.State, actions: np.ndarray, is_a: bool) -> None:
        if not is_a:
            return
        live = ~np.asarray(state.terminated)
        self._states.append(jax.tree.map(lambda x: np.asarray(x)[live], state))
        self._moves.append(np.asarray(actions)[live])

    def __len__(self) -> int:
        return int(sum(m.size for m in self._moves))

    def summary(self) -> dict:
        """Mistake, non-trivial mistake and exact-best rates with 95% intervals.

        Raises:
            MissingSolverError: bitbully is not installed.
            ValueError: no move was collected.
        """
        _, scores, legal, chosen = self._judged()
        return solver.summarize(solver.judge_moves(scores, legal, chosen))

    def by_stage(self, edges=solver.STAGE_EDGES) -> list[dict]:
        """``solver.mistakes_by_stage`` over the collected moves: where in the game
        the mistakes fell (stones on the board) and what each gave away.

        Raises:
            MissingSolverError: bitbully is not installed.
            ValueError: no move was collected, or bad ``edges``.
        """
        state, scores, legal, chosen = self._judged()
        return solver.mistakes_by_stage(state.num_moves, scores, legal, chosen, edges=edges)

    def _judged(self) -> tuple[env.State, np.ndarray, np.ndarray, np.ndarray]:
        """The collected positions ([P] numpy state), their [P, A] exact scores,
        [P, A] legal masks and [P] chosen moves; the scores are computed once."""
        if not len(self):
            raise ValueError("no move of the judged agent was seen")
        if self._cache is None or self._cache[0] != len(self):
            state = jax.tree.map(lambda *x: np.concatenate(x), *self._states)
            legal = np.asarray(env.legal_action_mask(state))
            self._cache = (len(self), (state, move_scores(state), legal,
                                       np.concatenate(self._moves)))
        return self._cache[1]


# --- The game-theoretic result of a match's openings. ---


def position_values(state: env.State) -> np.ndarray:
    """[B] int8 game-theoretic result of each live position for the player to move:
    +1 a win, 0 a draw, -1 a loss (with perfect play from both sides).

    Raises:
        MissingSolverError: bitbully is not installed.
        ValueError: a position is finished (it has no player to move).
    """
    if np.any(np.asarray(state.terminated)):
        raise ValueError("position_values: a finished game has no player to move")
    return np.sign(move_scores(state).max(axis=1)).astype(np.int8)


def opening_values(opening_moves: int) -> np.ndarray:
    """[7**K] int8: ``position_values`` of every K-ply opening (K = ``opening_moves``)
    in the order of ``arena.play_games(..., every_opening=True)``, the first ply the
    most significant base-7 digit.

    Raises:
        MissingSolverError: bitbully is not installed.
        ValueError: K is outside 0..4 (as for ``arena.num_exhaustive_openings``).
    """
    from c4jax.judge import arena  # here: arena's match loop is not needed to score

    arena.num_exhaustive_openings(opening_moves)  # checks K
    columns = itertools.product(range(1, env.NUM_ACTIONS + 1), repeat=opening_moves)
    moves = ["".join(map(str, seq)) for seq in columns]  # the first ply varies slowest
    return position_values(solver.states_from_moves(moves))


def kept_results(outcomes: np.ndarray, a_first: np.ndarray, opening_moves: int) -> np.ndarray:
    """[G] bool: in each game of an every-opening match, did agent_a end with at least
    the game-theoretic result its side had after the opening?

    Against ``perfect`` an agent can do no better than that result, so this counts
    the games in which it made no mistake that mattered; a perfect agent keeps it in
    every game. Game ``g`` played opening ``g // 2`` (mod 7**K), agent_a moving first
    where ``a_first`` (``arena.play_games``' order).

    Args:
        outcomes: [G] int8 +1 / 0 / -1 for agent_a (``MatchResult.outcomes``).
        a_first: [G] bool, agent_a moved first (``MatchResult.a_first``).
        opening_moves: the match's K, 0..4.

    Raises:
        MissingSolverError: bitbully is not installed.
    """
    values = opening_values(opening_moves)  # for the player to move after K plies
    outcomes, a_first = np.asarray(outcomes), np.asarray(a_first, bool)
    opening = (np.arange(outcomes.size) // 2) % values.size
    a_player = np.where(a_first, 0, 1)
    a_to_move = a_player == opening_moves % 2
    owed = np.where(a_to_move, values[opening], -values[opening])
    return outcomes >= owed
