#!/usr/bin/env bash
# Run the end-to-end tests on several PySpark versions, each in its own virtualenv, and print a table.
#   bash scripts/compat_matrix.sh                # 3.5.8 4.0.5 4.3.0
#   bash scripts/compat_matrix.sh 3.5.8          # one version
# CI runs the newest only (the installed one); this script is for the matrix in README.md.
set -uo pipefail
cd "$(dirname "$0")/.."
versions=("$@")
[ ${#versions[@]} -gt 0 ] || versions=(3.5.8 4.0.5 4.3.0)
tests=(tests/e2e/test_e2e_spark.py tests/unit/test_replay.py tests/unit/test_eventlog.py)
select='rocksdb_query or hdfs or stalled or restart_in_a_new_process or replay or eventlog or codec or metrics_equal'
echo "| PySpark | result |"
echo "|---|---|"
for v in "${versions[@]}"; do
  venv="${TMPDIR:-/tmp}/sso-compat-$v"
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  "$venv/bin/pip" install -q "pyspark==$v" pytest hypothesis pandas >/dev/null 2>&1 && "$venv/bin/pip" install -q -e . >/dev/null 2>&1
  summary=$("$venv/bin/python" -m pytest -p no:cacheprovider -q "${tests[@]}" -k "$select" 2>&1 | tail -1)
  echo "| $v | $summary |"
done
