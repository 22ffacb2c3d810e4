#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Debian userspace for the Xen dom0 (xl, xenstored, blkback's tools, fio).
# Cached in $CACHE/dom0-rootfs-<key>; the key is the package list below.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

# qemu-system-xen: QEMU's xen-block backend ("qdisk"), which libxl starts for
# a vbd with backendtype=qdisk; qemu-utils: qemu-img for its qcow2 file.
pkgs=xen-utils-4.17,xenstore-utils,kmod,util-linux,iproute2,fio,e2fsprogs,procps,python3-minimal,qemu-system-xen,qemu-utils
key=$(echo "$pkgs bookworm" | sha256sum | cut -c1-12)
root=$CACHE/dom0-rootfs-$key
if [ -f "$root/.blkfront-done" ]; then echo "$root"; exit 0; fi
exec 9> "$CACHE/build-dom0-rootfs.sh.lock"; flock 9
if [ -f "$root/.blkfront-done" ]; then echo "$root"; exit 0; fi
# DISTRO_MIRROR, else the host's own Debian mirror (its apt sources). Not
# part of the key: any mirror serves the same bookworm packages.
. "$REPO/tools/distro/apt-mirror.sh"
MIRROR=${DISTRO_MIRROR:-$(apt_mirror)} || exit 1
log "debootstrap dom0 rootfs into $root (about 2 minutes)"
rm -rf "$root"
debootstrap --variant=minbase --include="$pkgs" bookworm "$root" \
    "$MIRROR" > "$CACHE/debootstrap.log" 2>&1 ||
    { tail -20 "$CACHE/debootstrap.log" >&2; die "debootstrap failed (log: $CACHE/debootstrap.log)"; }
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/usr/share/doc "$root"/usr/share/man "$root"/usr/share/locale
touch "$root/.blkfront-done"
echo "$root"
