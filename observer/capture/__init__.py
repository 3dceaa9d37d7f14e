"""Taking events from Spark: the listener callbacks and, per batch, the driver's status store."""
