#!/usr/bin/env bash
# What stopping a build at a time limit and continuing it on another machine costs, against the
# same build uninterrupted, side by side in one run:
#
#   scripts/checkpoint-bench.sh COMPONENT LIMIT [DRAIN]
#
# Three builds of COMPONENT (and its dependencies), each on an empty "machine" (its own store,
# source cache, compiler cache and build directories under WORK): one uninterrupted; one with
# --time-limit LIMIT (and --drain DRAIN) that stops and pushes a signed checkpoint to a
# docker-registry on 127.0.0.1; then, with the stopped machine deleted, one that pulls the
# checkpoint and finishes. Prints each build's time, the resumed total against the uninterrupted
# one, and checks that both stored the same content key and files. Exits 1 if they differ.
# Beside wall time, the CPU time the whole machine spent (user + system, from /proc/stat) in each
# build: it counts the work done, not cores left idle while a drain waits or the machine's
# neighbours take its time, so it tells what a stop costs through run-to-run noise. Beside that,
# the CPU time of the build's own containers alone: each build runs them under a cgroup of its
# own (podman's --cgroup-parent; cgroup v1 cpuacct or v2 cpu.stat), which counts every compile,
# the killed ones included, and nothing of the machine's other work, so the figure holds even
# with other builds running beside it. And, from the ninja logs, the longest step of the
# uninterrupted build: a compile under way at the limit is killed and done again, so a drain
# shorter than it may not save it.
# Environment: ARCH (default gfx90c), RELEASE (default debian-6.4), ROCFORGE_BIN (default
# target/debug/rocforge), WORK (default a new directory under /var/tmp, kept), CONFIG (a
# rocforge config to start from, e.g. one with [mirrors]; it must have no [trust] or [runtime]
# table: the script sets both, and the host's ulimits come from containers/containers.conf).
# Run as root where the builder image is (scripts/debian-image.sh); with nothing else running
# for the wall-time figures to mean something.
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/lib.sh"

[ $# -ge 2 ] || { sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
component="$1" limit="$2" drain="${3:-}"
arch="${ARCH:-gfx90c}" release="${RELEASE:-debian-6.4}"
bin="${ROCFORGE_BIN:-$ROCFORGE_ROOT/target/debug/rocforge}"
[ -x "$bin" ] || die "$bin not found: run cargo build first (or set ROCFORGE_BIN)"
command -v docker-registry >/dev/null || die "docker-registry not found (Debian package docker-registry)"
work="${WORK:-$(mktemp -d /var/tmp/checkpoint-bench.XXXXXX)}"
mkdir -p "$work"
export CONTAINERS_CONF="$ROCFORGE_CONTAINERS_CONF"

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat >"$work/registry.yml" <<EOF
version: 0.1
log:
  level: error
storage:
  filesystem:
    rootdirectory: $work/registry
http:
  addr: 127.0.0.1:$port
EOF
docker-registry serve "$work/registry.yml" >"$work/registry.log" 2>&1 &
registry=$!
trap 'kill "$registry" 2>/dev/null || true' EXIT
# Stopped, it stops the build under way too, as Ctrl-C would (the build's containers go with it).
trap 'kill -INT "$(cat "$work/running" 2>/dev/null)" 2>/dev/null; exit 130' INT TERM
for _ in $(seq 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
    sleep 0.1
done
cache="oci://127.0.0.1:$port/rocforge/checkpoints"

if [ -n "${CONFIG:-}" ] && grep -Eq '^[[:space:]]*\[(runtime|trust)\]' "$CONFIG"; then
    die "$CONFIG has a [runtime] or [trust] table: give one without (the script sets both)"
fi
public=$("$bin" key generate --out "$work/keys" | tail -1)

# The build containers' cgroups go under $cgroup/MACHINE; cgroup v1 and v2 both charge a
# parent with what its children used, after they are gone too.
cgroup="/rocforge-checkpoint-bench-$port"
cgroup_dirs() {
    local d
    for d in /sys/fs/cgroup/cpuacct /sys/fs/cgroup; do
        [ -d "$d$cgroup" ] && echo "$d$cgroup"
    done
}
# container_cpu MACHINE: seconds of CPU time the machine's build containers used, or "n/a".
container_cpu() {
    local d
    for d in $(cgroup_dirs); do
        if [ -r "$d/$1/cpuacct.usage" ]; then
            awk '{ printf "%.1f", $1 / 1e9 }' "$d/$1/cpuacct.usage"
            return
        elif [ -r "$d/$1/cpu.stat" ]; then
            awk '$1 == "usage_usec" { printf "%.1f", $2 / 1e6 }' "$d/$1/cpu.stat"
            return
        fi
    done
    echo n/a
}
# podman makes the parent in every controller's hierarchy, with a cgroup for each machine and
# for conmon below it; each goes, deepest first, once its containers are gone.
cgroup_remove() {
    local d
    for d in /sys/fs/cgroup/*"$cgroup" /sys/fs/cgroup"$cgroup"; do
        [ -d "$d" ] && find "$d" -depth -type d -exec rmdir {} + 2>/dev/null
    done
    return 0
}
trap 'kill "$registry" 2>/dev/null || true; cgroup_remove' EXIT

# config MACHINE: the machine's rocforge config.
config() {
    {
        [ -z "${CONFIG:-}" ] || cat "$CONFIG"
        printf '\n[trust]\nkeys = ["%s"]\n' "$public"
        printf '\n[runtime]\npodman-run = ["--cgroup-parent", "%s/%s"]\n' "$cgroup" "$1"
    } >"$work/$1.config.toml"
}

# cpu: seconds of CPU time (user, nice, system, irq, softirq) the machine has spent since boot.
hz=$(getconf CLK_TCK)
cpu() { awk -v hz="$hz" '/^cpu / { printf "%.1f", ($2 + $3 + $4 + $7 + $8) / hz }' /proc/stat; }

# build MACHINE ARGS...: one build on an empty machine; prints its exit code, seconds, the
# machine's CPU seconds and its build containers' CPU seconds.
build() {
    local name="$1" m="$work/$1" start end rc=0 cpu0
    shift
    rm -rf "$m"
    mkdir -p "$m"
    config "$name"
    cpu0=$(cpu)
    start=$(date +%s.%N)
    ROCFORGE_STORE="$m/store" ROCFORGE_CACHE="$m/cache" ROCFORGE_CONFIG="$work/$name.config.toml" \
        "$bin" --release "$release" build "$component" --arch "$arch" "$@" \
        >"$m.log" 2>&1 &
    echo $! >"$work/running"
    wait $! || rc=$?
    end=$(date +%s.%N)
    echo "$rc $(elapsed "$start" "$end") $(elapsed "$cpu0" "$(cpu)") $(container_cpu "$name")"
}

# entry MACHINE: the store directory of COMPONENT's build on MACHINE.
entry() {
    grep -l "\"component\": *\"$component\"" "$work/$1"/store/*/meta.json 2>/dev/null |
        head -1 | xargs -r dirname
}

log "work directory $work; registry 127.0.0.1:$port"
log "uninterrupted build of $component for $arch ..."
read -r u_rc u_s u_cpu u_ct < <(build whole)
[ "$u_rc" = 0 ] || die "the uninterrupted build failed (exit $u_rc): $work/whole.log"

stop_args=(--cache "$cache" --cache-key "$work/keys/rocforge.key" --time-limit "$limit")
[ -z "$drain" ] || stop_args+=(--drain "$drain")
log "build stopped at $limit${drain:+ (drain $drain)} ..."
read -r a_rc a_s a_cpu a_ct < <(build stopped "${stop_args[@]}")
[ "$a_rc" = 75 ] || die "the stopped build exited $a_rc, not 75 (stopped at its limit): $work/stopped.log"
pushed=$(grep -m1 "checkpoint pushed to" "$work/stopped.log" || true)
[ -n "$pushed" ] || die "no checkpoint pushed: $work/stopped.log"
cat "$work"/stopped/cache/builds/*/build/.ninja_log >"$work/stopped.ninja_log" 2>/dev/null || true
rm -rf "$work/stopped"

log "resumed on an empty machine ..."
read -r b_rc b_s b_cpu b_ct < <(build resumed --cache "$cache")
[ "$b_rc" = 0 ] || die "the resumed build failed (exit $b_rc): $work/resumed.log"
grep -q "continuing the build that stopped in" "$work/resumed.log" ||
    die "the resumed build did not continue from the checkpoint: $work/resumed.log"

whole=$(entry whole) resumed=$(entry resumed)
same=yes
[ "$(basename "$whole")" = "$(basename "$resumed")" ] || same="no: another content key"
diff -r "$whole/tree" "$resumed/tree" >"$work/tree.diff" 2>&1 || same="no: the files differ ($work/tree.diff)"

total=$(awk -v a="$a_s" -v b="$b_s" 'BEGIN { printf "%.1f", a + b }')
ratio=$(awk -v t="$total" -v u="$u_s" 'BEGIN { printf "%.3f", t / u }')
cpu_total=$(awk -v a="$a_cpu" -v b="$b_cpu" 'BEGIN { printf "%.1f", a + b }')
cpu_ratio=$(awk -v t="$cpu_total" -v u="$u_cpu" 'BEGIN { printf "%.3f", t / u }')
ct_total=n/a ct_ratio=n/a
if [ "$u_ct" != n/a ] && [ "$a_ct" != n/a ] && [ "$b_ct" != n/a ]; then
    ct_total=$(awk -v a="$a_ct" -v b="$b_ct" 'BEGIN { printf "%.1f", a + b }')
    ct_ratio=$(awk -v t="$ct_total" -v u="$u_ct" 'BEGIN { printf "%.3f", t / u }')
fi
printf '%s for %s, %s (wall time; CPU time of the machine; CPU time of the build containers)\n' \
    "$component" "$arch" "$(date -u +%Y-%m-%d)"
printf '  uninterrupted:          %8.1f s  %8.1f s CPU  %8s s in containers\n' "$u_s" "$u_cpu" "$u_ct"
printf '  stopped at %-12s %8.1f s  %8.1f s CPU  %8s s in containers  %s\n' "$limit:" "$a_s" \
    "$a_cpu" "$a_ct" "${pushed#*: }"
printf '  resumed elsewhere:      %8.1f s  %8.1f s CPU  %8s s in containers  %s\n' "$b_s" "$b_cpu" \
    "$b_ct" "$(grep -m1 "continuing the build that stopped in" "$work/resumed.log" | sed 's/^.*: //')"
printf '  stopped + resumed:      %8.1f s  %8.1f s CPU  %8s s in containers\n' "$total" \
    "$cpu_total" "$ct_total"
printf '  against the uninterrupted build: %s times (machine CPU %s, container CPU %s)\n' \
    "$ratio" "$cpu_ratio" "$ct_ratio"
# steps LOG: "N steps, S s of step time" of a ninja log (v5 and later: start and end in ms).
steps() {
    awk '!/^#/ && NF >= 4 { n++; s += ($2 - $1) / 1000 }
        END { printf "%d steps, %.1f s of step time", n, s }' "$1" 2>/dev/null
}
whole_log=$(find "$work/whole/store/.logs" -name "$component-*.ninja_log" | head -1)
if [ -n "$whole_log" ]; then
    printf '  uninterrupted, from its ninja log: %s; the longest %s\n' "$(steps "$whole_log")" \
        "$(awk '!/^#/ && NF >= 4 && $2 - $1 > m { m = $2 - $1; t = $4 }
            END { printf "%.1f s (%s)", m / 1000, t }' "$whole_log")"
fi
[ ! -s "$work/stopped.ninja_log" ] ||
    printf '  stopped, from its ninja log:       %s\n' "$(steps "$work/stopped.ninja_log")"
printf '  same content key and files: %s\n' "$same"
[ "$same" = yes ]
