# SPDX-License-Identifier: GPL-2.0
# virtio guest: polled I/O. With poll_queues=N the last N of a disk's
# virtqueues have no interrupt; io_uring with IORING_SETUP_IOPOLL (fio
# --hipri) reaps their completions through blk-mq's poll, as with upstream's
# virtio_blk. Needs a disk with several queues:
#   virtio-guest.sh -d '64M,num-queues=4' tools/testing/guest/virtio-poll.sh
# POLL_DISK names the disk (default vda), POLL_QUEUES the count (default 1).
. /guest/common.sh
d=${POLL_DISK:-vda}
n=${POLL_QUEUES:-1}
lsmod | grep -q '^virtio_blk_rs ' && unload virtio_blk_rs
dmesg_mark poll
check "insmod virtio_blk_rs poll_queues=$n" insmod /lib/modules/virtio_blk_rs.ko poll_queues=$n
sleep 1
expect_eq "poll_queues in sysfs" "$(cat /sys/module/virtio_blk_rs/parameters/poll_queues)" "$n"
expect_eq "$d: io_poll" "$(q $d io_poll)" 1
check "probe line counts $n polled queues" [ "$(dmesg_since poll | grep -c "request queues ($n polled)")" -gt 0 ]
polled_fio() { # LABEL
    fio --name=poll --filename=/dev/$d --direct=1 --ioengine=io_uring --hipri=1 \
        --iodepth=4 --rw=randwrite --bs=4k --size=16M --verify=crc32c \
        --verify_fatal=1 --output=/tmp/fio-poll.log > /dev/null 2>&1
    check "$1: fio io_uring hipri write+verify exits 0" test $? = 0
    check "$1: fio reports err=0" grep -q 'err= 0' /tmp/fio-poll.log
}
polled_fio RS
check "rmmod virtio_blk_rs" unload virtio_blk_rs
polled=$(dmesg_since poll | sed -n "s/.*\[$d\] removed: .* \([0-9][0-9]*\) polled completions.*/\1/p" | tail -1)
echo "POLL $d: ${polled:-?} polled completions"
check "completions were reaped by polling (${polled:-none})" [ "${polled:-0}" -gt 0 ]
if [ -f /lib/modules/virtio_blk.ko ]; then
    check "insmod virtio_blk (C) poll_queues=$n" insmod /lib/modules/virtio_blk.ko poll_queues=$n
    sleep 1
    expect_eq "$d: io_poll as with the C driver" "$(q $d io_poll)" 1
    polled_fio C
    check "rmmod virtio_blk (C)" unload virtio_blk
fi
check "no warnings/oopses" sh -c "! dmesg | grep -E 'WARNING:|BUG:|Oops'"
finish
