#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# dom0's init (PID 1 after switch_root). Brings up the Xen toolstack pieces a
# test needs, then runs the per-run payload: /dev/vdc is a tar archive with
# dom0-run.sh, the domU kernel, initramfs and config. Output goes to hvc0,
# which Xen forwards to the serial port that the host harness reads.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin:/usr/lib/xen-4.17/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev 2>/dev/null
mount -o remount,rw /
mkdir -p /dev/pts /run /tmp && mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /run
mount -t tmpfs tmpfs /tmp
mount -t debugfs debugfs /sys/kernel/debug
mount -t xenfs xenfs /proc/xen
mkdir -p /run/lock /run/payload /run/xen /var/log/xen/console /var/lib/xen /var/run/xen
tar -xf /dev/vdc -C /run/payload || echo "dom0: cannot unpack the payload from /dev/vdc"
sh /run/payload/dom0-run.sh
echo "DOM0-EXIT: $?"
sync
# Reboot, not halt: Xen then resets the machine and QEMU (-no-reboot) exits.
# Should sysrq be missing, PID 1 exiting panics dom0, which does the same.
echo b > /proc/sysrq-trigger
