#!/usr/bin/env bash
# What a second GPU target costs PyTorch's HIP units: each unit compiled for one target
# (gfx90c), then for two (gfx90c and gfx902), then both again, side by side in one run.
#
#   scripts/torch-arch-bench.sh BUILD OUT [UNIT...]
#
# BUILD is a torch build directory of the debian-6.4 line that rocforge kept (a build stopped by
# --time-limit or Ctrl-C, configured for gfx90c alone: ~/.cache/rocforge/builds/<key>, holding
# build/ and deps/). The build directory is mounted as an overlay: nothing in it changes. Each
# unit is compiled by its own FindHIP script with /usr/bin/hipcc (no compiler cache) in the
# builder image; the objects land in OUT (e.g. for `rocforge inspect`), the times in
# OUT/times.tsv, and the summary on stdout. UNITs are file names under aten/src/ATen/native/hip
# (default: six of small to middling size). Environment: PODMAN_FLAGS, e.g. the
# `--ulimit` flags `rocforge doctor` prints; IMAGE (default localhost/rocforge/builder:debian-6.4-python).
set -euo pipefail

[ $# -ge 2 ] || { sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
build="$(cd "$1" && pwd)"
mkdir -p "$2"
out="$(cd "$2" && pwd)"
shift 2
units=("$@")
[ ${#units[@]} -gt 0 ] || units=(AbsKernel.hip ActivationGeluKernel.hip BinaryMulKernel.hip
    Copy.hip CumsumKernel.hip DepthwiseConv2d.hip)
image="${IMAGE:-localhost/rocforge/builder:debian-6.4-python}"
if [ ! -d "$build/build/pytorch/build" ] || [ ! -d "$build/deps" ]; then
    echo "torch-arch-bench: $build is not a kept torch build directory (no build/pytorch/build or deps/)" >&2
    exit 1
fi

# Runs in the image: single quotes keep its variables for its shell.
# shellcheck disable=SC2016
inner='
set -eu
D=/build/pytorch/build/caffe2/CMakeFiles/torch_hip.dir
for u in "$@"; do
  f=$(find "$D" -name "torch_hip_generated_${u}.o.cmake" | head -1)
  [ -n "$f" ] || { echo "torch-arch-bench: no FindHIP script for $u" >&2; exit 1; }
  grep -q -- "--offload-arch=gfx90c)" "$f" || { echo "torch-arch-bench: $u is not configured for gfx90c alone" >&2; exit 1; }
  for rep in 1 2; do
    for n in 1 2; do
      s=/tmp/$u.$n.cmake
      sed -e "s#\"/build/hipcc-launch\"#\"/usr/bin/hipcc\"#" "$f" > "$s"
      [ "$n" = 1 ] || sed -i "s#--offload-arch=gfx90c)#--offload-arch=gfx90c;--offload-arch=gfx902)#" "$s"
      t0=$(date +%s.%N)
      cmake -D build_configuration:STRING=Release -D generated_file:STRING=/out/$u.$n.o \
        -D generated_cubin_file:STRING=/tmp/$u.$n.cubin -P "$s" > /out/$u.$n.log 2>&1 ||
        { echo "torch-arch-bench: $u for $n target(s) failed: /out/$u.$n.log" >&2; exit 1; }
      t1=$(date +%s.%N)
      printf "%s\t%s\t%s\t%s\n" "$u" "$n" "$rep" "$(awk "BEGIN{print $t1 - $t0}")"
    done
  done
done
'
# shellcheck disable=SC2086
podman run --rm --network=none ${PODMAN_FLAGS:-} \
    -v "$build/build:/build:O" -v "$build/deps:/opt/rocm:ro" -v "$out:/out" \
    "$image" sh -c "$inner" sh "${units[@]}" | tee "$out/times.tsv" >&2

python3 - "$out/times.tsv" <<'EOF'
import sys, collections
t = collections.defaultdict(list)
for line in open(sys.argv[1]):
    u, n, _, s = line.split("\t")
    t[(u, int(n))].append(float(s))
units = sorted({u for u, _ in t})
one = two = 0.0
print(f"{'unit':<28} {'1 target':>9} {'2 targets':>10} {'ratio':>6}")
for u in units:
    a = sum(t[(u, 1)]) / len(t[(u, 1)])
    b = sum(t[(u, 2)]) / len(t[(u, 2)])
    one += a
    two += b
    print(f"{u:<28} {a:8.1f}s {b:9.1f}s {b / a:6.2f}")
print(f"{'all':<28} {one:8.1f}s {two:9.1f}s {two / one:6.2f}")
# t1 = host + device, t2 = host + 2 device: the share of one target's device code.
print(f"device code per target: {(two - one) / one:.0%} of a one-target compile; "
      f"the host half (once per unit): {(2 * one - two) / one:.0%}")
EOF
