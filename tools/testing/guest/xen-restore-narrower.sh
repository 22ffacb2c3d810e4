# SPDX-License-Identifier: GPL-2.0
# Xen domU (2 vCPUs, blkback max_queues=2, persistent grants): xl save and
# xl restore onto a backend with other limits, as a migration to another
# host would. The first restore's blkback allows one ring and no persistent
# grants: the disk keeps its two hardware queues, both now served by ring
# 0, requests held at the suspend are resent without persistent grants and
# fio verifies every block. The second restore is back to two rings with
# persistent grants. Upstream (blkfront_resume) changes the number of
# hardware queues instead. The third goes to a backend with fewer indirect
# segments (12 of 32) and one-page rings (the driver is loaded with
# max_ring_page_order=2: 4 pages, 128 slots), with 48 writes in flight,
# more than a one-page ring (32 slots) holds. The fourth goes to a backend
# whose optional keys are garbage, with a file system mounted.
. /guest/common.sh
D=xvda
P=/sys/module/xen_blkback/parameters
check "insmod xen_blkfront_rs max_ring_page_order=2" insmod /lib/modules/xen_blkfront_rs.ko max_ring_page_order=2
for i in $(seq 1 40); do [ -e /sys/block/$D ] && break; sleep 0.25; done
[ -e /sys/block/$D ] || { not_ok "disk $D appears"; finish; exit; }
S=/sys/kernel/debug/xen_blkfront_rs-$D/stats
st() { sed -n "s/^$1: //p" $S; }
hwq() { ls -d /sys/block/$D/mq/* | wc -l; }
expect_eq "before: rings served (of $(st rings))" "$(st rings_served)" 2
expect_eq "before: persistent grants (bounce buffer)" "$(st bounce_buffer)" 1
# Both CPUs write and read back (CPU N submits on hardware queue N).
per_cpu_roundtrip() { # WHEN SEEK_MB
    local c ok=1
    dd if=/dev/urandom of=/tmp/pc bs=1M count=2 2>/dev/null
    for c in 0 1; do
        taskset -c $c dd if=/tmp/pc of=/dev/$D bs=64k seek=$(( ($2 + c * 4) * 16 )) oflag=direct 2>/dev/null || ok=0
        taskset -c $c dd if=/dev/$D of=/tmp/pc.$c bs=64k skip=$(( ($2 + c * 4) * 16 )) count=32 iflag=direct 2>/dev/null || ok=0
        cmp -s /tmp/pc /tmp/pc.$c || ok=0
    done
    check "$1: writes and reads from both CPUs" [ $ok = 1 ]
}
check "taskset in the domU (busybox)" sh -c 'taskset -c 1 true'
per_cpu_roundtrip "before" 8
# restore_with QUEUES PERSISTENT WHEN [INDIRECT RING_ORDER DEPTH]: fio
# writes (throttled backend, 16 in flight) across a save/restore onto a
# blkback with those parameters (INDIRECT: it offers that many indirect
# segments, and fio writes 128 KiB, 32 segments, instead of 64 KiB;
# RING_ORDER: rings of at most 2^N pages; DEPTH: writes in flight).
restore_with() {
    local n0 held rc bs=64k depth=${6:-16}
    [ -n "${4:-}" ] && bs=128k
    n0=$(dmesg | grep -c "xen_blkfront_rs.*reconnected")
    # 2 IOPS while fio fills the rings, 1 from the save on: the 16 in
    # flight outlast a slow freeze (see xen-suspend.sh).
    echo "HOST-CMD: block_set_io_throttle vbd 0 0 0 2 0 0"
    fio --name=narrow --filename=/dev/$D --ioengine=libaio --iodepth=$depth --direct=1 \
        --rw=randwrite --bs=$bs --offset=160M --size=16M --verify=crc32c --verify_fatal=1 \
        --output=/tmp/fio-narrow.out > /dev/null 2>&1 &
    local fio_pid=$!
    fio_on_rings_stats "$3"
    echo "HOST-CMD: block_set_io_throttle vbd 0 0 0 1 0 0"
    echo "DOM0-CMD: echo $1 > $P/max_queues; echo $2 > $P/feature_persistent; ${4:+MAX_INDIRECT=$4 }${5:+MAX_RING_ORDER=$5 }sh /run/payload/save-restore"
    for i in $(seq 1 360); do
        [ "$(dmesg | grep -c "xen_blkfront_rs.*reconnected")" -gt "$n0" ] && break
        sleep 0.5
    done
    echo "HOST-CMD: block_set_io_throttle vbd 0 0 0 0 0 0"
    check "$3: reconnected to the new backend" \
        [ "$(dmesg | grep -c "xen_blkfront_rs.*reconnected")" -gt "$n0" ]
    held=$(dmesg | sed -n 's/.*resuming: \([0-9]*\) requests in flight.*/\1/p' | tail -1)
    check "$3: requests in flight at the suspend are requeued (${held:-none})" [ "${held:-0}" -gt 0 ]
    wait $fio_pid
    rc=$?
    grep -E "err=|verify|bad" /tmp/fio-narrow.out | head -5
    expect_eq "$3: fio across the restore: writes resent, crc32c verify" "$rc" 0
    expect_eq "$3: same hardware queues" "$(hwq)" 2
}
# The rings hold fio's requests (at most 30 s), counted from the stats.
fio_on_rings_stats() {
    local n=0
    while [ "$(st grants_in_use)" -lt 16 ] && [ $n -lt 60 ]; do sleep 0.5; n=$((n + 1)); done
    check "$1: fio has requests on the rings ($(st grants_in_use) grants in use)" test "$(st grants_in_use)" -ge 16
}
restore_with 1 N "one ring, no persistent grants"
expect_eq "one ring: rings served" "$(st rings_served)" 1
check "one ring: the driver says the queues share it" \
    sh -c "dmesg | grep -q 'allows 1 of the disk.s 2 rings'"
expect_eq "one ring: no persistent grants (no bounce buffer)" "$(st bounce_buffer)" 0
per_cpu_roundtrip "one ring" 16
restore_with 2 Y "two rings again, persistent grants"
expect_eq "two rings again: rings served" "$(st rings_served)" 2
expect_eq "two rings again: persistent grants (bounce buffer)" "$(st bounce_buffer)" 1
per_cpu_roundtrip "two rings again" 24
# A backend with fewer indirect segments (12; the driver negotiated 32):
# requests held at the suspend carry 32 segments. Upstream re-splits their
# bios (blkif_recover); ours sends such a request again as its bios, which
# the block layer splits to the new limits.
expect_eq "before fewer segments: max_segments" "$(cat /sys/block/$D/queue/max_segments)" 32
expect_eq "before: ring slots (4 pages)" "$(st ring_slots)" 128
busy0=$(st busy)
restore_with 2 Y "fewer indirect segments, one-page rings" 12 0 48
expect_eq "one-page rings: ring slots" "$(st ring_slots)" 32
check "one-page rings: reconnected with 2 rings of 1 pages" \
    sh -c "dmesg | grep 'xen_blkfront_rs.*reconnected' | tail -1 | grep -q '2 rings of 1 pages'"
echo "one-page rings: ring full (busy) $busy0 -> $(st busy)"
expect_eq "fewer segments: the queue's max_segments follows the backend" "$(cat /sys/block/$D/queue/max_segments)" 12
check "fewer segments: requests built for 32 segments went out again as bios ($(st requeued_as_bios))" \
    [ "$(st requeued_as_bios)" -gt 0 ]
check "fewer segments: one line says the limits are narrower" \
    sh -c "[ \$(dmesg | grep -c 'limits are narrower.*12 segments of 32') = 1 ]"
per_cpu_roundtrip "fewer segments" 32
# A restore onto a backend whose optional keys are garbage (the indirect
# segments, the rings' number and size), with a file system mounted: the
# keys fall back to their defaults with one line, the disk stays and so
# does everything on it (a reconnect that failed on them would delete the
# live disk under the mount).
garbage="feature-max-indirect-segments=lots multi-queue-max-queues=99999999999999999999 max-ring-page-order=0x10"
mkdir -p /mnt/g
if check "garbage keys: ext4 made and mounted on $D" sh -c "mkfs.ext4 -q -F /dev/$D && mount /dev/$D /mnt/g"; then
    dd if=/dev/urandom of=/mnt/g/before bs=1M count=4 2>/dev/null; sync
    sum0=$(md5sum < /mnt/g/before)
    n0=$(dmesg | grep -c "xen_blkfront_rs.*reconnected")
    echo "DOM0-CMD: BACKEND_KEYS='$garbage' sh /run/payload/save-restore"
    for i in $(seq 1 360); do
        [ "$(dmesg | grep -c "xen_blkfront_rs.*reconnected")" -gt "$n0" ] && break
        sleep 0.5
    done
    check "garbage keys: reconnected to the new backend" \
        [ "$(dmesg | grep -c "xen_blkfront_rs.*reconnected")" -gt "$n0" ]
    check "garbage keys: one line names the keys ignored ($(dmesg | grep -o 'ignoring [0-9]* optional backend key.*' | tail -1))" \
        sh -c "dmesg | grep -q 'ignoring 3 optional backend key'"
    check "garbage keys: $D and its mount are still there" grep -q "^/dev/$D /mnt/g " /proc/mounts
    dd if=/dev/urandom of=/mnt/g/after bs=1M count=4 2>/dev/null; sync
    sum1=$(md5sum < /mnt/g/after)
    echo 3 > /proc/sys/vm/drop_caches
    check "garbage keys: the file written before and the one written after read back intact" \
        [ "$(md5sum < /mnt/g/before)" = "$sum0" -a "$(md5sum < /mnt/g/after)" = "$sum1" ]
    expect_eq "garbage keys: rings served (the default: one)" "$(st rings_served)" 1
    umount /mnt/g
fi
check "no I/O errors" sh -c "! dmesg | grep -qiE 'I/O error|critical target error'"
check "no oops or warning" sh -c "! dmesg | grep -qE 'WARNING:|BUG:|Oops|Kernel panic'"
dmesg | grep -E "xen_blkfront_rs" | tail -8
unbind_vbds
check "rmmod xen_blkfront_rs" unload xen_blkfront_rs
finish
