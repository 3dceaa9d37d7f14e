#!/usr/bin/env bash
# A local Python base image built from Debian's own packages, for building deploy/image/Containerfile where no
# image registry is reachable (the tests, an air-gapped build host):
#
#   bash scripts/build_base_image.sh            # prints the image name, e.g. localhost/spark-state-observer-base:bookworm
#   buildah bud --build-arg BASE=localhost/spark-state-observer-base:bookworm -f deploy/image/Containerfile .
#
# mmdebstrap writes a minimal Debian root (python3, python3-venv, ca-certificates; no documentation) as a
# tarball into a cache, and buildah commits it as an image from scratch. Both steps are skipped when their
# result exists, so only the first run downloads (about 40 MB of packages, some 20 seconds).
#
# The root trusts the certificate authorities this machine trusts (its /etc/ssl/certs/ca-certificates.crt):
# pip inside the build then reaches PyPI through the same TLS-inspecting proxy, if there is one, as the host.
#
# Environment: SPARK_STATE_OBSERVER_IMAGE_CACHE (default ~/.cache/spark-state-observer/image),
# SPARK_STATE_OBSERVER_DEBIAN_SUITE (default bookworm: Python 3.11), SPARK_STATE_OBSERVER_DEBIAN_MIRROR
# (default: mmdebstrap's, deb.debian.org), BUILDAH (the buildah command with its global options, default
# "buildah --storage-driver vfs").
set -euo pipefail
CACHE="${SPARK_STATE_OBSERVER_IMAGE_CACHE:-$HOME/.cache/spark-state-observer/image}"
SUITE="${SPARK_STATE_OBSERVER_DEBIAN_SUITE:-bookworm}"
MIRROR="${SPARK_STATE_OBSERVER_DEBIAN_MIRROR:-}"
read -r -a BUILDAH <<<"${BUILDAH:-buildah --storage-driver vfs}"
IMAGE="localhost/spark-state-observer-base:$SUITE"
for tool in mmdebstrap "${BUILDAH[0]}"; do
  command -v "$tool" >/dev/null || { echo "build_base_image.sh: $tool is not installed (apt-get install $tool)" >&2; exit 1; }
done
mkdir -p "$CACHE"
ROOTFS="$CACHE/rootfs-$SUITE.tar"

if [ ! -s "$ROOTFS" ]; then
  # written under a temporary name and renamed: an interrupted run leaves no tarball that looks complete
  mmdebstrap --quiet --variant=minbase --include=python3,python3-venv,ca-certificates \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --customize-hook='copy-in /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs' \
    "$SUITE" "$ROOTFS.part" ${MIRROR:+"$MIRROR"}
  mv "$ROOTFS.part" "$ROOTFS"
fi

if ! "${BUILDAH[@]}" inspect --type image "$IMAGE" >/dev/null 2>&1; then
  container=$("${BUILDAH[@]}" from scratch)
  trap '"${BUILDAH[@]}" rm "$container" >/dev/null' EXIT
  "${BUILDAH[@]}" add "$container" "$ROOTFS" / >/dev/null
  "${BUILDAH[@]}" config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin --env LANG=C.UTF-8 \
    --cmd python3 --label "org.opencontainers.image.description=Debian $SUITE with python3 and python3-venv" "$container"
  "${BUILDAH[@]}" commit --quiet "$container" "$IMAGE" >/dev/null
fi
echo "$IMAGE"
