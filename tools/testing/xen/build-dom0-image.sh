#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The dom0 root disk (Debian rootfs + the test kernel's modules + our init)
# and dom0's initramfs (busybox + virtio_blk.ko, mounts /dev/vda and
# switch_roots). Cached next to each other, keyed by rootfs, kernel and init.
# Prints the path of dom0.img.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
KDIR=${1:?KDIR}
rootfs=$(bash "$REPO/tools/testing/build-dom0-rootfs.sh")
key=$( { echo "$rootfs"; cat "$KDIR/.blkfront-done" "$KDIR/include/config/kernel.release";
         stat -c %Y "$KDIR/arch/x86/boot/bzImage"; cat "$REPO/tools/testing/xen/dom0-init.sh"; } | sha256sum | cut -c1-16)
dir=$CACHE/dom0-$key
if [ -f "$dir/.blkfront-done" ]; then echo "$dir/dom0.img"; exit 0; fi
exec 9> "$CACHE/build-dom0-image.sh.lock"; flock 9
if [ -f "$dir/.blkfront-done" ]; then echo "$dir/dom0.img"; exit 0; fi
log "building dom0 image in $dir"
rm -rf "$dir"; mkdir -p "$dir"
stage=$dir/stage
cp -a "$rootfs" "$stage"
make -C "$SRC_DIR" O="$KDIR" LLVM=-19 ARCH=x86_64 INSTALL_MOD_PATH="$stage" modules_install >/dev/null
depmod -b "$stage" "$(cat "$KDIR/include/config/kernel.release")" >/dev/null
install -m 755 "$REPO/tools/testing/xen/dom0-init.sh" "$stage/sbin/blkrs-dom0-init"
mke2fs -q -t ext4 -d "$stage" "$dir/dom0.img" 1500M >/dev/null
rm -rf "$stage"

# dom0 initramfs: find the root disk and hand over to blkrs-dom0-init.
vb=$(find "$KDIR/drivers/block" -name virtio_blk.ko | head -1)
init=$(mktemp); chmod 755 "$init"
cat > "$init" <<'INIT'
#!/bin/sh
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
insmod /lib/modules/virtio_blk.ko
for i in 1 2 3 4 5 6 7 8 9 10; do [ -b /dev/vda ] && break; sleep 0.5; done
mkdir -p /newroot && mount -t ext4 /dev/vda /newroot || { echo "dom0 initramfs: cannot mount /dev/vda"; poweroff -f; }
umount /proc /sys; umount /dev 2>/dev/null
exec switch_root /newroot /sbin/blkrs-dom0-init
INIT
make_initramfs "$dir/dom0-initramfs.cpio.gz" "$vb:/lib/modules/virtio_blk.ko" "$init:/init"
rm -f "$init"
touch "$dir/.blkfront-done"
echo "$dir/dom0.img"
