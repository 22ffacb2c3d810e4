#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The debug test kernel (KASAN, lockdep, DEBUG_ATOMIC_SLEEP, debugobjects,
# kmemleak: .config.fragments/debug/) with our virtio module built against
# it, in one boot:
#  - requests of more segments than the inline scatterlist (a third disk,
#    seg_max 1022: chained tables taken and given back under KASAN);
#  - data checks with the C driver beside ours, fio verify (64 MiB at QD1 and QD32 here: 256
#    MiB took five minutes a boot under KASAN and TCG; the test kernel's
#    boots verify 256 MiB), surprise removal of a disk under I/O.
# (Function level resets on the debug kernel: 32-debug-virtio-reset.sh.)
# The boot starts with guest/debug-start.sh (the checkers are on) and ends
# with guest/debug-report.sh: any KASAN, lockdep, sleep-in-atomic,
# debugobjects or kmemleak report fails the run with its first lines.
# run-tests.sh runs it beside suites 60 and 65; 35-debug-xen.sh is the
# Xen half of the debug kernel's checks.
set -uo pipefail
T=$(cd "$(dirname "$0")/.." && pwd)
. "$T/lib.sh"
debug_suite virtio
GUEST_ENV="SCRIPTS=debug-start,virtio-chained-sg,virtio-io,fio-verify,virtio-unplug,debug-report CHAIN_DISK=vdc VERIFY_MOD=virtio_blk_rs VERIFY_DISK=vdb VERIFY_SIZE=64M" \
    KDIR=$KDBG KO_DIR=$KO KERNEL_APPEND=$DEBUG_VIRTIO_APPEND \
    bash "$T/virtio-guest.sh" -l debug-virtio -t 1500 \
    -d '256M,num-queues=1,queue-size=128' \
    -d '256M,logical_block_size=512,physical_block_size=4096,min_io_size=4096,opt_io_size=1048576,num-queues=2,queue-size=256' \
    -d '64M,queue-size=1024' \
    "$T/guest/multi.sh"
exit 0
