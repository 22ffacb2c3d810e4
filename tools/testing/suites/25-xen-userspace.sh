#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# xen_blkfront_rs against backends that fail or misbehave, in one Xen boot
# (a suite of its own so that run-tests.sh can run it beside the virtio
# suites, not after the other Xen boots):
# xen-badbackend.sh (blkback's xvda gets minimum-io-size 3000: ours
# ignores the bad optional value with its default, in one line), then the
# userspace blkif backend
# (tools/testing/xen-backend: blkif-backend in dom0 in place of blkback
# for xvdb). Well-behaved: C then ours, VDISK_REMOVABLE, fio
# crc32c verify of 128 MiB at QD32 (and QD1), flushes counted by the
# backend, detach, unload. Then ours under fio while the backend process
# is killed and started again (xen-benign.sh's restart row: ours
# reconnects, nothing lost). Then every scenario of `blkif-backend --list`
# (guest/xen-hostile.sh): ours must survive each and show what its line
# declares (asserted; suite 35-debug-xen runs four of them again under
# KASAN and lockdep). C's
# outcomes come from a slower run outside this suite (tools/testing/hostile-table.sh
# --run-c, which turns both logs into Documentation/hostile-backend.md).
set -uo pipefail
T=$(dirname "$0")/..
. "$T/lib.sh"
if (cd "$REPO" && cargo build --release -q -p xen-backend); then
    # Names for the scenarios to run; the lines, one GUEST_ENV word, for
    # what each must show.
    list=$("$REPO/target/release/blkif-backend" --list)
    scenarios=$(echo "$list" | awk '{ print $1 }' | paste -sd,) declared=$(echo "$list" | tr ' ' : | paste -sd,)
    GUEST_ENV="SCRIPTS=xen-badbackend,xen-userspace,xen-benign,xen-hostile BENIGN_ONLY=restart HOSTILE_SCENARIOS=$scenarios HOSTILE_EXPECT=$declared HOSTILE_WHO=ours US_VERIFY_SIZE=128M" \
        USERSPACE_BACKEND=1 bash "$T/xen-guest.sh" -l xen-userspace -m 4096 -o 1048576 -c 1 -t 2400 "$T/guest/multi.sh"
else
    echo "fail xen-userspace: cargo build -p xen-backend failed" >> "${RESULTS:-$CACHE/results.txt}"
fi
