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
#                   then resumes; io_timeout 5 s (BENIGN_FULL only: 10, 45,
#                   120)
#   stall-SECS      the same with the default io_timeout (30 s; BENIGN_FULL
#                   only: 10, 45, 120)
# With BENIGN_SLOW=1 (the boot needs xen-guest.sh's USERSPACE_BACKEND=1),
# the userspace blkif backend serves xvdb honestly but slowly
# (tools/testing/xen-backend's --flush-ms, --discard-ms, --request-ms),
# io_timeout 5 s for ours, while fio writes and verifies at queue depth
# 32; rows "BENIGN <row> <ours|C> <0, or fio's exit and errors> - <seconds>":
#   flush-40-t5      every flush answered after 40 s (fio's end_fsync)
#   discard-40-t5    blkdiscard of the disk beyond fio's 4 MiB, every
#                    discard answered after 40 s
#   restart          the backend process killed (SIGKILL) and started
#                    again 5 s into fio's 20 s: the new one takes the vbd
#                    over and goes back to InitWait (xen/us-backend
#                    restart); C runs it last in the boot (it ignores the
#                    InitWait: its requests wait for ever)
#   full-ring-60-t5  every read and write answered after 0.5 s on one
#                    ring of one page (32 requests), fio at depth 64 for
#                    60 s: the ring stays full, requests wait for room
#                    (the backend counts the most requests the ring held
#                    unanswered)
# C (no timeout: its queue has no io_timeout) runs every row for the
# baseline. Each row proves it struck: the reads took the throttle's time,
# the stall held requests in flight, the slow backend counted the requests
# it answered late (and the full ring had more requests in flight than
# slots), and ours counted request timeouts (debugfs request_timeouts).
. /guest/common.sh
D=xvda
# README's test command runs C's slow-32-t5 and ours' slow-32-t5-lim
# (about a minute); BENIGN_FULL=1 every row (Documentation/benign.md
# gives the command).
if [ -n "${BENIGN_FULL:-}" ]; then
    STALLS="10 45 120" STALLS_C="10 45 120" STALLS_DEFAULT="10 45 120"
else
    STALLS= STALLS_C= STALLS_DEFAULT=
fi

BENIGN_DISK=$D BENIGN_DRIVE=vbd

# slow_row ROW WHO BACKEND_ARGS: one BENIGN_SLOW row on xvdb.
slow_row() {
    local row=$1 who=$2 args=$3 t0 secs pid rc errs drc=- held=- delayed ans x=xvdb
    us_start - $args
    if ! us_disk_appears; then
        echo "BENIGN $row $who no-disk - 0"
        not_ok "$row: $who: xvdb appears (backend $args)"
        us_stop > /dev/null
        return
    fi
    [ $who = ours ] && echo 5000 > /sys/block/$x/queue/io_timeout
    set -- --name=s --filename=/dev/$x --direct=1 --ioengine=libaio --rw=randwrite --bs=4k --size=4M \
        --verify=crc32c --verify_fatal=1 --output=/tmp/slow.out
    t0=$(date +%s)
    case $row in
        flush-*) fio "$@" --iodepth=32 --end_fsync=1 > /dev/null 2>&1; rc=$? ;;
        discard-*)
            (blkdiscard -o 64M /dev/$x; echo $? > /tmp/discard.rc) &
            pid=$!
            fio "$@" --iodepth=32 > /dev/null 2>&1; rc=$?
            wait $pid; drc=$(cat /tmp/discard.rc) ;;
        full-ring-*)
            fio "$@" --iodepth=64 --time_based --runtime=60 --verify_backlog=64 > /dev/null 2>&1; rc=$?
            held=$(us_stats most_waiting) ;;
    esac
    secs=$(($(date +%s) - t0))
    errs=$(sed -n 's/.*err= *\([0-9]*\).*/\1/p' /tmp/slow.out | sort -u | paste -sd, -)
    delayed=$(us_stats delayed)
    ans=$(us_stop)
    us_disk_gone 30
    echo "BENIGN $row $who $([ $rc = 0 ] && [ "$errs" = 0 ] && [ "$drc" != 1 ] && echo 0 || echo "fio-exit-$rc,err=${errs:-none},discard-exit-$drc") - $secs"
    check "$row: $who: the backend answered $delayed request(s) late, and the row took ${secs} s (at least 40)" \
        [ "${delayed:-0}" -gt 0 -a "$secs" -ge 40 ]
    case $row in
        # 31: a slot is always between its answer and the next request
        # (measured: 31 for both drivers, fio at depth 64).
        full-ring-*) check "$row: $who: the ring of 32 slots was full (the backend found up to $held requests on it, unanswered)" [ "$held" -ge 31 ] ;;
        discard-*) check "$row: $who: blkdiscard succeeded (exit $drc)" [ "$drc" = 0 ] ;;
    esac
    check "$row: $who: fio wrote and verified (exit $rc, err=${errs:-none}; detach: $ans)" [ $rc = 0 -a "$errs" = 0 ]
}
# restart_row WHO: the restart row on xvdb (checked for ours, recorded
# for C); 1 if the driver hung.
restart_row() {
    local who=$1 t0 secs pid rc=- errs= n=0 back= be ans x=xvdb
    us_start -
    if ! us_disk_appears; then
        echo "BENIGN restart $who no-disk - 0"
        not_ok "restart: $who: xvdb appears"
        return 0
    fi
    [ $who = ours ] && echo 5000 > /sys/block/$x/queue/io_timeout
    be=$(xs_read device/vbd/51728/backend)
    t0=$(date +%s)
    fio --name=r --filename=/dev/$x --direct=1 --ioengine=libaio --rw=randwrite --bs=4k --size=4M \
        --iodepth=32 --time_based --runtime=20 --verify=crc32c --verify_backlog=64 --verify_fatal=1 \
        --output=/tmp/restart.out > /dev/null 2>&1 &
    pid=$!
    sleep 5
    echo "DOM0-CMD: sh /run/payload/us-backend restart - 51728"
    while [ $n -lt 40 ] && ! back=$(xs_read "$be/test-restarted"); do sleep 0.5; n=$((n + 1)); done
    n=0
    while kill -0 $pid 2> /dev/null && [ $n -lt 120 ]; do sleep 0.5; n=$((n + 1)); done
    secs=$(($(date +%s) - t0))
    if kill -0 $pid 2> /dev/null; then
        echo "BENIGN restart $who hangs - $secs"
        [ $who = ours ] && not_ok "restart: ours: fio ended within 60 s of its end (the backend came back: '${back:-no}')"
        return 1
    fi
    wait $pid; rc=$?
    errs=$(sed -n 's/.*err= *\([0-9]*\).*/\1/p' /tmp/restart.out | sort -u | paste -sd, -)
    ans=$(us_stop)
    us_disk_gone 30
    echo "BENIGN restart $who $([ $rc = 0 ] && [ "$errs" = 0 ] && echo 0 || echo "fio-exit-$rc,err=${errs:-none}") - $secs"
    # C's outcome is recorded, not asserted: it ignores the InitWait.
    [ $who = ours ] || return 0
    check "restart: $who: the backend was killed and started again under fio (its test-restarted node: '${back:-none}')" [ "$back" = 1 ]
    check "restart: $who: ours reconnected ($(dmesg | grep -c 'went back to InitWait: reconnecting') line(s))" \
        sh -c "dmesg | grep -q 'vbd-51728: backend .* went back to InitWait: reconnecting'"
    check "restart: $who: fio wrote and verified through the restart (exit $rc, err=${errs:-none}; detach: $ans)" [ $rc = 0 -a "$errs" = 0 ]
    return 0
}
# slow_rows WHO: every BENIGN_SLOW row (C's restart row aside: last).
slow_rows() {
    [ -n "${BENIGN_SLOW:-}" ] || return 0
    [ $1 = ours ] && restart_row ours
    slow_row flush-40-t5 "$1" "--flush-ms 40000"
    slow_row discard-40-t5 "$1" "--discard-ms 40000"
    slow_row full-ring-60-t5 "$1" "--request-ms 500 --ring-order 0 --queues 1"
}

dmesg_mark benign
# BENIGN_ONLY=restart (suite 25's userspace-backend boot, which has no
# throttled blkback disk to spare): ours' restart row alone, the check
# that guards the reconnect to a backend back in InitWait.
if [ "${BENIGN_ONLY:-}" = restart ]; then
    check "insmod xen_blkfront_rs" insmod /lib/modules/xen_blkfront_rs.ko
    restart_row ours
    unbind_vbds
    check "rmmod xen_blkfront_rs" unload xen_blkfront_rs
    finish
    exit
fi
# The C driver first: it does not attach to a vbd ours was unbound from
# within the wait (the other scripts load it first too).
if [ -f /lib/modules/xen-blkfront.ko ] && check "insmod xen-blkfront (C)" insmod /lib/modules/xen-blkfront.ko; then
    for i in $(seq 1 40); do [ -e /sys/block/$D ] && break; sleep 0.25; done
    throttle 0 2
    benign_reads slow-32-t5 C 32
    throttle 0 0
    for secs in $STALLS_C; do benign_stall stall-$secs-t5 C $secs; done
    for secs in $STALLS_DEFAULT; do benign_stall stall-$secs C $secs; done
    slow_rows C
    unbind_vbds vbd
    check "rmmod xen-blkfront (C)" unload xen_blkfront
fi
if fault_injection_disk $D; then
    echo 5000 > /sys/block/$D/queue/io_timeout
    for secs in $STALLS; do benign_stall stall-$secs-t5 ours $secs; done
    echo 30000 > /sys/block/$D/queue/io_timeout
    for secs in $STALLS_DEFAULT; do benign_stall stall-$secs ours $secs; done
    echo 5000 > /sys/block/$D/queue/io_timeout
    throttle 0 2
    [ -n "${BENIGN_FULL:-}" ] && benign_reads slow-32-t5 ours 32
    echo 5000 > /sys/module/xen_blkfront_rs/parameters/give_up_after_ms
    benign_reads slow-32-t5-lim ours 32
    echo 0 > /sys/module/xen_blkfront_rs/parameters/give_up_after_ms
    slow_rows ours
    t=$(dstat request_timeouts)
    echo "BENIGN-TIMEOUTS $D ${t:-none}"
    check "ours counted request timeouts (${t:-none}), and failed no request" [ "${t:-0}" -gt 0 ]
    nb=$(dmesg_since benign | grep -c 'no response for')
    check "ours broke no ring ($nb 'no response for' lines)" [ "$nb" = 0 ]
    check "the disk still reads afterwards" dd if=/dev/$D of=/dev/null bs=4k count=1 iflag=direct
    unbind_vbds
    check "rmmod xen_blkfront_rs" unload xen_blkfront_rs
fi
throttle 0 0
# C's restart row, last: a C driver that waits for ever holds its disk and
# the xenwatch thread, and the guest's power-off with them; dom0 then
# destroys the domain once the exit status is out.
if [ -n "${BENIGN_SLOW:-}" ] && [ -f /lib/modules/xen-blkfront.ko ] && check "insmod xen-blkfront (C), again" insmod /lib/modules/xen-blkfront.ko; then
    if ! restart_row C; then
        finish; rc=$?
        echo "GUEST-EXIT: $rc"
        echo "DOM0-CMD: xl destroy blktest"
        sleep 60
    fi
    unbind_vbds vbd
    check "rmmod xen-blkfront (C), again" unload xen_blkfront
fi
finish
