# Shared helpers for the machine set-up scripts (scripts/*.sh, .ci/setup-machine.sh).
# Source it; it defines functions and the paths every script agrees on, and changes no state.
# shellcheck shell=bash disable=SC2034 # the variables are used by the scripts sourcing this

# Repository root, whichever script sources this.
ROCFORGE_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# The podman configuration this machine needs (runtime runc, explicit ulimits).
ROCFORGE_CONTAINERS_CONF="$ROCFORGE_ROOT/containers/containers.conf"

# Test images, built by scripts/test-images.sh.
ROCFORGE_TEST_BASE="localhost/rocforge-test-base:bookworm"
ROCFORGE_TEST_BUILDER="localhost/rocforge-test-builder:bookworm"
# Label holding the hash of an image's inputs; a different hash means "rebuild".
ROCFORGE_INPUTS_LABEL="org.rocforge.test.inputs"

# The test docker daemon, started by scripts/start-docker.sh.
ROCFORGE_RUN_DIR="/run/rocforge-test"
ROCFORGE_DOCKER_SOCK="$ROCFORGE_RUN_DIR/docker.sock"
ROCFORGE_DOCKER_HOST="unix://$ROCFORGE_DOCKER_SOCK"

# The non-root user for rootless podman, created by scripts/rootless-user.sh.
ROCFORGE_TEST_USER="rocforge-test"

_rf_script="$(basename "$0")"

log() { printf '%s: %s\n' "$_rf_script" "$*" >&2; }

die() {
    printf '%s: error: %s\n' "$_rf_script" "$*" >&2
    exit 1
}

# timed NAME COMMAND...: run COMMAND, print how long it took; a failure names the step and exits.
timed() {
    local name="$1" start end rc=0
    shift
    start=$(date +%s.%N)
    "$@" || rc=$?
    end=$(date +%s.%N)
    if [ "$rc" -ne 0 ]; then
        die "step '$name' failed (exit $rc) after $(elapsed "$start" "$end") s"
    fi
    printf '%s: step %-28s %7s s\n' "$_rf_script" "'$name'" "$(elapsed "$start" "$end")" >&2
}

elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

require_root() {
    [ "$(id -u)" -eq 0 ] || die "run as root (this sets the machine up)"
}

# podman with the repository's containers.conf, whatever the caller's environment says.
rf_podman() { CONTAINERS_CONF="$ROCFORGE_CONTAINERS_CONF" podman "$@"; }

# inputs_of IMAGE ENGINE...: the inputs-hash label of IMAGE in that engine's store ("podman",
# "rf_podman", "docker -H ...", "runuser -u USER -- podman"), empty when IMAGE or the label is absent.
inputs_of() {
    local image="$1" out
    shift
    out=$("$@" image inspect --format "{{index .Config.Labels \"$ROCFORGE_INPUTS_LABEL\"}}" "$image" 2>/dev/null) || out=""
    [ "$out" = "<no value>" ] && out=""
    printf '%s' "$out"
}

# image_id IMAGE ENGINE...: IMAGE's ID (hex, no "sha256:") in that engine's store, empty if absent.
image_id() {
    local image="$1" out
    shift
    out=$("$@" image inspect --format '{{.Id}}' "$image" 2>/dev/null) || out=""
    printf '%s' "${out#sha256:}"
}

# docker_cli HOST: print the docker CLI that talks to the daemon at HOST (the machine's
# /usr/local/bin/docker may be a different version from Debian's /usr/bin/docker); fail if none.
docker_cli() {
    local host="$1" cli
    for cli in "$(command -v docker || true)" /usr/bin/docker /usr/local/bin/docker; do
        if [ -z "$cli" ] || [ ! -x "$cli" ]; then continue; fi
        if "$cli" -H "$host" version --format '{{.Server.Version}}' >/dev/null 2>&1; then
            printf '%s' "$cli"
            return 0
        fi
    done
    return 1
}
