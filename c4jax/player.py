"""A trained agent for host-level use: best moves and analyses of move strings.

    player = Player.from_checkpoint("runs/20261121-090000", num_simulations=64)
    player = Player.pretrained(num_simulations=64)   # the agent shipped in the package
    player.best_move("4453")        # -> Move(index=3, column=4): 0-based and 1-based
    player.play("4453")             # -> "44534": the move string after the agent's move
    player.analyse("4453")          # -> Analysis(policy [7], q [7], visits [7], value, ...)

Positions are Pons-style move strings (digits 1-7, first player first); a bad
string raises ``ValueError`` saying what is wrong. Loading reads only the
network variables of the checkpoint (``checkpoints.restore_variables``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from collections.abc import Iterator
from pathlib import Path

import absl.logging
import jax
import numpy as np

from c4jax import env
from c4jax.alphazero import network, search
from c4jax.alphazero.config import Config
from c4jax.position import Position
from c4jax.store import checkpoints, exported


@dataclasses.dataclass(frozen=True)
class Move:
    """A move in both numberings, so neither is used by mistake.

    ``index`` is 0-based (arrays, ``env.step``), ``column`` is 1-based (move
    strings, what a person types): ``moves + move.char`` plays it.
    """

    index: int  # 0-6
    column: int  # 1-7

    @classmethod
    def from_index(cls, index: int) -> Move:
        return cls(index=int(index), column=int(index) + 1)

    @property
    def char(self) -> str:
        """The move-string digit, ``str(column)``."""
        return str(self.column)


@dataclasses.dataclass(frozen=True)
class Analysis:
    """What the agent thinks of a position, from the side of the player to move.

    The move played is ``action``; ``policy`` is the search's improved policy
    (with Gumbel search, ``search.evaluation_move`` says whether ``action`` is
    its argmax, the best ``q`` or the survivor of sequential halving, one of
    the most visited moves), so show ``action`` marked next to them.
    """

    policy: np.ndarray  # [A] float32 improved policy (0 on full columns)
    # The search's root value, expected result in [-1, 1], +1 = the player to
    # move wins (under Gumbel search it underrates won positions: see
    # ``search.SearchOutput``; ``policy_value`` does not).
    value: float
    action: int  # the 0-based column the agent plays (the same search)
    # [A] float32 the search's value of each move for the player to move, in
    # [-1, 1]; NaN where it was not searched (full columns, or no simulations).
    q: np.ndarray | None = None
    visits: np.ndarray | None = None  # [A] int32 simulations through each move
    policy_value: float | None = None  # the value of playing ``policy``
    rule: str = ""  # how ``action`` was chosen, in words (``Player.rule``)

    @property
    def move(self) -> Move:
        """``action`` in both numberings."""
        return Move.from_index(self.action)


@contextlib.contextmanager
def _quiet_absl() -> Iterator[None]:
    """Hides absl WARNING lines (Orbax's notes on read-only checkpoints) while loading."""
    verbosity = absl.logging.get_verbosity()
    absl.logging.set_verbosity(absl.logging.ERROR)
    try:
        yield
    finally:
        absl.logging.set_verbosity(verbosity)


class Player:
    """The network (and optionally search) of a run, behind a move-string API.

    Args:
        config: the run's configuration (network shape, search settings).
        variables: network variables ``{'params', 'batch_stats'}``.
        num_simulations: search simulations per move; 0 = the network alone.
        seed: seed of the search's PRNG stream (Gumbel search without noise is
            deterministic; the seed only matters for ties).
        step: the training iteration of the checkpoint, if known.
    """

    def __init__(
        self,
        config: Config,
        variables: dict,
        *,
        num_simulations: int,
        seed: int = 0,
        step: int | None = None,
    ):
        if not isinstance(num_simulations, int | np.integer) or isinstance(num_simulations, bool):
            raise ValueError(f"num_simulations: got {num_simulations!r}, allowed: an integer >= 0")
        if num_simulations < 0:
            raise ValueError(f"num_simulations: got {num_simulations}, allowed: >= 0")
        num_simulations = int(num_simulations)
        self.config = config
        self.variables = variables
        self.num_simulations = num_simulations
        self.step = step
        self.seed = seed
        self._key = jax.random.key(seed)
        apply_fn = network.make_apply_fn(network.make_network(config.network))
        search_config = dataclasses.replace(config.search, num_simulations=num_simulations)
        self._search = jax.jit(
            search.make_search(apply_fn, search_config), static_argnames="evaluation"
        )
        self.act = functools.partial(
            search.make_alphazero_act(
                apply_fn, config.search, num_simulations=num_simulations
            ),
            variables,
        )
        """The agent ``act(key, state[B]) -> [B]`` for ``arena`` and ``solver``."""

    @classmethod
    def from_checkpoint(
        cls,
        run_dir: str | Path,
        *,
        num_simulations: int | None = None,
        step: int | None = None,
        seed: int = 0,
    ) -> Player:
        """Loads a run's checkpoint (by default its best by evaluation score).

        Args:
            run_dir: a run directory written by ``python -m c4jax.train``.
            num_simulations: search simulations; default the run's evaluation setting.
            step: which checkpoint; default the best (else the latest).
            seed: see the class.

        Raises:
            ValueError: no run or no such checkpoint there.
        """
        with _quiet_absl():
            restored = checkpoints.restore_variables(run_dir, step)
        config = restored.config
        sims = config.eval.num_simulations if num_simulations is None else num_simulations
        return cls(
            config, restored.variables, num_simulations=sims, seed=seed, step=restored.step
        )

    @classmethod
    def pretrained(cls, *, num_simulations: int | None = None, seed: int = 0) -> Player:
        """The agent shipped in the package (``c4jax/pretrained``; see its info.json).

        Args:
            num_simulations: search simulations; default its evaluation setting.
            seed: see the class.
        """
        with _quiet_absl():
            restored = exported.load_exported()
        config = restored.config
        sims = config.eval.num_simulations if num_simulations is None else num_simulations
        return cls(
            config, restored.variables, num_simulations=sims, seed=seed, step=restored.step
        )

    @classmethod
    def load(
        cls,
        run_dir: str | Path | None = None,
        *,
        num_simulations: int | None = None,
        step: int | None = None,
    ) -> Player:
        """A run's checkpoint (``from_checkpoint``), or the pretrained agent if ``run_dir`` is None.

        Raises:
            ValueError: no such run or checkpoint, a ``step`` without a run,
                or the package's pretrained files are missing.
        """
        if run_dir is None:
            if step is not None:
                raise ValueError("step: needs a run directory")
            return cls.pretrained(num_simulations=num_simulations)
        return cls.from_checkpoint(run_dir, num_simulations=num_simulations, step=step)

    def with_simulations(self, num_simulations: int) -> Player:
        """The same network with another number of simulations (a new search to compile),
        its random stream started again from this player's seed."""
        return Player(
            self.config, self.variables, num_simulations=num_simulations, seed=self.seed,
            step=self.step,
        )

    @property
    def rule(self) -> str:
        """How the agent picks its move from the search, in words (for displays)."""
        if self.num_simulations == 0:
            return "the highest policy, the network alone"
        if self.config.search.algorithm == "puct":
            return "the most visited move"
        return {
            "halving": "the survivor of sequential halving, one of the most visited moves",
            "policy": "the highest policy",
            "q": "the highest value",
        }[self.config.search.evaluation_move]

    def _next_key(self) -> jax.Array:
        self._key, key = jax.random.split(self._key)
        return key

    def _search_position(self, moves: str):
        state = env.from_moves(moves)
        if bool(state.terminated):
            raise ValueError(f"moves {moves!r}: the game is over, there is no move to choose")
        batch = env.stack([state])
        out = self._search(self.variables, self._next_key(), batch, evaluation=True)
        return jax.device_get(out)

    def best_move(self, moves: str) -> Move:
        """The agent's move after ``moves``: ``.index`` 0-based, ``.column`` 1-based."""
        return Move.from_index(int(self._search_position(moves).action[0]))

    def play(self, moves: str) -> str:
        """The move string after ``moves`` and the agent's reply (``"4453"`` -> ``"44534"``
        for the shipped agent)."""
        return moves + self.best_move(moves).char

    def analyse(self, moves: str) -> Analysis:
        """The search's policy, per-move values and visits, and its move after ``moves``."""
        out = self._search_position(moves)
        visits = np.asarray(out.visit_counts[0], np.int32)
        legal = np.zeros(env.NUM_ACTIONS, bool)
        legal[list(Position.parse(moves).legal)] = True
        q = np.where(legal & (visits > 0), np.asarray(out.qvalues[0]), np.nan)
        return Analysis(
            policy=np.asarray(out.policy[0]),
            value=float(out.root_value[0]),
            action=int(out.action[0]),
            q=q.astype(np.float32),
            visits=visits,
            policy_value=float(out.policy_value[0]),
            rule=self.rule,
        )

