"""Batched self-play inside ``lax.scan``, with exact value targets and no waste.

B games advance T moves per chunk; a finished game restarts at once. A position
gets its value target when its game ends. Positions of games still running at
the end of a chunk are not thrown away: each game's unfinished prefix is kept
as a right-aligned tail of L = 42 slots and carried into the next chunk, where
its targets become known. Shape letters: T moves per chunk, L = 42 tail slots,
B games, A = 7 actions.

These options widen what the network learns from:

* ``random_opening_moves = K``: each game opens with k ~ U{0..K} uniformly
  random moves, so that self-play visits the varied positions that a strong
  agent must judge (not only those its own sharpening policy leads to). The
  positions before and at a random move are not trained on, as their game
  result reflects a random move; by default (``opening_targets="drop"``) the
  random moves are played at once when a game starts (``random_openings``),
  so no search is spent on them (about a fifth of the searches with K = 12).
  These random moves end no game (a move that would is drawn again). A chunk
  draws R = 2 openings for each of its B game slots when it starts and
  evaluates them once (for the roots, see below); a slot's games that start in
  the chunk take its openings in turn (a third start in one chunk takes the
  first again), so no slot reads another's. With ``opening_targets="search"`` the random
  moves are played one a step, searched, and trained on: the search policy is
  the policy target and the search value (``policy_value``) the value target.
  They are played as drawn there, so a random move may end its game.
* ``value_target_q = w``: the value target is ``(1 - w) z + w q``, with ``z``
  the game result and ``q`` the search's value of its improved policy
  (``SearchOutput.policy_value``).
* ``value_target_lambda = l`` (with ``value_target_q = w > 0``): ``q`` is not
  the position's own search value ``v_t`` but the lambda-return of the search
  values along the game actually played, ``G_t = (1 - l) v_t + l (-G_{t+1})``,
  ending in the mover's game result after the last move (``lambda_returns``):
  TD(lambda) over the searches, so a position's target also hears the later
  searches, which see its consequences deeper. ``l = 0`` is ``v_t``; ``l -> 1``
  the game result. The chain runs through every searched position of the game,
  the fast searches of playout cap randomization included, and ends in the
  unshaped result (``value_length_shaping`` shapes ``z`` only).
* ``value_length_shaping = s``: the game result ``z`` of a decided game is
  shrunk with the plies ``n`` from the position to the game's end,
  ``z (1 - s n / 42)``, so that the network learns to prefer quick wins and
  slow losses (DeepFour); draws stay 0.
* ``full_search_fraction = p`` with a ``fast_search_fn`` (playout cap
  randomization, KataGo, Wu 2019): at each move the whole batch runs the full
  search with probability p, else the fast one (fewer simulations). Only the
  positions of full searches are trained on; the fast ones only move the games
  on, so games end sooner per unit of search and their results (value targets)
  come cheaper, while every policy target still comes from a full search.
* ``next_policy_targets``: each position also carries the search policy of
  the position after it, the opponent's reply (``next_policies``), for the
  network's opponent-reply head (KataGo's auxiliary target); all zeros after
  the game's last move, or where the next position had only a fast search.
* ``final_board_targets``: each position also carries the board its game
  ended with, from the side of the position's mover (``final_boards``), for
  the network's final-board head (KataGo's ownership target, for Connect
  Four: which cells end with whose stone, and which stay empty). It is the
  board the game really ended with, also for the positions that
  ``opening_targets="search"`` trains before a random move (whose value
  target is the search's): like the opponent's reply, it is what happened.
* ``policy_surprise_weight = s`` (KataGo's policy surprise weighting): each
  trained position carries a loss weight ``(1 - s) + s k / mean(k)``, with
  ``k`` the KL divergence from the network's prior to the search's policy at
  that position (``policy_surprise``) and the mean over the positions the
  chunk hands to the buffer; so the mean weight is 1 and the positions where
  the search overturned the network weigh more. KataGo writes such positions
  into its data more often, with s = 1/2; a loss weight is the same in
  expectation.
* ``surprise_starts = f`` (with random openings played at once): a share f of
  the new games start from a pool of the most surprising positions of earlier
  chunks (``starts``) instead of from a random opening; each chunk keeps its
  B most surprising positions with at most ``surprise_start_moves`` stones.
  A start from the pool counts all its stones as opening moves: its game's
  positions from there on are searched and trained on, as after a random
  opening.

Given the search's root evaluation (``evaluate_fn``), a move's root reuses the
network's evaluation of its position that the previous move's search already
made when it expanded the move played (``SearchOutput.child_logits``); games
that restart take their opening's (or the empty board's), evaluated once per
chunk. The network is fixed within a chunk, so this is the same evaluation (to float rounding). The
root runs the network only where some game has none: at a chunk's first move,
or after a move the search did not expand (a random opening move played one
a step, ``opening_targets="search"``; Gumbel always plays a move it visited,
whatever the moves it considers). With Gumbel that saves T - 1 of every T
root evaluations, 1 in (simulations + 1) of self-play's network work.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
from flax import struct

from c4jax import env, replay
from c4jax.alphazero import starts as starts_lib

TAIL = env.NUM_CELLS  # L: an unfinished game has at most 41 positions
OPENINGS_PER_SLOT = 2  # R: random openings drawn a game slot a chunk (module doc)
_UNKNOWN = -2  # result of a game that has not ended yet


@struct.dataclass
class Record:
    """Time-major records of searched positions."""

    state: env.State  # [T, B] the searched position (before the move)
    policy: jax.Array  # [T, B, A] float32 search policy
    done: jax.Array  # [T, B] bool, the move played here ended the game
    winner: jax.Array  # [T, B] int32 winner after that move (meaningful where done)
    valid: jax.Array  # [T, B] bool, a real position (False for tail padding)
    random: jax.Array  # [T, B] bool, the move played here was a random opening move
    search_value: jax.Array  # [T, B] float32 search value of the position (policy_value)
    full: jax.Array  # [T, B] bool, searched with the full search (trained on)
    # [T, B] float32 KL(search policy || network prior) of the position, the policy
    # surprise (``policy_surprise``); None unless surprise weights or starts are on.
    surprise: jax.Array | None = None
    # [T, B, 4] uint32 the board after the move (meaningful where done): the first
    # player's stones and all stones (lo, hi words each); None unless final-board
    # targets are on.
    after: jax.Array | None = None


@struct.dataclass
class SelfPlayState:
    """Games in progress and the positions of theirs still waiting for a result."""

    games: env.State  # [B] current positions
    tail: Record  # [L, B] each game's positions so far, right-aligned
    opening: jax.Array  # [B] int32 random opening moves of each current game
    # The positions new games may start from (``surprise_starts``); None when off.
    pool: starts_lib.StartPool | None = None


def init(batch_size: int, *, surprise: bool = False, pool: int = 0,
         final_board: bool = False) -> SelfPlayState:
    """B fresh games with empty tails (and no random opening moves); the tails
    keep ``Record.surprise`` when ``surprise`` and ``Record.after`` when
    ``final_board``, and an empty start pool of ``pool`` positions comes with
    them when ``pool > 0``."""
    games = env.init_batch(batch_size)
    empty = Record(
        state=jax.tree.map(lambda x: jnp.broadcast_to(x, (TAIL, batch_size)), env.init()),
        policy=jnp.zeros((TAIL, batch_size, env.NUM_ACTIONS), jnp.float32),
        done=jnp.zeros((TAIL, batch_size), bool),
        winner=jnp.full((TAIL, batch_size), -1, jnp.int32),
        valid=jnp.zeros((TAIL, batch_size), bool),
        random=jnp.zeros((TAIL, batch_size), bool),
        search_value=jnp.zeros((TAIL, batch_size), jnp.float32),
        full=jnp.zeros((TAIL, batch_size), bool),
        surprise=jnp.zeros((TAIL, batch_size), jnp.float32) if surprise else None,
        after=jnp.zeros((TAIL, batch_size, 4), jnp.uint32) if final_board else None,
    )
    return SelfPlayState(games=games, tail=empty, opening=jnp.zeros((batch_size,), jnp.int32),
                         pool=starts_lib.init(pool) if pool else None)


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


def first_player_words(state: env.State) -> jax.Array:
    """[S, 4] uint32 the board as (first player's lo, hi, all lo, hi) words."""
    own_is_first = state.current_player == 0
    first_lo = jnp.where(own_is_first, state.own_lo, state.own_lo ^ state.all_lo)
    first_hi = jnp.where(own_is_first, state.own_hi, state.own_hi ^ state.all_hi)
    return jnp.stack([first_lo, first_hi, state.all_lo, state.all_hi], axis=-1)


def final_boards(done: jax.Array, after: jax.Array, player: jax.Array) -> jax.Array:
    """[T, B, 4] uint32 the board each position's game ended with, as
    ``env.State``'s words from the side of the position's mover (own lo, hi,
    all lo, hi); zeros where the game has not ended.

    Args:
        done: [T, B] bool, the move at t ended its game.
        after: [T, B, 4] uint32 ``Record.after``, the first player's and all
            stones after the move at t.
        player: [T, B] int32 the mover at t (``State.current_player``).
    """

    def backward(final, x):
        done_t, after_t = x
        final = jnp.where(done_t[:, None], after_t, final)
        return final, final

    start = jnp.zeros(after.shape[1:], after.dtype)
    _, final = jax.lax.scan(backward, start, (done, after), reverse=True)
    first_lo, first_hi, all_lo, all_hi = (final[..., i] for i in range(4))
    mine = player == 0
    own_lo = jnp.where(mine, first_lo, first_lo ^ all_lo)
    own_hi = jnp.where(mine, first_hi, first_hi ^ all_hi)
    return jnp.stack([own_lo, own_hi, all_lo, all_hi], axis=-1)


def randomised(done: jax.Array, random: jax.Array) -> jax.Array:
    """[T, B] bool: a random move is played at or after t in the same game.

    Args:
        done: [T, B] bool, the move at t ended its game.
        random: [T, B] bool, the move at t was a random opening move.
    """

    def backward(later, x):
        done_t, random_t = x
        here = random_t | (later & ~done_t)
        return here, here

    start = jnp.zeros(done.shape[1:], bool)
    _, marked = jax.lax.scan(backward, start, (done, random), reverse=True)
    return marked


def lambda_returns(
    done: jax.Array, terminal: jax.Array, values: jax.Array, lam: float
) -> jax.Array:
    """[T, B] float32 lambda-returns of the search values along each game.

    ``G_t = (1 - lam) v_t + lam b_t`` with ``b_t`` the mover's result of the game
    if the move at t ended it, else ``-G_{t+1}`` (the next position's return,
    from the other player's side). Meaningful only where the game has ended.

    Args:
        done: [T, B] bool, the move at t ended its game.
        terminal: [T, B] float32 the game's result for the player to move at t,
            read where ``done``.
        values: [T, B] float32 search values v_t, for the player to move at t.
        lam: lambda in [0, 1) (1 would be the game result alone).
    """

    def backward(later, x):
        done_t, terminal_t, value_t = x
        here = (1.0 - lam) * value_t + lam * jnp.where(done_t, terminal_t, -later)
        return here, here

    start = jnp.zeros(done.shape[1:], jnp.float32)
    _, returns = jax.lax.scan(
        backward, start, (done, terminal.astype(jnp.float32), values), reverse=True
    )
    return returns


def plies_to_end(done: jax.Array, num_moves: jax.Array) -> jax.Array:
    """[T, B] int32 plies from each position to the end of its game, the move
    played there included (1 for the last position); 0 where the game has not ended.

    Args:
        done: [T, B] bool, the move at t ended its game.
        num_moves: [T, B] int32 stones on the board at t (before the move).
    """

    def backward(end, x):
        done_t, moves_t = x
        end = jnp.where(done_t, moves_t + 1, end)  # the game's length, -1 if unknown
        return end, jnp.where(end >= 0, end - moves_t, 0)

    start = jnp.full(done.shape[1:], -1, jnp.int32)
    _, plies = jax.lax.scan(backward, start, (done, num_moves.astype(jnp.int32)), reverse=True)
    return plies


def next_policies(policy: jax.Array, done: jax.Array, full: jax.Array) -> jax.Array:
    """[T, B, A] float32 the search policy of the position after each one.

    Row t's is row t + 1's ``policy`` (the same game's next position: a game's
    positions are consecutive rows of its column), or all zeros where the move
    at t ended the game, where t + 1 was not a full search, or at the last row.

    Args:
        policy: [T, B, A] float32 search policies.
        done: [T, B] bool, the move at t ended its game.
        full: [T, B] bool, position t had the full search.
    """
    following = jnp.concatenate([policy[1:], jnp.zeros_like(policy[:1])])
    has_next = ~done & jnp.concatenate([full[1:], jnp.zeros_like(full[:1])])
    return following * has_next[..., None]


def policy_surprise(policy: jax.Array, prior_logits: jax.Array) -> jax.Array:
    """[...] float32 KL(policy || softmax(prior_logits)): how far the search moved
    the network's policy (0 where ``policy`` is all zeros, a finished game).

    Args:
        policy: [..., A] float32 search policy (0 on illegal moves).
        prior_logits: [..., A] float32 the network's masked prior logits
            (finite, very negative on illegal moves: ``search.mask_logits``).
    """
    log_prior = jax.nn.log_softmax(prior_logits, axis=-1)
    kl = jnp.sum(jax.scipy.special.xlogy(policy, policy) - policy * log_prior, axis=-1)
    return jnp.maximum(kl, 0.0)  # rounding can dip below 0 where the two agree


def surprise_weights(surprise: jax.Array, trained: jax.Array, *, share: float) -> jax.Array:
    """[...] float32 loss weights ``(1 - share) + share * k / mean(k)`` (module doc).

    The mean is over the ``trained`` positions; where their surprise is all zero
    (e.g. searches without simulations) every weight is 1.

    Args:
        surprise: [...] float32 policy surprise k of each position.
        trained: [...] bool, the position goes to the buffer.
        share: s in [0, 1], the share of the weight given in proportion to k.
    """
    count = jnp.maximum(trained.sum(), 1)
    mean = jnp.sum(jnp.where(trained, surprise, 0.0)) / count
    relative = jnp.where(mean > 0, surprise / jnp.where(mean > 0, mean, 1.0), 1.0)
    return ((1.0 - share) + share * relative).astype(jnp.float32)


def random_openings(key: jax.Array, batch: int, most: int) -> tuple[env.State, jax.Array]:
    """B positions after k ~ U{0..most} uniformly random moves, none ending the game.

    Returns:
        ``(state [B], k [B] int32)``: the positions and the moves played in each.
        A random move that would end the game is drawn again (the loop runs
        ``most + 4`` rounds, so a board where that keeps happening can come out
        with fewer than k moves: ``k`` counts the moves played).
    """
    count_key, move_key = jax.random.split(key)
    wanted = jax.random.randint(count_key, (batch,), 0, most + 1)

    def play(round_key, carry):
        state, played = carry
        action = _uniform_legal(round_key, env.legal_action_mask(state))
        after = env.step(state, action)
        go = (played < wanted) & ~after.terminated
        state = jax.tree.map(lambda new, old: jnp.where(go, new, old), after, state)
        return (state, played + go), None

    start = (env.init_batch(batch), jnp.zeros((batch,), jnp.int32))
    (state, played), _ = jax.lax.scan(
        lambda carry, k: play(k, carry), start, jax.random.split(move_key, most + 4))
    return state, played


def value_targets(results: jax.Array, player: jax.Array) -> jax.Array:
    """[...] float32 +1 / 0 / -1 for the player to move, given the game's winner."""
    return env.result_value(results, player)


def make_selfplay(
    search_fn: Callable,
    *,
    num_steps: int,
    random_opening_moves: int = 0,
    value_target_q: float = 0.0,
    value_target_lambda: float = 0.0,
    value_length_shaping: float = 0.0,
    opening_targets: str = "drop",
    evaluate_fn: Callable | None = None,
    fast_search_fn: Callable | None = None,
    full_search_fraction: float = 1.0,
    next_policy_targets: bool = False,
    final_board_targets: bool = False,
    policy_surprise_weight: float = 0.0,
    surprise_starts: float = 0.0,
    surprise_start_moves: int = 20,
) -> Callable:
    """Returns ``selfplay(variables, key, sp_state) -> (sp_state, positions, valid, metrics)``.

    Args:
        search_fn: ``search_fn(variables, key, state[B], root_eval=None) ->
            SearchOutput`` with ``action [B]``, ``policy [B, A]`` and
            ``policy_value [B]`` (and the ``child_*`` fields, with ``evaluate_fn``).
        num_steps: T, moves each game advances per call.
        random_opening_moves: K, each game opens with k ~ U{0..K} random moves
            (played at once, unsearched, with ``opening_targets="drop"``).
        value_target_q: w in [0, 1], weight of the search value in the target.
        value_target_lambda: l in [0, 1), the search value in the target is the
            lambda-return of the game's search values (module doc; 0 = its own).
        value_length_shaping: s in [0, 1), shrinks a decided game's result by
            ``1 - s n / 42``, n the plies to its end (module doc; 0 = off).
        opening_targets: ``"drop"`` leaves the positions up to a game's last
            random opening move out; ``"search"`` trains on them with the
            search policy and value (once their game has ended, as the others).
        evaluate_fn: ``evaluate_fn(variables, state[B]) -> (logits [B, A], value
            [B])``, the search's root evaluation (``search.make_evaluate``);
            given, roots reuse the previous search's evaluations (module doc).
        fast_search_fn: a search like ``search_fn`` with fewer simulations, for
            playout cap randomization (module doc); needed when
            ``full_search_fraction < 1``.
        full_search_fraction: p in (0, 1], the chance that a move's searches
            are the full ones (1 = every move, ``fast_search_fn`` unused).
        next_policy_targets: fill ``Positions.next_policy`` (module doc).
        final_board_targets: fill ``Positions.final_board`` (module doc); the
            state needs ``init(..., final_board=True)``.
        policy_surprise_weight: s in [0, 1]; above 0, fill ``Positions.weight``
            with policy surprise weights (module doc) and keep ``Record.surprise``
            in the tails (``init(..., surprise=True)``). ``search_fn``'s output
            then needs ``prior_logits``.
        surprise_starts: f in [0, 1], the share of new games started from the
            state's start pool (module doc; ``init(..., surprise=True,
            pool=P)``); needs random openings played at once.
        surprise_start_moves: the most stones a position may have to enter the pool.

    The returned function is pure and jittable. ``positions`` holds the
    ``(L + T) * B`` candidate rows of the window (tail + chunk) and ``valid``
    [(L + T) * B] marks those whose game ended, ready for ``replay.add``.
    """

    if opening_targets not in ("drop", "search"):
        raise ValueError(f"opening_targets: 'drop' or 'search', got {opening_targets!r}")
    if num_steps < 1:
        raise ValueError(f"num_steps: >= 1, got {num_steps!r}")
    if not 0 <= random_opening_moves <= env.NUM_CELLS - 1:
        raise ValueError(f"random_opening_moves: in [0, 41], got {random_opening_moves!r}")
    if not 0 <= value_target_q <= 1:
        raise ValueError(f"value_target_q: in [0, 1], got {value_target_q!r}")
    if not 0 <= surprise_start_moves <= env.NUM_CELLS - 1:
        raise ValueError(f"surprise_start_moves: in [0, 41], got {surprise_start_moves!r}")
    if not 0 <= value_target_lambda < 1:
        raise ValueError(f"value_target_lambda: in [0, 1), got {value_target_lambda!r}")
    if not 0 <= value_length_shaping < 1:
        raise ValueError(f"value_length_shaping: in [0, 1), got {value_length_shaping!r}")
    if not 0 < full_search_fraction <= 1:
        raise ValueError(f"full_search_fraction: in (0, 1], got {full_search_fraction!r}")
    if not 0 <= policy_surprise_weight <= 1:
        raise ValueError(f"policy_surprise_weight: in [0, 1], got {policy_surprise_weight!r}")
    if not 0 <= surprise_starts <= 1:
        raise ValueError(f"surprise_starts: in [0, 1], got {surprise_starts!r}")
    weighted = policy_surprise_weight > 0
    pooled = surprise_starts > 0
    surprised = weighted or pooled
    capped = full_search_fraction < 1
    if capped and fast_search_fn is None:
        raise ValueError("full_search_fraction < 1 needs a fast_search_fn")

    # Random openings played at once when a game starts (module doc), unsearched.
    at_once = random_opening_moves > 0 and opening_targets == "drop"
    if pooled and not at_once:
        raise ValueError("surprise_starts needs random openings played at once "
                         "(random_opening_moves > 0, opening_targets 'drop')")

    def selfplay(variables, key, sp_state: SelfPlayState):
        batch = sp_state.games.num_moves.shape[0]
        if final_board_targets and sp_state.tail.after is None:
            raise ValueError("final_board_targets needs selfplay.init(..., final_board=True)")
        reuse = evaluate_fn is not None
        if at_once:  # R openings a game slot, taken in turn by the slot's games that start
            key, openings_key = jax.random.split(key)
            starts, start_moves = random_openings(
                openings_key, OPENINGS_PER_SLOT * batch, random_opening_moves)
            if pooled:
                key, pool_key = jax.random.split(key)
                starts, start_moves, from_pool = starts_lib.draw(
                    sp_state.pool, pool_key, starts, start_moves, share=surprise_starts)
            else:
                from_pool = jnp.zeros(start_moves.shape, bool)
        else:  # the empty board (the random moves, if any, are searched one a step)
            starts, start_moves = env.init_batch(1), jnp.zeros((1,), jnp.int32)
            from_pool = jnp.zeros((1,), bool)
        starts_eval = evaluate_fn(variables, starts) if reuse else ()
        pool = (starts, start_moves, from_pool, starts_eval)

        def start_of(started):
            """The start of each slot's next game: [B] positions, their random moves,
            whether they came from the start pool, and their (logits [B, A], value
            [B]) where evaluated."""
            if not at_once:
                return jax.tree.map(lambda x: jnp.broadcast_to(x[0], (batch,) + x.shape[1:]),
                                    pool)
            turn = started % OPENINGS_PER_SLOT  # [B]

            def take(x):  # [R * B, ...] -> this turn's [B, ...], each slot its own
                x = x.reshape((OPENINGS_PER_SLOT, batch) + x.shape[1:])
                index = turn.reshape((1, batch) + (1,) * (x.ndim - 2))
                return jnp.take_along_axis(x, index, axis=0)[0]

            return jax.tree.map(take, pool)

        def root_of(games, roots):
            """The root evaluation: the carried one where every game has it."""
            logits, value, known = roots
            return jax.lax.cond(
                jnp.all(known),
                lambda: (logits, value),
                lambda: evaluate_fn(variables, games),
            )

        def move(carry, step_key):
            games, opening, roots, started = carry
            if capped:
                search_key, random_key, opening_key, cap_key = jax.random.split(step_key, 4)
                full = jax.random.uniform(cap_key) < full_search_fraction
            else:
                search_key, random_key, opening_key = jax.random.split(step_key, 3)
                full = jnp.bool_(True)
            root_eval = {"root_eval": root_of(games, roots)} if reuse else {}
            if capped:
                out = jax.lax.cond(
                    full,
                    lambda: search_fn(variables, search_key, games, **root_eval),
                    lambda: fast_search_fn(variables, search_key, games, **root_eval),
                )
            else:
                out = search_fn(variables, search_key, games, **root_eval)
            if at_once:  # the random moves were played when the game started
                random = jnp.zeros((batch,), bool)
                action = out.action
            else:
                random = games.num_moves < opening
                random_action = _uniform_legal(random_key, env.legal_action_mask(games))
                action = jnp.where(random, random_action, out.action)
            after = env.step(games, action)
            restart = after.terminated
            new_games, new_moves, new_from_pool, new_eval = start_of(started)
            started = started + restart
            if reuse:  # the evaluation of ``after`` the search made, or its start's
                played = action[:, None]
                roots = (
                    jnp.where(
                        restart[:, None],
                        new_eval[0],
                        jnp.take_along_axis(out.child_logits, played[:, :, None], axis=1)[:, 0],
                    ),
                    jnp.where(
                        restart, new_eval[1],
                        jnp.take_along_axis(out.child_value, played, axis=1)[:, 0],
                    ),
                    restart | jnp.take_along_axis(out.child_expanded, played, axis=1)[:, 0],
                )
            record = Record(
                state=games,
                policy=out.policy,
                done=after.terminated,
                winner=after.winner,
                valid=jnp.ones((batch,), bool),
                random=random,
                search_value=out.policy_value,
                full=jnp.broadcast_to(full, (batch,)),
                surprise=policy_surprise(out.policy, out.prior_logits) if surprised else None,
                after=first_player_words(after) if final_board_targets else None,
            )
            games = jax.tree.map(lambda new, old: jnp.where(restart, new, old), new_games, after)
            if at_once:
                new_opening = new_moves
            else:
                new_opening = jax.random.randint(
                    opening_key, (batch,), 0, random_opening_moves + 1)
            opening = jnp.where(restart, new_opening, opening)
            pool_start = restart & new_from_pool
            return (games, opening, roots, started), (
                record, after.num_moves, new_opening, pool_start)

        keys = jax.random.split(key, num_steps)
        # No evaluation carried into a chunk: the network changed since the last one.
        roots = (
            jnp.zeros((batch, env.NUM_ACTIONS), jnp.float32),
            jnp.zeros((batch,), jnp.float32),
            jnp.zeros((batch,), bool),
        )
        (games, opening, _, _), (chunk, lengths, openings, pool_starts) = jax.lax.scan(
            move, (sp_state.games, sp_state.opening, roots, jnp.zeros((batch,), jnp.int32)),
            keys
        )
        window = jax.tree.map(lambda a, b: jnp.concatenate([a, b]), sp_state.tail, chunk)
        results = game_results(window.done, window.winner)  # [L + T, B]
        known = results != _UNKNOWN
        tainted = randomised(window.done, window.random)  # result reflects a random move
        trained = jnp.ones_like(tainted) if opening_targets == "search" else ~tainted
        ready = window.valid & known & trained & window.full

        # The running games' positions are the last rows of the window: num_moves
        # of them, less the random moves played at once (never searched).
        searched_moves = games.num_moves - opening if at_once else games.num_moves
        slot = jnp.arange(TAIL)[:, None]
        new_tail = jax.tree.map(lambda x: x[-TAIL:], window)
        new_tail = new_tail.replace(valid=slot >= TAIL - searched_moves[None, :])
        window_len = window.valid.shape[0]
        carried = jnp.zeros_like(window.valid).at[window_len - TAIL :].set(new_tail.valid)
        discarded = window.valid & ~known & ~carried
        z = value_targets(results, window.state.current_player)
        if value_length_shaping:
            plies = plies_to_end(window.done, window.state.num_moves)
            z = z * (1.0 - value_length_shaping * plies / env.NUM_CELLS)
        q = window.search_value
        if value_target_lambda:
            terminal = value_targets(window.winner, window.state.current_player)
            q = lambda_returns(window.done, terminal, q, value_target_lambda)
        value = (1.0 - value_target_q) * z + value_target_q * q
        value = jnp.where(tainted, window.search_value, value)  # only kept with "search"

        flat = lambda x: x.reshape((-1,) + x.shape[2:])  # noqa: E731
        positions = replay.Positions(
            state=jax.tree.map(flat, window.state),
            policy=flat(window.policy),
            value=flat(value),
            next_policy=(flat(next_policies(window.policy, window.done, window.full))
                         if next_policy_targets else None),
            weight=(flat(surprise_weights(window.surprise, ready, share=policy_surprise_weight))
                    if weighted else None),
            final_board=(flat(final_boards(window.done, window.after,
                                           window.state.current_player))
                         if final_board_targets else None),
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
            "random_move_fraction": chunk.random.sum() / searched,
            "opening_moves": jnp.sum(openings * chunk.done) / denominator,
            "full_search_fraction": chunk.full.sum() / searched,
        }
        if surprised:  # mean policy surprise of the positions handed to the buffer
            metrics["policy_surprise"] = (jnp.sum(jnp.where(ready, window.surprise, 0.0))
                                          / jnp.maximum(ready.sum(), 1))
        new_pool = sp_state.pool
        if pooled:  # this chunk's most surprising positions of the opening stage
            eligible = (chunk.valid & chunk.full
                        & (chunk.state.num_moves <= surprise_start_moves))
            new_pool = starts_lib.add(
                sp_state.pool, jax.tree.map(flat, chunk.state), flat(chunk.surprise),
                flat(eligible), keep=min(sp_state.pool.surprise.shape[0], batch))
            metrics["pool_start_fraction"] = pool_starts.sum() / denominator
            metrics["pool_surprise"] = jnp.sum(new_pool.surprise) / jnp.maximum(new_pool.size, 1)
        new_state = SelfPlayState(games=games, tail=new_tail, opening=opening, pool=new_pool)
        return new_state, positions, flat(ready), metrics

    return selfplay


def _uniform_legal(key: jax.Array, legal: jax.Array) -> jax.Array:
    """[B] int32 uniformly random legal move of [B, A] ``legal`` (0 where none)."""
    logits = jnp.where(legal, 0.0, -jnp.inf)
    sampled = jax.random.categorical(key, logits, axis=-1)
    return jnp.where(jnp.any(legal, axis=-1), sampled, 0).astype(jnp.int32)
