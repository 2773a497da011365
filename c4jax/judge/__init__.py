"""Everything that measures an agent, apart from the training engine.

* ``protocol``: what an agent is (jittable or host-side) and the one cache of
  compiled agent calls and matches.
* ``registry``: ``make_agent(spec)``, the only list of agent specs; it builds
  the baselines (random, win-if-you-can and lookahead in ``c4jax.baselines``),
  the network agents (``c4jax.alphazero.search``) and the agents below.
* ``uct``: mcts-N, rollout MCTS; ``minimax``: minimax-K, depth-limited
  alpha-beta; ``perfect``: the perfect player and the move judge (bitbully).
* ``arena``: batched matches and their ``MatchResult``; round robins.
* ``stats``: confidence intervals.
* ``solver``: the Pons solver sets and the mistake-rate metric.
* ``elo``: Bradley-Terry ratings.
* ``periodic``: the evaluation during training, and gating.

Importing ``c4jax.judge`` loads none of them.
"""
