"""Offline tools, without a running job: replay of recorded events, the checkpoint inspector, state readers."""
