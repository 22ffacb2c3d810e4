# SPDX-License-Identifier: GPL-2.0
# virtio guest: ring-full path. Run with a tiny ring without indirect
# descriptors (e.g. -d '128M,queue-size=16,indirect_desc=off,
# seg-max-adjust=off,num-queues=1') and a deeper blk-mq queue than the ring
# holds, so virtqueue_add_sgs fails with ENOSPC and requests are retried
# (BLK_STS_DEV_RESOURCE). Checks: the driver's ring-full counter (reported
# at remove) is not 0, and data written by 8 parallel writers reads back
# intact. With seg-max-adjust=off the device offers seg_max 126, more than
# the 16-entry ring holds without indirect descriptors: the driver must cap
# it to 11 (ring - 2 for header and status - 3 for a GET_ID the device may
# never answer) and say so, or a request of more segments would be retried
# for ever.
. /guest/common.sh
check "insmod virtio_blk_rs queue_depth=64" insmod /lib/modules/virtio_blk_rs.ko queue_depth=64
sleep 1
topology_line vda
echo "RINGFULL vda: nr_requests=$(q vda nr_requests) max_segments=$(q vda max_segments)"
expect_eq "vda: max_segments capped to the ring beside GET_ID (16 - 2 - 3)" "$(q vda max_segments)" 11
check "one dmesg line says seg_max does not fit the ring" sh -c "dmesg | grep -q 'seg_max 126 does not fit a ring of 16 without indirect descriptors beside GET_ID: 11 segments per request'"
for i in 0 1 2 3 4 5 6 7; do dd if=/dev/urandom of=/tmp/src$i bs=64k count=64 2>/dev/null; done
for i in 0 1 2 3 4 5 6 7; do
    dd if=/tmp/src$i of=/dev/vda bs=16k seek=$((i * 256)) oflag=direct 2>/dev/null &
done
wait
for i in 0 1 2 3 4 5 6 7; do
    dd if=/dev/vda of=/tmp/dst$i bs=4k skip=$((i * 1024)) count=1024 iflag=direct 2>/dev/null &
done
wait
bad=0
for i in 0 1 2 3 4 5 6 7; do cmp -s /tmp/src$i /tmp/dst$i || bad=$((bad + 1)); done
expect_eq "8 parallel 4 MiB writers/readers on a 16-entry ring: regions differing" "$bad" 0
check "rmmod virtio_blk_rs" rmmod virtio_blk_rs
retries=$(removal_count vda "ring-full retries")
check "ring-full retries happened (vda: ${retries:-no count})" [ "${retries:-0}" -gt 0 ]
check "no warnings/oopses" sh -c "! dmesg | grep -E 'WARNING:|BUG:|Oops|I/O error'"
finish
