#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# PID 1 (init=) of the deployment boots: a Debian trixie root on the disk under
# test, booted by Debian's kernel through the initramfs that update-initramfs
# made inside that root. Which boot this is, and what to expect, come from the
# kernel command line:
#   blkfront_test=installed  package installed: ours drives the root disk;
#                            writes a marker file for the next boot
#   blkfront_test=reboot     the marker reads back, still ours
#   blkfront_test=other      a kernel our modules are not built for (the
#                            next kernel upload), package installed: the C
#                            driver drives the root disk, the marker reads
#                            back
#   blkfront_test=removed    the C driver drives the root disk again, the
#                            marker still reads back
#   blkfront_disk=vda|xvda  blkfront_ours=<module>  blkfront_c=<module>
# The host counts the TAP lines; "GUEST-EXIT: N" ends the run.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mountpoint -q /proc || mount -t proc proc /proc
mountpoint -q /sys || mount -t sysfs sys /sys
mountpoint -q /dev || mount -t devtmpfs dev /dev
mountpoint -q /run || mount -t tmpfs tmpfs /run
. /guest/common.sh

arg() { tr ' ' '\n' < /proc/cmdline | sed -n "s/^$1=//p" | tail -1; }
phase=$(arg blkfront_test) disk=$(arg blkfront_disk) ours=$(arg blkfront_ours) cdrv=$(arg blkfront_c)
krel=$(uname -r)
pkg=blkfront-rs-modules-$krel
marker=/var/tmp/blkfront-marker
echo "DEPLOY-BOOT: phase=$phase disk=$disk ours=$ours c=$cdrv release=$krel"

# The module whose driver has the disk (the driver's "module" link).
disk_module() { basename "$(readlink "/sys/block/$1/device/driver/module" 2>/dev/null)"; }
root_line() { findmnt -n -o SOURCE,FSTYPE /; }
root_rw() { findmnt -n -o OPTIONS / | tr ',' '\n' | grep -qx rw; }

expect_eq "root file system mounted from /dev/$disk" "$(root_line)" "/dev/$disk ext4"
check "root file system mounted read-write" root_rw
case $phase in
installed | reboot) want=$ours other=$cdrv ;;
# other, removed: the C driver.
*) want=$cdrv other=$ours ;;
esac
expect_eq "$disk driven by $want" "$(disk_module "$disk")" "$want"
check "$other not loaded" test ! -d "/sys/module/$other"
echo "DMESG:"; dmesg 2>&1 | grep -E "$want|$disk|dmesg" | head -8

case $phase in
installed)
    check "package $pkg installed" sh -c "dpkg-query -W -f='\${Status}' $pkg | grep -q 'ok installed'"
    # The initramfs loaded ours by alias: a load of the C driver loads ours.
    check "modprobe.d file in effect (a load of $cdrv loads $ours)" sh -c "modprobe -c | grep -q '^install $cdrv .*$ours'"
    # Read back by the next boot (the check is there).
    { head -c 4M /dev/urandom > $marker && sha256sum $marker > $marker.sha256 && sync; } ||
        not_ok "writing the marker file"
    ;;
reboot)
    check "marker file written before the reboot reads back" sha256sum -c --quiet $marker.sha256
    ;;
other)
    check "marker file reads back on the C driver" sha256sum -c --quiet $marker.sha256
    check "$krel has no module $ours" sh -c "! modinfo -F filename $ours > /dev/null 2>&1"
    check "modprobe.d file in effect here too (a load of $cdrv tries $ours first)" sh -c "modprobe -c | grep -q '^install $cdrv .*$ours'"
    ;;
removed)
    check "marker file reads back on the C driver" sha256sum -c --quiet $marker.sha256
    check "package $pkg not installed" sh -c "! dpkg-query -W -f='\${Status}' $pkg 2>/dev/null | grep -q 'ok installed'"
    ;;
*)
    not_ok "known phase (blkfront_test='$phase')"
    ;;
esac

finish; rc=$?
echo "GUEST-EXIT: $rc"
sync
mount -o remount,ro / 2>/dev/null
# No init system to ask (minbase has no systemd): power off through sysrq,
# and wait for it without exec'ing anything from the read-only root.
echo o > /proc/sysrq-trigger
while :; do :; done
