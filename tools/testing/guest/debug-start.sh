#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# First script of a debug-kernel boot (suites/30-debug-virtio.sh, 35-debug-xen.sh): the checkers
# are on, and kmemleak forgets what boot left behind, so that
# debug-report.sh, last in the boot, speaks of what the checks did.
. /guest/common.sh
check "KASAN initialised" sh -c "dmesg | grep -q 'KernelAddressSanitizer initialized'"
check "lockdep on (/proc/lockdep)" test -r /proc/lockdep
K=/sys/kernel/debug/kmemleak
check "kmemleak on (booted with kmemleak=on)" test -w $K
[ -w $K ] && echo clear > $K
finish
