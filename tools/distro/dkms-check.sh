#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The documented DKMS flow (dkms.conf at the repo root), run inside the
# chroot made by debian-kdir.sh against its prepared tree:
#   dkms add / build --kernelsourcedir / install, then checks the installed
#   modules' vermagic. Prints "dkms: ok" last when everything worked.
#
#   dkms-check.sh CHROOT KDIR_IN_CHROOT KERNELRELEASE
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
CH=$1 KD=$2 KREL=$3
NAME=$(sed -n 's/^PACKAGE_NAME="\(.*\)"/\1/p' "$REPO/dkms.conf")
VER=$(sed -n 's/^PACKAGE_VERSION="\(.*\)"/\1/p' "$REPO/dkms.conf")
# objtool reads /proc: mount it unless the caller (debian-kdir.sh) did.
if ! mountpoint -q "$CH/proc"; then
    mount -t proc proc "$CH/proc"; trap 'umount -l "$CH/proc"' EXIT
fi
inch() { chroot "$CH" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 "$@"; }

# A clean source copy at /usr/src/NAME-VER (what `dkms add` expects).
inch dkms remove "$NAME/$VER" --all >/dev/null 2>&1 || true
rm -rf "$CH/usr/src/$NAME-$VER"; mkdir -p "$CH/usr/src/$NAME-$VER"
(cd "$REPO" && git ls-files -co --exclude-standard -z | grep -zv '^target/' |
    xargs -0 tar -c --ignore-failed-read 2>/dev/null) | tar -x -C "$CH/usr/src/$NAME-$VER"
mkdir -p "$CH/lib/modules/$KREL"
# DKMS signs what it builds with its MOK (/var/lib/dkms/mok.key, made on
# first use) when it finds sign-file; by default it looks in
# /lib/modules/<release>/build, i.e. the headers package: point it at the
# prepared tree's. (Enrolling mok.pub with mokutil is what makes such a
# module loadable under Secure Boot lockdown; not done here.)
if [ -x "$CH$KD/scripts/sign-file" ]; then
    echo "sign_file=\"$KD/scripts/sign-file\"" > "$CH/etc/dkms/framework.conf.d/blkfront-rs.conf"
fi
echo "+ dkms add $NAME/$VER"
inch dkms add "$NAME/$VER"
echo "+ dkms build $NAME/$VER -k $KREL --kernelsourcedir $KD"
if ! inch dkms build "$NAME/$VER" -k "$KREL" --kernelsourcedir "$KD"; then
    tail -30 "$CH/var/lib/dkms/$NAME/$VER/build/make.log" 2>/dev/null || true
    echo "dkms: build failed"; exit 1
fi
echo "+ dkms install $NAME/$VER -k $KREL"
inch dkms install "$NAME/$VER" -k "$KREL" --kernelsourcedir "$KD" --force
inch dkms status "$NAME"
for m in virtio_blk_rs xen_blkfront_rs; do
    f=$(ls "$CH/lib/modules/$KREL"/updates/dkms/$m.ko* 2>/dev/null | head -1)
    [ -n "$f" ] || { echo "dkms: $m not installed under /lib/modules/$KREL/updates/dkms"; exit 1; }
    echo "dkms installed $(basename "$f"): vermagic '$(modinfo -F vermagic "$f")', signer '$(modinfo -F signer "$f")'"
done
if [ -x "$CH$KD/scripts/sign-file" ] && [ -z "$(modinfo -F signer "$f")" ]; then
    echo "dkms: modules not signed although sign-file was configured"; exit 1
fi
echo "dkms: ok"
