"""The pgx AlphaZero reference pipeline of ``bench.bench_train``, and the stub network.

In the style of pgx's AlphaZero example (``examples/alphazero``):
``pgx.make("connect_four")`` vmapped, the pgx state as the mctx embedding,
``recurrent_fn`` stepping pgx and reading ``state.observation`` and
``state.rewards`` of the player who moved (discount -1, 0 at the end), the
same mctx policy with the same settings as c4jax's search and the same masking
of illegal moves at every depth. Self-play runs in ``lax.scan``; finished games
restart from a fresh ``init`` through a select (cheaper than pgx's
``auto_reset``, which computes an ``init`` every step); each step stores the
observation, search policy, reward and discount, and value targets come from a
backward pass over the chunk, as in the example (positions of games still
running at the end of a chunk get no target). The observations go into a ring
buffer (``replay.add``), and SGD samples observation minibatches from it with
the same learner step (``learner.make_sgd_step`` of the run's network and
optimizer) in the same ``lax.scan`` as ``Trainer.learn``.

``stub_apply`` stands in for the network in either pipeline's self-play
(``--stub-network``), leaving env + tree + observation.

The pipeline is a ``harness.Pipeline``: the harness times it beside c4jax's.
Shapes: B games, T moves per chunk, M replay rows, H x W board, A = 7 actions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from bench.harness import Pipeline, state_bytes


@struct.dataclass
class ObsPositions:
    """Reference replay rows: what pgx's example trains on."""

    obs: jax.Array  # [M, H, W, 2] bool, pgx's observation
    policy: jax.Array  # [M, A] float32 search policy
    value: jax.Array  # [M] float32 value target


@struct.dataclass
class StepRecord:
    """One self-play step of all B games, as pgx's example stores it."""

    obs: jax.Array  # [B, H, W, 2] bool
    policy: jax.Array  # [B, A] float32 action_weights
    reward: jax.Array  # [B] float32 reward of the player who moved
    terminated: jax.Array  # [B] bool
    discount: jax.Array  # [B] float32: -1, or 0 at the end


def reference_pipeline(run, games_key: jax.Array, learner_state, apply_fn: Callable) -> Pipeline:
    """pgx ``connect_four`` self-play in the style of pgx's AlphaZero example.

    Args:
        run: a ``trainer.Trainer`` (for its search settings and learner step).
        games_key: PRNG key for the first games' random first players.
        learner_state: a ``learner.LearnerState`` (donated by ``learn``).
        apply_fn: the network self-play evaluates: the Flax module's inference
            apply (``run.network.apply(..., train=False)``), or ``stub_apply``.
    """
    import mctx
    import pgx

    from c4jax import replay
    from c4jax.alphazero import learner, search

    config = run.config
    s, t = config.search, config.train
    batch, num_steps = t.selfplay_batch, t.selfplay_steps
    game = pgx.make("connect_four")
    step = jax.vmap(game.step)  # key=None: Connect Four's step is deterministic

    def recurrent_fn(variables, rng_key, action, state):
        del rng_key
        mover = state.current_player
        state = step(state, action)
        logits, value = apply_fn(variables, state.observation)
        logits = search.mask_logits(logits, state.legal_action_mask)  # all True at the end
        reward = state.rewards[jnp.arange(state.rewards.shape[0]), mover]
        value = jnp.where(state.terminated, 0.0, value)
        discount = jnp.where(state.terminated, 0.0, -1.0)
        output = mctx.RecurrentFnOutput(
            reward=reward, discount=discount, prior_logits=logits, value=value
        )
        return output, state

    def policy(variables, key, state):
        legal = state.legal_action_mask
        logits, value = apply_fn(variables, state.observation)
        root = mctx.RootFnOutput(
            prior_logits=search.mask_logits(logits, legal), value=value, embedding=state
        )
        if s.algorithm == "gumbel":
            return mctx.gumbel_muzero_policy(
                params=variables,
                rng_key=key,
                root=root,
                recurrent_fn=recurrent_fn,
                num_simulations=s.num_simulations,
                invalid_actions=~legal,
                qtransform=search.gumbel_qtransform,
                max_num_considered_actions=s.max_num_considered_actions,
                gumbel_scale=s.gumbel_scale,
            )
        return mctx.muzero_policy(
            params=variables,
            rng_key=key,
            root=root,
            recurrent_fn=recurrent_fn,
            num_simulations=s.num_simulations,
            invalid_actions=~legal,
            qtransform=search.puct_qtransform,
            dirichlet_fraction=s.dirichlet_fraction,
            dirichlet_alpha=s.dirichlet_alpha,
            pb_c_init=s.pb_c_init,
        )

    def play(variables, key, carry):
        games, buffer = carry
        init_key, moves_key = jax.random.split(key)
        fresh = jax.vmap(game.init)(jax.random.split(init_key, batch))

        def move(state, move_key):
            out = policy(variables, move_key, state)
            mover = state.current_player
            after = step(state, out.action)
            record = StepRecord(
                obs=state.observation,
                policy=out.action_weights,
                reward=after.rewards[jnp.arange(batch), mover],
                terminated=after.terminated,
                discount=jnp.where(after.terminated, 0.0, -1.0),
            )
            state = jax.tree.map(
                lambda new, old: jnp.where(
                    jnp.reshape(after.terminated, (batch,) + (1,) * (old.ndim - 1)), new, old
                ),
                fresh,
                after,
            )
            return state, record

        games, data = jax.lax.scan(move, games, jax.random.split(moves_key, num_steps))
        # pgx's compute_loss_input: value targets backwards over the chunk, masked
        # where the game did not end inside it.
        ended = jnp.cumsum(data.terminated[::-1], axis=0)[::-1] >= 1

        def backward(value, x):
            reward, discount = x
            value = reward + discount * value
            return value, value

        _, value = jax.lax.scan(
            backward, jnp.zeros(batch), (data.reward, data.discount), reverse=True
        )
        flat = lambda x: x.reshape((-1,) + x.shape[2:])  # noqa: E731
        positions = ObsPositions(obs=flat(data.obs), policy=flat(data.policy), value=flat(value))
        return (games, replay.add(buffer, positions, flat(ended))), ended.sum()

    def sample(buffer, key):
        index_key, mirror_key = jax.random.split(key)
        index = jax.random.randint(index_key, (t.minibatch_size,), 0, jnp.maximum(buffer.size, 1))
        picked = jax.tree.map(lambda x: x[index], buffer.data)
        obs = picked.obs.astype(jnp.float32)
        target = picked.policy
        if t.mirror_augment:  # the same augmentation as c4jax's sampler
            flip = jax.random.bernoulli(mirror_key, 0.5, (t.minibatch_size,))
            obs = jnp.where(flip[:, None, None, None], jnp.flip(obs, axis=-2), obs)
            target = jnp.where(flip[:, None], jnp.flip(target, axis=-1), target)
        return replay.Minibatch(obs=obs, policy=target, value=picked.value)

    sgd_step = learner.make_sgd_step(run.network, run.optimizer, t)

    def learn(learner_state, buffer, key):
        def sgd(ls, sgd_key):
            return sgd_step(ls, sample(buffer, sgd_key))

        keys = jax.random.split(key, t.sgd_steps)
        learner_state, metrics = jax.lax.scan(sgd, learner_state, keys)
        return learner_state, jnp.mean(metrics["loss"])

    games = jax.vmap(game.init)(jax.random.split(games_key, batch))
    capacity = t.replay_capacity
    buffer = replay.ReplayBuffer(
        data=ObsPositions(
            obs=jnp.zeros((capacity,) + games.observation.shape[1:], games.observation.dtype),
            policy=jnp.zeros((capacity, games.legal_action_mask.shape[-1]), jnp.float32),
            value=jnp.zeros((capacity,), jnp.float32),
        ),
        insert=jnp.int32(0),
        size=jnp.int32(0),
    )
    return Pipeline(
        name="reference",
        play=jax.jit(play, donate_argnums=2),
        learn=jax.jit(learn, donate_argnums=0),
        carry=(games, buffer),
        learner_state=learner_state,
        node_bytes=state_bytes(games),
    )


def stub_apply(variables: Any, obs: jax.Array) -> tuple[jax.Array, jax.Array]:
    """A stand-in for the network that costs next to nothing (``--stub-network``).

    It still reads every observation plane, so the observation is built, and its
    outputs depend on the position, so the search does real work.

    Args:
        variables: ignored.
        obs: [B, H, W, 2] planes, float32 or bool.

    Returns:
        ``(logits [B, A], value [B])`` float32.
    """
    del variables
    flat = obs.reshape(obs.shape[0], -1).astype(jnp.float32)  # [B, H * W * 2]
    logits = flat[:, 0:14:2] - flat[:, 1:14:2]  # the top row: stones in it, per column
    value = jnp.tanh(jnp.sum(flat * jnp.arange(flat.shape[1]), axis=-1) * 1e-3 - 0.5)
    return logits, value
