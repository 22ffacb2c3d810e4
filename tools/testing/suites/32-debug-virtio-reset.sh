#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The debug test kernel (KASAN, lockdep, DEBUG_ATOMIC_SLEEP, debugobjects,
# kmemleak) in a q35 guest with our virtio module built against it:
# function level resets under fio verify (freeze and restore of the
# queues; ours only: the C driver's run is in suite 10). The boot starts
# with guest/debug-start.sh and ends with guest/debug-report.sh: any
# checker's report fails the run with its first lines.
# A suite of its own, not a boot of 30-debug-virtio: run-tests.sh runs it
# in the other lane (after 15-virtio-hostile, whose debug boot already
# reuses the modules 30 built), where it evens the two lanes out.
set -uo pipefail
T=$(cd "$(dirname "$0")/.." && pwd)
. "$T/lib.sh"
debug_suite virtio
GUEST_ENV="SCRIPTS=debug-start,virtio-reset,debug-report RESET_SIZE=32M RESET_LOOPS=2 RESET_DRIVERS=virtio_blk_rs" \
    KDIR=$KDBG KO_DIR=$KO KERNEL_APPEND="kmemleak=on log_buf_len=4M" PCIE=1 \
    bash "$T/virtio-guest.sh" -l debug-virtio-reset -t 900 -d 128M "$T/guest/multi.sh"
exit 0
