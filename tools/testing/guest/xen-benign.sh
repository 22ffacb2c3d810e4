#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Xen domU: an honest backend that is merely slow. QEMU throttles dom0's
# backing disk (drive "vbd") to 2 requests a second, so blkback answers
# xvda's requests slowly but answers them all; 32 concurrent 4 KiB O_DIRECT
# readers wait up to 16 s each, past io_timeout 5 s. Ours must lose nothing
# where the C driver loses nothing. Rows, each a line
# "BENIGN <row> <ours|C> <failed> <reads> <seconds>":
#   slow-32-t5      io_timeout 5 s, the default give_up_after_ms (0)
#   slow-32-t5-lim  the same with give_up_after_ms=5000 (a ring that
#                   answers is never given up on, whatever the limit)
#   stall-SECS-t5   fio writes and verifies at queue depth 32 while dom0's
#                   disk stalls for SECS s (throttled to one byte a second),
#                   then resumes; io_timeout 5 s (BENIGN_FULL only: 10, 45)
# C (no timeout: its queue has no io_timeout) runs both for the baseline.
# Each row proves it struck: the reads took the throttle's time, the stall
# held requests in flight, and ours counted request timeouts (debugfs
# request_timeouts).
. /guest/common.sh
D=xvda
# README's test command runs a subset (about a minute); BENIGN_FULL=1
# every row (Documentation/benign.md gives the command and its time).
if [ -n "${BENIGN_FULL:-}" ]; then STALLS="10 45" STALLS_C="10 45"; else STALLS= STALLS_C=; fi

# row NAME WHO: 32 concurrent direct reads of distinct blocks; its BENIGN
# line and checks.
row() {
    local name=$1 who=$2 n=32 i t0 secs failed=0
    rm -f /tmp/rd.*
    t0=$(date +%s)
    for i in $(seq 1 $n); do
        (dd if=/dev/$D of=/dev/null bs=4k count=1 skip=$((i * 16)) iflag=direct 2> /dev/null; echo $? > /tmp/rd.$i) &
    done
    wait
    secs=$(($(date +%s) - t0))
    for i in $(seq 1 $n); do [ "$(cat /tmp/rd.$i 2> /dev/null)" = 0 ] || failed=$((failed + 1)); done
    echo "BENIGN $name $who $failed $n $secs"
    check "$name: $who: $n throttled reads took ${secs}s (at least $((n / 4))s: the disk was slow)" [ "$secs" -ge $((n / 4)) ]
    check "$name: $who: no read failed ($failed of $n)" [ "$failed" = 0 ]
}

# stall_row NAME WHO SECS: fio writes and verifies (crc32c, queue depth
# 32) while dom0's disk stalls for SECS s (throttled to one byte a
# second, then the throttle lifted); its BENIGN line and checks. Proof
# that it struck: fio's requests in flight in the middle of the stall.
stall_row() {
    local name=$1 who=$2 secs=$3 pid rc held errs
    fio --name=s --filename=/dev/$D --direct=1 --ioengine=libaio --iodepth=32 --rw=randwrite \
        --bs=4k --size=4M --time_based --runtime=$((secs + 8)) --verify=crc32c --verify_backlog=64 \
        --verify_fatal=1 --output=/tmp/stall.out > /dev/null 2>&1 &
    pid=$!
    sleep 3
    echo "HOST-CMD: block_set_io_throttle vbd 1 0 0 0 0 0"
    sleep $((secs / 2))
    held=$(awk '{ print $1 + $2 }' /sys/block/$D/inflight)
    sleep $((secs - secs / 2))
    echo "HOST-CMD: block_set_io_throttle vbd 0 0 0 0 0 0"
    wait $pid; rc=$?
    errs=$(sed -n 's/.*err= *\([0-9]*\).*/\1/p' /tmp/stall.out | sort -u | paste -sd, -)
    echo "BENIGN $name $who $([ $rc = 0 ] && [ "$errs" = 0 ] && echo 0 || echo "fio-exit-$rc,err=${errs:-none}") - $secs"
    check "$name: $who: the stall held fio's requests ($held in flight at its middle)" [ "${held:-0}" -gt 0 ]
    check "$name: $who: fio wrote and verified through a $secs s stall (exit $rc, err=${errs:-none})" [ $rc = 0 -a "$errs" = 0 ]
}

dmesg_mark benign
# The C driver first: it does not attach to a vbd ours was unbound from
# within the wait (the other scripts load it first too).
if [ -f /lib/modules/xen-blkfront.ko ] && check "insmod xen-blkfront (C)" insmod /lib/modules/xen-blkfront.ko; then
    for i in $(seq 1 40); do [ -e /sys/block/$D ] && break; sleep 0.25; done
    echo "HOST-CMD: block_set_io_throttle vbd 0 0 0 2 0 0"
    sleep 2
    row slow-32-t5 C
    echo "HOST-CMD: block_set_io_throttle vbd 0 0 0 0 0 0"
    sleep 2
    for secs in $STALLS_C; do stall_row stall-$secs-t5 C $secs; done
    unbind_vbds vbd
    check "rmmod xen-blkfront (C)" unload xen_blkfront
fi
if fault_injection_disk $D; then
    echo 5000 > /sys/block/$D/queue/io_timeout
    for secs in $STALLS; do stall_row stall-$secs-t5 ours $secs; done
    echo "HOST-CMD: block_set_io_throttle vbd 0 0 0 2 0 0"
    sleep 2
    row slow-32-t5 ours
    echo 5000 > /sys/module/xen_blkfront_rs/parameters/give_up_after_ms
    row slow-32-t5-lim ours
    echo 0 > /sys/module/xen_blkfront_rs/parameters/give_up_after_ms
    t=$(dstat request_timeouts)
    echo "BENIGN-TIMEOUTS $D ${t:-none}"
    check "ours counted request timeouts (${t:-none}), and failed no request" [ "${t:-0}" -gt 0 ]
    nb=$(dmesg_since benign | grep -c 'no response for')
    check "ours broke no ring ($nb 'no response for' lines)" [ "$nb" = 0 ]
    check "the disk still reads afterwards" dd if=/dev/$D of=/dev/null bs=4k count=1 iflag=direct
    unbind_vbds
    check "rmmod xen_blkfront_rs" unload xen_blkfront_rs
fi
echo "HOST-CMD: block_set_io_throttle vbd 0 0 0 0 0 0"
sleep 2
finish
