"""``spark-state-observer mcp``: a read-only Model Context Protocol server for assistants.

An on-call engineer who asks an assistant first gets the same answers the state browser gives: the
fleet's verdicts, one query explained with its runbook section, restores in progress, a checkpoint
inspected, a sizing what-if. ``answers`` reads the history and says it in plain words plus data;
``server`` declares the tools and resources with the official ``mcp`` SDK; ``serve`` runs them over
stdio or streamable HTTP (with the TLS and basic-auth settings of ``/metrics``).
"""
