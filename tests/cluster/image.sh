#!/usr/bin/env bash
# The container image of the Apptainer tests, built on first use and cached by the digest of its recipe.
#
#   tests/cluster/image.sh           print the image's path; build it first if it is missing
#   tests/cluster/image.sh --digest  print only the recipe's digest (what names the cache directory)
#
# The image is an Apptainer sandbox directory (apptainer(1) "exec" takes a directory as well as a SIF file): a
# Debian minbase with Debian's python3, and CPU torch installed from the package index pip is configured with
# (`pip install --target`, then a .pth file in the image's dist-packages puts it on python3's path). Nothing of
# the host's Python is used inside: the image's /usr/bin/python3 runs slurmgen's runtime and the test programs.
# A sandbox rather than a SIF: building a SIF of torch takes another ~70 s and 300 MB (mksquashfs), and a
# directory is what a root-owned test cluster can run without squashfuse or a loop device.
#
# Cache: $SLURMGEN_IMAGE_CACHE (default /var/cache/slurmgen/images), one directory per recipe:
# python-torch-<digest>. The build runs in <dir>.partial and is renamed at the very end (a directory there is
# complete by construction), under a lock, so one build per recipe per machine; up.sh binds the cache into the
# chroot clusters at its own path. About 1-2 min on a quiet 2-core machine (debootstrap ~35 s, pip ~20 s).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
# shellcheck source=SCRIPTDIR/common.sh
. "$HERE/common.sh"

CACHE=${SLURMGEN_IMAGE_CACHE:-/var/cache/slurmgen/images}
MIRROR=${SLURMGEN_DEBIAN_MIRROR:-http://deb.debian.org/debian}
RECIPE_VERSION=1
# bookworm's python3 is 3.11, the ABI (cp311) of the torch wheels the tests' index holds.
IMAGE_SUITE=bookworm
IMAGE_PACKAGES=(python3 procps)
PY=${SLURMGEN_IMAGE_PIP_PYTHON:-$REPO/.venv/bin/python}
[[ -x $PY ]] || PY=$(command -v python3)

# The torch of the project's own environment, so the image computes what the host computes.
torch_version() {
    "$PY" -c 'import importlib.metadata as m; print(m.version("torch"))' 2>/dev/null || echo 2.13.0+cpu
}

recipe() {
    printf 'recipe %s\nsuite %s\nvariant minbase\npackages %s\ntorch %s\n' "$RECIPE_VERSION" "$IMAGE_SUITE" \
        "${IMAGE_PACKAGES[*]}" "$TORCH"
}

build() {
    local dir=$1 partial=$1.partial t0=$EPOCHREALTIME
    rm -rf "$partial"
    command -v debootstrap >/dev/null || "$HERE/apt-install.sh" debootstrap ||
        die "debootstrap is missing and could not be installed"
    log "building the test image in $partial: $IMAGE_SUITE minbase + ${IMAGE_PACKAGES[*]} (debootstrap)"
    # A private mount namespace: debootstrap mounts /proc and /sys in the target (chroot.sh does the same).
    local packages
    packages=$(IFS=,; echo "${IMAGE_PACKAGES[*]}")
    unshare --mount --propagation private -- debootstrap --variant=minbase --include="$packages" "$IMAGE_SUITE" \
        "$partial" "$MIRROR" >"$CACHE/build.log" 2>&1 || die "debootstrap $IMAGE_SUITE failed: see $CACHE/build.log"
    rm -rf "$partial"/var/cache/apt/archives/*.deb "$partial"/var/lib/apt/lists/*
    local t1=$EPOCHREALTIME
    log "installing torch $TORCH from the package index into the image"
    "$PY" -m pip install --quiet --no-cache-dir --only-binary=:all: --target "$partial/opt/torch" "torch==$TORCH" \
        >>"$CACHE/build.log" 2>&1 || die "pip install torch failed: see $CACHE/build.log"
    local site
    site=$(find "$partial/usr/lib/python3/dist-packages" -maxdepth 0 -type d)
    printf '/opt/torch\n' >"$site/slurmgen-test-torch.pth"
    # apptainer binds these at run time (apptainer.conf "bind path"); a sandbox needs the mount points.
    touch "$partial/etc/hosts" "$partial/etc/localtime"
    recipe >"$partial/.slurmgen-recipe"
    mv -T "$partial" "$dir"
    log "image ready: $dir (debootstrap $(awk "BEGIN { printf \"%.0f\", $t1 - $t0 }") s, torch $(awk "BEGIN { printf \"%.0f\", $EPOCHREALTIME - $t1 }") s)"
}

main() {
    TORCH=$(torch_version)
    local digest
    digest=$(recipe | sha256sum | cut -c1-12)
    case ${1:-} in
    --digest) printf '%s\n' "$digest"; return 0 ;;
    -h | --help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; return 0 ;;
    "") ;;
    *) die "unknown argument: $1 (try --help)" ;;
    esac
    [[ $EUID -eq 0 ]] || die "must run as root (debootstrap)"
    mkdir -p "$CACHE"
    local dir=$CACHE/python-torch-$digest
    exec {lock}>"$dir.lock"
    flock -w 1800 "$lock" || die "another build of $dir holds $dir.lock"
    [[ -f $dir/.slurmgen-recipe ]] || build "$dir"
    printf '%s\n' "$dir"
}

main "$@"
