"""``python -m spark_state_observer.cli``: the same as the ``spark-state-observer`` command."""

import sys

from spark_state_observer.cli.main import main

sys.exit(main())
