"""Value-based agents on the c4jax env: Double DQN ("Yoda"), Q-learning and the linear "Grogu".

``python -m c4jax.dqn.train --config grogu|ddqn|qlearning`` trains one; its
run directory is an agent spec (``dqn:RUN_DIR``) for ``evaluate`` and ``play``.
Modules: ``config`` (frozen configuration, presets in ``c4jax/configs/dqn``),
``qnet`` (the Q-functions and Grogu's alignment features), ``learner`` (TD
targets, loss, SGD step), ``trainer`` (the fused jitted iteration), ``player``
(loading a run's Q-network as an agent), ``train`` (the command line).
"""
