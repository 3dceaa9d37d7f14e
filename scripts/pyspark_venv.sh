#!/usr/bin/env bash
# A virtualenv with another PySpark, for recording incidents with it (scripts/record_*.py --python DIR/bin/python
# --suffix _NN) or running the compatibility matrix by hand.
#   bash scripts/pyspark_venv.sh 3.5.8 /work/venvs/ps35
# Installs the PySpark asked for, pandas and pyarrow (the pandas state jobs need them) and this project.
set -euo pipefail
version=${1:?usage: pyspark_venv.sh VERSION DIR}
venv=${2:?usage: pyspark_venv.sh VERSION DIR}
cd "$(dirname "$0")/.."
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
extra=()
case "$version" in
  3.*) extra=("numpy<2" "pandas<2.3") ;;  # PySpark 3.5's Arrow conversions predate NumPy 2
esac
"$venv/bin/pip" install -q "pyspark==$version" pandas pyarrow "${extra[@]}"
"$venv/bin/pip" install -q -e .
"$venv/bin/python" -c "import pyspark; print('PySpark', pyspark.__version__, 'in', '$venv')"
