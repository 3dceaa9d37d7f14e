"""``python -m observer.cli``: the same as the ``spark-state-observer`` command."""

import sys

from observer.cli.main import main

sys.exit(main())
