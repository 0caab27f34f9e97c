#!/usr/bin/env bash
# Sets up rootless podman for rocforge's container tests: a non-root user rocforge-test with
# /etc/subuid and /etc/subgid ranges, a runtime directory /run/user/UID, the repository's
# containers.conf as ~/.config/containers/containers.conf, containers/storage-rootless.conf as
# ~/.config/containers/storage.conf (native overlay), and the test images (built by
# scripts/test-images.sh) in that user's own image store. Idempotent; checks the result with
# `podman run --rm localhost/rocforge-test-base:bookworm true` as that user (default network,
# slirp4netns, so /dev/net/tun is made 0666 as Debian's udev would). Run as root.
#
# Run podman as that user the way this script does:
#   runuser -u rocforge-test -- env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/home/rocforge-test \
#       USER=rocforge-test LOGNAME=rocforge-test XDG_RUNTIME_DIR=/run/user/UID podman ...
# (from a directory the user can read, e.g. its home).
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/lib.sh"
require_root

USER_NAME="$ROCFORGE_TEST_USER"
SUBID_COUNT=65536

ensure_user() {
    if ! getent passwd "$USER_NAME" >/dev/null; then
        useradd --create-home --shell /bin/bash --comment "rocforge rootless container tests" \
            "$USER_NAME" || die "useradd $USER_NAME failed"
        log "created user $USER_NAME"
    fi
}

# first_free_subid FILE: the first ID after every range in FILE (at least 100000).
first_free_subid() {
    awk -F: 'BEGIN { next_id = 100000 } NF >= 3 && $2 + $3 > next_id { next_id = $2 + $3 } END { print next_id }' "$1"
}

ensure_subids() {
    local changed=0 start
    touch /etc/subuid /etc/subgid
    if ! grep -q "^$USER_NAME:" /etc/subuid; then
        start=$(first_free_subid /etc/subuid)
        usermod --add-subuids "$start-$((start + SUBID_COUNT - 1))" "$USER_NAME"
        changed=1
    fi
    if ! grep -q "^$USER_NAME:" /etc/subgid; then
        start=$(first_free_subid /etc/subgid)
        usermod --add-subgids "$start-$((start + SUBID_COUNT - 1))" "$USER_NAME"
        changed=1
    fi
    log "subuid $(grep "^$USER_NAME:" /etc/subuid | head -n1), subgid $(grep "^$USER_NAME:" /etc/subgid | head -n1)"
    # A store made before the ranges changed must be migrated to the new mapping.
    if [ "$changed" = 1 ] && [ -d "$USER_HOME/.local/share/containers/storage" ]; then
        as_user podman system migrate
    fi
}

# Rootless podman's default network (slirp4netns) opens /dev/net/tun as the user. Debian's udev
# rules make it 0666; these machines have no udev and leave it 0600, so set it as udev would.
ensure_tun() {
    [ -c /dev/net/tun ] || die "/dev/net/tun is missing; rootless podman networking needs the tun module"
    if [ "$(stat -c %a /dev/net/tun)" != 666 ]; then
        chmod 0666 /dev/net/tun
        log "chmod 0666 /dev/net/tun (as Debian's udev rules set it)"
    fi
}

ensure_dirs_and_conf() {
    # No systemd-logind here: make the runtime directory podman expects. /run is a tmpfs, so
    # this is redone after every boot.
    install -d -o "$USER_NAME" -g "$USER_GROUP" -m 700 "$XDG_DIR"
    install -d -o "$USER_NAME" -g "$USER_GROUP" -m 755 "$USER_HOME/.config" "$USER_HOME/.config/containers"
    install_conf "$ROCFORGE_CONTAINERS_CONF" containers.conf
    install_conf "$ROCFORGE_ROOT/containers/storage-rootless.conf" storage.conf
}

# install_conf SOURCE NAME: copy SOURCE to ~/.config/containers/NAME when it differs.
install_conf() {
    local dest="$USER_HOME/.config/containers/$2"
    if ! cmp -s "$1" "$dest"; then
        install -o "$USER_NAME" -g "$USER_GROUP" -m 644 "$1" "$dest"
        log "installed $dest"
    fi
}

# The store must use native overlay (storage-rootless.conf). A store created with another
# driver (vfs, what podman picks here without that file) cannot be opened with overlay: remove it,
# the images are loaded again below.
ensure_overlay_store() {
    local driver store="$USER_HOME/.local/share/containers/storage"
    driver=$(as_user podman info --format '{{.Store.GraphDriverName}}' 2>/dev/null || true)
    [ "$driver" = overlay ] && return 0
    log "$USER_NAME's podman store uses '${driver:-?}', not overlay: removing it"
    as_user podman system reset -f >/dev/null 2>&1 || true
    rm -rf "$store" "$XDG_DIR/containers" "$XDG_DIR/libpod"
    driver=$(as_user podman info --format '{{.Store.GraphDriverName}}') \
        || die "podman info as $USER_NAME failed"
    [ "$driver" = overlay ] || die "$USER_NAME's podman store uses '$driver', not overlay"
}

# as_user COMMAND...: run COMMAND as the test user with a clean login-like environment.
as_user() {
    (cd "$USER_HOME" && runuser -u "$USER_NAME" -- env -i \
        PATH=/usr/local/bin:/usr/bin:/bin HOME="$USER_HOME" USER="$USER_NAME" LOGNAME="$USER_NAME" \
        XDG_RUNTIME_DIR="$XDG_DIR" "$@")
}

load_images() {
    local image want
    for image in "$ROCFORGE_TEST_BASE" "$ROCFORGE_TEST_BUILDER"; do
        want=$(image_id "$image" rf_podman)
        [ -n "$want" ] || die "$image is not in root's podman store; run scripts/test-images.sh first"
        if [ "$(image_id "$image" as_user podman)" = "$want" ]; then
            log "$USER_NAME's store has $image"
            continue
        fi
        rf_podman save --format docker-archive "$image" | as_user podman load -q >/dev/null \
            || die "loading $image into $USER_NAME's podman store failed"
        [ "$(image_id "$image" as_user podman)" = "$want" ] \
            || die "$USER_NAME's store has a different ID for $image after loading"
        log "loaded $image into $USER_NAME's podman store"
    done
    # Images the tags no longer point at.
    as_user podman image prune -f >/dev/null
}

verify() {
    local out
    out=$(as_user podman run --rm "$ROCFORGE_TEST_BASE" true 2>&1) \
        || { printf '%s\n' "$out" >&2; die "rootless podman run as $USER_NAME failed"; }
}

timed "user" ensure_user
USER_UID=$(id -u "$USER_NAME")
USER_GROUP=$(id -gn "$USER_NAME")
USER_HOME=$(getent passwd "$USER_NAME" | cut -d: -f6)
XDG_DIR="/run/user/$USER_UID"
timed "runtime dir and config" ensure_dirs_and_conf
timed "/dev/net/tun" ensure_tun
timed "subuid/subgid" ensure_subids
timed "overlay store" ensure_overlay_store
timed "load images (rootless)" load_images
timed "rootless podman run" verify
log "rootless podman ok: runuser -u $USER_NAME -- env XDG_RUNTIME_DIR=$XDG_DIR HOME=$USER_HOME podman ..."
