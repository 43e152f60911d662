#!/usr/bin/env bash
# The Debian chroot that holds a Slurm version the host does not package, built on first use and cached.
#
#   tests/cluster/chroot.sh --slurm 24.11          print the chroot's path; build it first if it is missing
#   tests/cluster/chroot.sh --slurm 24.11 --rebuild  build it again (a running cluster keeps its old copy)
#
# Cache: $SLURMGEN_CHROOT_CACHE (default /var/cache/slurmgen/chroots), one directory per recipe:
# slurm-<version>-<suite>-<hash of the recipe>. A directory there is complete by construction: the build runs
# in <dir>.partial and is renamed at the very end, so a build that died leaves only a .partial, removed by the
# next build. Changing the recipe below (suite, packages) changes the hash, so an old chroot is never reused
# for a new recipe. /var/cache survives reboots, unlike /tmp; a fresh machine builds it once (about 1-2 min).
# Mirror: $SLURMGEN_DEBIAN_MIRROR (default http://deb.debian.org/debian, the one apt uses here).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=SCRIPTDIR/common.sh
. "$HERE/common.sh"

CACHE=${SLURMGEN_CHROOT_CACHE:-/var/cache/slurmgen/chroots}
MIRROR=${SLURMGEN_DEBIAN_MIRROR:-http://deb.debian.org/debian}
RECIPE_VERSION=1 # bump to force a rebuild everywhere after a change that the package list does not show

# What jobs on a chroot node run besides Slurm: the host's Python (bind-mounted at its own path, see up.sh)
# needs the shared libraries its standard modules link against (ldd on lib-dynload/*.so: ctypes -> libffi,
# ssl/hashlib -> libssl, sqlite3, bz2, lzma, zlib, uuid, readline, curses, pyexpat); torch's wheel brings its
# own libgomp and needs libstdc++/libgcc, which minbase has. ifcfg runs `ip`/`route`; tests use hostname/ps.
# The *t64 names are trixie's and later (Debian's 64-bit time_t transition renamed them). Not here: libnsl2
# for the deprecated `nis` module (forky ships only libnsl3), and Tk.
EXTRA_PACKAGES=(libffi8 libssl3t64 libsqlite3-0 libbz2-1.0 liblzma5 zlib1g libuuid1 libreadline8t64 libncursesw6
    libexpat1 iproute2 net-tools hostname procps)

# Mount points for the host paths up.sh binds into the chroot (so they look the same inside and outside), and
# for the files each node gets its own copy of (minbase has no /etc/hosts).
MOUNT_POINTS=(work home root usr/local tmp run proc sys dev)
MOUNT_FILES=(etc/hosts etc/resolv.conf etc/nsswitch.conf)

# apt inside the chroot: Debian testing/unstable Release files carry a Valid-Until date, and a mirror
# snapshot older than that is refused ("Release file ... is expired", apt.conf(5) Acquire::Check-Valid-Until).
APT_OPTS=(-o Acquire::Check-Valid-Until=false -o Dpkg::Use-Pty=0)

# Apptainer for the container tests (tests/runtime/test_apptainer_cluster.py), in the 26.05 chroot only. Debian
# ships it in sid alone (not in forky): sid is added as a second source, pinned below forky, and only apptainer
# and what forky lacks come from it.
APPTAINER_VERSIONS=(26.05)
with_apptainer() { [[ " ${APPTAINER_VERSIONS[*]} " == *" $SLURM_VERSION "* ]]; }

recipe() {
    printf 'recipe %s\nsuite %s\nvariant minbase\npackages %s\n' "$RECIPE_VERSION" "$SUITE" \
        "${PACKAGES[*]} ${EXTRA_PACKAGES[*]}"
    if with_apptainer; then printf 'apptainer sid %s\n' "$(apptainer_wrapper | sha256sum | cut -c1-10)"; fi
}

# /usr/bin/apptainer in the chroot (the package's binary is diverted to apptainer.real). Apptainer refuses to run
# in a "weak chroot": its starter setns()es into the container's mount namespace, which moves it to that
# namespace's root mount, and aborts when that is not the "/" it started from (starter.c; the message is
# "Running inside a weak chrooted environment, prefer pivot_root instead of chroot"). slurmd starts every task
# with chroot(2), so the task's "/" is the chroot, while its mount namespace's root is the host's "/". The
# wrapper makes the chroot the root mount of a private mount namespace: unshare(1) a new one, nsenter(1) into it
# (setns puts us at its root mount, the host's "/"), cd to the chroot (fd 9, opened before, names it from
# there), pivot_root(8) with new and old root the same directory and detach the old one (pivot_root(2), NOTES:
# "pivot_root(".", ".")"); every mount under the chroot (/proc, /dev, /tmp, the node's /etc/hosts) stays.
apptainer_wrapper() {
    cat <<'WRAPPER'
#!/bin/sh
# Written by tests/cluster/chroot.sh (see the comment above apptainer_wrapper there): re-root, then apptainer.
exec 9</
# shellcheck disable=SC2016 # expanded by the inner sh, at the host's root
exec unshare --mount --propagation private -- nsenter --mount=/proc/self/ns/mnt -- /bin/sh -c '
    PATH=/usr/sbin:/usr/bin:/sbin:/bin
    cd "$(readlink /proc/self/fd/9)" && pivot_root . . && umount -l . && cd "$1" || exit 255
    shift
    exec 9<&-
    exec /usr/bin/apptainer.real "$@"' apptainer-pivot "$PWD" "$@"
WRAPPER
}

install_apptainer() {
    local dir=$1
    log "adding apptainer from sid (Debian has it only there)"
    printf 'deb %s sid main\n' "$MIRROR" >"$dir/etc/apt/sources.list.d/sid.list"
    printf 'APT::Default-Release "%s";\n' "$SUITE" >"$dir/etc/apt/apt.conf.d/99slurmgen-default-release"
    # Diverted after the install: the package's postinst registers /usr/bin/singularity.apptainer, a link to
    # apptainer, as an alternative and fails while that link dangles.
    in_chroot "$dir" "export DEBIAN_FRONTEND=noninteractive
        apt-get ${APT_OPTS[*]} update -qq &&
        apt-get ${APT_OPTS[*]} install -y -qq --no-install-recommends apptainer/sid &&
        dpkg-divert --local --rename --divert /usr/bin/apptainer.real --add /usr/bin/apptainer &&
        apt-get clean && rm -rf /var/lib/apt/lists/*" >>"$CACHE/build-$SLURM_VERSION.log" 2>&1 ||
        die "apt-get install apptainer/sid failed: see $CACHE/build-$SLURM_VERSION.log"
    # Root here may lack capabilities (this VM's bounding set has no CAP_SYS_RESOURCE), and the default "full"
    # asks for every one: "Requesting capability set ... while permitted capability set is ..." (apptainer.conf(5):
    # root default capabilities = full | file | no).
    sed -i 's/^root default capabilities = .*/root default capabilities = no/' "$dir/etc/apptainer/apptainer.conf"
    apptainer_wrapper >"$dir/usr/bin/apptainer"
    chmod 755 "$dir/usr/bin/apptainer"
}

# chroot_dir: the cache directory of this version's recipe.
chroot_dir() {
    local hash
    hash=$(recipe | sha256sum | cut -c1-10)
    printf '%s/slurm-%s-%s-%s' "$CACHE" "$SLURM_VERSION" "$SUITE" "$hash"
}

# Run a shell command inside the chroot being built, with /dev and /proc, in a private mount namespace so
# nothing stays mounted on the host (not even after a crash).
in_chroot() {
    local dir=$1
    shift
    # shellcheck disable=SC2016 # expanded by the inner bash
    unshare --mount --propagation private -- bash -c 'set -e; mount --rbind /dev "$1/dev"; mount -t proc proc "$1/proc"
        r=$1; shift; exec chroot "$r" /bin/sh -c "$@"' bash "$dir" "$@"
}

ensure_debootstrap() {
    command -v debootstrap >/dev/null && return 0
    "$HERE/apt-install.sh" debootstrap || die "debootstrap is missing and could not be installed"
}

mount_points() {
    local d
    for d in "${MOUNT_POINTS[@]}"; do mkdir -p "$1/$d"; done
    for d in "${MOUNT_FILES[@]}"; do [[ -e $1/$d ]] || touch "$1/$d"; done
}

build() {
    local dir=$1 partial=$1.partial t0=$EPOCHREALTIME script
    rm -rf "$partial"
    ensure_debootstrap
    # An older debootstrap may not know a newer suite by name (bookworm's knows trixie and sid, not forky);
    # every Debian suite since buster uses the same script as sid.
    script=/usr/share/debootstrap/scripts/$SUITE
    [[ -e $script ]] || script=/usr/share/debootstrap/scripts/sid
    log "building the $SUITE chroot for Slurm $SLURM_VERSION in $partial (debootstrap, about a minute)"
    # In a private mount namespace: debootstrap mounts /proc and /sys inside the target, and a failed run
    # would leave them mounted under the directory that the next build removes.
    unshare --mount --propagation private -- debootstrap --variant=minbase "$SUITE" "$partial" "$MIRROR" \
        "$script" >"$CACHE/build-$SLURM_VERSION.log" 2>&1 ||
        die "debootstrap $SUITE failed: see $CACHE/build-$SLURM_VERSION.log"
    local t1=$EPOCHREALTIME
    printf 'Acquire::Check-Valid-Until "false";\n' >"$partial/etc/apt/apt.conf.d/99slurmgen-valid-until"
    # Package scripts must not start daemons (they would take Slurm's ports on the host network).
    printf '#!/bin/sh\nexit 101\n' >"$partial/usr/sbin/policy-rc.d"
    chmod 755 "$partial/usr/sbin/policy-rc.d"
    log "installing ${PACKAGES[*]} and the libraries the host's Python needs"
    in_chroot "$partial" "export DEBIAN_FRONTEND=noninteractive; apt-get ${APT_OPTS[*]} update -qq &&
        apt-get ${APT_OPTS[*]} install -y -qq --no-install-recommends ${PACKAGES[*]} ${EXTRA_PACKAGES[*]} &&
        apt-get clean" >>"$CACHE/build-$SLURM_VERSION.log" 2>&1 ||
        die "apt-get install in the $SUITE chroot failed: see $CACHE/build-$SLURM_VERSION.log"
    if with_apptainer; then install_apptainer "$partial"; fi
    local got
    # shellcheck disable=SC2016 # a dpkg-query format, not a shell expansion
    got=$(chroot "$partial" dpkg-query -W -f='${Version}' slurmctld)
    [[ $got == "$SLURM_VERSION".* ]] ||
        die "Debian $SUITE now ships Slurm $got, not $SLURM_VERSION: update the suite in tests/cluster/common.sh"
    mount_points "$partial"
    # Seen from inside (a job on a node): the Slurm wrappers in $BIN exec the chroot's own binaries at once.
    printf 'slurm %s\n' "$got" >"$partial/etc/slurmgen-chroot"
    recipe >"$partial/.slurmgen-recipe"
    mv -T "$partial" "$dir"
    log "chroot ready: Slurm $got in $dir (debootstrap $(awk "BEGIN { printf \"%.0f\", $t1 - $t0 }") s, packages $(awk "BEGIN { printf \"%.0f\", $EPOCHREALTIME - $t1 }") s)"
}

main() {
    parse_cluster_args "$@"
    set -- "${ARGS[@]+"${ARGS[@]}"}"
    local rebuild=0
    case ${1:-} in
    --rebuild) rebuild=1 ;;
    -h | --help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; return 0 ;;
    "") ;;
    *) die "unknown argument: $1 (try --help)" ;;
    esac
    [[ $SOURCE == chroot ]] || die "Slurm $SLURM_VERSION comes from the host's packages, not from a chroot"
    [[ $EUID -eq 0 ]] || die "must run as root (debootstrap, chroot, mount namespaces)"
    mkdir -p "$CACHE"
    local dir
    dir=$(chroot_dir)
    # One build per recipe at a time; a second caller waits and then finds it complete.
    exec {lock}>"$dir.lock"
    flock -w 1800 "$lock" || die "another build of $dir holds $dir.lock"
    if ((rebuild)) && [[ -d $dir ]]; then
        # A running cluster has the old directory open; move it aside instead of deleting it under it.
        mv -T "$dir" "$dir.old.$$"
        log "moved the old chroot to $dir.old.$$ (delete it once no cluster uses it)"
    fi
    [[ -f $dir/.slurmgen-recipe ]] || build "$dir"
    mount_points "$dir" # cheap; covers a chroot cached by an older chroot.sh
    printf '%s\n' "$dir"
}

main "$@"
