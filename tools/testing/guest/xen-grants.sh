#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Xen domU with a small grant table (xen-guest.sh -g: BLKGRANTFRAMES frames
# of 512 grants) and two vbds (-2), each with one ring per vCPU and
# max_indirect_segments=256 (a 1 MiB request takes 257 grants): fio on both
# disks at once, 16 deep, wants several times more grants than the table
# has. Every request must still complete (wait, never EIO: fio crc32c
# verify 0 errors on both disks), the driver must have run out of grants
# (out_of_grants > 0 in its stats) and its retries must not spin (blk-mq
# reruns a queue that returned BLK_STS_RESOURCE after 3 ms or on a
# completion: at most a few hundred retries a second, not a busy loop).
# The C xen-blkfront first on the same workload for comparison (with
# persistent grants: it cannot bind a vbd a frontend has left Closed, so
# it runs once, on the fresh vbds), then ours with and without persistent
# grants (our feature_persistent parameter).
. /guest/common.sh
FRAMES=${BLKGRANTFRAMES:?xen-guest.sh -g}
echo "GRANTS: grant table of $FRAMES frames = $((FRAMES * 512)) grants; $(ls -d /sys/bus/xen/devices/vbd-* | wc -l) vbds, $(nproc) vCPUs"

disks_up() { # N: wait for xvda and xvdb
    for i in $(seq 1 60); do [ -e /sys/block/xvda ] && [ -e /sys/block/xvdb ] && return 0; sleep 0.25; done
    return 1
}
# workload LABEL MARK: both disks at once (disjoint regions of dom0's one
# disk), 1 MiB random writes 16 deep then a crc32c read-back, no I/O error
# in dmesg since MARK (dmesg_mark before the driver was loaded); PEAK: the
# most grants our driver held at once (in use plus persistent, both
# disks), sampled.
workload() {
    local label=$1 mark=$2 t0 t1 peak=0 g rc
    t0=$(cut -d. -f1 /proc/uptime)
    fio --name=a --filename=/dev/xvda --offset=0 --size=48M \
        --name=b --filename=/dev/xvdb --offset=128M --size=48M \
        --ioengine=libaio --iodepth=16 --direct=1 --rw=randwrite --bs=1M \
        --verify=crc32c --verify_fatal=1 --output=/tmp/fio-grants.out > /dev/null 2>&1 &
    local pid=$!
    while kill -0 $pid 2>/dev/null; do
        g=$(cat /sys/kernel/debug/xen_blkfront_rs-xvd[ab]/stats 2>/dev/null |
            awk '/^(grants_in_use|persistent_grants_held):/ { n += $2 } END { print n + 0 }')
        [ "$g" -gt "$peak" ] && peak=$g
        sleep 0.2
    done
    wait $pid; rc=$?
    t1=$(cut -d. -f1 /proc/uptime)
    ELAPSED=$((t1 - t0)); [ $ELAPSED -gt 0 ] || ELAPSED=1
    PEAK=$peak
    expect_eq "$label: fio on xvda and xvdb at once, 1 MiB 16 deep, crc32c verify" "$rc" 0
    grep -E "err=|verify:|bad magic|crc32c" /tmp/fio-grants.out | head -4
    check "$label: no I/O error in dmesg" [ "$(dmesg_since "$mark" | grep -c 'I/O error')" = 0 ]
}
stat_of() { sed -n "s/^$2: //p" /sys/kernel/debug/xen_blkfront_rs-$1/stats; }

dmesg_mark grants-c
if check "C: insmod xen-blkfront max_indirect_segments=256" \
    insmod /lib/modules/xen-blkfront.ko max_indirect_segments=256 feature_persistent=1; then
    if disks_up; then
        workload "C persistent" grants-c
        echo "GRANTS C persistent: 2 disks, $(nproc) rings each, fio ${ELAPSED} s"
    else
        not_ok "C: xvda and xvdb appear"
    fi
    unbind_vbds vbd
    check "C: rmmod xen-blkfront" unload xen-blkfront
fi
for persistent in 1 0; do
    p=persistent; [ $persistent = 0 ] && p=no-persistent
    dmesg_mark grants-rs-$p
    check "RS $p: insmod xen_blkfront_rs max_indirect_segments=256 feature_persistent=$persistent" \
        insmod /lib/modules/xen_blkfront_rs.ko max_indirect_segments=256 feature_persistent=$persistent
    if disks_up; then
        workload "RS $p" grants-rs-$p
        oog=0 busy=0
        for d in xvda xvdb; do
            oog=$((oog + $(stat_of $d out_of_grants))) busy=$((busy + $(stat_of $d busy)))
        done
        echo "GRANTS RS $p: 2 disks, $(stat_of xvda rings) rings each, fio ${ELAPSED} s, at most $PEAK of $((FRAMES * 512)) grants held (sampled), out of grants $oog times, $busy retries ($((busy / ELAPSED))/s)"
        check "RS $p: the grant table ran out ($oog times)" [ "$oog" -gt 0 ]
        check "RS $p: retries do not spin ($busy in $ELAPSED s, at most 1000/s)" [ "$busy" -le $((1000 * ELAPSED)) ]
        for d in xvda xvdb; do cat /sys/kernel/debug/xen_blkfront_rs-$d/stats | tr '\n' ' '; echo; done
    else
        not_ok "RS $p: xvda and xvdb appear"
    fi
    unbind_vbds
    check "RS $p: rmmod xen_blkfront_rs" unload xen_blkfront_rs
done
finish
