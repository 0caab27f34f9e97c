#!/bin/bash
# replay.sh PREFIX TARGET [CU] [OUTDIR]
# Compile-only replay of MIOpen's solvers for TARGET (gfx90c, gfx902, gfx900, ...) without a GPU:
# builds fakedevice.so in the builder image, mounts PREFIX (MIOpen + rocBLAS + rocRAND + roctx,
# installed for /opt/rocm) at /opt/rocm read-only, and runs MIOpenDriver over problems.txt with
# MIOPEN_DEVICE_ARCH / MIOPEN_DEBUG_COMPILE_ONLY, writing OUTDIR/summary.json and OUTDIR/logs/.
# TARGET may carry a target-id feature; a bare name gets ":xnack-", what gfx900, gfx902 and
# gfx90c devices report under ROCm (their gcnArchName), which MIOpen and hipRTC then use.
set -eu
PREFIX=$(realpath "$1"); TARGET="$2"; CU="${3:-8}"
HERE=$(cd "$(dirname "$0")" && pwd)
case "$TARGET" in *:*) ARCH="$TARGET" ;; *) ARCH="$TARGET:xnack-" ;; esac
OUT=$(realpath -m "${4:-$HERE/out/${ARCH%%:*}}")
IMAGE=${IMAGE:-localhost/rocforge/builder:debian-6.4}
export CONTAINERS_CONF=${CONTAINERS_CONF:-$HERE/../../containers/containers.conf}
[ "${RESUME:-0}" = 1 ] || rm -rf "$OUT"
mkdir -p "$OUT/fd/fakelib"
RUN=(podman run --rm --network=none --security-opt label=disable -e FAKEDEVICE_DROP_MNO_XNACK=${FAKEDEVICE_DROP_MNO_XNACK:-0} -e PROBLEMS=${PROBLEMS:-problems.txt} -e RESUME=${RESUME:-0})
# REPLAY_ENV="K=V K2=V2": extra variables for MIOpen (e.g. solver switches), recorded in OUTDIR.
for kv in ${REPLAY_ENV:-}; do RUN+=(-e "$kv"); done
# The shim is built per run, into OUTDIR/fd (the builder image's gcc and HIP headers).
"${RUN[@]}" -v "$HERE:/w:ro" -v "$OUT/fd:/fd" "$IMAGE" bash -c \
  'gcc -std=gnu11 -O2 -Wall -Wextra -fPIC -shared -fvisibility=hidden -o /fd/fakedevice.so /w/fakedevice.c -ldl -lpthread'
# hipRTC dlopen()s "libamdhip64.so" to ask the device its ISA: let that name resolve to the shim
# too (not needed with Debian's libhiprtc, whose query reaches the shim through libamdhip64's
# interposed exports; kept so a hipRTC that dlsym()s on its own handle gets the same answer).
ln -sf ../fakedevice.so "$OUT/fd/fakelib/libamdhip64.so"
echo "${REPLAY_ENV:-}" >> "$OUT/replay-env.txt"
start=$(date +%s)
nice -n 10 "${RUN[@]}" -v "$PREFIX:/opt/rocm:ro" -v "$OUT/fd:/fd:ro" -v "$HERE:/w:ro" -v "$OUT:/out" \
  "$IMAGE" bash /w/replay-inner.sh "$ARCH" "$CU" 2>&1 | tee -a "$OUT/replay.out"
sfx=; [ "${RESUME:-0}" = 1 ] && sfx=_resume; echo "wall_seconds$sfx $(( $(date +%s) - start ))" >> "$OUT/total.txt"
echo "$OUT/summary.json"
