"""The model: listener events normalized across Spark versions, and the vocabulary they are named in.

``events`` (the dataclasses), ``parse`` (JSON to events), and the leaf vocabularies every other package
reads instead of spelling them again: ``kinds`` (event kinds, statuses, outcomes), ``signal_kinds`` (the
signals' kinds and ``SignalEvent``), ``phases`` (batch phases) and ``fields`` (Spark's operator field names).
"""
