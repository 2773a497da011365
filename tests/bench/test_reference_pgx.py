"""bench/reference_pgx.py: the stub network, and the pgx reference's self-play chunk and
replay rows (with the stub in self-play, so that only pgx, mctx and the buffer compile)."""

import jax
import jax.numpy as jnp
import numpy as np

from bench import bench_train
from bench.reference_pgx import reference_pipeline, stub_apply

SMOKE = ["--blocks", "1", "--channels", "8", "--sims", "2", "--batch", "8", "--steps", "4"]


def test_stub_reads_the_position_and_costs_nothing():
    obs = jnp.zeros((3, 6, 7, 2), bool).at[1, 0, 2, 0].set(True).at[2, 5, 3, 1].set(True)
    logits, value = stub_apply(None, obs)
    assert logits.shape == (3, 7) and value.shape == (3,)
    assert logits.dtype == value.dtype == jnp.float32
    np.testing.assert_array_equal(logits[1], [0, 0, 1, 0, 0, 0, 0])  # a stone in the top row
    assert len(set(np.asarray(value).tolist())) == 3  # every position its own value
    assert np.all(np.abs(value) < 1)


def test_reference_chunk_stores_pgx_observations_with_value_targets():
    from c4jax.alphazero import trainer

    config = bench_train.make_config(bench_train.parse_args(SMOKE))
    run = trainer.Trainer(config)
    state = run.init(jax.random.key(0))
    p = reference_pipeline(run, jax.random.key(1), state.learner, stub_apply)
    assert p.name == "reference" and p.node_bytes > 100  # pgx's state in every tree node
    found = []
    for i in range(3):
        p.carry, rows = p.play(None, jax.random.key(10 + i), p.carry)
        found.append(int(rows))
    games, buffer = p.carry
    assert games.observation.shape == (8, 6, 7, 2)
    # Only positions of games that ended inside their chunk get a target.
    assert 0 < sum(found) <= 3 * 8 * 4 and int(buffer.size) == sum(found)
    rows = jax.tree.map(lambda x: np.asarray(x[: sum(found)]), buffer.data)
    assert set(np.unique(rows.value)) <= {-1.0, 0.0, 1.0}
    np.testing.assert_allclose(rows.policy.sum(axis=-1), 1.0, rtol=1e-5)
    assert rows.obs.dtype == np.bool_ and rows.obs.shape[1:] == (6, 7, 2)
