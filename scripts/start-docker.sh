#!/usr/bin/env bash
# Starts a docker daemon (Debian's docker.io dockerd) for rocforge's container tests, in the
# background, with its own state so it never meets another daemon on the machine:
#   socket    /run/rocforge-test/docker.sock   (DOCKER_HOST=unix:///run/rocforge-test/docker.sock)
#   data-root /var/lib/rocforge-test/docker
#   exec-root /run/rocforge-test/docker-exec, pidfile /run/rocforge-test/docker.pid
#   log       /var/log/rocforge-test-dockerd.log
# Idempotent: when a daemon already answers on the socket, nothing is started. Waits until
# `docker info` works, then prints the DOCKER_HOST line on stdout. Run as root.
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/lib.sh"
require_root

DATA_ROOT=/var/lib/rocforge-test/docker
EXEC_ROOT="$ROCFORGE_RUN_DIR/docker-exec"
PIDFILE="$ROCFORGE_RUN_DIR/docker.pid"
LOG=/var/log/rocforge-test-dockerd.log
TIMEOUT=60

DOCKERD=$(command -v dockerd || true)
[ -n "$DOCKERD" ] || DOCKERD=/usr/sbin/dockerd
[ -x "$DOCKERD" ] || die "dockerd not found; apt-get install docker.io"

report() {
    local cli="$1"
    log "docker $("$cli" -H "$ROCFORGE_DOCKER_HOST" version --format '{{.Server.Version}}') answers at $ROCFORGE_DOCKER_HOST (CLI: $cli)"
    printf 'DOCKER_HOST=%s\n' "$ROCFORGE_DOCKER_HOST"
}

if cli=$(docker_cli "$ROCFORGE_DOCKER_HOST"); then
    report "$cli"
    exit 0
fi

# A pidfile whose daemon is alive but does not answer is a daemon still starting or wedged:
# do not start a second one on the same state.
if [ -s "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
    log "dockerd (pid $(cat "$PIDFILE")) is running but not answering yet; waiting"
else
    mkdir -p "$ROCFORGE_RUN_DIR" "$DATA_ROOT" "$EXEC_ROOT"
    rm -f "$ROCFORGE_DOCKER_SOCK" "$PIDFILE"
    log "starting $DOCKERD (log: $LOG)"
    # setsid + nohup: the daemon outlives this script and its session; stdin from /dev/null.
    setsid nohup "$DOCKERD" \
        --data-root "$DATA_ROOT" \
        --exec-root "$EXEC_ROOT" \
        --pidfile "$PIDFILE" \
        -H "$ROCFORGE_DOCKER_HOST" \
        >>"$LOG" 2>&1 </dev/null &
fi

for _ in $(seq $((TIMEOUT * 5))); do
    if cli=$(docker_cli "$ROCFORGE_DOCKER_HOST"); then
        report "$cli"
        exit 0
    fi
    sleep 0.2
done
tail -n 30 "$LOG" >&2 || true
die "dockerd did not answer at $ROCFORGE_DOCKER_HOST within ${TIMEOUT}s (log: $LOG)"
