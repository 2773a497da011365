"""The AlphaZero engine: config, network, search, self-play, learner and the fused trainer."""
