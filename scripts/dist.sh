#!/usr/bin/env bash
# Packs rocforge's own binary for a GitHub release (the publish job of release.yml calls it):
#   scripts/dist.sh BINARY OUT_DIR
# writes OUT_DIR/rocforge-<version>-<target>.tar.gz, holding rocforge-<version>-<target>/ with
# the binary, shell completions (bash, zsh, fish), the man pages and README.md (and LICENSE*
# when the repository has them), and OUT_DIR/<tarball>.sha256 (sha256sum -c reads it); prints
# the tarball's path. Completions and man pages come from BINARY itself (`rocforge completions`,
# `rocforge man --out`), so they describe exactly that binary. The tarball is reproducible:
# sorted names, owner 0, the mtime of SOURCE_DATE_EPOCH (else 0) and no gzip timestamp.
# TARGET names the platform (default: this machine's, x86_64-unknown-linux-gnu on the runner).
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/lib.sh"

[ $# -eq 2 ] || die "usage: scripts/dist.sh BINARY OUT_DIR"
bin=$1
out=$2
[ -x "$bin" ] || die "$bin is not an executable"
# `rocforge --version` prints "rocforge 0.1.0".
version=$("$bin" --version | awk '{print $2}')
[ -n "$version" ] || die "$bin --version printed no version"
target=${TARGET:-$(uname -m)-unknown-linux-gnu}
name="rocforge-$version-$target"

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
dir="$stage/$name"
mkdir -p "$dir/completions" "$dir/man"
install -m 0755 "$bin" "$dir/rocforge"
# The file names each shell looks for: bash-completion's rocforge, zsh's _rocforge in $fpath,
# fish's completions/rocforge.fish.
"$bin" completions bash > "$dir/completions/rocforge.bash"
"$bin" completions zsh > "$dir/completions/_rocforge"
"$bin" completions fish > "$dir/completions/rocforge.fish"
"$bin" man --out "$dir/man" 2>/dev/null
for f in README.md LICENSE LICENSE-MIT LICENSE-APACHE; do
    if [ -f "$ROCFORGE_ROOT/$f" ]; then cp "$ROCFORGE_ROOT/$f" "$dir/"; fi
done
chmod -R u=rwX,go=rX "$dir"

mkdir -p "$out"
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@${SOURCE_DATE_EPOCH:-0}" \
    -C "$stage" -cf - "$name" | gzip -9n > "$out/$name.tar.gz"
(cd "$out" && sha256sum "$name.tar.gz" > "$name.tar.gz.sha256")
printf '%s\n' "$out/$name.tar.gz"
