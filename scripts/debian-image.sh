#!/usr/bin/env bash
# Builds the debian-6.4 line's builder image (localhost/rocforge/builder:debian-6.4) with
# rocforge itself: the sid base by debootstrap when podman lacks it, then
# containers/Containerfile.debian-6.4 (podman's layer cache makes a second run take seconds).
# tests/it/real_rocm.rs builds real ROCm code in it. Run as root, after `cargo build`.
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/lib.sh"
require_root

bin="${ROCFORGE_BIN:-$ROCFORGE_ROOT/target/debug/rocforge}"
[ -x "$bin" ] || die "$bin not found: run cargo build first (or set ROCFORGE_BIN)"
export CONTAINERS_CONF="$ROCFORGE_CONTAINERS_CONF"
store="${ROCFORGE_STORE:-/var/lib/rocforge-test/store}"
mkdir -p "$store"
"$bin" --recipes "$ROCFORGE_ROOT/recipes" --release debian-6.4 --store "$store" \
    image build --runtime podman
