#!/usr/bin/env bash
# The README's test command: install everything the tests need, then run them (arguments go to pytest).
#
#   bash scripts/test.sh                 # the whole suite (tests/unit, tests/integration, tests/e2e)
#   bash scripts/test.sh -m "not slow"   # the fast tests alone
#   bash scripts/test.sh tests/unit      # one folder: unit (no Spark, no server), integration (real servers), e2e (real Spark)
#   SPARK_STATE_OBSERVER_TEST_WORKERS=0 bash scripts/test.sh   # in one process (two by default)
#
# Debian packages (Prometheus, promtool, Pushgateway, Alertmanager, Java, Maven, Chromium, PostgreSQL, and
# buildah with mmdebstrap for the container image test) are
# installed with apt-get when this runs as root (or with passwordless sudo); otherwise it says what to
# install and the tests that need them skip (or fail, with SPARK_STATE_OBSERVER_REQUIRE_REAL=1, as in CI).
# The Kafka broker and Spark's Kafka connector come from Maven Central into a cache (scripts/fetch_kafka.sh), and so
# does s3proxy, the S3-compatible server of the object-store tests (scripts/fetch_s3proxy.sh), with Spark's S3
# connector (hadoop-aws and the AWS SDK bundle, scripts/fetch_hadoop_aws.sh) for the job that writes there through s3a.
set -euo pipefail
cd "$(dirname "$0")/.."

# command (or file) -> Debian package
declare -A NEEDS=(
  [prometheus]=prometheus [promtool]=prometheus [prometheus-pushgateway]=prometheus-pushgateway
  [amtool]=prometheus-alertmanager [java]=default-jre-headless [mvn]=maven [openssl]=openssl
  [chromium]=chromium [/usr/lib/postgresql]=postgresql [buildah]=buildah [mmdebstrap]=mmdebstrap
)
missing=()
for what in "${!NEEDS[@]}"; do
  if [[ "$what" == /* ]]; then [ -e "$what" ] || missing+=("${NEEDS[$what]}")
  else command -v "$what" >/dev/null 2>&1 || missing+=("${NEEDS[$what]}"); fi
done
if [ ${#missing[@]} -gt 0 ]; then
  packages=$(printf '%s\n' "${missing[@]}" | sort -u | tr '\n' ' ')
  if command -v apt-get >/dev/null 2>&1 && { [ "$(id -u)" = 0 ] || sudo -n true 2>/dev/null; }; then
    as_root=""; [ "$(id -u)" = 0 ] || as_root="sudo -n"
    echo "installing Debian packages: $packages"
    $as_root apt-get update -qq
    # shellcheck disable=SC2086
    DEBIAN_FRONTEND=noninteractive $as_root apt-get install -y -qq --no-install-recommends $packages >/dev/null
  else
    echo "warning: install these Debian packages for the end-to-end tests (they skip without them): $packages" >&2
  fi
fi
command -v kubectl >/dev/null 2>&1 || echo "warning: kubectl not found: the Kubernetes kustomize test skips (install kubectl)" >&2

python -m pip install -q -e '.[test]'
if command -v mvn >/dev/null 2>&1 && command -v java >/dev/null 2>&1; then
  bash scripts/fetch_kafka.sh
  bash scripts/fetch_s3proxy.sh
  bash scripts/fetch_hadoop_aws.sh
else
  echo "warning: no mvn/java: the Kafka and object-store tests skip (bash scripts/fetch_kafka.sh, scripts/fetch_s3proxy.sh and scripts/fetch_hadoop_aws.sh after installing maven)" >&2
fi

# Two test processes (pytest-xdist), each file whole in one of them (module and session fixtures, a Spark
# session, a broker, are made once per process): most slow tests wait on Spark batches, brokers and servers, and
# the other process uses that time. SPARK_STATE_OBSERVER_TEST_WORKERS sets how many (0: one process, as plain pytest).
status=0
python -m pytest -n "${SPARK_STATE_OBSERVER_TEST_WORKERS:-2}" --dist loadfile "$@" || status=$?
# pytest's "no tests collected" (5) is a failure here too: a run that tests nothing proves nothing
exit "$status"
