#!/bin/sh
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
for bs in 4k 512k; do
    if fio --thread --name=mq$bs --filename=/dev/$D --direct=1 --ioengine=libaio --iodepth=32 --numjobs=2 \
        --rw=randwrite --bs=$bs --size=16M --offset=16M --verify=crc32c --do_verify=1 --verify_fatal=1 \
        >/tmp/fio.log 2>&1; then ok "fio verify bs=$bs 2 jobs qd32"; else not_ok "fio verify bs=$bs 2 jobs qd32"; tail -5 /tmp/fio.log; fi
done
S=/sys/kernel/debug/xen_blkfront_rs-$D/stats
cat "$S"
expect_eq "rings in stats" "$(grep '^rings:' $S | cut -d' ' -f2)" "$want"
dmesg | grep -iE 'blkfront' | tail -3
for dev in /sys/bus/xen/drivers/xen_blkfront_rs/vbd-*; do
    [ -e "$dev" ] && echo "$(basename "$dev")" > /sys/bus/xen/drivers/xen_blkfront_rs/unbind
done
check "rmmod xen_blkfront_rs" rmmod xen_blkfront_rs
finish
