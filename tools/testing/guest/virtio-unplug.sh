# SPDX-License-Identifier: GPL-2.0
# virtio guest: surprise removal under I/O. vdb is hot-unplugged (HOST-CMD:
# device_del vd1) while a writer is running on it; the driver must remove the
# disk cleanly (in-flight I/O completes or fails, no oops), vda keeps working
# and the module unloads.
#   virtio-guest.sh -d 128M -d 128M tools/testing/guest/virtio-unplug.sh
. /guest/common.sh
check "insmod virtio_blk_rs" insmod /lib/modules/virtio_blk_rs.ko
sleep 1
check "vdb present" [ -b /dev/vdb ]
# Rewrites the disk until I/O fails (the disk is gone).
( n=0; while dd if=/dev/zero of=/dev/vdb bs=64k count=512 seek=$(( (n % 4) * 512 )) oflag=direct 2>/tmp/dd.err; do n=$((n + 1)); done; echo "UNPLUG writer: $n passes, then: $(tail -1 /tmp/dd.err)" ) &
writer=$!
sleep 2
echo "HOST-CMD: device_del vd1"
i=0
while [ -e /sys/block/vdb ] && [ $i -lt 60 ]; do sleep 1; i=$((i + 1)); done
check "vdb removed after device_del (${i}s)" [ ! -e /sys/block/vdb ]
i=0
while kill -0 $writer 2>/dev/null && [ $i -lt 30 ]; do sleep 1; i=$((i + 1)); done
check "writer on the removed disk terminated" sh -c "! kill -0 $writer 2>/dev/null"
dmesg | grep -E 'vdb|virtio1' | tail -5
roundtrip "vda still works" vda 64k 16 10
check "rmmod virtio_blk_rs" rmmod virtio_blk_rs
check "no warnings/oopses" sh -c "! dmesg | grep -E 'WARNING:|BUG:|Oops|general protection'"
finish
