#!/usr/bin/env bash
# Takes components built from the debian-6.4 line in the local store the whole way a user's
# install goes: packaged and signed, indexed, installed by `rocforge install` from that index into
# a fresh prefix of a builder-image container (the libraries need sid's glibc), checked with
# `rocforge inspect --against`, and a program compiled against the installed library is run:
# it must link, start, and report that there is no GPU (exit 3).
#
#   scripts/real-install.sh COMPONENT PROGRAM LIBS [ARCH]
#   scripts/real-install.sh rocfft tests/fixtures/programs/rocfft.cpp -lrocfft
#
# ROCFORGE: the rocforge binary (default target/release/rocforge). Runs offline in the container.
# OVERLAY: the --overlay the build was given (COMPONENT:PATH=DIR), when it was given one.
set -euo pipefail
cd "$(dirname "$0")/.."
component=$1 program=$2 libs=$3 arch=${4:-gfx90c,gfx902}
rocforge=$(realpath "${ROCFORGE:-target/release/rocforge}")
image=localhost/rocforge/builder:debian-6.4
export CONTAINERS_CONF=${CONTAINERS_CONF:-$PWD/containers/containers.conf}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$rocforge" key generate --out "$work/keys" >/dev/null
overlay=()
[ -z "${OVERLAY:-}" ] || overlay=(--overlay "$OVERLAY")
"$rocforge" --recipes recipes --release debian-6.4 package "$component" --arch "$arch" \
  --runtime auto --out "$work/dist" --sign-key "$work/keys/rocforge.key" "${overlay[@]}"
cp "$program" "$work/prog.cpp"
podman run --rm --network=none -v "$rocforge:/usr/local/bin/rocforge:ro" -v "$work:/w:ro" "$image" \
  bash -c "set -e
    rocforge install $component --release debian-6.4 --arch $arch --from /w/dist/index.json \
      --prefix /opt/fresh --key /w/keys/rocforge.pub
    rocforge inspect --against $arch /opt/fresh
    hipcc -o /tmp/prog /w/prog.cpp -I/opt/fresh/include -L/opt/fresh/lib $libs
    set +e
    LD_LIBRARY_PATH=/opt/fresh/lib /tmp/prog
    code=\$?
    echo \"exit=\$code\"
    test \$code = 3"
