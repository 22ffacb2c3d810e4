# SPDX-License-Identifier: GPL-2.0
# virtio guest: 4 KiB logical blocks.
#   virtio-guest.sh -d '128M,logical_block_size=4096,physical_block_size=4096' tools/testing/guest/virtio-4k.sh
. /guest/common.sh
check "insmod virtio_blk_rs" insmod /lib/modules/virtio_blk_rs.ko
sleep 1
topology_line vda
expect_eq "vda logical_block_size" "$(q vda logical_block_size)" 4096
expect_eq "vda size in 512-byte sectors" "$(cat /sys/block/vda/size)" 262144
check "capacity line in 4096-byte blocks" sh -c "dmesg | grep -q '\[vda\] 32768 4096-byte logical blocks (134 MB/128 MiB)'"
roundtrip "4k-aligned O_DIRECT data round trip" vda 4k 256 7
check "rmmod virtio_blk_rs" rmmod virtio_blk_rs
check "no warnings/oopses" sh -c "! dmesg | grep -E 'WARNING:|BUG:|Oops'"
finish
