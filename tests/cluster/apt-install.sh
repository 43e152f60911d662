#!/usr/bin/env bash
# Install Debian packages on this machine for the tests, one install at a time.
#
#   tests/cluster/apt-install.sh PACKAGE...   (as root) exit 0 once every PACKAGE is installed
#
# Every apt-get of the test harness on this machine goes through here: the 22.05 cluster's Slurm and munge
# (up.sh), debootstrap for the chroots and the test image (chroot.sh, image.sh), openssh-server and the TOTP tools
# (tests/ssh_server.py), chromium (tests/goodput/test_goodput_html.py). On a fresh machine the test workers ask for
# them in the same minute, and apt-get does not wait for another apt-get: it stops at once with "Could not get lock
# /var/lib/dpkg/lock-frontend" (or ".../lists/lock" for `apt-get update`), which left the 24.11 and 26.05 clusters
# without debootstrap while the 22.05 cluster installed Slurm. So one flock(1) on a file of ours orders the tests'
# installs; inside it, DPkg::Lock::Timeout (apt.conf(5)) waits for a dpkg run that is not ours (an unattended
# upgrade). That option does not cover the lists lock of `apt-get update` (measured on apt 2.6: it fails at once),
# which is why the flock is needed at all.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=SCRIPTDIR/common.sh
. "$HERE/common.sh"

# A root-owned directory (/var/cache/slurmgen also holds the chroots and the image): nothing another user planted
# in a world-writable /tmp or /run/lock is opened here.
LOCK_DIR=${SLURMGEN_APT_LOCK_DIR:-/var/cache/slurmgen}
WAIT=1800 # seconds: a chromium install on a slow mirror takes minutes, and another test's may be before ours

(($#)) || die "usage: apt-install.sh PACKAGE..."

missing() {
    local p
    for p in "$@"; do
        dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$' || echo "$p"
    done
}

mapfile -t wanted < <(missing "$@")
((${#wanted[@]})) || exit 0 # all there: nothing needs root, apt-get or the lock
[[ $EUID -eq 0 ]] || die "installing ${wanted[*]} needs root"
command -v apt-get >/dev/null || die "${wanted[*]} missing and there is no apt-get to install them"

mkdir -p "$LOCK_DIR"
exec 8>"$LOCK_DIR/apt.lock"
flock -w "$WAIT" 8 || die "another test's apt-get held $LOCK_DIR/apt.lock for $WAIT s"
mapfile -t wanted < <(missing "${wanted[@]}") # the install before ours may have brought them
((${#wanted[@]})) || exit 0

log "installing ${wanted[*]}"
export DEBIAN_FRONTEND=noninteractive
# fd 8 (the lock) closed for apt-get: a process it leaves running would hold the lock for as long as it runs.
run_apt() { apt-get -o "DPkg::Lock::Timeout=$WAIT" -qq "$@" 8>&-; }
# Package postinst scripts must not start daemons from /etc (they would take port 6817, or start the system's
# MariaDB or sshd). Debian images usually carry a policy-rc.d that forbids it (invoke-rc.d(8)); add one for the
# duration of the install if this machine has none.
policy=/usr/sbin/policy-rc.d own_policy=0
if [[ ! -e $policy ]]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy" && own_policy=1
fi
drop_policy() { if ((own_policy)); then rm -f "$policy"; fi; }
trap drop_policy EXIT
# apt-get update only when needed: no candidate in the lists, or a download that fails on stale lists.
updated=0
if ! apt-cache show "${wanted[@]}" >/dev/null 2>&1; then
    run_apt update && updated=1
fi
install=(run_apt install -y --no-install-recommends "${wanted[@]}")
if ! "${install[@]}" >/dev/null; then
    # Lists updated already: apt-get's answer stands. Else they may be stale: update once and try again.
    if ((updated)) || ! { run_apt update && "${install[@]}" >/dev/null; }; then
        die "apt-get install ${wanted[*]} failed"
    fi
fi
mapfile -t still < <(missing "${wanted[@]}")
((${#still[@]} == 0)) || die "apt-get installed nothing for ${still[*]}"
