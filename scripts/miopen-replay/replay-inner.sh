#!/bin/bash
# Runs inside the builder image (started by replay.sh). Replays MIOpenDriver over problems.txt
# for one fake device; writes logs to /out/logs and the summary via summarize.py.
# Never runs anything on a GPU: there is none; fakedevice.so answers the HIP runtime calls.
set -u
ARCH="$1"            # e.g. gfx90c:xnack-  (what the device would report as gcnArchName)
CU="$2"
OUT=/out
mkdir -p "$OUT/logs" "$OUT/kcache" "$OUT/udb" "$OUT/sysdb" /tmp/home
export HOME=/tmp/home
export LD_LIBRARY_PATH=/fd/fakelib:/opt/rocm/lib:/opt/rocm/lib/x86_64-linux-gnu
export FAKEDEVICE_ARCH="$ARCH" FAKEDEVICE_CU="$CU" FAKEDEVICE_REPORT="$OUT/fakedevice-report.jsonl"
export MIOPEN_DEVICE_ARCH="$ARCH" MIOPEN_DEVICE_CU="$CU"
export MIOPEN_DEBUG_COMPILE_ONLY=1 MIOPEN_FIND_MODE=NORMAL MIOPEN_COMPILE_PARALLEL_LEVEL=1
export MIOPEN_LOG_LEVEL=6 MIOPEN_ENABLE_LOGGING_CMD=1
export MIOPEN_USER_DB_PATH="$OUT/udb" MIOPEN_CUSTOM_CACHE_DIR="$OUT/kcache"
export MIOPEN_SYSTEM_DB_PATH="$OUT/sysdb"   # empty: same (default) kernel configs for every target
DRV=/opt/rocm/bin/MIOpenDriver
# RESUME=1: keep earlier logs and runs.tsv, run only what is missing (e.g. after a fix here).
[ "${RESUME:-0}" = 1 ] || : > "$OUT/runs.tsv"

run() { # label, extra-env, args...
    local label="$1" xenv="$2"; shift 2
    local log="$OUT/logs/$label.log" t0 t1 rc
    t0=$(date +%s.%N)
    env $xenv FAKEDEVICE_LOG="$log" \
        timeout 1800 env LD_PRELOAD=/fd/fakedevice.so "$DRV" "$@" </dev/null >>"$log" 2>&1
    rc=$?
    t1=$(date +%s.%N)
    printf '%s\t%s\t%s\t%s\t%s\n' "$label" "$rc" "$(awk -v a=$t0 -v b=$t1 'BEGIN{printf "%.1f", b-a}')" "$xenv" "$*" >>"$OUT/runs.tsv"
    echo "$(date -u +%T) $label rc=$rc $(awk -v a=$t0 -v b=$t1 'BEGIN{printf "%.1f", b-a}')s"
}

conv_run() { # label, args...
    local label="$1"; shift
    local log="$OUT/logs/$label.log"
    [ "${RESUME:-0}" = 1 ] && [ -s "$log" ] || run "$label" "" "$@"
    # A failed kernel build aborts the rest of that problem's precompile (PrecompileKernels,
    # src/solver.cpp:83-99), so replay each applicable solver alone to attribute results.
    if grep -q "Code object build failed\|HIPRTC status = \|comgr status = " "$log"; then
        # solver names may hold <, >, - (ConvOclBwdWrW2<1>, ConvWinograd3x3MultipassWrW<3-2>)
        for s in $(grep -o 'SearchForAllSolutions\] [^ :]*: Success\.' "$log" | awk '{print $2}' | tr -d : | sort -u); do
            [ "${RESUME:-0}" = 1 ] && [ -s "$OUT/logs/$label@$s.log" ] && continue
            run "$label@$s" "MIOPEN_DEBUG_FIND_ONLY_SOLVER=$s" "$@"
        done
    fi
}

t_start=$(date +%s)
grep -v '^\s*#' "/w/${PROBLEMS:-problems.txt}" | grep -v '^\s*$' | while read -r label rest; do
    if [ "$label" = "@CONV" ]; then
        set -- $rest; shape="$1"; shift
        for dt in fp32 fp16; do
            sub=conv; [ $dt = fp16 ] && sub=convfp16
            for dir in 1:fwd 2:bwd 4:wrw; do
                conv_run "conv-$dt-${dir#*:}-$shape" $sub "$@" -F "${dir%%:*}" -V 0 -i 1 -t 0 -s 0
            done
        done
    else
        [ "${RESUME:-0}" = 1 ] && [ -s "$OUT/logs/$label.log" ] || run "$label" "" $rest
    fi
done
if [ "${RESUME:-0}" = 1 ]; then echo "total_seconds_resume $(( $(date +%s) - t_start ))" >> "$OUT/total.txt"; else echo "total_seconds $(( $(date +%s) - t_start ))" > "$OUT/total.txt"; fi
python3 /w/summarize.py "$OUT" "$ARCH" "$CU" > "$OUT/summary.json"
echo "summary: $OUT/summary.json"
