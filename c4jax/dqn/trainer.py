"""The fused value-based iteration: B games advance T learner moves, then K SGD steps.

``make_iteration(config)`` returns the pure ``iteration(state, key) -> (state,
metrics)`` (jit it); nothing in it syncs with the host. Each of the B games
has its opponent, drawn per game from the configured mix (``OPPONENTS``), and
the learner's colour, drawn per game too (as second player the learner finds
the opponent's first move, uniformly random, already on the board). In one env
step every game sees the learner move (epsilon-greedy on the online network),
the opponent reply, and one ``Transitions`` row from the learner's side; a game
that ends restarts at once with a new opponent and colour.

Shapes: B games, T env steps, K SGD steps, C replay capacity, A = 7 actions.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import struct

from c4jax import baselines, env, replay
from c4jax.dqn import qnet
from c4jax.dqn.config import DQNConfig, opponent_weights
from c4jax.dqn.learner import QLearnerState, Transitions, make_sgd_step, to_batch

OPPONENTS = ("random", "win-if-you-can", "lookahead", "self")  # the opponent kinds, in order


@struct.dataclass
class Games:
    """The B games being played; the learner is to move in every live one."""

    state: env.State  # [B]
    opponent: jax.Array  # [B] int32 index into OPPONENTS


@struct.dataclass
class DQNTrainState:
    """All that a run needs to continue bit-for-bit."""

    step: jax.Array  # [] int32 iterations done
    learner: QLearnerState
    replay: replay.ReplayBuffer  # data: Transitions [C]
    games: Games


@dataclasses.dataclass(frozen=True)
class DQNTrainer:
    """The pure functions of a value-based run.

    Attributes:
        config: the run's configuration.
        module: the Flax Q-network.
        apply: ``apply(params, obs [S, H, W, 2]) -> [S, A]``.
        init: ``init(key) -> DQNTrainState`` (pure; jit it).
        iteration: ``iteration(state, key) -> (state, metrics)`` (pure; jit it).
    """

    config: DQNConfig
    module: object
    apply: qnet.QApply
    init: Callable
    iteration: Callable


def epsilon_at(config: DQNConfig, step: jax.Array) -> jax.Array:
    """[] float32 exploration rate at iteration ``step``: linear from start to end
    over the first ``epsilon_decay`` of the run, then flat."""
    t = config.train
    span = t.epsilon_decay * t.num_iterations
    if span <= 0:  # no decay: epsilon_end from the first iteration on
        return jnp.full(jnp.shape(step), t.epsilon_end, jnp.float32)
    progress = jnp.minimum(step / span, 1.0)
    return (t.epsilon_start + (t.epsilon_end - t.epsilon_start) * progress).astype(jnp.float32)


def greedy_moves(key: jax.Array, q: jax.Array, state: env.State) -> jax.Array:
    """[B] the legal move with the highest value (ties at random)."""
    return baselines.argmax_random_ties(key, q, env.legal_action_mask(state))


def epsilon_greedy(key: jax.Array, q: jax.Array, state: env.State, epsilon) -> jax.Array:
    """[B] a uniformly random legal move with probability ``epsilon``, else the greedy one."""
    k_greedy, k_explore, k_random = jax.random.split(key, 3)
    greedy = greedy_moves(k_greedy, q, state)
    explore = jax.random.bernoulli(k_explore, epsilon, greedy.shape)
    return jnp.where(explore, baselines.random_agent(k_random, state), greedy)


def make_trainer(config: DQNConfig) -> DQNTrainer:
    """The pure ``init`` and ``iteration`` of ``config`` (see the module)."""
    t = config.train
    module = qnet.make_q_network(config.model)
    apply = qnet.make_apply(module)
    optimizer = optax.adam(t.learning_rate)
    sgd_step = make_sgd_step(apply, optimizer, t)
    # Relative to the largest weight (in float64 first): any finite weights give
    # finite float32 logits where they are not 0 (-inf for weight 0).
    weights = np.asarray(opponent_weights(t), np.float64)
    logits = jnp.log(jnp.asarray(weights / weights.max(), jnp.float32))

    def new_games(key: jax.Array, batch: int) -> Games:
        k_opp, k_colour, k_first = jax.random.split(key, 3)
        opponent = jax.random.categorical(k_opp, logits, shape=(batch,)).astype(jnp.int32)
        second = jax.random.bernoulli(k_colour, 0.5, (batch,))
        empty = env.init_batch(batch)
        first = baselines.random_agent(k_first, empty)
        state = jax.tree.map(
            lambda a, b: jnp.where(second, a, b), env.step(empty, first), empty
        )
        return Games(state=state, opponent=opponent)

    def opponent_moves(key, state, opponent, target_params) -> jax.Array:
        keys = jax.random.split(key, 4)
        q = apply(target_params, env.observe(state))
        candidates = jnp.stack([
            baselines.random_agent(keys[0], state),
            baselines.win_agent(keys[1], state),
            baselines.lookahead_agent(keys[2], state),
            epsilon_greedy(keys[3], q, state, t.epsilon_end),
        ])  # [4, B]
        return jnp.take_along_axis(candidates, opponent[None], axis=0)[0]

    def init(key: jax.Array) -> DQNTrainState:
        k_params, k_games = jax.random.split(key)
        params = qnet.init_params(module, k_params)
        empty = env.init_batch(t.replay_capacity)
        data = Transitions(
            state=empty,
            action=jnp.zeros((t.replay_capacity,), jnp.int32),
            reward=jnp.zeros((t.replay_capacity,), jnp.float32),
            next_state=empty,
            done=jnp.zeros((t.replay_capacity,), bool),
        )
        return DQNTrainState(
            step=jnp.int32(0),
            learner=QLearnerState(
                params=params,
                target_params=jax.tree.map(jnp.copy, params),
                opt_state=optimizer.init(params),
            ),
            replay=replay.ReplayBuffer(data=data, insert=jnp.int32(0), size=jnp.int32(0)),
            games=new_games(k_games, t.num_envs),
        )

    def iteration(state: DQNTrainState, key: jax.Array):
        act_key, learn_key = jax.random.split(key)
        epsilon = epsilon_at(config, state.step)
        params, target_params = state.learner.params, state.learner.target_params

        def env_step(games: Games, step_key):
            k_act, k_opp, k_new = jax.random.split(step_key, 3)
            s = games.state
            action = epsilon_greedy(k_act, apply(params, env.observe(s)), s, epsilon)
            s1 = env.step(s, action)
            s2 = env.step(s1, opponent_moves(k_opp, s1, games.opponent, target_params))
            reward = env.result_value(s2.winner, s.current_player)
            done = s2.terminated
            row = Transitions(state=s, action=action, reward=reward, next_state=s2, done=done)
            fresh = new_games(k_new, t.num_envs)
            after = jax.tree.map(
                lambda f, o: jnp.where(done, f, o), fresh, Games(state=s2, opponent=games.opponent)
            )
            kind = jax.nn.one_hot(games.opponent, len(OPPONENTS)) * done[:, None]  # [B, 4]
            points = (reward + 1.0) / 2.0  # 1 win, 0.5 draw, 0 loss
            stats = jnp.stack([jnp.sum(kind, 0), jnp.sum(kind * points[:, None], 0)])  # [2, 4]
            return after, (row, stats)

        games, (rows, stats) = jax.lax.scan(
            env_step, state.games, jax.random.split(act_key, t.env_steps)
        )
        flat = jax.tree.map(lambda x: x.reshape(-1, *x.shape[2:]), rows)  # [T * B]
        buffer = replay.add(state.replay, flat, jnp.ones(flat.action.shape, bool))

        def sgd(learner_state, sgd_key):
            k_index, k_mirror = jax.random.split(sgd_key)
            index = jax.random.randint(k_index, (t.minibatch_size,), 0, buffer.size)
            picked = jax.tree.map(lambda x: x[index], buffer.data)
            batch = to_batch(picked, k_mirror, mirror=t.mirror_augment)
            return sgd_step(learner_state, batch)

        learned, sgd_metrics = jax.lax.scan(
            sgd, state.learner, jax.random.split(learn_key, t.sgd_steps)
        )
        totals = jnp.sum(stats, axis=0)  # [2, 4]: games ended, points, per opponent
        metrics = {k: jnp.mean(v) for k, v in sgd_metrics.items()}
        metrics.update(
            epsilon=epsilon,
            replay_size=buffer.size,
            games_finished=jnp.sum(totals[0]),
            params_finite=jnp.all(jnp.stack(
                [jnp.all(jnp.isfinite(x)) for x in jax.tree.leaves(learned.params)]
            )).astype(jnp.float32),
        )
        for i, name in enumerate(OPPONENTS):
            # The learner's score (exploring) in its training games against each opponent.
            metrics[f"train_score/{name}"] = totals[1, i] / jnp.maximum(totals[0, i], 1.0)
        new_state = DQNTrainState(step=state.step + 1, learner=learned, replay=buffer, games=games)
        return new_state, metrics

    return DQNTrainer(config=config, module=module, apply=apply, init=init, iteration=iteration)


def q_act(apply: qnet.QApply, params: dict, key: jax.Array, state: env.State) -> jax.Array:
    """The greedy agent: ``act(key, state[B]) -> [B]`` the legal move with the highest Q
    (ties at random). Bind ``apply`` and ``params`` with ``functools.partial``."""
    return greedy_moves(key, apply(params, env.observe(state)), state)


def num_parameters(params: dict) -> int:
    """Scalars in ``params``."""
    return int(sum(np.prod(np.shape(x)) for x in jax.tree.leaves(params)))
