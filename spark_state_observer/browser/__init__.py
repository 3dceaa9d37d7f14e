"""The state browser: a Streamlit app over the history, the checkpoints and Spark's state readers.

``spark-state-observer ui`` runs ``APP_PATH`` with ``streamlit run``; the path is taken from this
package so it resolves the same from a source tree, an editable install or an installed wheel.
"""

from __future__ import annotations

import os

APP_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "app.py")
