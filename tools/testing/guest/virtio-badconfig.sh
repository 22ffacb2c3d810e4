# SPDX-License-Identifier: GPL-2.0
# virtio guest: a device with an inconsistent config is refused with one
# message naming the field and value; the other disk works.
#   virtio-guest.sh -d 64M -d '64M,physical_block_size=4096,min_io_size=6144' ...
# (min_io_size 6144 bytes = 12 logical blocks: larger than a 4 KiB physical
# block but not a multiple of it; upstream accepts it as io_min 6144.)
. /guest/common.sh
check "insmod virtio_blk_rs" insmod /lib/modules/virtio_blk_rs.ko
sleep 1
check "vda (good config) present" [ -b /dev/vda ]
check "no disk for the bad config" [ ! -e /sys/block/vdb ]
msg=$(dmesg | grep -E 'virtio_blk_rs virtio1: virtio-blk config' | tail -1)
echo "BADCONFIG: $msg"
check "one dev_err naming min_io_size and its value" sh -c "dmesg | grep -E 'virtio_blk_rs virtio1: virtio-blk config min_io_size = 12' >/dev/null"
expect_eq "messages for virtio1" "$(dmesg | grep -c 'virtio_blk_rs virtio1: virtio-blk config')" 1
dd if=/dev/urandom of=/tmp/p bs=64k count=16 2>/dev/null
dd if=/tmp/p of=/dev/vda bs=64k oflag=direct 2>/dev/null
dd if=/dev/vda of=/tmp/b bs=64k count=16 iflag=direct 2>/dev/null
check "vda works" cmp -s /tmp/p /tmp/b
check "rmmod virtio_blk_rs" rmmod virtio_blk_rs
check "no warnings/oopses" sh -c "! dmesg | grep -E 'WARNING:|BUG:|Oops'"
finish
