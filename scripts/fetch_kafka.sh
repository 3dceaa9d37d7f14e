#!/usr/bin/env bash
# Fetch the real Kafka parts the tests and the demo use from Maven Central (Maven's own client), into a cache:
#   $DIR/broker-<kafka version>/*.jar        a KRaft broker:  java -cp "$DIR/broker-V/*" kafka.Kafka server.properties
#   $DIR/connector-<pyspark version>/*.jar   Spark's Kafka source for the installed PySpark, for spark.jars (no Ivy at run time);
#                                            its Scala binary version from PySpark's (3.x: _2.12, 4.x: _2.13)
# Each folder gets a manifest.json (versions, jar list) written last: a folder with one is complete and is skipped.
#
# Environment: SPARK_STATE_OBSERVER_KAFKA_DIR (default ~/.cache/spark-state-observer/kafka),
# SPARK_STATE_OBSERVER_KAFKA_VERSION (broker, default 4.1.1), SPARK_STATE_OBSERVER_MAVEN_REPO (default Maven Central),
# PYTHON (the interpreter whose PySpark the connector must match, default python).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
DIR="${SPARK_STATE_OBSERVER_KAFKA_DIR:-$HOME/.cache/spark-state-observer/kafka}"
KAFKA_VERSION="${SPARK_STATE_OBSERVER_KAFKA_VERSION:-4.1.1}"
export SPARK_STATE_OBSERVER_MAVEN_REPO="${SPARK_STATE_OBSERVER_MAVEN_REPO:-https://repo.maven.apache.org/maven2}"
PYTHON="${PYTHON:-python}"
if ! command -v mvn >/dev/null; then
  echo "fetch_kafka.sh: Maven (mvn) is not installed (apt-get install maven)" >&2
  exit 1
fi
if ! PYSPARK_VERSION="$("$PYTHON" -c 'import pyspark; print(pyspark.__version__)' 2>/dev/null)"; then
  echo "fetch_kafka.sh: $PYTHON cannot import pyspark; install the package first (pip install -e .): the connector must match its version" >&2
  exit 1
fi
# Spark's Scala binary version: 3.x is built for Scala 2.12 (its PyPI jars are _2.12), 4.x for 2.13 only
case "$PYSPARK_VERSION" in
  3.*) SCALA_BINARY=2.12 ;;
  *) SCALA_BINARY=2.13 ;;
esac
MVN=(mvn -q -B -Dstyle.color=never -s "$HERE/kafka/settings.xml" -f "$HERE/kafka/pom.xml")
mvn_q() { "${MVN[@]}" "$@" 2>&1 | sed 's/\x1b\[[0-9;]*m//g'; }  # quiet Maven still writes colour resets
mkdir -p "$DIR"

# newest published release of a Spark artifact not newer than PySpark's version, same major
# (Central may lag behind PyPI: PySpark 4.3.0 was on PyPI before spark-sql-kafka 4.3.0 reached Central)
nearest() {
  "$PYTHON" - "$1" "$PYSPARK_VERSION" <<'PY'
import os, re, sys, urllib.request
artifact, want = sys.argv[1], sys.argv[2]
url = f"{os.environ['SPARK_STATE_OBSERVER_MAVEN_REPO']}/org/apache/spark/{artifact}/maven-metadata.xml"
versions = re.findall(r"<version>(\d+)\.(\d+)\.(\d+)</version>", urllib.request.urlopen(url, timeout=60).read().decode())
target = tuple(int(p) for p in want.split(".")[:3])
ok = sorted({tuple(map(int, v)) for v in versions if int(v[0]) == target[0] and tuple(map(int, v)) <= target})
if not ok:
    sys.exit(f"no release of {artifact} for Spark {want} on {url}")
print(".".join(map(str, ok[-1])))
PY
}

manifest() {  # folder, then key=value pairs
  local folder="$1"; shift
  "$PYTHON" - "$folder" "$@" <<'PY'
import json, os, sys
folder, pairs = sys.argv[1], sys.argv[2:]
doc = dict(p.split("=", 1) for p in pairs)
doc["jars"] = sorted(n for n in os.listdir(folder) if n.endswith(".jar"))
with open(os.path.join(folder, "manifest.json"), "w") as f:
    json.dump(doc, f, indent=1)
PY
}

broker="$DIR/broker-$KAFKA_VERSION"
if [ -f "$broker/manifest.json" ]; then
  echo "kafka broker $KAFKA_VERSION: present in $broker"
else
  rm -rf "$broker.part"
  mvn_q -Pbroker -Dkafka.version="$KAFKA_VERSION" dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$broker.part"
  manifest "$broker.part" kafka="$KAFKA_VERSION"
  rm -rf "$broker" && mv "$broker.part" "$broker"
  echo "kafka broker $KAFKA_VERSION: fetched $(ls "$broker" | grep -c '\.jar$') jars into $broker"
fi

connector="$DIR/connector-$PYSPARK_VERSION"
if [ -f "$connector/manifest.json" ]; then
  echo "spark kafka connector for pyspark $PYSPARK_VERSION: present in $connector"
else
  sql_kafka="$(nearest "spark-sql-kafka-0-10_$SCALA_BINARY")"
  token="$(nearest "spark-token-provider-kafka-0-10_$SCALA_BINARY")"
  if [ "$sql_kafka" != "$PYSPARK_VERSION" ] || [ "$token" != "$PYSPARK_VERSION" ]; then
    echo "warning: Maven Central has no $PYSPARK_VERSION connector; using spark-sql-kafka $sql_kafka, token provider $token" >&2
  fi
  rm -rf "$connector.part"
  mvn_q -Pconnector -Dspark.version="$sql_kafka" -Dspark.token.version="$token" -Dscala.binary.version="$SCALA_BINARY" dependency:copy-dependencies -DoutputDirectory="$connector.part"
  manifest "$connector.part" pyspark="$PYSPARK_VERSION" scala="$SCALA_BINARY" spark_sql_kafka="$sql_kafka" spark_token_provider="$token"
  rm -rf "$connector" && mv "$connector.part" "$connector"
  echo "spark kafka connector for pyspark $PYSPARK_VERSION: fetched into $connector: $(ls "$connector" | grep '\.jar$' | tr '\n' ' ')"
fi
