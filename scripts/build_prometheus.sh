#!/usr/bin/env bash
# Build a Prometheus 3 from its Go module, for tests/integration/test_openmetrics_prometheus.py.
# Debian 12's prometheus (2.42) cannot read created timestamps from OpenMetrics; Prometheus 3 can.
# Service discovery is left out (only static, file and http remain): the build is then about a third shorter.
# Usage: bash scripts/build_prometheus.sh [OUT] ; then SPARK_STATE_OBSERVER_TEST_PROMETHEUS=OUT pytest ...
set -euo pipefail
VERSION=3.5.0
MODULE=v0.305.0   # Prometheus 3.5.0 as a Go module version
OUT=${1:-/tmp/prometheus-$VERSION/prometheus}
WORK=$(mktemp -d)
export GOPATH="${GOPATH:-$(go env GOPATH)}" GOFLAGS=-mod=mod
cd "$WORK"
go mod init local/prometheus-build >/dev/null 2>&1
SRC=$(go mod download -json "github.com/prometheus/prometheus@$MODULE" | sed -n 's/.*"Dir": "\(.*\)",/\1/p')
cp -r "$SRC" prom && chmod -R u+w prom
printf '// Trimmed: no service discovery beyond static, file and http.\n\npackage plugins\n' > prom/plugins/plugins.go
go mod edit -require="github.com/prometheus/prometheus@$MODULE" -replace=github.com/prometheus/prometheus=./prom \
  -replace=github.com/fsnotify/fsnotify@v1.8.0=github.com/fsnotify/fsnotify@v1.7.0   # as Prometheus' own go.mod does
mkdir -p "$(dirname "$OUT")"
go build -p 2 -ldflags "-X github.com/prometheus/common/version.Version=$VERSION" -o "$OUT" github.com/prometheus/prometheus/cmd/prometheus
"$OUT" --version | head -1
