#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Xen domU check for xen_blkfront_rs with non-default parameters: several
# rings (needs a domU with >= 2 vCPUs and a backend offering
# multi-queue-max-queues >= 2), a 4-page ring, 128 indirect segments.
. /guest/common.sh
D=xvda
check "insmod with max_queues=2 max_ring_page_order=2 max_indirect_segments=128" \
    insmod /lib/modules/xen_blkfront_rs.ko max_queues=2 max_ring_page_order=2 max_indirect_segments=128
for i in $(seq 1 40); do [ -e /sys/block/$D ] && break; sleep 0.25; done
[ -e /sys/block/$D ] && ok "disk $D appears" || { not_ok "disk $D appears"; dmesg | tail -20; finish; exit; }
topology_line $D
cpus=$(grep -c ^processor /proc/cpuinfo)
nq=$(ls -d /sys/block/$D/mq/* | wc -l)
want=2; [ "$cpus" -lt 2 ] && want=1
expect_eq "hardware queues (rings) with $cpus CPUs" "$nq" "$want"
expect_eq "queue depth (4-page ring: 128 slots)" "$(q $D nr_requests)" 128
expect_eq "max_segments (128 indirect)" "$(q $D max_segments)" 128
expect_eq "max_hw_sectors_kb" "$(q $D max_hw_sectors_kb)" 512
# Four concurrent O_DIRECT writers of 512 KiB blocks (128 segments: one
# indirect request each), then verified reads.
for i in 1 2 3 4; do
    dd if=/dev/urandom of=/tmp/c.$i bs=1M count=4 2>/dev/null
done
for i in 1 2 3 4; do
    dd if=/tmp/c.$i of=/dev/$D bs=512k seek=$((i * 8)) oflag=direct 2>/dev/null &
done
wait
same=1
for i in 1 2 3 4; do
    dd if=/dev/$D of=/tmp/r.$i bs=512k skip=$((i * 8)) count=8 iflag=direct 2>/dev/null
    [ "$(md5sum < /tmp/r.$i | cut -d' ' -f1)" = "$(md5sum < /tmp/c.$i | cut -d' ' -f1)" ] || same=0
done
[ $same = 1 ] && ok "4 concurrent 512k writers verified" || not_ok "4 concurrent 512k writers verified"
S=/sys/kernel/debug/xen_blkfront_rs-$D/stats
cat "$S"
ind=$(grep '^indirect_requests:' $S | cut -d' ' -f2)
[ "${ind:-0}" -gt 0 ] && ok "indirect requests with 128 segments ($ind)" || not_ok "indirect requests used"
expect_eq "rings in stats" "$(grep '^rings:' $S | cut -d' ' -f2)" "$want"
dmesg | grep -iE 'blkfront' | tail -3
unbind_vbds
check "rmmod xen_blkfront_rs" rmmod xen_blkfront_rs
finish
