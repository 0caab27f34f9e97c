#!/usr/bin/env bash
# Machine set-up for the test suite. Everything a fresh Debian 12 machine lacks is installed
# here, so CI and developers' machines agree. Idempotent, and quick when nothing is missing.
#
# As root (CI): installs the Debian packages, starts the test docker daemon, builds the test
# images and sets up the rootless podman user (see containers/README.md, "Test images and the
# CI machine"). As another user it only checks the Rust toolchain and reports what is missing.
# ROCFORGE_SKIP_CONTAINERS=1 skips the container part (packages are still installed).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh

total_start=$(date +%s.%N)

# Debian packages the tests (and the container tests) use.
packages=(
    # basics
    git python3 ca-certificates pkg-config libssl-dev zstd minisign shellcheck curl gcc libc6-dev
    # jq: the release workflow's steps use it, and tests/it/ci.rs runs them
    jq
    # skopeo: tests/it/publish.rs reads a pushed manifest with it too
    skopeo
    # ar (static-archive tests), mount/umount (tmpfs for the full-disk tests), runuser
    binutils mount util-linux
    cmake ninja-build
    # containers: podman (runc, not crun: hybrid cgroups), rootless podman (uidmap, slirp4netns;
    # native overlay, so no fuse-overlayfs), docker, debootstrap (and mmdebstrap, which makes the
    # same base without root)
    podman runc uidmap slirp4netns containernetworking-plugins iptables
    docker.io debootstrap mmdebstrap
    # an OCI registry on 127.0.0.1 for image digests, publishing and the build cache
    docker-registry
    # the wheel index test: pip install into a venv from 127.0.0.1
    python3-venv python3-pip
    # HIP: Debian's hipcc pulls clang-15, lld-15, rocm-device-libs, libamdhip64-dev;
    # llvm-15 has llvm-objcopy-15, clang-tools-15 has clang-offload-bundler-15.
    hipcc llvm-15 clang-tools-15
    # clang 19 for code objects (all three are needed to compile HIP)
    clang-19 clang-tools-19 lld-19
    # cargo-fuzz's libfuzzer-sys compiles libFuzzer's C++ (scripts/fuzz.sh)
    g++
    # headless browser for the hardware-report test (tests/it/testrun.rs)
    chromium
    # Nix (nix-instantiate --parse / --eval without a daemon) for tests/it/nix.rs
    nix-bin
)

# Node.js for the workflow linter (scripts/lint-workflows.sh): the machine image usually has it;
# Debian's nodejs + npm otherwise.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    packages+=(nodejs npm)
fi

missing_packages() {
    local p status
    for p in "${packages[@]}"; do
        status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
        [ "$status" = "install ok installed" ] || printf '%s\n' "$p"
    done
}

install_packages() {
    local missing
    mapfile -t missing < <(missing_packages)
    if [ ${#missing[@]} -eq 0 ]; then
        log "all ${#packages[@]} Debian packages present"
        return 0
    fi
    log "installing ${#missing[@]} Debian packages: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq || die "apt-get update failed"
    apt-get install -y -qq --no-install-recommends -o Dpkg::Use-Pty=0 "${missing[@]}" >/dev/null \
        || die "apt-get install failed for: ${missing[*]}"
    mapfile -t missing < <(missing_packages)
    [ ${#missing[@]} -eq 0 ] || die "still missing after apt-get install: ${missing[*]}"
}

check_tools() {
    local tool
    for tool in podman runc newuidmap debootstrap mmdebstrap dockerd hipcc clang++-15 llvm-objcopy-15 \
        clang-offload-bundler-15 clang++-19 ld.lld-19 cmake ninja zstd minisign shellcheck; do
        command -v "$tool" >/dev/null || die "$tool not found after installing the packages"
    done
}

check_rust() {
    local tool
    for tool in cargo rustfmt cargo-clippy; do
        command -v "$tool" >/dev/null \
            || die "$tool is missing; install the Rust toolchain with rustfmt and clippy"
    done
}

# cargo-fuzz for scripts/fuzz.sh, from crates.io (builds in about 1.5 minutes).
install_cargo_fuzz() {
    local want=0.13.2
    if [ "$(cargo fuzz --version 2>/dev/null)" = "cargo-fuzz $want" ]; then
        log "cargo-fuzz $want present"
        return 0
    fi
    log "installing cargo-fuzz $want"
    cargo install cargo-fuzz --version "$want" --locked --quiet \
        || die "cargo install cargo-fuzz failed"
}

if [ "$(id -u)" -eq 0 ]; then
    timed "apt packages" install_packages
    timed "check tools" check_tools
    if [ "${ROCFORGE_SKIP_CONTAINERS:-0}" != 1 ]; then
        timed "docker daemon" bash scripts/start-docker.sh
        timed "test images" bash scripts/test-images.sh
        timed "rootless user" bash scripts/rootless-user.sh
    fi
else
    mapfile -t missing < <(missing_packages)
    if [ ${#missing[@]} -gt 0 ]; then
        log "not root: cannot install ${missing[*]}; run this as root (container tests need them)"
    fi
fi
timed "rust toolchain" check_rust
timed "cargo-fuzz" install_cargo_fuzz
log "ok ($(cargo --version)), total $(elapsed "$total_start" "$(date +%s.%N)") s"
