#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# A kernel upgrade on a trixie system with our DKMS source added, as an
# administrator meets it: in a copy of the trixie root (build-debian-root.sh)
# dkms is installed, the repo's sources go to /usr/src/<name>-<version> and
# `dkms add`; then apt installs kernel packages our modules cannot be built
# for there (Debian's headers carry no Rust metadata, and OTHER_KREL is not
# Linux 7.3). Whatever DKMS does, apt must succeed, every kernel package be
# configured, the new kernel get its initramfs, and our modules be named in
# one line per kernel hook. Prints "pass NAME" / "fail NAME" lines; the
# caller (suites/65-debian-deploy.sh) records them. Only a chroot: no boot.
#
#   deploy-dkms.sh ROOT KREL OTHER_KREL LOGPREFIX
set -uo pipefail
T=$(cd "$(dirname "$0")" && pwd)
. "$T/lib.sh"
ROOT=$1 KREL=$2 OTHER_KREL=$3 LOGP=$4
NAME=$(sed -n 's/^PACKAGE_NAME="\(.*\)"/\1/p' "$REPO/dkms.conf")
VER=$(sed -n 's/^PACKAGE_VERSION="\(.*\)"/\1/p' "$REPO/dkms.conf")
pass() { echo "pass $*"; }
fail() { echo "fail $*"; }

work=$(mktemp -d "$CACHE/deploy/dkms.XXXX")
R=$work/root
# The .debs apt fetches are kept between runs (bind-mounted over the root's
# archive directory): the packages are ~250 MB, the step otherwise seconds.
ARCH=$CACHE/deploy/dkms-apt-archives
mkdir -p "$ARCH/partial"
cleanup() {
    umount -l "$R/var/cache/apt/archives" "$R/proc" 2>/dev/null
    # Never rm -rf with a mount still below.
    grep -q " $work[/ ]" /proc/mounts || rm -rf "$work"
}
trap cleanup EXIT
# -x: never into a file system mounted below the root (a /proc left there).
cp -ax "$ROOT" "$R"
mount -t proc proc "$R/proc"
mount --bind "$ARCH" "$R/var/cache/apt/archives"
inroot() { chroot "$R" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive "$@"; }
apt_in() { inroot apt-get install -y --no-install-recommends -t trixie-backports "$@"; }

# The root has OTHER_KREL installed already: take it out, so that the
# upgrade below is a first install (its postinst must make the initramfs).
other_pkgs="linux-image-$OTHER_KREL linux-binary-$OTHER_KREL linux-modules-$OTHER_KREL linux-base-$OTHER_KREL"
if ! { inroot apt-get purge -y $other_pkgs && inroot apt-get update &&
       inroot apt-get install -y --no-install-recommends dkms; } > "$LOGP-setup.log" 2>&1; then
    fail "DKMS: dkms installed in a copy of the trixie root (log $LOGP-setup.log)"; exit 0
fi
mkdir -p "$R/usr/src/$NAME-$VER"
(cd "$REPO" && git ls-files -co --exclude-standard -z | grep -zv '^target/' |
    xargs -0 tar -c --ignore-failed-read 2>/dev/null) | tar -x -C "$R/usr/src/$NAME-$VER"
if ! inroot dkms add "$NAME/$VER" >> "$LOGP-setup.log" 2>&1; then
    fail "DKMS: dkms add $NAME/$VER (log $LOGP-setup.log)"; exit 0
fi

# dkms_autoinstaller skips a kernel without headers: with them, DKMS
# builds (or decides not to). The headers' own postinst runs it too.
# ok_install LOG PKG...: apt's status, every PKG configured, no DKMS error.
ok_install() {
    local log=$1 p st; shift
    apt_in "$@" > "$log" 2>&1 || { echo "apt-get exit status $?"; return 1; }
    for p in "$@"; do
        st=$(inroot dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>&1)
        [ "$st" = "ii " ] || { echo "$p: dpkg status '$st'"; return 1; }
    done
    ! grep -q '^Error!\|^dpkg: error' "$log" || { echo "$(grep -m1 '^Error!\|^dpkg: error' "$log")"; return 1; }
}
# one_line LOG KREL: our line, once per hook that ran DKMS for KREL.
one_line() {
    local n hooks
    n=$(grep -c "^$NAME: not built for $2: " "$1")
    hooks=$(grep -c "^/etc/kernel/\(header_\)\{0,1\}postinst.d/dkms:\$" "$1")
    ((n >= 1 && n == hooks))
}

log=$LOGP-headers-$KREL.log
if why=$(ok_install "$log" "linux-headers-$KREL"); then
    pass "DKMS: apt install linux-headers-$KREL with our DKMS source added: exit 0, configured"
else
    fail "DKMS: apt install linux-headers-$KREL with our DKMS source added: $why (log $log)"
fi
one_line "$log" "$KREL" &&
    pass "DKMS: $KREL has no Rust-ready tree: one '$NAME: not built for $KREL' line" ||
    fail "DKMS: $KREL: want one '$NAME: not built for $KREL' line per DKMS hook (log $log)"

log=$LOGP-upgrade-$OTHER_KREL.log
if why=$(ok_install "$log" "linux-image-$OTHER_KREL" "linux-headers-$OTHER_KREL"); then
    pass "DKMS: apt install linux-image-$OTHER_KREL + headers with our DKMS source added: exit 0, configured"
else
    fail "DKMS: apt install linux-image-$OTHER_KREL + headers with our DKMS source added: $why (log $log)"
fi
[ -f "$R/boot/initrd.img-$OTHER_KREL" ] && [ -f "$R/boot/vmlinuz-$OTHER_KREL" ] &&
    pass "DKMS: $OTHER_KREL's postinst made its initramfs" ||
    fail "DKMS: no /boot/initrd.img-$OTHER_KREL after its install (log $log)"
one_line "$log" "$OTHER_KREL" &&
    pass "DKMS: $OTHER_KREL is not Linux 7.3: one '$NAME: not built for $OTHER_KREL' line per DKMS hook" ||
    fail "DKMS: $OTHER_KREL: want one '$NAME: not built for $OTHER_KREL' line per DKMS hook (log $log)"
exit 0
