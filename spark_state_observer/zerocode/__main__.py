"""``python -m spark_state_observer.zerocode path``: print the folder zero-code attach needs on ``PYTHONPATH``.

For configuration that cannot run ``spark-state-observer run`` (``spark.kubernetes.driverEnv.PYTHONPATH``,
``spark.yarn.appMasterEnv.PYTHONPATH``, an init script): ``--pythonpath`` prints the whole value, the
folder before the current ``PYTHONPATH``.
"""

from __future__ import annotations

import argparse
import os
import sys

from spark_state_observer.zerocode import boot_path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m spark_state_observer.zerocode", description="Zero-code attach: where the boot folder is."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    path = sub.add_parser("path", help="print the folder to put first on the driver's PYTHONPATH")
    path.add_argument("--pythonpath", action="store_true", help="print that folder joined with the current PYTHONPATH")
    args = parser.parse_args(argv)
    if args.pythonpath:
        print(os.pathsep.join(p for p in (boot_path(), os.environ.get("PYTHONPATH", "")) if p))
    else:
        print(boot_path())
    return 0


if __name__ == "__main__":
    sys.exit(main())
