# SPDX-License-Identifier: GPL-2.0
# virtio guest: honest devices that are merely slow. Ours must lose nothing
# where the C driver loses nothing: no I/O error, no device reset.
#
# A slow disk: QEMU throttles drive d0 (vda) to 2 requests a second
# (block_set_io_throttle from the monitor), and N concurrent 4 KiB O_DIRECT
# readers wait up to N/2 s each, past the queue's io_timeout. Rows, each a
# line "BENIGN <row> <ours|C> <failed> <reads or -> <seconds>":
#   slow-32-t5      32 readers, io_timeout 5 s (waits up to 16 s; ours:
#                   BENIGN_FULL only)
#   slow-32-t5-lim  the same with give_up_after_ms=5000 (a queue that
#                   answers is never given up on, whatever the limit)
#   slow-80         80 readers, the default io_timeout (waits up to 40 s;
#                   BENIGN_FULL only)
# A poll queue whose reaping task stops: fio's io_uring --hipri reads on
# vdb (two queues, one polled), the fio process stopped (SIGSTOP) for 10 s
# (40 s with BENIGN_FULL)
# while its requests are in flight, io_timeout 5 s and give_up_after_ms=5000:
# the device answered them, nobody reaped them; the timeout reaps them.
#   poll-stopped-S  fio's exit and errors after it is resumed (S: 10 or 40)
# A disk that stalls, then resumes: QEMU throttles d0 to one byte a
# second for SECS s, then lifts the throttle, while fio writes and
# verifies at queue depth 32.
#   stall-SECS-t5   io_timeout 5 s; BENIGN_FULL only: 10, 45, 120
#   stall-SECS      the default io_timeout; BENIGN_FULL only: 10, 45, 120
# A device slow to flush or to discard: our own vhost-user-blk device
# (tools/testing/virtio-backend), hot-plugged well-behaved but answering
# each flush, or each discard and write-zeroes, 40 s after it took it
# (--flush-ms, --discard-ms; one request after another: the requests
# behind it wait too). It needs a guest booted by virtio-guest.sh with
# VHOST_USER=1, which the host says with BENIGN_VUB=1 in GUEST_ENV;
# BENIGN_FULL only. Ours with io_timeout 5 s, C with its default:
#   flush-40-t5     fio's randwrite and crc32c verify at queue depth 32
#                   on 4 MiB, then one flush (--end_fsync=1); struck if
#                   fio took 40 s or more
#   discard-40-t5   blkdiscard from 64 MiB to the end of the 128 MiB disk
#                   (four requests of 16 MiB: 160 s) while fio runs the
#                   same job, without the flush, on the first 4 MiB;
#                   struck if blkdiscard took 40 s or more
# BENIGN_ROWS=slow-device runs these rows only (with BENIGN_VUB=1).
# The C driver (no timeout: its requests wait for ever) runs slow-32-t5
# and the stalls for the baseline. Each row proves it struck: the reads
# took the throttle's time, the stall held requests in flight, and ours
# counted request timeouts (its removal line).
. /guest/common.sh
d=vda
# README's test command runs the rows that guard the code (about a
# minute and a half: slow-32-t5-lim, which fails if a timeout ever gives
# up on a queue that answers, poll-stopped and C's slow-32-t5);
# BENIGN_FULL=1 every row (Documentation/benign.md gives the command).
FULL=${BENIGN_FULL:-}
if [ -n "$FULL" ]; then
    STALLS="10 45 120" STALLS_DEFAULT="10 45 120" STALLS_C="10 45 120" STOP_SECS=40
else
    STALLS= STALLS_DEFAULT= STALLS_C= STOP_SECS=10
fi
dmesg_mark benign

BENIGN_DISK=$d BENIGN_DRIVE=d0

# vub_plug N OPTIONS...: hot-plugs a well-behaved vhost-user device vub<N>
# with these device options and prints its disk's name once it is up (at
# most 60 s: the disk not under /sys/block before).
vub_plug() {
    local n=$1 before i d
    shift
    before=" $(ls /sys/block | tr '\n' ' ') "
    # On stderr: the caller takes stdout, the disk's name.
    echo "HOST-CMD: vub-attach - $n $*" >&2
    for i in $(seq 1 120); do
        for d in $(ls /sys/block); do
            case $before in *" $d "*) ;; *) [ -b /dev/$d ] && { echo $d; return 0; } ;; esac
        done
        sleep 0.5
    done
    return 1
}
# vub_unplug WHO N DISK: unplugs vub<N>; for ours a check that its disk
# went within 60 s (with ours' count of request timeouts on it).
vub_unplug() {
    local who=$1 n=$2 d=$3 i=0 t
    echo "HOST-CMD: vub-detach $n"
    while [ -e /sys/block/$d ] && [ $i -lt 120 ]; do sleep 0.5; i=$((i + 1)); done
    [ $who = ours ] || return 0
    # Its removal line follows the disk's going.
    sleep 1
    t=$(removal_count $d "request timeouts")
    check "$ROW: ours: the disk $d went at the unplug (its removal line: ${t:-no} request timeouts)" \
        [ ! -e /sys/block/$d ]
}
# vub_fio DISK OUT MORE...: fio's verify job of benign_stall on the first
# 4 MiB of DISK, its report in OUT, with the options MORE.
vub_fio() {
    local d=$1 out=$2
    shift 2
    fio --name=v --filename=/dev/$d --direct=1 --ioengine=libaio --iodepth=32 --rw=randwrite \
        --bs=4k --size=4M --verify=crc32c --verify_backlog=64 --verify_fatal=1 "$@" \
        --output=$out > /dev/null 2>&1
}
# fio_outcome OUT RC: "0" for fio's exit RC 0 and err=0 in its report OUT,
# else "fio-exit-RC,err=E".
fio_outcome() {
    local errs
    errs=$(sed -n 's/.*err= *\([0-9]*\).*/\1/p' $1 | sort -u | paste -sd, -)
    [ $2 = 0 ] && [ "$errs" = 0 ] && echo 0 || echo "fio-exit-$2,err=${errs:-none}"
}
# slow_plug WHO N DEVICE-OPTIONS...: hot-plugs device vub<N> for the row
# ROW, its disk's name in SLOW_DISK (ours: io_timeout 5 s); 1, after the
# row's line, if no disk came.
slow_plug() {
    local who=$1 n=$2
    shift 2
    if ! SLOW_DISK=$(vub_plug $n "$@"); then
        echo "BENIGN $ROW $who no-disk - 0"
        [ $who = ours ] && not_ok "$ROW: ours: the slow device's disk appears"
        return 1
    fi
    [ $who = ours ] && echo 5000 > /sys/block/$SLOW_DISK/queue/io_timeout
    return 0
}
# slow_flush WHO N: the row flush-40-t5 on device vub<N>.
slow_flush() {
    local who=$1 n=$2 d t0 rc secs outcome
    ROW=flush-40-t5
    slow_plug $who $n --flush-ms 40000 || return 1
    d=$SLOW_DISK
    t0=$(date +%s)
    vub_fio $d /tmp/vub.out --end_fsync=1; rc=$?
    secs=$(($(date +%s) - t0))
    outcome=$(fio_outcome /tmp/vub.out $rc)
    echo "BENIGN $ROW $who $([ $secs -lt 40 ] && echo not-struck:)$outcome - $secs"
    if [ $who = ours ]; then
        check "$ROW: ours: fio with its flush answered 40 s late took ${secs}s (at least 40 s: the flush was slow)" [ $secs -ge 40 ]
        check "$ROW: ours: fio wrote, flushed and verified with no error ($outcome)" [ "$outcome" = 0 ]
    fi
    vub_unplug $who $n $d
}
# slow_discard WHO N: the row discard-40-t5 on device vub<N>.
slow_discard() {
    local who=$1 n=$2 d pid t0 drc rc secs outcome bytes i
    ROW=discard-40-t5
    slow_plug $who $n --discard-ms 40000 || return 1
    d=$SLOW_DISK
    bytes=$(($(cat /sys/block/$d/size) * 512))
    # Time-based: fio still writes when the discards go in, and its
    # requests queue behind them.
    vub_fio $d /tmp/vub.out --time_based --runtime=20 &
    pid=$!
    i=0
    while [ "$(inflight_sample $d)" = 0 ] && [ $i -lt 5 ]; do i=$((i + 1)); done
    t0=$(date +%s)
    blkdiscard -o $((64 << 20)) -l $((bytes - (64 << 20))) /dev/$d; drc=$?
    secs=$(($(date +%s) - t0))
    wait $pid; rc=$?
    outcome=$(fio_outcome /tmp/vub.out $rc)
    if [ $drc != 0 ]; then
        [ "$outcome" = 0 ] && outcome=blkdiscard-exit-$drc || outcome=blkdiscard-exit-$drc,$outcome
    fi
    echo "BENIGN $ROW $who $([ $secs -lt 40 ] && echo not-struck:)$outcome - $secs"
    if [ $who = ours ]; then
        check "$ROW: ours: blkdiscard of $(((bytes >> 20) - 64)) MiB with each discard answered 40 s late took ${secs}s (at least 40 s: the discards were slow)" [ $secs -ge 40 ]
        check "$ROW: ours: blkdiscard exits 0 and fio beside it has no error ($outcome)" [ "$outcome" = 0 ]
    fi
    vub_unplug $who $n $d
}
# slow_full_ring WHO N: the row full-ring-60-t5 on device vub<N>: every
# read and write answered 0.5 s late, one after another, fio at twice the
# disk's depth for 60 s: the virtqueue stays full (its requests in flight
# reach the disk's depth), requests wait for room.
slow_full_ring() {
    local who=$1 n=$2 d pid rc t0 secs outcome depth held
    ROW=full-ring-60-t5
    slow_plug $who $n --request-ms 500 || return 1
    d=$SLOW_DISK
    depth=$(cat /sys/block/$d/queue/nr_requests)
    t0=$(date +%s)
    fio --name=v --filename=/dev/$d --direct=1 --ioengine=libaio --iodepth=$((depth * 2)) --rw=randwrite \
        --bs=4k --size=4M --verify=crc32c --verify_backlog=64 --verify_fatal=1 --time_based --runtime=60 \
        --output=/tmp/vub.out > /dev/null 2>&1 &
    pid=$!
    sleep 30
    held=$(awk '{ print $1 + $2 }' /sys/block/$d/inflight)
    wait $pid; rc=$?
    secs=$(($(date +%s) - t0))
    outcome=$(fio_outcome /tmp/vub.out $rc)
    echo "BENIGN $ROW $who $([ "$held" -lt "$depth" ] && echo not-struck:)$outcome - $secs"
    if [ $who = ours ]; then
        check "$ROW: ours: the disk's $depth requests in flight at once, the virtqueue full ($held at the middle)" [ "$held" -ge "$depth" ]
        check "$ROW: ours: fio wrote and verified with no error ($outcome)" [ "$outcome" = 0 ]
    fi
    vub_unplug $who $n $d
}
# slow_device_rows: flush-40-t5 and discard-40-t5, ours then C (each loaded for
# them alone), on devices vub1 to vub4.
slow_device_rows() {
    if [ -z "${BENIGN_VUB:-}" ]; then
        echo "BENIGN-NOT-RUN flush-40-t5 discard-40-t5 full-ring-60-t5: no vhost-user device (BENIGN_VUB=1 and VHOST_USER=1 on the host)"
        return 0
    fi
    # vda unthrottled: the module's probe reads it.
    throttle 0 0
    check "insmod virtio_blk_rs" insmod /lib/modules/virtio_blk_rs.ko
    sleep 1
    slow_flush ours 1
    slow_discard ours 2
    slow_full_ring ours 5
    check "rmmod virtio_blk_rs" unload virtio_blk_rs
    if [ -f /lib/modules/virtio_blk.ko ]; then
        check "insmod virtio_blk (C)" insmod /lib/modules/virtio_blk.ko
        sleep 1
        slow_flush C 3
        slow_discard C 4
        slow_full_ring C 6
        check "rmmod virtio_blk (C)" unload virtio_blk
    fi
}
if [ "${BENIGN_ROWS:-}" = slow-device ]; then
    check "BENIGN_ROWS=slow-device: the host says the vhost-user device is there (BENIGN_VUB=${BENIGN_VUB:-})" \
        [ -n "${BENIGN_VUB:-}" ]
    slow_device_rows
    check "no warnings/oopses" sh -c "! dmesg | grep -E 'WARNING:|BUG:|Oops'"
    finish
    exit
fi

if [ -n "$FULL" ]; then
    check "insmod virtio_blk_rs" insmod /lib/modules/virtio_blk_rs.ko
    sleep 1
    echo 5000 > /sys/block/$d/queue/io_timeout
    for secs in $STALLS; do benign_stall stall-$secs-t5 ours $secs; done
    echo 30000 > /sys/block/$d/queue/io_timeout
    for secs in $STALLS_DEFAULT; do benign_stall stall-$secs ours $secs; done
    check "rmmod virtio_blk_rs" unload virtio_blk_rs
fi

throttle 0 2

check "insmod virtio_blk_rs poll_queues=1" insmod /lib/modules/virtio_blk_rs.ko poll_queues=1
sleep 1
echo 5000 > /sys/block/$d/queue/io_timeout
[ -n "$FULL" ] && benign_reads slow-32-t5 ours 32
echo 5000 > /sys/module/virtio_blk_rs/parameters/give_up_after_ms
benign_reads slow-32-t5-lim ours 32
echo 0 > /sys/module/virtio_blk_rs/parameters/give_up_after_ms
echo 30000 > /sys/block/$d/queue/io_timeout
[ -n "$FULL" ] && benign_reads slow-80 ours 80
check "ours: the disk still reads afterwards" dd if=/dev/$d of=/dev/null bs=4k count=1 iflag=direct

# The poll queue: vdb's second queue.
echo 5000 > /sys/block/vdb/queue/io_timeout
echo 5000 > /sys/module/virtio_blk_rs/parameters/give_up_after_ms
fio --name=p --filename=/dev/vdb --direct=1 --ioengine=io_uring --hipri=1 --thread \
    --iodepth=8 --numjobs=2 --cpus_allowed=0,1 --cpus_allowed_policy=split \
    --rw=randread --bs=4k --size=16M --time_based --runtime=20 --output=/tmp/poll.out > /dev/null 2>&1 &
pid=$!
sleep 4
# Stopped with requests in flight (the row's proof that it struck): a
# stop takes effect when each thread leaves the kernel, where io_uring's
# poll loop may still reap everything first, so the requests are counted
# once every thread is stopped; a stop that caught none is undone and
# tried again.
held=0 i=0
while [ $i -lt 50 ]; do
    kill -STOP $pid
    n=0
    while [ "$(grep -h '^State:' /proc/$pid/task/*/status | grep -vc 'T (stopped)')" -gt 0 ] && [ $n -lt 40 ]; do
        usleep 50000; n=$((n + 1))
    done
    held=$(awk '{ print $1 + $2 }' /sys/block/vdb/inflight)
    [ "$held" -gt 0 ] && break
    kill -CONT $pid
    usleep 100000; i=$((i + 1))
done
sleep $STOP_SECS
kill -CONT $pid
wait $pid; rc=$?
errs=$(sed -n 's/.*err= *\([0-9]*\).*/\1/p' /tmp/poll.out | sort -u | paste -sd, -)
echo "BENIGN poll-stopped-$STOP_SECS ours $([ "$held" = 0 ] && echo "not-struck:" )$([ $rc = 0 ] && [ "$errs" = 0 ] && echo 0 || echo "fio-exit-$rc,err=${errs:-none}") - $STOP_SECS"
check "poll-stopped-$STOP_SECS: ours: fio was stopped with polled requests in flight ($held)" [ "$held" -gt 0 ]
check "poll-stopped-$STOP_SECS: ours: fio stopped $STOP_SECS s exits 0 once resumed (err=${errs:-none})" [ $rc = 0 -a "$errs" = 0 ]
echo 0 > /sys/module/virtio_blk_rs/parameters/give_up_after_ms

check "rmmod virtio_blk_rs" unload virtio_blk_rs
for disk in $d vdb; do
    t=$(removal_count $disk "request timeouts")
    echo "BENIGN-TIMEOUTS $disk ${t:-none}"
    # The rows waited past io_timeout: the timeouts ran, and failed nothing.
    check "$disk: ours counted request timeouts (${t:-none}), and failed no request" [ "${t:-0}" -gt 0 ]
done
check "ours gave up on no device (no 'answered nothing' line)" sh -c "! dmesg | grep -q 'answered nothing'"

if [ -f /lib/modules/virtio_blk.ko ]; then
    check "insmod virtio_blk (C)" insmod /lib/modules/virtio_blk.ko
    sleep 1
    benign_reads slow-32-t5 C 32
    throttle 0 0
    for secs in $STALLS_C; do benign_stall stall-$secs-t5 C $secs; done
    for secs in $STALLS_DEFAULT; do benign_stall stall-$secs C $secs; done
    check "rmmod virtio_blk (C)" unload virtio_blk
fi
[ -n "$FULL" ] && slow_device_rows
check "no warnings/oopses" sh -c "! dmesg | grep -E 'WARNING:|BUG:|Oops'"
finish
