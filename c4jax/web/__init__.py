"""The local web app (``python -m c4jax.serve``): ``make_app`` builds it around a Player."""
