# SPDX-License-Identifier: GPL-2.0
# virtio guest: the serial (VIRTIO_BLK_T_GET_ID) is asked with a deadline
# and probe never depends on the answer.
#   virtio-guest.sh -d '64M,num-queues=1' -d '64M,num-queues=2' tools/testing/guest/virtio-serial.sh
# get_id_timeout_ms=0 sends GET_ID on virtqueue 0 already given up on and
# without notifying the device, so both disks come up with an empty serial
# (the attribute present, as upstream's when GET_ID fails), and:
#  vda (1 queue): the next I/O notifies virtqueue 0, the device answers
#      after the waiter gave up: the late answer is counted and dropped;
#  vdb (2 queues, all I/O from a CPU mapped to the other queue): virtqueue
#      0 is never notified, so GET_ID may never be answered and its buffer
#      is then freed after the reset at remove. But QEMU may look at the
#      queue without a notification (seen in about half the runs, likely
#      its initial look at every queue after DRIVER_OK racing with the
#      GET_ID): then it is a late answer. Either way the buffer must be
#      released exactly once.
# Then more such cycles under kmemleak (boot with kmemleak=on): nothing of
# either path may leak (the GET_ID buffer, the ring's indirect table).
. /guest/common.sh
removed() { dmesg | grep -E "\[$1\] removed: [0-9]+ requests" | tail -1; }

# Default load: both serials read (QEMU serial=rsdiskN); pick a CPU that
# maps to vdb's hardware queue 1 (so not to queue 0).
check "insmod virtio_blk_rs" insmod /lib/modules/virtio_blk_rs.ko
expect_eq "vda serial" "$(cat /sys/block/vda/serial 2>/dev/null)" rsdisk0
expect_eq "vdb serial" "$(cat /sys/block/vdb/serial 2>/dev/null)" rsdisk1
q1=$(cat /sys/block/vdb/mq/1/cpu_list 2>/dev/null)
cpu=$(echo "$q1" | cut -d, -f1 | cut -d- -f1)
echo "SERIAL vdb hctx1 cpus '$q1': the test runs on CPU '${cpu:-none}'"
check "vdb has a CPU on hardware queue 1" [ -n "$cpu" ]
check "rmmod virtio_blk_rs" rmmod virtio_blk_rs
cpu=${cpu:-1}

dmesg_mark serial
cycles=1
check "insmod get_id_timeout_ms=0 (on CPU $cpu)" taskset -c "$cpu" insmod /lib/modules/virtio_blk_rs.ko get_id_timeout_ms=0
check "vda and vdb added without the serial" sh -c '[ -b /dev/vda ] && [ -b /dev/vdb ]'
# As upstream: the attribute is there, empty.
for d in vda vdb; do
    check "$d: serial attribute present" [ -e /sys/block/$d/serial ]
    expect_eq "$d: serial empty" "$(cat /sys/block/$d/serial 2>/dev/null | wc -c)" 0
done
for d in vda vdb; do
    expect_eq "$d: one line saying the serial was not answered in time" \
        "$(dmesg_since serial | grep -c "\[$d\] no serial: GET_ID not answered within 0 ms")" 1
done
dd if=/dev/urandom of=/tmp/p bs=64k count=16 2>/dev/null
for d in vda vdb; do
    taskset -c "$cpu" dd if=/tmp/p of=/dev/$d bs=64k seek=3 oflag=direct 2>/dev/null
    taskset -c "$cpu" dd if=/dev/$d of=/tmp/b bs=64k skip=3 count=16 iflag=direct 2>/dev/null
    check "$d: data round trip" cmp -s /tmp/p /tmp/b
done
check "rmmod virtio_blk_rs (on CPU $cpu)" taskset -c "$cpu" rmmod virtio_blk_rs
late() { removed $1 | sed -n 's/.* \([0-9][0-9]*\) late GET_ID answers.*/\1/p'; }
never() { dmesg_since serial | grep -c "\[$1\] GET_ID never answered: its buffer freed after the reset"; }
removed vda; removed vdb
echo "SERIAL GET_ID fate: vda late=$(late vda) never=$(never vda), vdb late=$(late vdb) never=$(never vdb)"
expect_eq "vda: the GET_ID answer came late, was counted and dropped" "$(late vda)" 1
expect_eq "vda: no buffer left for the reset to free" "$(never vda)" 0
expect_eq "vdb: GET_ID buffer released once (late answer or after the reset)" \
    "$(( $(late vdb) + $(never vdb) ))" 1

K=/sys/kernel/debug/kmemleak
if [ -w $K ]; then
    echo clear > $K
    cycles=7
    for i in 1 2 3 4 5 6; do
        taskset -c "$cpu" insmod /lib/modules/virtio_blk_rs.ko get_id_timeout_ms=0 || not_ok "insmod cycle $i"
        taskset -c "$cpu" dd if=/dev/vdb of=/dev/null bs=64k count=16 iflag=direct 2>/dev/null
        taskset -c "$cpu" rmmod virtio_blk_rs || not_ok "rmmod cycle $i"
    done
    echo "SERIAL GET_ID fates, all cycles: late $(dmesg_since serial | sed -n 's/.* \([0-9]*\) late GET_ID answers.*/\1/p' | awk '{ s += $1 } END { print s + 0 }'), never answered $(dmesg_since serial | grep -c 'GET_ID never answered')"
    # kmemleak reports objects unreferenced for 5 s and seen in two scans.
    sleep 6; echo scan > $K; sleep 6; echo scan > $K
    n=$(grep -c '^unreferenced object' $K)
    grep -A12 '^unreferenced object' $K | head -40
    expect_eq "kmemleak after 6 more get_id_timeout_ms=0 cycles: unreferenced objects" "$n" 0
else
    no_kmemleak
fi
# The teardowns the next two checks are about: each load since the mark
# ends with one removal line per disk.
expect_eq "removal lines of vda and vdb after $cycles loads with get_id_timeout_ms=0" \
    "$(dmesg_since serial | grep -cE '\[vd[ab]\] removed: [0-9]+ requests')" $((2 * cycles))
check "no GET_ID buffer leaked at teardown" sh -c "! dmesg | grep -q 'GET_ID buffer still owned'"
check "no request left at reset" sh -c "! dmesg | grep -q 'still owned by the device at reset'"
check "no warnings/oopses" sh -c "! dmesg | grep -E 'WARNING:|BUG:|Oops|general protection'"
finish
