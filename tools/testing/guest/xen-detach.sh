#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Xen domU: the backend detaches the disk (xl block-detach in dom0) while
# xen_blkfront_rs has it: the disk must go away without hanging, and the
# module must unload afterwards. The script asks dom0 for the detach once
# its writer runs (DOM0-CMD, see xen-guest.sh).
. /guest/common.sh
D=xvda
check "insmod xen_blkfront_rs" insmod /lib/modules/xen_blkfront_rs.ko
for i in $(seq 1 40); do [ -e /sys/block/$D ] && break; sleep 0.25; done
[ -e /sys/block/$D ] && ok "disk $D appears" || { not_ok "disk $D appears"; finish; exit; }
n=0
while [ -e /sys/block/$D ] && [ $n -lt 400 ]; do
    [ $n = 4 ] && echo "DOM0-CMD: xl block-detach blktest xvda"
    dd if=/dev/zero of=/dev/$D bs=64k count=16 seek=$((n % 64 * 16)) oflag=direct 2>/dev/null
    n=$((n + 1)); sleep 0.5
done
[ ! -e /sys/block/$D ] && ok "disk gone after backend detach ($n write rounds)" || not_ok "disk gone after backend detach"
dmesg | grep -iE "blkfront|xen_blkfront_rs|vbd" | tail -8
check "rmmod xen_blkfront_rs" rmmod xen_blkfront_rs
finish
