#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# xen_blkfront_rs on real Xen with Linux's xen-blkback and other backends,
# in five boots (a Xen boot under TCG costs about half a minute before
# its checks, so each runs several check scripts):
#  A: persistent grants, 4K physical sectors with io sizes published by the
#     hotplug script, 2 vCPUs / 2 rings: the C xen-blkfront first (its limits
#     recorded beside ours; O_DSYNC durability counted by blkback in dom0 for
#     C and for ours), then our data checks (discard, durability) and fio
#     verify, then
#     multi-queue (4-page rings), then max_indirect_segments 11 and 256 on
#     single-page rings: the reconnect must not leave the earlier
#     connection's ring-page-order behind (it did: blkback mapped stale
#     ring references and the 11-segment writes hung). Then xl
#     save/restore under fio onto a blkback with one ring and no persistent
#     grants, and back (the disk's two queues share the one ring). Last
#     (it detaches the vbd), the ring breaks under fio (fault injection):
#     EIO in bounded time, detach, grants accounted, unload. Also: a
#     CD-ROM vbd for both drivers (XEN_CDROM) and the idle-disk purge of
#     persistent grants (XEN_IDLE_PURGE).
#  B: no persistent grants, 512-byte sectors: data checks (discard,
#     durability), fio verify,
#     max_indirect_segments 11 and 256, an untrusted frontend (bounce buffers
#     without persistent grants), online resize, xl save + xl restore of the
#     domU under I/O, removal in the reconnect window after a restore
#     (fault injection holds the reconnect; held requests fail, no hang),
#     and last a backend detach under I/O.
set -uo pipefail
T=$(dirname "$0")/..
. "$T/lib.sh"
GUEST_ENV="SCRIPTS=xen-compare,xen-io,fio-verify,xen-mq,xen-indirect-limits,xen-restore-narrower,xen-faults XEN_CDROM=1 XEN_IDLE_PURGE=1 VERIFY_MOD=xen_blkfront_rs VERIFY_DISK=xvda XEN_EXPECT_PHYS=4096 XEN_EXPECT_MIN_IO=4096 XEN_EXPECT_OPT_IO=1048576" \
    bash "$T/xen-guest.sh" -l xen-p1-b4096 -p 1 -b 4096 -m 4096 -o 1048576 -c 2 -t 900 "$T/guest/multi.sh"
GUEST_ENV="SCRIPTS=xen-benign,xen-io,fio-verify,xen-indirect-limits,xen-untrusted,xen-resize,xen-suspend,xen-removal,xen-detach VERIFY_MOD=xen_blkfront_rs VERIFY_DISK=xvda XEN_EXPECT_PHYS=512 XEN_EXPECT_MIN_IO=512 XEN_EXPECT_OPT_IO=0" \
    bash "$T/xen-guest.sh" -l xen-p0-b512 -p 0 -b 512 -s 256M -t 900 "$T/guest/multi.sh"
# C: a backend whose published optional value fails validation (xen-badbackend.sh,
# in suite 25's boot: blkback's xvda gets minimum-io-size 3000).
# D: a grant table of 4 frames (2048 grants) and two vbds with 2 rings and
# 256 indirect segments each: both disks at once run out of grants, every
# request still completes (C driver first, same workload).
bash "$T/xen-guest.sh" -l xen-grants -p 1 -g 4 -c 2 -2 -s 256M -t 900 "$T/guest/xen-grants.sh"
# H: 18 vbds on one dom0 disk, C then ours: every vbd a disk, the 17th
# and 18th (xvdq, xvdr) by libxl's extended ids; names, device numbers
# and where each disk's block lands as with the C driver. No persistent
# grants: no bounce frames to allocate 18 times.
GUEST_ENV="XEN_VBDS=18" bash "$T/xen-guest.sh" -l xen-many-vbds -p 0 -V 18 -s 256M -t 600 "$T/guest/xen-many-vbds.sh"
# No PVH boot of the test kernel here: suite 35-debug-xen's boot is a PVH
# domU running its checks (fio verify, upstream's HVM guards, and more) with
# the same module source, and one more Xen boot would bring a slow machine's
# run near CI's 90 minutes.
# F: an HVM domU with PV drivers (what most clouds run: hvmloader, SeaBIOS
# and QEMU's device model in dom0, direct kernel boot, the emulated disks
# unplugged) whose vbds QEMU's xen-block ("qdisk", xl's backendtype=qdisk)
# serves in place of blkback: xvda raw on a dom0 disk, xvdb a qcow2 file.
# The C driver, then ours, fio verify at QD1 and QD32 on both, limits side
# by side.
GUEST_ENV="SCRIPTS=xen-guest-type,xen-qdisk EXPECT_GUEST_TYPE=HVM QDISK_SIZE=32M" \
    BACKEND=qdisk DOMU_TYPE=hvm DOMU_MEM=512 bash "$T/xen-guest.sh" -l xen-hvm-qdisk -c 1 -s 256M -t 900 "$T/guest/multi.sh"
# G (xen-badbackend, the userspace backend's checks and the hostile
# scenarios) is suite 25-xen-userspace.sh, in stage 1's second lane.
