"""Thin typer commands over the packages; every command module exposes ``register(app)``."""
