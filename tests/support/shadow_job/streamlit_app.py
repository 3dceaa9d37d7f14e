"""A job's own ``streamlit_app`` module: the name this package's browser once took (issue 48)."""

TITLE = "the job's app"
