# SPDX-License-Identifier: GPL-2.0
# Xen domU: save and restore of the whole guest (xl save / xl restore, run
# by dom0) while our disk is busy. The disk must stay the same block device
# (no remove/re-add: an fd opened before keeps working), the old backend's
# grants are all revoked, requests the rings still hold at the suspend are
# requeued and resubmitted on the new backend (an async writer against a
# throttled backing disk makes sure there are some), nothing fails and
# every byte written before and across the save reads back. Upstream:
# blkfront_resume / blkif_recover.
. /guest/common.sh
D=xvda
check "insmod xen_blkfront_rs" insmod /lib/modules/xen_blkfront_rs.ko
for i in $(seq 1 40); do [ -e /sys/block/$D ] && break; sleep 0.25; done
[ -e /sys/block/$D ] || { not_ok "disk $D appears"; finish; exit; }
devt=$(cat /sys/block/$D/dev)
dd if=/dev/urandom of=/tmp/a bs=1M count=8 2>/dev/null
dd if=/dev/urandom of=/tmp/b bs=1M count=32 2>/dev/null
dd if=/tmp/a of=/dev/$D bs=1M oflag=direct 2>/dev/null
# An fd opened before the save, read after the restore.
exec 3</dev/$D
# A writer alive across the save: 1 MiB O_DIRECT writes of the same 32 MiB
# over and over at 64 MiB until told to stop; it goes on after the
# restore. It pauses (in a sleep) for the save: a dd in the middle of a
# write waits in D state, the freezer then waits for its I/O, and fio's
# requests queued ahead of it in the throttled disk complete too, leaving
# nothing in flight at the suspend (0 held, seen twice).
(
    while [ ! -e /tmp/stop ]; do
        while [ -e /tmp/pause ]; do echo idle > /tmp/dd.state; sleep 0.2; done
        echo busy > /tmp/dd.state
        dd if=/tmp/b of=/dev/$D bs=1M seek=64 oflag=direct 2>>/tmp/dd.err || { echo fail > /tmp/dd.rc; exit; }
        echo x >> /tmp/dd.passes
    done
    echo 0 > /tmp/dd.rc
) &
writer=$!
# The writer pauses before dom0's disk is throttled, not just before the
# save: a 32 MiB pass caught by the throttle (2 IOPS shared with fio) took
# longer than the minute the script waited for it, the save went ahead
# with dd in D state and the freezer gave up after 20 s ("1 tasks
# refusing to freeze", no save).
sleep 2
touch /tmp/pause
n=0
while [ "$(cat /tmp/dd.state 2>/dev/null)" != idle ] && [ $n -lt 120 ]; do sleep 0.5; n=$((n + 1)); done
check "writer paused for the save ($(cat /tmp/dd.passes 2>/dev/null | wc -l) passes)" [ "$(cat /tmp/dd.state)" = idle ]
# Requests in flight at the suspend: dom0's disk is throttled to 2 IOPS and
# an async writer (libaio, 24 deep, room left in the 32 tags for the dd
# writer's 1 MiB) keeps the ring busy. The freezer stops
# fio in io_getevents, not in the block layer, so its requests are still on
# the ring when the guest suspends: the driver must requeue them and resend
# them to the new backend. fio then reads every block back (crc32c). At 8
# IOPS the 16 drained in the 2 s a slow guest's freeze took (0 requests
# held); at 2 they lasted 8 s, and a freeze of 8.6 s drained them too.
# Hence 24 in flight and 1 IOPS from
# the save on: 24 s, more than the freezer's 20 s timeout.
echo "HOST-CMD: block_set_io_throttle vbd 0 0 0 2 0 0"
fio --name=inflight --filename=/dev/$D --ioengine=libaio --iodepth=24 --direct=1 \
    --rw=randwrite --bs=64k --offset=160M --size=16M --verify=crc32c --verify_fatal=1 \
    --output=/tmp/fio-inflight.out > /dev/null 2>&1 &
fio_pid=$!
# Until fio's requests are in flight, at most a minute: 16 writes in
# flight means fio has at least 8 of them there (the dd writer's 1 MiB
# write is at most 8 requests). A fixed sleep alone was too short on a
# slow guest (a KASAN kernel).
sleep 3
n=0
while [ "$(awk '{ print $2 }' /sys/block/$D/inflight)" -lt 16 ] && [ $n -lt 120 ]; do
    sleep 0.5; n=$((n + 1))
done
# The restored domain's backend flushes differently (a host whose disk has
# no write cache): dom0's backing disk goes write-through before the save,
# so the new blkback offers no feature-flush-cache, and the live queue must
# follow it (upstream: blkif_recover re-reads the features and updates the
# queue). The old queue's "write back" left in place would send flushes the
# backend refuses.
expect_eq "write cache before the save (backend offers flush)" "$(q $D write_cache)" "write back"
echo "DOM0-CMD: echo 'write through' > /sys/block/vdb/cache_type"
echo "HOST-CMD: block_set_io_throttle vbd 0 0 0 1 0 0"
dmesg_mark save
echo "DOM0-CMD: sh /run/payload/save-restore"
for i in $(seq 1 360); do dmesg_since save | grep -q "xen_blkfront_rs.*reconnected" && break; sleep 0.5; done
rm -f /tmp/pause
echo "HOST-CMD: block_set_io_throttle vbd 0 0 0 0 0 0"
expect_eq "queue follows the new backend: write cache off (no flush)" "$(q $D write_cache)" "write through"
# Back to a flushing disk for the next restore of this boot.
echo "DOM0-CMD: echo 'write back' > /sys/block/vdb/cache_type"
held=$(dmesg_since save | sed -n 's/.*resuming: \([0-9]*\) requests in flight.*/\1/p' | tail -1)
check "requests in flight at the suspend are requeued (${held:-none})" [ "${held:-0}" -gt 0 ]
wait $fio_pid
expect_eq "fio across save/restore: writes resent, crc32c verify" "$?" 0
grep -E "err=|verify|bad" /tmp/fio-inflight.out | head -5
reconnects=$(dmesg_since save | grep -c 'xen_blkfront_rs.*reconnected')
check "driver reports the resume" [ "$(dmesg_since save | grep -c 'xen_blkfront_rs.*resuming')" -gt 0 ]
check "driver reconnects to the new backend" [ "$reconnects" -gt 0 ]
# The suspend left no notifier of the unbound channel behind (checked by the
# driver at each ring's reconnect, which the reconnected line says ran), so
# nothing could notify a freed irq in the window.
check "no notifier survives the suspend ($reconnects reconnects)" \
    [ "$reconnects" -gt 0 -a "$(dmesg_since save | grep -c 'notifier survived the suspend')" = 0 ]
# "ring N torn down: G grants granted, R revoked" at the suspend.
set -- $(dmesg_since save | grep -E 'ring [0-9]+ torn down' | tail -1 | sed 's/.*ring [0-9]* torn down: \([0-9]*\) grants granted, \([0-9]*\) revoked.*/\1 \2/')
expect_eq "grants revoked at the suspend (of ${1:-?} granted)" "${2:-none}" "${1:-?}"
before=$(wc -l < /tmp/dd.passes)
sleep 3
touch /tmp/stop
wait $writer
after=$(wc -l < /tmp/dd.passes)
expect_eq "writer across save/restore exits" "$(cat /tmp/dd.rc)" 0
check "writer makes progress after the restore ($before -> $after passes)" [ "$after" -gt "$before" ]
cat /tmp/dd.err | grep -v records | head -5
dmesg | grep -E "xen_blkfront_rs|Freezing|suspending|xen-blkback" | tail -8
expect_eq "same block device after restore" "$(cat /sys/block/$D/dev 2>/dev/null)" "$devt"
dd if=/dev/$D of=/tmp/a2 bs=1M count=8 iflag=direct 2>/dev/null
check "data written before the save reads back" cmp -s /tmp/a /tmp/a2
dd if=/dev/$D of=/tmp/b2 bs=1M skip=64 count=32 iflag=direct 2>/dev/null
check "data written across the save reads back" cmp -s /tmp/b /tmp/b2
check "fd opened before the save still reads" sh -c "dd bs=4k count=1 <&3 >/dev/null 2>&1"
exec 3<&-
dd if=/tmp/a of=/dev/$D bs=1M seek=128 oflag=direct 2>/dev/null
dd if=/dev/$D of=/tmp/a3 bs=1M skip=128 count=8 iflag=direct 2>/dev/null
check "new writes after the restore read back" cmp -s /tmp/a /tmp/a3
check "no I/O errors" sh -c "! dmesg | grep -qiE 'I/O error|critical target error'"
check "no oops or warning" sh -c "! dmesg | grep -qE 'WARNING:|BUG:|Oops|Kernel panic'"
cat /sys/kernel/debug/xen_blkfront_rs-$D/stats 2>/dev/null | head -20
unbind_vbds
check "rmmod xen_blkfront_rs" unload xen_blkfront_rs
finish
