# SPDX-License-Identifier: GPL-2.0
# virtio guest: online resize. The first disk is grown through the QEMU
# monitor (HOST-CMD: block_resize, relayed by virtio-guest.sh); the driver
# must pick up the config change and update the capacity.
#   virtio-guest.sh -d 256M tools/testing/guest/virtio-resize.sh
. /guest/common.sh
check "insmod virtio_blk_rs" insmod /lib/modules/virtio_blk_rs.ko
sleep 1
before=$(cat /sys/block/vda/size)
echo "RESIZE-READY size=$before"
echo "HOST-CMD: block_resize d0 384M"
i=0
while [ "$(cat /sys/block/vda/size)" = "$before" ] && [ $i -lt 60 ]; do sleep 1; i=$((i + 1)); done
after=$(cat /sys/block/vda/size)
echo "RESIZE size: $before -> $after"
check "vda capacity changed online" [ "$after" != "$before" ]
expect_eq "vda size after the resize to 384 MiB (512-byte sectors)" "$after" 786432
dmesg | grep 'new size' | tail -2
# The new space is usable: write and read back at the end of the disk.
dd if=/dev/urandom of=/tmp/p bs=64k count=16 2>/dev/null
seek=$(( after / 128 - 16 ))
dd if=/tmp/p of=/dev/vda bs=64k seek=$seek oflag=direct 2>/dev/null
dd if=/dev/vda of=/tmp/b bs=64k skip=$seek count=16 iflag=direct 2>/dev/null
check "vda: data round trip in the new last MiB" cmp -s /tmp/p /tmp/b
check "rmmod virtio_blk_rs" rmmod virtio_blk_rs
finish
