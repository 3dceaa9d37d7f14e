"""Reading what a finished (or running) application left behind: event logs and checkpoints."""
