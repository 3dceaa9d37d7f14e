"""A job's own ``observer`` module: the name this package's import once took (issue 48).

Zero-code attach must leave it to the job, in the driver and in Spark's Python workers alike.
"""

OWNER = "the job"


def bucket(value: int) -> str:
    """The job's own key function, run by Spark's Python workers inside a UDF."""
    return f"bucket-{value % 5}"
