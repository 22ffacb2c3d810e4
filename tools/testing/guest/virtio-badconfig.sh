# SPDX-License-Identifier: GPL-2.0
# virtio guest: a device whose advisory config field is out of range comes
# up anyway, the field clamped, with one warning naming the field, the
# value offered and the value used; the other disk is untouched.
#   virtio-guest.sh -d 64M -d '64M,physical_block_size=4096,min_io_size=6144' ...
# (min_io_size 6144 bytes = 12 logical blocks: larger than a 4 KiB physical
# block but not a multiple of it; upstream accepts it as io_min 6144, the
# driver rounds it down to 8 blocks, io_min 4096.)
. /guest/common.sh
check "insmod virtio_blk_rs" insmod /lib/modules/virtio_blk_rs.ko
sleep 1
check "vda (good config) present" [ -b /dev/vda ]
check "vdb (odd min_io_size) present" [ -b /dev/vdb ]
msg=$(dmesg | grep -E 'virtio_blk_rs virtio1: device config' | tail -1)
echo "BADCONFIG: $msg"
check "one warning naming min_io_size, its value and the value used" sh -c "dmesg | grep -E 'virtio_blk_rs virtio1: device config: min_io_size 12, using 8\$' >/dev/null"
expect_eq "config warnings for virtio1" "$(dmesg | grep -c 'virtio_blk_rs virtio1: device config')" 1
expect_eq "config warnings for virtio0" "$(dmesg | grep -c 'virtio_blk_rs virtio0: device config')" 0
expect_eq "vdb io_min: whole physical blocks" "$(q vdb minimum_io_size)" 4096
expect_eq "vdb physical block" "$(q vdb physical_block_size)" 4096
roundtrip "vda works" vda 64k 16 0
# Only on the block device: dd would make a regular file in its place.
if [ -b /dev/vdb ]; then roundtrip "vdb works" vdb 64k 16 0; else not_ok "vdb works: no /dev/vdb"; fi
check "rmmod virtio_blk_rs" rmmod virtio_blk_rs
check "no warnings/oopses" sh -c "! dmesg | grep -E 'WARNING:|BUG:|Oops'"
finish
