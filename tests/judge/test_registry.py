"""The agent registry: spec parsing, errors that list the forms, building agents."""

import functools

import jax
import numpy as np
import pytest

from c4jax import baselines, env
from c4jax.judge import registry
from c4jax.player import Player

# --- Agent specs (no checkpoint needed). ---


@pytest.mark.parametrize(
    "spec, kind, value",
    [
        ("random", "random", None),
        ("lookahead", "lookahead", None),
        ("win-if-you-can", "win-if-you-can", None),
        ("mcts", "mcts", 1000),
        ("mcts-50", "mcts", 50),
        ("minimax", "minimax", 5),
        ("minimax-3", "minimax", 3),
    ],
)
def test_parse_spec_reference_agents(spec, kind, value):
    parsed = registry.parse_spec(spec)
    assert (parsed.kind, parsed.value) == (kind, value)


def test_parse_spec_dqn_forms(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    assert registry.parse_spec(f"dqn:{run}") == registry.AgentSpec(kind="dqn", run_dir=run)
    assert registry.parse_spec(f"dqn:{run}:30").step == 30
    with pytest.raises(ValueError, match="no run directory"):
        registry.parse_spec(f"dqn:{tmp_path / 'nope'}")
    with pytest.raises(ValueError, match="checkpoint step 'x' is not a whole number"):
        registry.parse_spec(f"dqn:{run}:x")


def test_parse_spec_run_forms(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    assert registry.parse_spec(str(run)) == registry.AgentSpec(kind="run", run_dir=run)
    parsed = registry.parse_spec(f"{run}@64")
    assert (parsed.run_dir, parsed.step, parsed.sims) == (run, None, 64)
    parsed = registry.parse_spec(f"{run}:40@0")
    assert (parsed.run_dir, parsed.step, parsed.sims) == (run, 40, 0)
    parsed = registry.parse_spec(f"{run}:7")
    assert (parsed.run_dir, parsed.step, parsed.sims) == (run, 7, None)


@pytest.mark.parametrize(
    "spec, problem",
    [
        ("mcst", "no run directory 'mcst'"),
        ("mcts-0", "out of range"),
        ("mcts-many", "not a whole number"),
        ("minimax-0", "out of range"),
        ("minimax-99", "out of range"),
        ("", "empty"),
        ("no/such/run@64", "no run directory 'no/such/run'"),
    ],
)
def test_make_agent_rejects_bad_specs(spec, problem):
    with pytest.raises(ValueError) as err:
        registry.make_agent(spec)
    message = str(err.value)
    assert problem in message
    assert "Allowed:" in message and "mcts-N" in message


def test_make_agent_rejects_bad_run_suffixes(tmp_path):
    with pytest.raises(ValueError, match="simulations 'x' is not a whole number"):
        registry.make_agent(f"{tmp_path}@x")
    with pytest.raises(ValueError, match="not a run directory"):
        registry.make_agent(f"{tmp_path}@4")  # a folder, but no checkpoints/




# --- Building agents. ---


def test_make_agent_normalises_names_and_builds_the_baselines():
    assert registry.make_agent("random") == ("random", baselines.random_agent)
    assert registry.make_agent(" lookahead ") == ("lookahead", baselines.lookahead_agent)
    name, agent = registry.make_agent("mcts")
    assert name == "mcts-1000" and agent.keywords["num_simulations"] == 1000
    name, agent = registry.make_agent("minimax-3")
    assert name == "minimax-3" and agent.keywords["depth"] == 3


def test_every_entry_is_listed_in_the_forms_and_the_help():
    kinds = [entry.kind for entry in registry.ENTRIES]
    assert len(set(kinds)) == len(kinds) and kinds[-1] == "run"  # the catch-all is last
    help_text = registry.describe()
    for entry in registry.ENTRIES:
        assert entry.form in registry.AGENT_FORMS
        assert f"{entry.form}\n      {entry.description}" in help_text


def test_make_agents_rejects_a_repeated_agent():
    assert [n for n, _ in registry.make_agents(["random", "mcts-5"])] == ["random", "mcts-5"]
    with pytest.raises(ValueError, match="'mcts-1000' is listed twice"):
        registry.make_agents(["mcts", "mcts-1000"])


@pytest.mark.slow
def test_run_agents_are_cached_and_play_like_the_player(tiny_run):
    name, agent = registry.make_agent(f"{tiny_run}@0")
    step = int(name.rsplit(":", 1)[1].split("@")[0])
    assert name == f"{tiny_run}:{step}@0"
    assert registry.make_agent(f"{tiny_run}@0").agent is agent  # one object: reused jit
    assert registry.make_agent(f"{tiny_run}:{step}@0").name == name
    assert isinstance(agent, functools.partial)  # its variables are jit arguments
    player = Player.from_checkpoint(tiny_run, num_simulations=0)
    assert player.step == step
    states = env.stack([env.from_moves(m) for m in ("", "4", "4453", "121212")])
    key = jax.random.key(0)
    np.testing.assert_array_equal(
        np.asarray(jax.jit(agent)(key, states)), np.asarray(jax.jit(player.act)(key, states))
    )


@pytest.mark.slow
def test_an_exported_network_is_an_agent_that_plays_like_its_run(tiny_run, tmp_path):
    from c4jax.store import checkpoints, exported

    restored = checkpoints.restore_variables(tiny_run, None)
    out = exported.export_network(restored, tmp_path / "net", {"note": "test"})
    name, agent = registry.make_agent(f"{out}@0")
    assert name == f"{out}@0"
    assert registry.make_agent(f"{out}@0").agent is agent  # cached: one jit
    _, from_run = registry.make_agent(f"{tiny_run}:{restored.step}@0")
    states = env.stack([env.from_moves(m) for m in ("", "4", "4453", "121212")])
    key = jax.random.key(0)
    np.testing.assert_array_equal(
        np.asarray(jax.jit(agent)(key, states)), np.asarray(jax.jit(from_run)(key, states))
    )
    with pytest.raises(ValueError, match="exported network, which holds one step: drop :STEP"):
        registry.make_agent(f"{out}:3@0")
