#!/usr/bin/env bash
# Fetch s3proxy (an S3-compatible server, org.gaul:s3proxy, its jar-with-dependencies) from Maven Central with
# Maven's own client into a cache, for the object-store tests: $DIR/s3proxy-<version>.jar, run as
#   java -jar s3proxy-<version>.jar --properties s3proxy.conf   (filesystem backend, loopback: tests/support/s3_server.py)
#
# Environment: SPARK_STATE_OBSERVER_S3PROXY_DIR (default ~/.cache/spark-state-observer/s3proxy),
# SPARK_STATE_OBSERVER_S3PROXY_VERSION (default 2.6.0), SPARK_STATE_OBSERVER_MAVEN_REPO (default Maven Central).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
DIR="${SPARK_STATE_OBSERVER_S3PROXY_DIR:-$HOME/.cache/spark-state-observer/s3proxy}"
VERSION="${SPARK_STATE_OBSERVER_S3PROXY_VERSION:-2.6.0}"
export SPARK_STATE_OBSERVER_MAVEN_REPO="${SPARK_STATE_OBSERVER_MAVEN_REPO:-https://repo.maven.apache.org/maven2}"
if ! command -v mvn >/dev/null; then
  echo "fetch_s3proxy.sh: Maven (mvn) is not installed (apt-get install maven)" >&2
  exit 1
fi
jar="$DIR/s3proxy-$VERSION.jar"
if [ -f "$jar" ]; then
  echo "s3proxy $VERSION: present in $jar"
  exit 0
fi
mkdir -p "$DIR"
rm -rf "$DIR/part"
mvn -q -B -Dstyle.color=never -s "$HERE/kafka/settings.xml" dependency:copy \
  -Dartifact="org.gaul:s3proxy:$VERSION:jar:jar-with-dependencies" -DoutputDirectory="$DIR/part" 2>&1 | sed 's/\x1b\[[0-9;]*m//g'
mv "$DIR/part/s3proxy-$VERSION-jar-with-dependencies.jar" "$jar.part" && mv "$jar.part" "$jar"  # whole or absent
rm -rf "$DIR/part"
echo "s3proxy $VERSION: fetched into $jar"
