#!/usr/bin/env bash
# Builds and runs each cargo-fuzz target in fuzz/ for a bounded time; fails on any crash.
#
#   scripts/fuzz.sh [SECONDS]    seconds per target, default 60 (six targets: 6 x SECONDS)
#
# Targets: inspect_bytes (ELF files, offload bundles, code objects), inspect_wheel (wheels, read
# member by member through their zip directory), recipe_parse (recipe TOML),
# tar_extract (install's safe extraction, then each input installed twice into a real prefix;
# asserts nothing lands outside the staging directory or changes beside the prefix),
# results_xml (gtest XML reports and event lines) and release_files (key lists and their
# signatures, registry challenges, the index and each component's install order). Seeds:
# fuzz/corpus/TARGET/; those of tar_extract and results_xml are written by fuzz/seeds.py, those
# of release_files are a genuine chain of key lists `rocforge key rotate` wrote.
#
# Runs on a stable toolchain: `--sanitizer none` (cargo-fuzz's default AddressSanitizer build
# passes -Zsanitizer, which stable rustc refuses unless RUSTC_BOOTSTRAP=1), debug assertions and overflow checks on, and fuzz/src/lib.rs's allocation guard in
# place of libFuzzer's -malloc_limit_mb. Each run starts from the committed seeds in
# fuzz/corpus/TARGET/ (read only) and writes what it finds to a scratch directory, so the
# committed corpus stays as it is. A crashing input is kept in fuzz/artifacts/TARGET/; rerun it
# with `cd fuzz && cargo fuzz run --sanitizer none -a TARGET artifacts/TARGET/crash-...`.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh

secs="${1:-60}"
[[ "$secs" =~ ^[0-9]+$ ]] || die "SECONDS must be a whole number, got '$secs'"
targets=(inspect_bytes inspect_wheel recipe_parse tar_extract results_xml release_files)
flags=(--sanitizer none --debug-assertions)
# Memory limit for one input, in MiB; the same figure as fuzz/src/lib.rs's LIMIT.
rss_limit_mb=2048

cargo fuzz --version >/dev/null 2>&1 \
    || die "cargo-fuzz is missing: cargo install cargo-fuzz --locked (.ci/setup-machine.sh does)"

cd fuzz
# Not --locked: a dependency added to rocforge must not break this run. Cargo then only adds
# what fuzz/Cargo.lock lacks (commit the change) and keeps every version pinned there.
log "building ${targets[*]}"
cargo fuzz build "${flags[@]}"

scratch="$(mktemp -d)"
# tar_extract unpacks into scratch roots named for its process (in /dev/shm when present):
# rocforge-fuzz-tar-PID for staging, rocforge-fuzz-tar-PID.prefix for the prefix.
trap 'rm -rf "$scratch" /dev/shm/rocforge-fuzz-tar-* "${TMPDIR:-/tmp}"/rocforge-fuzz-tar-*' EXIT
failed=()
for t in "${targets[@]}"; do
    [ -d "corpus/$t" ] || die "no seed corpus fuzz/corpus/$t"
    mkdir -p "$scratch/$t" "artifacts/$t"
    log "fuzzing $t for $secs s from $(find "corpus/$t" -type f | wc -l) seeds"
    start=$(date +%s)
    if cargo fuzz run "${flags[@]}" "$t" "$scratch/$t" "corpus/$t" -- \
        -max_total_time="$secs" -rss_limit_mb="$rss_limit_mb" -timeout=10 -max_len=65536 \
        -print_final_stats=1 >"$scratch/$t.log" 2>&1; then
        log "$t: no crash in $(($(date +%s) - start)) s: $(grep -E '^(stat::number_of_executed_units|Done)' "$scratch/$t.log" | tail -1)"
    else
        # The panic message (or the allocation guard's), libFuzzer's verdict and where the input is.
        grep -E -A1 'panicked at|==fuzz==|ERROR: libFuzzer|Test unit written|Base64:' \
            "$scratch/$t.log" >&2 || tail -n 40 "$scratch/$t.log" >&2
        log "$t: CRASH; input kept in fuzz/artifacts/$t/"
        failed+=("$t")
    fi
done
[ ${#failed[@]} -eq 0 ] || die "crashes in: ${failed[*]}"
log "ok: ${targets[*]}, $secs s each"
