#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Xen domU, with the test-only fault-injection file (compiled in with
# CONFIG_FAULT_INJECTION). First, a batch whose last request is sent again
# as bios is published all the same. Then the ring breaks while fio has
# I/O in flight, exactly as a bad backend response breaks it. Every request
# must end: fio's in-flight I/O fails with EIO within a bounded time, dmesg
# names the fault once per ring, new I/O fails at once, no grant stays in
# use, the backend's detach completes, every grant granted is revoked at
# teardown, and the module unloads. Last in a boot: the disk is detached at
# the end.
. /guest/common.sh
D=xvda
fault_injection_disk $D || { finish; exit; }
rings=$(dstat rings)

# A batch's last request sent again as its bios (as one too wide for a
# narrower backend is): the batch's earlier requests, queued but not yet
# published, must be published all the same (blk-mq calls commit_rqs only
# after a failed last request). fio submits 16 at a time (one plug, one
# batch); the fault takes the ends of 8 batches. Such batches come a few a
# second (blk-mq often dispatches one request at a time): fio runs 2 s at
# a time until two were taken, at most 5 times.
check "inject: resend-batch-end" sh -c "echo resend-batch-end > $DBG/inject"
fails=0
for i in 1 2 3 4 5; do
    fio --name=batches --filename=/dev/$D --direct=1 --ioengine=libaio --iodepth=32 \
        --iodepth_batch_submit=16 --rw=randread --bs=4k --size=64M --time_based --runtime=2 \
        > /tmp/fio-batch.log 2>&1 || fails=$((fails + 1))
    [ "$(dstat resent_batch_ends)" -ge 2 ] && break
done
expect_eq "fio runs that failed with batch ends sent again as bios" "$fails" 0
check "batch ends sent again as bios ($(dstat resent_batch_ends))" test "$(dstat resent_batch_ends)" -gt 0
expect_eq "batch ends sent again that left the batch unpublished" "$(dstat batch_ends_unpublished)" 0

dmesg_mark faults

# dom0's disk throttled to 8 IOPS (QEMU's block_set_io_throttle) keeps
# fio's requests on the ring: 16 deep, a minute long unless the disk fails.
echo "HOST-CMD: block_set_io_throttle vbd 0 0 0 8 0 0"
sleep 2
fio --thread --name=inflight --filename=/dev/$D --direct=1 --ioengine=libaio \
    --iodepth=16 --rw=randwrite --bs=64k --size=64M --time_based --runtime=60 \
    > /tmp/fio-fault.log 2>&1 &
FIO=$!
fio_on_rings "before the fault" 8
t0=$(cut -d. -f1 /proc/uptime)
check "inject: break" sh -c "echo break > $DBG/inject"
fio_fails_with_eio $FIO /tmp/fio-fault.log "the fault" $t0
echo "HOST-CMD: block_set_io_throttle vbd 0 0 0 0 0 0"
# One line per ring: "ring N: fault injected; disabled for further use, M
# requests in flight failed".
expect_eq "dmesg names the fault once per ring" "$(dmesg_since faults | grep -c 'ring [0-9]*: fault injected;')" "$rings"
dmesg_since faults | grep 'ring [0-9]*: fault injected;'
failed=$(dmesg_since faults | sed -n 's/.*ring [0-9]*: fault injected;.* \([0-9]*\) requests in flight failed.*/\1/p' | awk '{ n += $1 } END { print n + 0 }')
check "the requests in flight at the fault were failed ($failed)" test "$failed" -gt 0
# An error exit, not the timeout's kill (124 or 128 + SIGTERM).
timeout 10 dd if=/dev/$D of=/dev/null bs=4k count=1 iflag=direct 2>/dev/null
rc=$?
check "new I/O fails at once (dd exit $rc, within 10 s)" [ "$rc" -ge 1 -a "$rc" -lt 124 ]
expect_eq "no grant in use after the fault" "$(dstat grants_in_use)" 0
expect_eq "backend errors counted" "$(dstat backend_errors)" "$rings"

# The backend detaches the broken disk; it must go away and the module unload.
echo "DOM0-CMD: xl block-detach blktest xvda"
n=0
while [ -e /sys/block/$D ] && [ $n -lt 120 ]; do sleep 0.5; n=$((n + 1)); done
[ ! -e /sys/block/$D ] && ok "disk gone after backend detach" || not_ok "disk gone after backend detach (60 s)"
# One "ring N torn down: G grants granted, R revoked" line per ring since
# the mark before the fault.
dmesg_since faults | grep -E 'ring [0-9]+ torn down:'
set -- $(dmesg_since faults | sed -n 's/.*ring [0-9]* torn down: \([0-9]*\) grants granted, \([0-9]*\) revoked.*/\1 \2/p' |
    awk '{ g += $1; r += $2; n++ } END { print n + 0, g + 0, r + 0 }')
expect_eq "one teardown line per ring" "$1" "$rings"
check "every grant granted is revoked ($2 granted, $3 revoked)" test "$2" -gt 0 -a "$2" = "$3"
check "rmmod xen_blkfront_rs" unload xen_blkfront_rs
finish
