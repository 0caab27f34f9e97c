#!/usr/bin/env bash
# Builds the container images rocforge's container tests use, without any registry:
#   localhost/rocforge-test-base:bookworm     debootstrap --variant=minbase, podman import
#   localhost/rocforge-test-builder:bookworm  containers/Containerfile.test-builder (hipcc, cmake,
#                                             ninja, make, g++), podman build --timestamp 0
# Each image carries the label org.rocforge.test.inputs = hash of its inputs; an image whose
# label matches is kept, anything else is rebuilt. Then the builder is checked (it compiles a
# HIP kernel for gfx90c and gfx902) and both images are loaded into the test docker daemon
# (scripts/start-docker.sh) when it answers. Run as root. Idempotent.
#
# Environment: ROCFORGE_DEBIAN_MIRROR overrides the mirror read from the apt sources;
# DOCKER_HOST overrides the test daemon's socket.
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/lib.sh"
require_root

SUITE=bookworm
VARIANT=minbase
CONTAINERFILE="$ROCFORGE_ROOT/containers/Containerfile.test-builder"
# Bump to force a rebuild of both images when this script's recipe changes.
RECIPE_VERSION=1

# The Debian mirror this machine's apt uses for $SUITE (deb822 debian.sources first, then
# sources.list), so debootstrap reaches the same mirror apt does.
debian_mirror() {
    local f=/etc/apt/sources.list.d/debian.sources uri
    if [ -n "${ROCFORGE_DEBIAN_MIRROR:-}" ]; then
        printf '%s' "$ROCFORGE_DEBIAN_MIRROR"
        return
    fi
    if [ -r "$f" ]; then
        # First stanza whose Suites has exactly $SUITE; print its first URI.
        uri=$(awk -v suite="$SUITE" '
            function flush() { if (!done && has_suite && uri != "") { print uri; done = 1 } uri = ""; has_suite = 0 }
            /^[ \t]*$/ { flush(); next }
            /^URIs:/ { uri = $2 }
            /^Suites:/ { for (i = 2; i <= NF; i++) if ($i == suite) has_suite = 1 }
            END { flush() }' "$f")
        if [ -n "$uri" ]; then
            printf '%s' "$uri"
            return
        fi
    fi
    if [ -r /etc/apt/sources.list ]; then
        uri=$(awk -v suite="$SUITE" '$1 == "deb" {
                i = 2; if ($i ~ /^\[/) { while ($i !~ /\]$/) i++; i++ }
                if ($(i + 1) == suite) { print $i; exit } }' /etc/apt/sources.list)
        if [ -n "$uri" ]; then
            printf '%s' "$uri"
            return
        fi
    fi
    die "no Debian mirror for $SUITE in /etc/apt/sources.list.d/debian.sources or /etc/apt/sources.list; set ROCFORGE_DEBIAN_MIRROR"
}

MIRROR=$(debian_mirror)

base_inputs() {
    printf 'recipe=%s\nsuite=%s\nvariant=%s\nmirror=%s\ndebootstrap=%s\narch=%s\n' \
        "$RECIPE_VERSION" "$SUITE" "$VARIANT" "$MIRROR" \
        "$(dpkg-query -W -f='${Version}' debootstrap)" "$(dpkg --print-architecture)" \
        | sha256sum | cut -d' ' -f1
}

builder_inputs() {
    { printf 'recipe=%s\nbase=%s\n' "$RECIPE_VERSION" "$(image_id "$ROCFORGE_TEST_BASE" rf_podman)"
      cat "$CONTAINERFILE"; } | sha256sum | cut -d' ' -f1
}

build_base() {
    local want tmp
    want=$(base_inputs)
    if [ "$(inputs_of "$ROCFORGE_TEST_BASE" rf_podman)" = "$want" ]; then
        log "$ROCFORGE_TEST_BASE is up to date"
        return 0
    fi
    log "building $ROCFORGE_TEST_BASE: debootstrap --variant=$VARIANT $SUITE from $MIRROR"
    tmp=$(mktemp -d /var/tmp/rocforge-test-base.XXXXXX)
    # shellcheck disable=SC2064 # expand $tmp now
    trap "rm -rf '$tmp'" EXIT
    timed "debootstrap" run_debootstrap "$tmp"
    rm -rf "$tmp/root/var/cache/apt/archives/"*.deb "$tmp/root/var/lib/apt/lists/"*
    timed "podman import base" import_rootfs "$tmp/root" "$want"
    rm -rf "$tmp"
    trap - EXIT
}

run_debootstrap() {
    local tmp="$1"
    debootstrap --variant="$VARIANT" "$SUITE" "$tmp/root" "$MIRROR" >"$tmp/debootstrap.log" 2>&1 \
        || { tail -n 30 "$tmp/debootstrap.log" >&2; return 1; }
}

import_rootfs() {
    local root="$1" inputs="$2"
    tar --numeric-owner --xattrs -C "$root" -c . \
        | rf_podman import --quiet \
            --change 'CMD ["/bin/bash"]' \
            --change "LABEL $ROCFORGE_INPUTS_LABEL=$inputs" \
            - "$ROCFORGE_TEST_BASE" >/dev/null
}

build_builder() {
    local want buildlog=/var/log/rocforge-test-builder-build.log
    want=$(builder_inputs)
    if [ "$(inputs_of "$ROCFORGE_TEST_BUILDER" rf_podman)" = "$want" ]; then
        log "$ROCFORGE_TEST_BUILDER is up to date"
        return 0
    fi
    log "building $ROCFORGE_TEST_BUILDER from ${CONTAINERFILE#"$ROCFORGE_ROOT"/}"
    rf_podman build --timestamp 0 --pull=never \
        --label "$ROCFORGE_INPUTS_LABEL=$want" \
        -f "$CONTAINERFILE" -t "$ROCFORGE_TEST_BUILDER" "$ROCFORGE_ROOT/containers" \
        >"$buildlog" 2>&1 \
        || { tail -n 40 "$buildlog" >&2; die "podman build of $ROCFORGE_TEST_BUILDER failed (log: $buildlog)"; }
}

# remove_replaced ENGINE...: remove the images the tags pointed at before this run, when the tags
# moved (builder first: it is the base's child). Only those IDs: other images in the store
# belong to others; one still in use stays.
remove_replaced() {
    local id
    for id in "${replaced[@]}"; do
        "$@" rmi "$id" >/dev/null 2>&1 || true
    done
}

# The builder must compile HIP for gfx90c and gfx902, with hipcc and with clang++-15 the way
# CMake projects use it, offline.
verify_builder() {
    local out
    # shellcheck disable=SC2016 # expanded by the container's shell
    out=$(rf_podman run --rm --network none "$ROCFORGE_TEST_BUILDER" sh -euc '
        cd "$(mktemp -d)"
        printf "%s\n" "#include <hip/hip_runtime.h>" \
            "__global__ void k(float *x) { x[threadIdx.x] *= 2.0f; }" >k.hip
        hipcc --offload-arch=gfx90c --offload-arch=gfx902 -c k.hip -o k.o
        clang++-15 -x hip --rocm-path=/usr \
            --rocm-device-lib-path=/usr/lib/x86_64-linux-gnu/amdgcn/bitcode \
            --offload-arch=gfx90c --offload-arch=gfx902 -c k.hip -o k2.o
        for o in k.o k2.o; do
            llvm-objcopy-15 --dump-section .hip_fatbin=f.bin "$o"
            clang-offload-bundler-15 --list --type=o --input=f.bin | sort | tr "\n" " "
            echo
        done' 2>&1) || { printf '%s\n' "$out" >&2; die "$ROCFORGE_TEST_BUILDER cannot compile HIP"; }
    if [ "$(printf '%s\n' "$out" | grep -c -- '--gfx902 .*--gfx90c ')" -ne 2 ]; then
        printf '%s\n' "$out" >&2
        die "$ROCFORGE_TEST_BUILDER: compiled objects lack gfx90c/gfx902 code objects"
    fi
}

# Load both images into the test docker daemon, when one answers, unless it has them already.
load_into_docker() {
    local host="${DOCKER_HOST:-$ROCFORGE_DOCKER_HOST}" cli image old
    if ! cli=$(docker_cli "$host"); then
        log "no docker daemon answers at $host; images not loaded into docker (run scripts/start-docker.sh)"
        return 0
    fi
    replaced=()
    for image in "$ROCFORGE_TEST_BUILDER" "$ROCFORGE_TEST_BASE"; do
        old=$(image_id "$image" "$cli" -H "$host")
        if [ "$old" = "$(image_id "$image" rf_podman)" ]; then
            log "docker at $host has $image"
            continue
        fi
        rf_podman save --format docker-archive "$image" | "$cli" -H "$host" load -q >/dev/null \
            || die "loading $image into docker at $host failed"
        [ "$(image_id "$image" "$cli" -H "$host")" = "$(image_id "$image" rf_podman)" ] \
            || die "docker at $host has a different ID for $image after loading"
        log "loaded $image into docker at $host"
        [ -z "$old" ] || replaced+=("$old")
    done
    remove_replaced "$cli" -H "$host"
}

old_ids=("$(image_id "$ROCFORGE_TEST_BUILDER" rf_podman)" "$(image_id "$ROCFORGE_TEST_BASE" rf_podman)")
timed "base image" build_base
timed "builder image" build_builder
replaced=()
for id in "${old_ids[@]}"; do
    if [ -n "$id" ] && [ "$id" != "$(image_id "$ROCFORGE_TEST_BASE" rf_podman)" ] \
        && [ "$id" != "$(image_id "$ROCFORGE_TEST_BUILDER" rf_podman)" ]; then
        replaced+=("$id")
    fi
done
remove_replaced rf_podman
timed "verify builder (HIP compile)" verify_builder
timed "load into docker" load_into_docker
rf_podman images --filter reference='localhost/rocforge-test-*' \
    --format '{{.Repository}}:{{.Tag}} {{.ID}} {{.Size}}' >&2
