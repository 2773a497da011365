"""The AlphaZero engine: config, network, search, self-play, learner, the fused trainer, and
``Player`` (a trained network behind a move-string API)."""
