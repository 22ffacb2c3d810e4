#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# virtio_blk_rs against a device that misbehaves: every scenario of
# `virtio-blk-backend --list` (tools/testing/virtio-backend, a
# vhost-user-blk device hot-plugged into the guest, guest/virtio-hostile.sh)
# on the test kernel, then a few of them again on the debug kernel (KASAN,
# lockdep, kmemleak: the two that take back or free what the device held;
# HOSTILE_DEBUG_SCENARIOS=all runs every one). Ours
# must survive each and show what its line declares; here, on the host,
# each scenario that strikes after the probe must have struck (the
# device's "fired" line). C's outcomes come from a run outside this suite
# (tools/testing/hostile-table.sh --virtio --run-c, which turns both logs
# into Documentation/hostile-device.md).
set -uo pipefail
T=$(cd "$(dirname "$0")/.." && pwd)
. "$T/lib.sh"
RESULTS=${RESULTS:-$CACHE/results.txt}
if ! (cd "$REPO" && cargo build --release -q -p virtio-backend); then
    echo "fail virtio-hostile: cargo build -p virtio-backend failed" >> "$RESULTS"
    exit 0
fi
list=$("$REPO/target/release/virtio-blk-backend" --list)
declared=$(echo "$list" | tr ' ' : | paste -sd,)
# fired LABEL SCENARIOS: a check per scenario that strikes after the probe.
fired() {
    local log=$CACHE/logs/$1.log s
    for s in ${2//,/ }; do
        grep -q "^$s strikes=probe " <<< "$list" && continue
        if tr -d '\r' < "$log" | grep -qx "HOST-VUB: fired $s"; then
            echo "pass $1: $s: the device struck"
        else
            echo "fail $1: $s: the device never struck (no 'fired $s' from virtio-blk-backend)"
        fi
    done >> "$RESULTS"
}
all=$(echo "$list" | awk '{ print $1 }' | paste -sd,)
GUEST_ENV="HOSTILE_SCENARIOS=$all HOSTILE_EXPECT=$declared HOSTILE_WHO=ours" \
    VHOST_USER=1 bash "$T/virtio-guest.sh" -l virtio-hostile -t 1800 "$T/guest/virtio-hostile.sh"
fired virtio-hostile "$all"

debug_suite virtio
scenarios=${HOSTILE_DEBUG_SCENARIOS:-used-id-out-of-range,stall}
[ "$scenarios" = all ] && scenarios=$all
GUEST_ENV="SCRIPTS=debug-start,virtio-hostile,debug-report HOSTILE_SCENARIOS=$scenarios HOSTILE_EXPECT=$declared HOSTILE_WHO=ours" \
    KDIR=$KDBG KO_DIR=$KO KERNEL_APPEND=$DEBUG_VIRTIO_APPEND \
    VHOST_USER=1 bash "$T/virtio-guest.sh" -l debug-virtio-hostile -t 1500 "$T/guest/multi.sh"
fired debug-virtio-hostile "$scenarios"
exit 0
