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
# while its requests are in flight, io_timeout 5 s and give_up_after_ms=5000:
# the device answered them, nobody reaped them; the timeout reaps them.
#   poll-stopped    fio's exit and errors after it is resumed
# A disk that stalls, then resumes: QEMU throttles d0 to one byte a
# second for SECS s, then lifts the throttle, while fio writes and
# verifies at queue depth 32.
#   stall-SECS-t5   io_timeout 5 s; BENIGN_FULL only: 10, 45, 120
#   stall-SECS      the default io_timeout; BENIGN_FULL only: 10, 45, 120
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
    STALLS="10 45 120" STALLS_DEFAULT="10 45 120" STALLS_C="10 45 120"
else
    STALLS= STALLS_DEFAULT= STALLS_C=
fi
dmesg_mark benign

BENIGN_DISK=$d BENIGN_DRIVE=d0

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
sleep 10
kill -CONT $pid
wait $pid; rc=$?
errs=$(sed -n 's/.*err= *\([0-9]*\).*/\1/p' /tmp/poll.out | sort -u | paste -sd, -)
echo "BENIGN poll-stopped ours $([ "$held" = 0 ] && echo "not-struck:" )$([ $rc = 0 ] && [ "$errs" = 0 ] && echo 0 || echo "fio-exit-$rc,err=${errs:-none}") - 10"
check "poll-stopped: ours: fio was stopped with polled requests in flight ($held)" [ "$held" -gt 0 ]
check "poll-stopped: ours: fio stopped 10 s exits 0 once resumed (err=${errs:-none})" [ $rc = 0 -a "$errs" = 0 ]
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
check "no warnings/oopses" sh -c "! dmesg | grep -E 'WARNING:|BUG:|Oops'"
finish
