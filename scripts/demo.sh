#!/usr/bin/env bash
# Run the demo on a fresh machine: install Java (Debian/Ubuntu, as root) and the package, then start it.
# Arguments go to `spark-state-observer demo` (e.g. --provider hdfs --duration 60 --port 9200).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v java >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends default-jre-headless
  else
    echo "spark-state-observer demo needs Java 17 or newer (e.g. apt-get install default-jre-headless)" >&2
    exit 1
  fi
fi
python3 -m pip install -q -e '.[ui]'
exec spark-state-observer demo --ui 8501 "$@"
