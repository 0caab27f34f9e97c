#!/usr/bin/env bash
# Publish everything of one release line that the store holds, for one target set: the signed
# tarballs (libraries, `-tests` artifacts, SBOMs, provenance, index, wheel index) to a GitHub
# release and to an OCI registry, then the runtime and devel images with their signed referrers.
#
#   scripts/publish-line.sh --arch gfx90c,gfx902 --out dist \
#       --github github://OWNER/REPO@TAG --registry REGISTRY/REPO [--images REGISTRY/NAME]
#
# Components: every component the store holds for those targets (`rocforge store list`), or
# those named after `--`. Each step is one rocforge command, printed before it runs; a step that
# fails stops the script, and running it again finishes the publish (uploads skip what is there).
# Environment: GITHUB_TOKEN, ROCFORGE_GITHUB_API, ROCFORGE_REGISTRY_USER/PASSWORD, ROCFORGE_RELEASE
# and ROCFORGE_STORE as for rocforge; ROCFORGE=path of the binary (default: rocforge on PATH).
set -euo pipefail

rf="${ROCFORGE:-rocforge}"
arch="" out="" github="" registry="" images=""
usage() { sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
while [ $# -gt 0 ]; do
    case "$1" in
    --arch) arch="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --github) github="$2"; shift 2 ;;
    --registry) registry="$2"; shift 2 ;;
    --images) images="$2"; shift 2 ;;
    --) shift; break ;;
    -h | --help) usage ;;
    *) echo "publish-line.sh: unknown argument $1" >&2; usage ;;
    esac
done
{ [ -n "$arch" ] && [ -n "$out" ]; } || usage
[ -n "$github" ] || [ -n "$registry" ] || {
    echo "publish-line.sh: give --github and/or --registry: where the release goes" >&2
    exit 2
}
images="${images:-${registry:+$registry}}"

step() {
    printf '+ %s\n' "$*" >&2
    local start=$SECONDS
    "$@"
    printf '  (%ss)\n' "$((SECONDS - start))" >&2
}

# The store's targets are sorted (gfx902,gfx90c); compare sets, not spellings.
sorted() { tr ',' '\n' <<<"$1" | sort | paste -sd,; }
want="$(sorted "$arch")"
if [ $# -gt 0 ]; then
    components=("$@")
else
    mapfile -t components < <("$rf" store list | awk -v w="$want" '
        { n = split($4, t, ","); asort(t); s = t[1]; for (i = 2; i <= n; i++) s = s "," t[i] }
        s == w && !seen[$2]++ { print $2 }')
fi
[ ${#components[@]} -gt 0 ] || {
    echo "publish-line.sh: the store holds nothing for $arch; build first (rocforge build COMPONENT --arch $arch)" >&2
    exit 1
}
# Libraries go into the images; test clients and the examples corpus are artifacts only.
libraries=()
for c in "${components[@]}"; do
    case "$c" in *-tests | rocm-examples) ;; *) libraries+=("$c") ;; esac
done

step "$rf" package "${components[@]}" --arch "$arch" --out "$out"
[ -z "$github" ] || step "$rf" publish "$out" --to "$github"
[ -z "$registry" ] || step "$rf" publish "$out" --to "oci://$registry"
if [ -n "$images" ] && [ ${#libraries[@]} -gt 0 ]; then
    # The line the components came from: --release/ROCFORGE_RELEASE, else the default one.
    # (awk reads to the end: an early exit would break rocforge's pipe, and pipefail the script.)
    release="${ROCFORGE_RELEASE:-$("$rf" list | awk '/\(default\)/ && !r { r = $3 } END { print r }')}"
    targets="$(tr ',' '-' <<<"$want")"
    for kind in runtime devel; do
        step "$rf" image create "${libraries[@]}" --arch "$arch" --kind "$kind" \
            --push --tag "$images:$release-$kind-$targets"
    done
fi
