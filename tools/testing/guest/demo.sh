# SPDX-License-Identifier: GPL-2.0
# Demo body, sourced with MOD (our module) and DISK (the disk it binds) set:
# load the driver, show the disk the way lsblk -t and dmesg see it, and move
# some data through it.
. /guest/common.sh
check "insmod $MOD" insmod "/lib/modules/$MOD.ko"
for i in 1 2 3 4 5 6 7 8 9 10; do [ -b "/dev/$DISK" ] && break; sleep 0.5; done
lsblk -t 2>/dev/null || true
dmesg | grep -E "\[$DISK\]|$DISK:" | tail -2
if [ -b "/dev/$DISK" ]; then
    dd if=/dev/urandom of=/tmp/pattern bs=1M count=4 2>/dev/null
    dd if=/tmp/pattern of="/dev/$DISK" bs=1M oflag=direct 2>/dev/null
    dd if="/dev/$DISK" of=/tmp/back bs=1M count=4 iflag=direct 2>/dev/null
    if cmp -s /tmp/pattern /tmp/back; then ok "DATA 4 MiB written and read back with O_DIRECT"; else not_ok "DATA 4 MiB read back differs"; fi
else
    not_ok "/dev/$DISK exists"
fi
finish
