#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Xen domU check for xen_blkfront_rs: connect, queue limits from sysfs, the
# per-disk dmesg line, data integrity with fio (direct segments, indirect
# requests), discard as the backend advertises it, durability of O_DSYNC
# writes counted by dom0's xen-blkback, debugfs statistics, KUnit, clean
# unload.
# Optional expectations come from the kernel command line of the domU or
# the environment: XEN_EXPECT_PHYS, XEN_EXPECT_MIN_IO, XEN_EXPECT_OPT_IO.
. /guest/common.sh
D=xvda
check "insmod xen_blkfront_rs" insmod /lib/modules/xen_blkfront_rs.ko
for i in $(seq 1 40); do [ -e /sys/block/$D ] && break; sleep 0.25; done
if [ ! -e /sys/block/$D ]; then
    not_ok "disk $D appears"
    dmesg | tail -30
    finish; exit
fi
ok "disk $D appears"
topology_line $D
line=$(dmesg | grep "blkfront: $D:" | tail -1)
echo "DMESG: $line"
case "$line" in
*"persistent grants:"*"indirect descriptors:"*"bounce buffer:"*"io_min:"*) ok "dmesg line in upstream form with io_min/io_opt" ;;
*) not_ok "dmesg line in upstream form with io_min/io_opt" ;;
esac
expect_eq "logical_block_size" "$(q $D logical_block_size)" 512
# Upstream's device numbers (major 202 "xvd") unless the C driver holds it.
if [ -d /sys/module/xen_blkfront ]; then
    check "dynamic device numbers while xen-blkfront holds major 202" [ "$(cut -d: -f1 /sys/block/$D/dev)" != 202 ]
else
    expect_eq "device numbers like upstream" "$(cat /sys/block/$D/dev)" "202:0"
    check "/proc/devices names major 202 xvd" grep -q "^202 xvd$" /proc/devices
fi
[ -n "$XEN_EXPECT_PHYS" ] && expect_eq "physical_block_size" "$(q $D physical_block_size)" "$XEN_EXPECT_PHYS"
[ -n "$XEN_EXPECT_MIN_IO" ] && expect_eq "minimum_io_size" "$(q $D minimum_io_size)" "$XEN_EXPECT_MIN_IO"
[ -n "$XEN_EXPECT_OPT_IO" ] && expect_eq "optimal_io_size" "$(q $D optimal_io_size)" "$XEN_EXPECT_OPT_IO"
expect_eq "max_segments (indirect, default max_indirect_segments=32)" "$(q $D max_segments)" 32
expect_eq "max_hw_sectors_kb" "$(q $D max_hw_sectors_kb)" 128
expect_eq "max_segment_size" "$(q $D max_segment_size)" 4096

# Raw write/read back with O_DIRECT through dd (4 KiB, direct segments).
dd if=/dev/urandom of=/tmp/pat bs=4096 count=256 2>/dev/null
check "dd write 1 MiB O_DIRECT" dd if=/tmp/pat of=/dev/$D bs=4096 count=256 oflag=direct 2>/dev/null
dd if=/dev/$D of=/tmp/back bs=4096 count=256 iflag=direct 2>/dev/null
expect_eq "dd read back matches" "$(md5sum < /tmp/back | cut -d' ' -f1)" "$(md5sum < /tmp/pat | cut -d' ' -f1)"
fio_ok() { # name args...: a fio run whose output goes to /tmp/fio.log
    local name=$1; shift
    if fio --thread "$@" >/tmp/fio.log 2>&1; then ok "$name"; else not_ok "$name"; tail -5 /tmp/fio.log; fi
}
# dd_verify NAME WBS RBS SEEK_MIB [MIB]: MIB (default 8) MiB of random data
# written with O_DIRECT blocks of WBS, read back with blocks of RBS, compared.
dd_verify() {
    local name=$1 wbs=$2 rbs=$3 at=$4 mib=${5:-8}
    dd if=/dev/urandom of=/tmp/p.$at bs=1M count=$mib 2>/dev/null
    dd if=/tmp/p.$at of=/dev/$D bs=$wbs seek=$((at * 1048576)) oflag=direct,seek_bytes 2>/dev/null
    dd if=/dev/$D of=/tmp/b.$at bs=$rbs skip=$((at * 1048576)) count=$((mib * 1048576)) iflag=direct,skip_bytes,count_bytes 2>/dev/null
    expect_eq "$name" "$(md5sum < /tmp/b.$at | cut -d' ' -f1)" "$(md5sum < /tmp/p.$at | cut -d' ' -f1)"
    rm -f /tmp/p.$at /tmp/b.$at
}
FIO=$(command -v fio)
# fio is in every domU (xen-guest.sh copies the host's, which setup-host.sh
# installs): missing or unusable is a failure. No throughput here: that is
# the benchmark's (tools/testing/bench/seeds.sh).
if [ -z "$FIO" ] || ! fio --thread --name=probe --filename=/tmp/fio.probe --size=64k --rw=write >/dev/null 2>&1; then
    not_ok "fio usable in the domU (missing, or no SysV IPC in this kernel?): dd checks only"
    FIO=
fi
dd_verify "dd verify 128k writes (32 segments: indirect) / 64k reads" 128k 64k 16
dd_verify "dd verify 1M writes / 1M reads (split at max_hw_sectors)" 1M 1M 32
dd_verify "dd verify 512-byte writes / 4k reads" 512 4k 48 1
# Four writers at once: several requests in flight, batching.
for i in 1 2 3 4; do
    dd if=/dev/urandom of=/tmp/c.$i bs=1M count=4 2>/dev/null
    dd if=/tmp/c.$i of=/dev/$D bs=64k seek=$(((64 + 4 * i) * 1048576)) oflag=direct,seek_bytes 2>/dev/null &
done
wait
same=1
for i in 1 2 3 4; do
    dd if=/dev/$D of=/tmp/r.$i bs=256k skip=$(((64 + 4 * i) * 1048576)) count=$((4 * 1048576)) iflag=direct,skip_bytes,count_bytes 2>/dev/null
    [ "$(md5sum < /tmp/r.$i | cut -d' ' -f1)" = "$(md5sum < /tmp/c.$i | cut -d' ' -f1)" ] || same=0
done
[ $same = 1 ] && ok "4 concurrent writers verified" || not_ok "4 concurrent writers verified"
fio_ok() { # name args...: a fio run whose output goes to /tmp/fio.log
    local name=$1; shift
    if fio --thread "$@" >/tmp/fio.log 2>&1; then ok "$name"; else not_ok "$name"; tail -5 /tmp/fio.log; fi
}
if [ -n "$FIO" ]; then
    vsize=16M
    for bs in 4k 64k 128k 1m; do
        fio_ok "fio verify bs=$bs, $vsize (direct, libaio qd 8)" --name=v$bs --filename=/dev/$D --direct=1 \
            --ioengine=libaio --iodepth=8 --rw=randwrite --bs=$bs --size=$vsize --offset=32M \
            --verify=crc32c --do_verify=1 --verify_fatal=1
    done
    # Unaligned user buffers: segments that straddle pages.
    fio_ok "fio verify bs=64k, buffers offset 512" --name=unal --filename=/dev/$D --direct=1 \
        --ioengine=psync --rw=write --bs=64k --size=4M --offset=64M --iomem_align=512 \
        --verify=md5 --do_verify=1 --verify_fatal=1
fi
# Discard follows the backend's feature-discard (blkback writes it, 0 or 1,
# at every connect). blkif makes discard a hint ("does not guarantee that
# the blocks will be erased"), and dom0's disk ignores it (QEMU's default
# discard=ignore): no read-back of zeroes, but the request must succeed and
# reach the backend (its ds_req counter), and the queue limits must follow
# discard-granularity (at least a physical block, blkcore::limits).
B=$(xs_read "device/vbd/$(basename "$(readlink /sys/block/$D/device)" | sed 's/^vbd-//')/backend")
fdisc=$(xs_read "$B/feature-discard")
echo "BACKEND $B: feature-discard=${fdisc:-?} discard-granularity=$(xs_read "$B/discard-granularity") discard_max_bytes=$(q $D discard_max_bytes) discard_granularity=$(q $D discard_granularity)"
case $fdisc in
1)  g=$(xs_read "$B/discard-granularity") || g=0
    want=$(q $D physical_block_size); [ "$g" -gt "$want" ] && want=$g
    check "feature-discard=1: queue offers discard (discard_max_bytes $(q $D discard_max_bytes))" \
        [ "$(q $D discard_max_bytes)" != 0 ]
    expect_eq "discard_granularity = max(discard-granularity $g, physical block)" "$(q $D discard_granularity)" "$want"
    if c0=$(vbd_counters $D); then
        check "blkdiscard 1 MiB at 0 succeeds" blkdiscard -o 0 -l 1048576 /dev/$D
        if c1=$(vbd_counters $D); then
            set -- $c0 $c1
            check "blkdiscard reached the backend: ds_req +$(($8 - $4)) (>= 1)" [ $(($8 - $4)) -ge 1 ]
        else
            not_ok "xen-blkback counters from dom0 after blkdiscard"
        fi
    else
        not_ok "xen-blkback counters from dom0 before blkdiscard"
    fi ;;
0)  expect_eq "feature-discard=0: no discard in the queue (discard_max_bytes)" "$(q $D discard_max_bytes)" 0
    check "feature-discard=0: blkdiscard refused" sh -c "! blkdiscard -o 0 -l 1048576 /dev/$D 2>/dev/null" ;;
*)  not_ok "backend's feature-discard readable from the domU (xenstore $B: '$fdisc')" ;;
esac
# Flush: forced writes must reach xen-blkback as flushes (not just "sync
# returns": with nothing dirty that proves nothing about the driver).
durability "durability" $D
# A filesystem on top: page-cache I/O, flushes/FUA from the journal.
# mkfs.ext4 comes from the host's e2fsprogs (setup-host.sh installs it).
if ! command -v mkfs.ext4 >/dev/null; then
    not_ok "mkfs.ext4 in the domU (xen-guest.sh copies the host's)"
else
    if mkfs.ext4 -q -F -E nodiscard /dev/$D >/tmp/mkfs.log 2>&1 && mkdir -p /mnt && mount -t ext4 /dev/$D /mnt; then
        ok "mkfs.ext4 + mount"
        dd if=/dev/urandom of=/mnt/f bs=1M count=8 2>/dev/null; sync
        sum1=$(md5sum < /mnt/f | cut -d' ' -f1)
        umount /mnt && mount -t ext4 /dev/$D /mnt
        expect_eq "file survives umount/mount" "$(md5sum < /mnt/f | cut -d' ' -f1)" "$sum1"
        umount /mnt
    else
        not_ok "mkfs.ext4 + mount"; tail -3 /tmp/mkfs.log
    fi
fi
S=/sys/kernel/debug/xen_blkfront_rs-$D/stats
if [ -r "$S" ]; then
    echo "STATS:"; cat "$S"
    req=$(grep '^requests:' "$S" | cut -d' ' -f2)
    [ "${req:-0}" -gt 0 ] && ok "debugfs stats count requests ($req)" || not_ok "debugfs stats count requests"
    ind=$(grep '^indirect_requests:' "$S" | cut -d' ' -f2)
    [ "${ind:-0}" -gt 0 ] && ok "indirect requests used ($ind)" || not_ok "indirect requests used"
    st() { sed -n "s/^$1: //p" "$S"; }
    if [ "$(st bounce_buffer)" = 0 ]; then
        # Without persistent grants the request's own pages are granted:
        # nothing is copied and every grant is revoked after completion.
        expect_eq "no persistent grants: bytes copied" "$(st bytes_copied)" 0
        expect_eq "no persistent grants: every grant revoked" "$(st grants_revoked)" \
            "$(( $(st grants_granted) - $(st grants_in_use) ))"
    else
        # Persistent grants: once the pool is warm, more I/O grants nothing.
        g0=$(st grants_granted)
        dd if=/dev/$D of=/dev/null bs=128k count=256 iflag=direct 2>/dev/null
        dd if=/dev/zero of=/dev/$D bs=128k count=256 seek=512 oflag=direct 2>/dev/null
        g1=$(st grants_granted)
        check "persistent grants: no new grants over 64 MiB more I/O (granted $g0 -> $g1)" [ "$g0" -gt 0 -a "$g1" = "$g0" ]
        # The data path's tables over a page (pool entries and copy
        # records: tens of KiB per ring with bounce frames) come from
        # vmalloc, which takes single pages: never a high-order allocation
        # that fails on a fragmented guest. /proc/vmallocinfo names the
        # allocating function (`KBuf::with_capacity`): two per ring.
        nv=$(grep -c 'KBuf.*\[xen_blkfront_rs\]' /proc/vmallocinfo)
        check "bounce frames: the data path's tables over a page are vmalloc areas ($nv on $(st rings) ring(s)), not high-order pages" [ "$nv" -ge $((2 * $(st rings))) ]
    fi
    # An idle disk gives back what the backend stopped mapping: dom0's
    # blkback unmaps grants unused for 1 s, and the 10 s purge (upstream's
    # blkfront_delay_work) revokes them with no I/O from this domain. Asked
    # for (XEN_IDLE_PURGE=1) by the persistent boot of suite 20-xen: it idles
    # for 25 s.
    if [ "${XEN_IDLE_PURGE:-0}" = 1 ] && [ "$(st persistent_grants_held)" = 0 ]; then
        not_ok "idle purge: the disk holds persistent grants to purge (none: is the backend persistent?)"
    elif [ "${XEN_IDLE_PURGE:-0}" = 1 ]; then
        # The counts are taken before dom0 is asked: the backend drops the
        # grants within about a second of the write, and a purge tick landing
        # before a later reading would hide the change (seen in CI: held
        # 0 -> 0, revoked 2112 -> 2112, the revocations already counted).
        u0=$(st persistent_grants_held) r0=$(st grants_revoked)
        echo "DOM0-CMD: echo 1 > /sys/module/xen_blkback/parameters/persistent_grant_unused_seconds"
        sleep 25
        u1=$(st persistent_grants_held) r1=$(st grants_revoked)
        echo "DOM0-CMD: echo 60 > /sys/module/xen_blkback/parameters/persistent_grant_unused_seconds"
        check "idle disk: grants the backend dropped are revoked without I/O (held $u0 -> $u1, revoked $r0 -> $r1)" \
            [ "$r1" -gt "$r0" -a "$u1" -lt "$u0" ]
    fi
else
    not_ok "debugfs stats at $S"
fi
dmesg | grep -iE 'blkfront|xen_blkfront_rs' | tail -5
ktap xen_blkfront_rs
# The parameters are in sysfs with upstream's permissions; feature_persistent
# (like trusted) is writable and applies from the next connection: rebound
# with N, the frontend offers no persistent grants and uses none.
P=/sys/module/xen_blkfront_rs/parameters
perms=$(for f in feature_persistent max_indirect_segments max_queues max_ring_page_order trusted; do
    printf '%s=%s ' $f "$(stat -c %a $P/$f 2>/dev/null)"; done)
expect_eq "parameters in sysfs with upstream's permissions" "$perms" \
    "feature_persistent=644 max_indirect_segments=444 max_queues=444 max_ring_page_order=444 trusted=644 "
vbd=$(basename "$(readlink /sys/block/$D/device)")
rebind() {
    echo "$vbd" > /sys/bus/xen/drivers/xen_blkfront_rs/unbind
    dmesg_mark rebind
    echo "$vbd" > /sys/bus/xen/drivers/xen_blkfront_rs/bind
    for i in $(seq 1 80); do [ -e /sys/block/$D ] && dmesg_since rebind | grep -q "blkfront: $D:" && break; sleep 0.25; done
}
for v in N Y; do
    echo $v > $P/feature_persistent
    expect_eq "feature_persistent written through sysfs" "$(cat $P/feature_persistent)" $v
    rebind
    fp=$(xs_read "device/vbd/${vbd#vbd-}/feature-persistent")
    line=$(dmesg_since rebind | grep "blkfront: $D:" | tail -1)
    echo "after feature_persistent=$v: frontend feature-persistent=$fp; $line"
    if [ $v = N ]; then
        expect_eq "feature_persistent=N: the next connection offers no persistent grants" "$fp" 0
        case $line in
        *"persistent grants: disabled"*) ok "feature_persistent=N: and uses none" ;;
        *) not_ok "feature_persistent=N: and uses none" ;;
        esac
    else
        expect_eq "feature_persistent=Y: offered again" "$fp" 1
    fi
    roundtrip "data after rebinding with feature_persistent=$v" $D 64k 16 100
done
rings=$(sed -n 's/^rings: //p' "$S" 2>/dev/null)
dmesg_mark teardown
unbind_vbds
check "rmmod xen_blkfront_rs" rmmod xen_blkfront_rs
[ ! -e /sys/block/$D ] && ok "disk gone after rmmod" || not_ok "disk gone after rmmod"
# Each ring logs its grant record at teardown: all granted grants revoked.
dmesg_since teardown | grep -E 'ring [0-9]+ torn down:'
set -- $(dmesg_since teardown | sed -n 's/.*ring [0-9]* torn down: \([0-9]*\) grants granted, \([0-9]*\) revoked.*/\1 \2/p' |
    awk '$1 != $2 { bad++ } { n++ } END { print n + 0, bad + 0 }')
check "a grant record at each ring's teardown ($1 of ${rings:-?} rings)" [ "$1" -gt 0 -a "$1" = "$rings" ]
expect_eq "rings whose grants were not all revoked at teardown" "$2" 0
finish
