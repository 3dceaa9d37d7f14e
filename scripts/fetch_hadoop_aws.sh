#!/usr/bin/env bash
# Fetch Spark's S3 connector (s3a) from Maven Central with Maven's own client into a cache, for the end-to-end test
# where a real PySpark job writes its event log and checkpoint to s3proxy:
#   $DIR/hadoop-aws-<hadoop version>/*.jar   hadoop-aws, the AWS SDK v2 bundle and the analytics accelerator, at the
#                                            versions hadoop-aws's pom names (scripts/hadoop_aws/pom.xml), for spark.jars
# The Hadoop version is the one of the hadoop-client jars PySpark ships (a mismatch fails at run time).
# The folder gets a manifest.json (versions, jar list) written last: a folder with one is complete and is skipped.
# Maven's local repository for this fetch is a temporary one (the SDK bundle alone is ~690 MB: not kept twice).
#
# Environment: SPARK_STATE_OBSERVER_HADOOP_AWS_DIR (default ~/.cache/spark-state-observer/hadoop-aws),
# SPARK_STATE_OBSERVER_MAVEN_REPO (default Maven Central), PYTHON (the interpreter whose PySpark to match, default python).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
DIR="${SPARK_STATE_OBSERVER_HADOOP_AWS_DIR:-$HOME/.cache/spark-state-observer/hadoop-aws}"
export SPARK_STATE_OBSERVER_MAVEN_REPO="${SPARK_STATE_OBSERVER_MAVEN_REPO:-https://repo.maven.apache.org/maven2}"
PYTHON="${PYTHON:-python}"
if ! command -v mvn >/dev/null; then
  echo "fetch_hadoop_aws.sh: Maven (mvn) is not installed (apt-get install maven)" >&2
  exit 1
fi
if ! HADOOP_VERSION="$("$PYTHON" - <<'PY'
import glob, os, re, pyspark
jars = glob.glob(os.path.join(os.path.dirname(pyspark.__file__), "jars", "hadoop-client-api-*.jar"))
print(re.search(r"hadoop-client-api-(.+)\.jar$", jars[0]).group(1))
PY
)"; then
  echo "fetch_hadoop_aws.sh: $PYTHON cannot tell PySpark's Hadoop version (is pyspark installed? pip install -e .)" >&2
  exit 1
fi
target="$DIR/hadoop-aws-$HADOOP_VERSION"
if [ -f "$target/manifest.json" ]; then
  echo "hadoop-aws $HADOOP_VERSION: present in $target"
  exit 0
fi
mkdir -p "$DIR"
rm -rf "$target.part" "$DIR/m2.part"
trap 'rm -rf "$DIR/m2.part"' EXIT
mvn -q -B -Dstyle.color=never -s "$HERE/kafka/settings.xml" -f "$HERE/hadoop_aws/pom.xml" -Dmaven.repo.local="$DIR/m2.part" \
  -Dhadoop.version="$HADOOP_VERSION" dependency:copy-dependencies -DoutputDirectory="$target.part" 2>&1 | sed 's/\x1b\[[0-9;]*m//g'
"$PYTHON" - "$target.part" "$HADOOP_VERSION" <<'PY'
import json, os, sys
folder, hadoop = sys.argv[1], sys.argv[2]
jars = sorted(n for n in os.listdir(folder) if n.endswith(".jar"))
if not any(n.startswith("hadoop-aws-") for n in jars) or not any(n.startswith("bundle-") for n in jars):
    sys.exit(f"fetch_hadoop_aws.sh: hadoop-aws or the AWS SDK bundle is missing from {jars}")
with open(os.path.join(folder, "manifest.json"), "w") as f:
    json.dump({"hadoop": hadoop, "jars": jars}, f, indent=1)
PY
rm -rf "$target" && mv "$target.part" "$target"  # whole or absent
echo "hadoop-aws $HADOOP_VERSION: fetched into $target: $(ls "$target" | grep '\.jar$' | tr '\n' ' ')"
