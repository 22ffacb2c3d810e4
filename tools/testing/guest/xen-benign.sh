#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Xen domU: an honest backend that is merely slow. QEMU throttles dom0's
# backing disk (drive "vbd") to 2 requests a second, so blkback answers
# xvda's requests slowly but answers them all; 32 concurrent 4 KiB O_DIRECT
# readers wait up to 16 s each, past io_timeout 5 s. Ours must lose nothing
# where the C driver loses nothing. Rows, each a line
# "BENIGN <row> <ours|C> <failed> <reads> <seconds>":
#   slow-32-t5      io_timeout 5 s, the default give_up_after_ms (0)
#   slow-32-t5-lim  the same with give_up_after_ms=5000 (a ring that
#                   answers is never given up on, whatever the limit)
#   stall-SECS-t5   fio writes and verifies at queue depth 32 while dom0's
#                   disk stalls for SECS s (throttled to one byte a second),
#                   then resumes; io_timeout 5 s (BENIGN_FULL only: 10, 45)
# C (no timeout: its queue has no io_timeout) runs both for the baseline.
# Each row proves it struck: the reads took the throttle's time, the stall
# held requests in flight, and ours counted request timeouts (debugfs
# request_timeouts).
. /guest/common.sh
D=xvda
# README's test command runs C's slow-32-t5 and ours' slow-32-t5-lim
# (about a minute); BENIGN_FULL=1 every row (Documentation/benign.md
# gives the command).
if [ -n "${BENIGN_FULL:-}" ]; then STALLS="10 45" STALLS_C="10 45"; else STALLS= STALLS_C=; fi

BENIGN_DISK=$D BENIGN_DRIVE=vbd

dmesg_mark benign
# The C driver first: it does not attach to a vbd ours was unbound from
# within the wait (the other scripts load it first too).
if [ -f /lib/modules/xen-blkfront.ko ] && check "insmod xen-blkfront (C)" insmod /lib/modules/xen-blkfront.ko; then
    for i in $(seq 1 40); do [ -e /sys/block/$D ] && break; sleep 0.25; done
    throttle 0 2
    benign_reads slow-32-t5 C 32
    throttle 0 0
    for secs in $STALLS_C; do benign_stall stall-$secs-t5 C $secs; done
    unbind_vbds vbd
    check "rmmod xen-blkfront (C)" unload xen_blkfront
fi
if fault_injection_disk $D; then
    echo 5000 > /sys/block/$D/queue/io_timeout
    for secs in $STALLS; do benign_stall stall-$secs-t5 ours $secs; done
    throttle 0 2
    [ -n "${BENIGN_FULL:-}" ] && benign_reads slow-32-t5 ours 32
    echo 5000 > /sys/module/xen_blkfront_rs/parameters/give_up_after_ms
    benign_reads slow-32-t5-lim ours 32
    echo 0 > /sys/module/xen_blkfront_rs/parameters/give_up_after_ms
    t=$(dstat request_timeouts)
    echo "BENIGN-TIMEOUTS $D ${t:-none}"
    check "ours counted request timeouts (${t:-none}), and failed no request" [ "${t:-0}" -gt 0 ]
    nb=$(dmesg_since benign | grep -c 'no response for')
    check "ours broke no ring ($nb 'no response for' lines)" [ "$nb" = 0 ]
    check "the disk still reads afterwards" dd if=/dev/$D of=/dev/null bs=4k count=1 iflag=direct
    unbind_vbds
    check "rmmod xen_blkfront_rs" unload xen_blkfront_rs
fi
throttle 0 0
finish
