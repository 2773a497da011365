"""What is kept on disk: a run's Orbax checkpoints, their damage checks, exported networks."""
