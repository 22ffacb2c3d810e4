#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Xen PVH (or HVM) domU: upstream's HVM guards. dom0 attaches a CD-ROM vbd
# (xvdc); an HVM-type guest must leave it alone (an HVM guest keeps its
# emulated drive), with one line saying why; dom0 then forces the vbd away
# (xl cannot remove a vbd no frontend ever took, as with the C driver).
# In a PV guest the same vbd binds (guest/xen-compare.sh, XEN_CDROM=1).
. /guest/common.sh
gt=$(cat /sys/hypervisor/guest_type 2>/dev/null)
check "an HVM-type guest (guest_type $gt)" [ "$gt" = PVH -o "$gt" = HVM ]
lsmod | grep -q '^xen_blkfront_rs ' || check "insmod xen_blkfront_rs" insmod /lib/modules/xen_blkfront_rs.ko
dmesg_mark hvm-guards
echo "DOM0-CMD: sh /run/payload/cdrom-attach"
for i in $(seq 1 120); do [ -e /sys/bus/xen/devices/vbd-51744 ] && break; sleep 0.5; done
check "dom0 attached the CD-ROM vbd" test -e /sys/bus/xen/devices/vbd-51744
sleep 3
check "the CD-ROM vbd is not bound (no driver link)" test ! -e /sys/bus/xen/devices/vbd-51744/driver
check "no xvdc disk" test ! -e /sys/block/xvdc
n=$(dmesg_since hvm-guards | grep -c 'not binding: HVM guest: a CD-ROM vbd is left to the emulated drive')
expect_eq "one dmesg line says why" "$n" 1
echo "DOM0-CMD: sh /run/payload/cdrom-attach detach"
for i in $(seq 1 120); do [ -e /sys/bus/xen/devices/vbd-51744 ] || break; sleep 0.5; done
check "dom0 detached the CD-ROM vbd" test ! -e /sys/bus/xen/devices/vbd-51744
check "no oops or warning" sh -c "! dmesg | grep -qE 'WARNING:|BUG:|Oops'"
finish
