#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The main job: set up the host, build the test kernel (cached) and our
# modules, boot guests, load our drivers and show their disks working:
# the lsblk -t line, the driver's dmesg line and a data check, first on
# QEMU's virtio-blk, then on real Xen with Linux's xen-blkback.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
bash "$REPO/tools/testing/setup-host.sh"
KDIR=$(bash "$REPO/tools/testing/build-kernel.sh"); export KDIR
make -s -C "$REPO" KDIR="$KDIR"
export RESULTS=$CACHE/demo-results.txt LOGDIR=$CACHE/demo-logs
: > "$RESULTS"
show() { tr -d '\r' < "$1" | sed 's/^(XEN) //' | grep -E 'NAME|^ *x?vd[a-z]|TOPOLOGY|virtio_blk_rs|xen_blkfront_rs|blkfront:|DATA|^ok|^not ok' | grep -v 'KTAP' ; }
rc=0
bash "$REPO/tools/testing/virtio-guest.sh" -l demo-virtio \
    -d '256M,logical_block_size=512,physical_block_size=4096,min_io_size=4096,opt_io_size=1048576' \
    "$REPO/tools/testing/guest/demo-virtio.sh" || rc=1
echo "=== virtio_blk_rs on QEMU virtio-blk-pci (512/4096, io_min 4K, io_opt 1M) ==="
show "$LOGDIR/demo-virtio.log"
bash "$REPO/tools/testing/xen-guest.sh" -l demo-xen -p 1 -b 4096 -m 4096 -o 1048576 \
    "$REPO/tools/testing/guest/demo-xen.sh" || rc=1
echo "=== xen_blkfront_rs on Xen 4.17 + xen-blkback (persistent grants, 4K physical) ==="
show "$LOGDIR/demo-xen.log"
echo "full logs: $LOGDIR"
exit $rc
