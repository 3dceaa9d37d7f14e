"""Pieces several pages show (a verdict, a query's summary line, a checkpoint's inspection): views use
them, so no view imports another."""
