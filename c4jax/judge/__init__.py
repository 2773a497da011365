"""Everything that measures an agent, apart from the training engine.

* ``protocol``: what an agent is (jittable or host-side) and the one cache of
  compiled agent calls and matches.
* ``agents``: the baselines (random, lookahead, mcts-N, minimax-K) and the
  network agent (network alone or with search).
* ``registry``: ``make_agent(spec)``, the only list of agent specs.
* ``arena``: batched matches and their ``MatchResult``; round robins.
* ``stats``: confidence intervals.
* ``solver``: the Pons solver sets and the mistake-rate metric.
* ``elo``: Bradley-Terry ratings.
* ``periodic``: the evaluation during training, and gating.

Importing ``c4jax.judge`` loads none of them.
"""
