#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Xen domU: the same dd workloads with the C xen-blkfront and with
# xen_blkfront_rs, one after the other on the same vbd, for a side-by-side
# ratio (TCG timings: compare ratios, not absolute numbers); and for each
# driver the durability check (guest/common.sh): O_DSYNC writes reach
# xen-blkback with a flush each, counted in dom0. With XEN_CDROM=1 dom0
# also attaches a read-only CD-ROM vbd (xvdc) first: both drivers must
# answer the CD-ROM ioctls as upstream's blkif_ioctl does.
. /guest/common.sh
D=xvda
perf_dd() { # LABEL DD-ARGS...
    local label=$1 t0 t1; shift
    t0=$(cut -d' ' -f1 /proc/uptime)
    dd "$@" 2>/dev/null
    t1=$(cut -d' ' -f1 /proc/uptime)
    echo "PERF $label: $(awk -v a=$t0 -v b=$t1 'BEGIN { printf "%.1f MB/s (%.2f s)", 64 / (b - a + 0.001), b - a }')"
}
run() { # driver-label
    for i in $(seq 1 40); do [ -e /sys/block/$D ] && break; sleep 0.25; done
    [ -e /sys/block/$D ] && ok "$1: $D appears" || { not_ok "$1: $D appears"; return; }
    topology_line $D
    dmesg | grep "blkfront: $D:" | tail -1
    # HDIO_GETGEO (busybox fdisk asks it): ours answers as the C driver.
    fdisk -l /dev/$D 2>/dev/null | grep heads > /tmp/geo-$1
    echo "GEOMETRY $1 $D: $(cat /tmp/geo-$1)"
    check "$1: $D geometry is upstream's 255 heads, 63 sectors/track" grep -q ' 255 heads, 63 sectors/track' /tmp/geo-$1
    [ "$1" = RS ] && expect_eq "$D geometry (HDIO_GETGEO) same as the C driver's" "$(cat /tmp/geo-RS)" "$(cat /tmp/geo-C 2>/dev/null)"
    perf_dd "$1 write 1M" if=/dev/zero of=/dev/$D bs=1M count=64 seek=64 oflag=direct
    perf_dd "$1 read 1M" if=/dev/$D of=/dev/null bs=1M count=64 skip=64 iflag=direct
    perf_dd "$1 write 128k" if=/dev/zero of=/dev/$D bs=128k count=512 seek=1024 oflag=direct
    perf_dd "$1 read 128k" if=/dev/$D of=/dev/null bs=128k count=512 skip=1024 iflag=direct
    for j in 1 2 3 4; do
        dd if=/dev/zero of=/dev/$D bs=64k count=256 seek=$((2048 + 256 * j)) oflag=direct 2>/dev/null &
    done
    t0=$(cut -d' ' -f1 /proc/uptime); wait; t1=$(cut -d' ' -f1 /proc/uptime)
    echo "PERF $1 4x concurrent write 64k: $(awk -v a=$t0 -v b=$t1 'BEGIN { printf "%.1f MB/s", 64 / (b - a + 0.001) }')"
    durability "$1 durability" $D
    [ "${XEN_CDROM:-0}" = 1 ] && cdrom_checks "$1"
}
cdrom_checks() { # driver-label
    for i in $(seq 1 40); do [ -e /sys/block/xvdc ] && break; sleep 0.25; done
    check "$1: CD-ROM vbd xvdc appears" test -e /sys/block/xvdc || return
    expect_eq "$1: xvdc read-only" "$(cat /sys/block/xvdc/ro)" 1
    expect_eq "$1: xvdc data" "$(head -c 14 /dev/xvdc)" BLKFRONT-CDROM
    echo "xvdc $(cdrom-ioctl /dev/xvdc); xvda $(cdrom-ioctl /dev/$D)" > /tmp/cd-$1
    echo "CDROM-IOCTLS $1: $(cat /tmp/cd-$1)"
    check "$1: CD-ROM ioctls as upstream (capability only on xvdc, zeroed multisession on both)" \
        grep -qx 'xvdc get_capability=0 multisession=0 zeroed=1; xvda get_capability=-22 multisession=0 zeroed=1' /tmp/cd-$1
    [ "$1" = RS ] && expect_eq "CD-ROM ioctls same as the C driver's" "$(cat /tmp/cd-RS)" "$(cat /tmp/cd-C 2>/dev/null)"
}
if [ "${XEN_CDROM:-0}" = 1 ]; then
    echo "DOM0-CMD: sh /run/payload/cdrom-attach"
    for i in $(seq 1 120); do [ -e /sys/bus/xen/devices/vbd-51744 ] && break; sleep 0.5; done
    check "dom0 attached the CD-ROM vbd" test -e /sys/bus/xen/devices/vbd-51744
fi
# The C driver is the baseline: xen-guest.sh copies it from the test kernel
# (CONFIG_XEN_BLKDEV_FRONTEND=m), so failing to load it is a failure.
if check "insmod xen-blkfront (C)" insmod /lib/modules/xen-blkfront.ko; then
    run C
    unbind_vbds vbd
    check "rmmod xen-blkfront" rmmod xen-blkfront
fi
check "insmod xen_blkfront_rs" insmod /lib/modules/xen_blkfront_rs.ko
run RS
cat /sys/kernel/debug/xen_blkfront_rs-$D/stats
unbind_vbds
check "rmmod xen_blkfront_rs" rmmod xen_blkfront_rs
if [ "${XEN_CDROM:-0}" = 1 ]; then
    echo "DOM0-CMD: sh /run/payload/cdrom-attach detach"
    for i in $(seq 1 120); do [ -e /sys/bus/xen/devices/vbd-51744 ] || break; sleep 0.5; done
    check "dom0 detached the CD-ROM vbd" test ! -e /sys/bus/xen/devices/vbd-51744
fi
finish
