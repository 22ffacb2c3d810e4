#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Xen domU: the backing device grows while the disk is in use (the host
# resizes dom0's disk through the QEMU monitor; dom0's virtio_blk sees the
# new capacity): blkback re-announces Connected with the new "sectors", the
# disk's size follows.   xen-guest.sh -s 256M tools/testing/guest/xen-resize.sh
. /guest/common.sh
D=xvda
check "insmod xen_blkfront_rs" insmod /lib/modules/xen_blkfront_rs.ko
for i in $(seq 1 40); do [ -e /sys/block/$D ] && break; sleep 0.25; done
[ -e /sys/block/$D ] && ok "disk $D appears" || { not_ok "disk $D appears"; finish; exit; }
s0=$(cat /sys/block/$D/size); echo "size before: $s0"
echo "HOST-CMD: block_resize vbd 384M"
n=0
while [ "$(cat /sys/block/$D/size)" = "$s0" ] && [ $n -lt 300 ]; do
    dd if=/dev/$D of=/dev/null bs=4k count=1 iflag=direct 2>/dev/null
    n=$((n + 1)); sleep 0.5
done
expect_eq "size after the backend grew" "$(cat /sys/block/$D/size)" 786432
dd if=/dev/urandom of=/tmp/p bs=1M count=1 2>/dev/null
dd if=/tmp/p of=/dev/$D bs=1M seek=300 oflag=direct 2>/dev/null
dd if=/dev/$D of=/tmp/b bs=1M skip=300 count=1 iflag=direct 2>/dev/null
expect_eq "I/O beyond the old end" "$(md5sum < /tmp/b | cut -d' ' -f1)" "$(md5sum < /tmp/p | cut -d' ' -f1)"
dmesg | grep -iE "capacity|blkfront" | tail -4
unbind_vbds
check "rmmod xen_blkfront_rs" rmmod xen_blkfront_rs
finish
