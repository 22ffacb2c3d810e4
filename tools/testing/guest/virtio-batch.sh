# SPDX-License-Identifier: GPL-2.0
# virtio guest: requests handed over in batches (blk-mq's queue_rqs). With
# no I/O scheduler, a plug of several requests (libaio submitting 16 at
# once) reaches the driver as one batch: each run of requests for one
# virtqueue is added under one lock hold with one notification. Checks: the
# data verifies (crc32c), the removal line counts batches, and there were
# fewer notifications than requests. BATCH_DISK names the disk (default
# vdb).
. /guest/common.sh
D=${BATCH_DISK:-vdb}
check "insmod virtio_blk_rs" insmod /lib/modules/virtio_blk_rs.ko
for i in $(seq 1 40); do [ -b /dev/$D ] && break; sleep 0.5; done
echo none > /sys/block/$D/queue/scheduler
check "$D: no I/O scheduler (blk-mq calls queue_rqs only then)" grep -q '\[none\]' /sys/block/$D/queue/scheduler
fio --name=batch --filename=/dev/$D --direct=1 --rw=randwrite --bs=4k --size=16M --ioengine=libaio \
    --iodepth=32 --iodepth_batch_submit=16 --iodepth_batch_complete_min=16 --verify=crc32c --do_verify=1 \
    --verify_fatal=1 --output=/tmp/batch.out > /dev/null 2>&1
fio_checked "fio 4k random writes submitted 16 at a time + crc32c verify" /tmp/batch.out $?
grep -E 'submit  ' /tmp/batch.out | sed 's/^/FIO: /'
check "rmmod virtio_blk_rs" rmmod virtio_blk_rs
reqs=$(removal_count $D requests)
notifs=$(removal_count $D notifications)
batches=$(removal_count $D batches)
check "requests came in batches ($D: ${batches:-no count})" [ "${batches:-0}" -gt 0 ]
check "fewer notifications than requests ($D: ${notifs:-?} for ${reqs:-?})" [ "${notifs:-0}" -lt "${reqs:-0}" ]
check "no warnings/oopses" sh -c "! dmesg | grep -E 'WARNING:|BUG:|Oops|left in a request list'"
finish
