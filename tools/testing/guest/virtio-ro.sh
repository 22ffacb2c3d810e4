# SPDX-License-Identifier: GPL-2.0
# virtio guest: VIRTIO_BLK_F_RO. The second disk is read-only on the host:
#   truncate -s 64M /tmp/ro.img
#   QEMU_EXTRA='-drive file=/tmp/ro.img,if=none,id=dro,format=raw,readonly=on -device virtio-blk-pci,drive=dro' \
#     virtio-guest.sh -d 64M tools/testing/guest/virtio-ro.sh
. /guest/common.sh
check "insmod virtio_blk_rs" insmod /lib/modules/virtio_blk_rs.ko
sleep 1
expect_eq "vda ro" "$(cat /sys/block/vda/ro)" 0
expect_eq "vdb ro (host read-only)" "$(cat /sys/block/vdb/ro 2>/dev/null)" 1
check "vdb readable" dd if=/dev/vdb of=/dev/null bs=64k count=16 iflag=direct
check "vdb write refused" sh -c "! dd if=/dev/zero of=/dev/vdb bs=4k count=1 oflag=direct 2>/dev/null"
check "rmmod virtio_blk_rs" rmmod virtio_blk_rs
check "no warnings/oopses" sh -c "! dmesg | grep -E 'WARNING:|BUG:|Oops'"
finish
