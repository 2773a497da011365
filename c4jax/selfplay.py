"""Batched self-play inside ``lax.scan``, with exact value targets and no waste.

B games advance T moves per chunk; a finished game restarts at once. A position
gets its value target when its game ends. Positions of games still running at
the end of a chunk are not thrown away: each game's unfinished prefix is kept
as a right-aligned tail of L = 42 slots and carried into the next chunk, where
its targets become known. Shape letters: T moves per chunk, L = 42 tail slots,
B games, A = 7 actions.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
from flax import struct

from c4jax import env, replay

TAIL = env.NUM_CELLS  # L: an unfinished game has at most 41 positions
_UNKNOWN = -2  # result of a game that has not ended yet


@struct.dataclass
class Record:
    """Time-major records of searched positions."""

    state: env.State  # [T, B] the searched position (before the move)
    policy: jax.Array  # [T, B, A] float32 search policy
    done: jax.Array  # [T, B] bool, the move played here ended the game
    winner: jax.Array  # [T, B] int32 winner after that move (meaningful where done)
    valid: jax.Array  # [T, B] bool, a real position (False for tail padding)


@struct.dataclass
class SelfPlayState:
    """Games in progress and the positions of theirs still waiting for a result."""

    games: env.State  # [B] current positions
    tail: Record  # [L, B] each game's positions so far, right-aligned


def init(batch_size: int) -> SelfPlayState:
    """B fresh games with empty tails."""
    games = env.init_batch(batch_size)
    empty = Record(
        state=jax.tree.map(lambda x: jnp.broadcast_to(x, (TAIL, batch_size)), env.init()),
        policy=jnp.zeros((TAIL, batch_size, env.NUM_ACTIONS), jnp.float32),
        done=jnp.zeros((TAIL, batch_size), bool),
        winner=jnp.full((TAIL, batch_size), -1, jnp.int32),
        valid=jnp.zeros((TAIL, batch_size), bool),
    )
    return SelfPlayState(games=games, tail=empty)


def game_results(done: jax.Array, winner: jax.Array) -> jax.Array:
    """[T, B] winner of the game each position belongs to, or -2 if not ended.

    Args:
        done: [T, B] bool, the move at t ended its game.
        winner: [T, B] int32 winner after the move at t (0, 1, -1 draw).
    """

    def backward(result, x):
        done_t, winner_t = x
        result = jnp.where(done_t, winner_t, result)
        return result, result

    start = jnp.full(done.shape[1:], _UNKNOWN, jnp.int32)
    _, results = jax.lax.scan(backward, start, (done, winner), reverse=True)
    return results


def value_targets(results: jax.Array, player: jax.Array) -> jax.Array:
    """[...] float32 +1 / 0 / -1 for the player to move, given the game's winner."""
    return jnp.where(results == -1, 0.0, jnp.where(results == player, 1.0, -1.0))


def make_selfplay(search_fn: Callable, *, num_steps: int) -> Callable:
    """Returns ``selfplay(variables, key, sp_state) -> (sp_state, positions, valid, metrics)``.

    Args:
        search_fn: ``search_fn(variables, key, state[B]) -> SearchOutput`` with
            ``action [B]`` and ``policy [B, A]``.
        num_steps: T, moves each game advances per call.

    The returned function is pure and jittable. ``positions`` holds the
    ``(L + T) * B`` candidate rows of the window (tail + chunk) and ``valid``
    [(L + T) * B] marks those whose game ended, ready for ``replay.add``.
    """

    def selfplay(variables, key, sp_state: SelfPlayState):
        batch = sp_state.games.num_moves.shape[0]
        fresh = env.init_batch(batch)

        def move(games, step_key):
            out = search_fn(variables, step_key, games)
            after = env.step(games, out.action)
            record = Record(
                state=games,
                policy=out.policy,
                done=after.terminated,
                winner=after.winner,
                valid=jnp.ones((batch,), bool),
            )
            games = jax.tree.map(
                lambda new, old: jnp.where(after.terminated, new, old), fresh, after
            )
            return games, (record, after.num_moves)

        keys = jax.random.split(key, num_steps)
        games, (chunk, lengths) = jax.lax.scan(move, sp_state.games, keys)
        window = jax.tree.map(lambda a, b: jnp.concatenate([a, b]), sp_state.tail, chunk)
        results = game_results(window.done, window.winner)  # [L + T, B]
        known = results != _UNKNOWN
        ready = window.valid & known

        # The running games' positions are the last num_moves rows of the window.
        slot = jnp.arange(TAIL)[:, None]
        new_tail = jax.tree.map(lambda x: x[-TAIL:], window)
        new_tail = new_tail.replace(valid=slot >= TAIL - games.num_moves[None, :])
        window_len = window.valid.shape[0]
        carried = jnp.zeros_like(window.valid).at[window_len - TAIL :].set(new_tail.valid)
        discarded = window.valid & ~known & ~carried

        flat = lambda x: x.reshape((-1,) + x.shape[2:])  # noqa: E731
        positions = replay.Positions(
            state=jax.tree.map(flat, window.state),
            policy=flat(window.policy),
            value=flat(value_targets(results, window.state.current_player)),
        )
        finished = chunk.done.sum()
        denominator = jnp.maximum(finished, 1)
        searched = num_steps * batch
        metrics = {
            "games_finished": finished,
            "game_length": jnp.sum(lengths * chunk.done) / denominator,
            "first_player_win_rate": jnp.sum(chunk.done & (chunk.winner == 0)) / denominator,
            "draw_rate": jnp.sum(chunk.done & (chunk.winner == -1)) / denominator,
            "positions_added": ready.sum(),
            "discarded_fraction": discarded.sum() / searched,
        }
        return SelfPlayState(games=games, tail=new_tail), positions, flat(ready), metrics

    return selfplay
