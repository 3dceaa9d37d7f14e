"""The Spark session behind the State contents page: started on first use of that page only.

Reading state runs batch jobs, so a local session is needed; an already active session in the
process (a notebook, a test) is reused rather than a second one started.
"""

from __future__ import annotations

from typing import Any

import streamlit as st


@st.cache_resource(show_spinner="Starting a local Spark session (first use only)...")
def session() -> Any:
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    return (
        SparkSession.builder.master("local[1]")
        .appName("spark-state-browser")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
