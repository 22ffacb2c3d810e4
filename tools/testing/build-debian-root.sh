#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# A Debian trixie root file system with Debian's stock kernel installed the
# way a guest has it (`apt-get install -t trixie-backports linux-image-$KREL`,
# as Debian documents for backported kernels; its initramfs made by
# update-initramfs inside the root): the system the deployment boots
# (suites/65-debian-deploy.sh) install our package into. A second kernel,
# OTHER_KREL, stands for the next kernel upload (a new ABI name our
# modules are not built for): it must still find its root disk.
#
#   build-debian-root.sh        prints the root's path (a directory)
#
# Cached in $CACHE/deploy/root-<key> (key: suite, mirror, release, package
# list). Only Debian packages; nothing is installed on the host: apt runs
# inside the trixie root (chroot), never on this bookworm host.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
KREL=${DISTRO_KREL:-7.3.4+deb13-amd64}
OTHER_KREL=${DISTRO_OTHER_KREL:-7.2.12+deb13-amd64}
# DISTRO_MIRROR, else the host's own Debian mirror (its apt sources).
. "$REPO/tools/distro/apt-mirror.sh"
MIRROR=${DISTRO_MIRROR:-$(apt_mirror)} || exit 1
# udev: loads drivers by modalias in the initramfs and the root; zstd:
# initramfs-tools' default compression; xen-blkfront needs nothing more.
pkgs=kmod,udev,initramfs-tools,zstd,e2fsprogs,util-linux,procps
# The image's label (mke2fs -L root): the initramfs' fsck hook reads the type.
fstab="LABEL=root / ext4 rw,errors=remount-ro 0 1"
key=$(echo "trixie $MIRROR $KREL $OTHER_KREL $pkgs $fstab" | sha256sum | cut -c1-12)
root=$CACHE/deploy/root-$key
if [ -f "$root/.blkfront-done" ]; then echo "$root"; exit 0; fi
mkdir -p "$CACHE/deploy"
exec 9> "$CACHE/deploy/.lock"; flock 9
if [ -f "$root/.blkfront-done" ]; then echo "$root"; exit 0; fi
# Never rm -rf a tree with a mount below it.
if grep -q " $root[/ ]" /proc/mounts; then die "$root has mounts below it"; fi
rm -rf "$root"
t0=$(date +%s)
log "debootstrap trixie root into $root (log $CACHE/deploy/debootstrap.log)"
debootstrap --variant=minbase --include="$pkgs" trixie "$root" "$MIRROR" \
    > "$CACHE/deploy/debootstrap.log" 2>&1 ||
    { tail -20 "$CACHE/deploy/debootstrap.log" >&2; die "debootstrap failed (log: $CACHE/deploy/debootstrap.log)"; }
echo "deb $MIRROR trixie-backports main" > "$root/etc/apt/sources.list.d/backports.list"
echo "$fstab" > "$root/etc/fstab"
echo blkfront-rs-guest > "$root/etc/hostname"
mount -t proc proc "$root/proc"
trap 'umount -l "$root/proc"' EXIT
inroot() { chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive "$@"; }
log "installing linux-image-$KREL and linux-image-$OTHER_KREL into the root (log $CACHE/deploy/apt.log)"
{ inroot apt-get update && inroot apt-get install -y --no-install-recommends -t trixie-backports \
    "linux-image-$KREL" "linux-image-$OTHER_KREL"; } > "$CACHE/deploy/apt.log" 2>&1 ||
    { tail -20 "$CACHE/deploy/apt.log" >&2; die "installing the kernels failed (log: $CACHE/deploy/apt.log)"; }
for k in "$KREL" "$OTHER_KREL"; do
    [ -f "$root/boot/initrd.img-$k" ] || die "the kernel's postinst made no /boot/initrd.img-$k"
done
inroot apt-get clean
umount "$root/proc"; trap - EXIT
echo $(($(date +%s) - t0)) > "$root/.build-seconds"
touch "$root/.blkfront-done"
log "trixie root ready in $(cat "$root/.build-seconds")s ($(du -sh "$root" | cut -f1))"
echo "$root"
