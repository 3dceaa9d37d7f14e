"""Signals derived from the event stream: restarts, restores, reloads, stalls, growth, lag."""
