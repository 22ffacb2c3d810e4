#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The debug test kernel (KASAN, lockdep, DEBUG_ATOMIC_SLEEP, debugobjects,
# kmemleak) as a Xen PVH domU (dom0 stays on the test kernel; KASAN does not
# boot as a PV guest), with our Xen module built against it:
#  - fio verify of random 4k-256k writes (direct and indirect requests,
#    reads back) at QD1 and QD32, in both grant modes (persistent grants
#    with bounce copies, then feature_persistent=0: the request's own pages
#    granted before the ring lock), xl save/restore with requests held and
#    removal in the reconnect window, the ring broken under fio by fault
#    injection and the backend's detach, and the HVM guards (a CD-ROM vbd
#    left alone);
#  - hostile-backend scenarios (guest/xen-hostile.sh; the paths that free
#    or fail something belong under the checkers; suite 25 runs all of
#    them on the test kernel), one for each such path of ours: a bad
#    response id (the ring broken, what is in flight failed), the backend
#    killed (removal with requests in flight and the backend gone), a
#    read's pages written after its answer (the request held until the
#    backend unmaps, the data path parked, removal waiting), and a bounce
#    frame written after its answer (the frame retired, never reused).
#    late-read-after-response and late-write-cached take the path of
#    late-write-after-response (the driver holds a request whatever the
#    backend does with its pages, and whoever owns them),
#    late-write-persistent none of its own (persistent frames stay mapped
#    by design; the copy out at the answer is what fio-verify's persistent
#    run does here), closing-after-answering that of "killed" (what is
#    left in flight fails), keep-all-at-teardown that of a clean detach
#    (the backend's mappings are gone before the vbd's removal: every
#    grant revoked at once, none deferred). Each takes about 60 s here
#    (KASAN domU under TCG, with the checks of what each must show), so
#    all 32 would add about half an hour to a run whose budget is 45
#    minutes: the others run on the test kernel in suite 25 (where the
#    console scan still catches any WARN or oops), and all of them under
#    the checkers with
#      HOSTILE_DEBUG_SCENARIOS=all bash tools/testing/suites/35-debug-xen.sh
#    (or a comma list of names).
# xen-io.sh (data checks, discard, durability, rebinds) runs in both Xen
# boots of 20-xen.sh, not here: under KASAN it took 12.5 minutes.
# One vCPU: with two, a PVH domU nested under TCG triple-faulted once in
# user mode during fio, outside any driver. xen-suspend (a second
# save/restore) runs on PV in 20-xen.sh.
# The boot starts with guest/debug-start.sh and ends with
# guest/debug-report.sh: any KASAN, lockdep, sleep-in-atomic, debugobjects
# or kmemleak report fails the run with its first lines.
# run-tests.sh runs this suite after 30 and 55, beside suites 10 and 15
# (one host thread each), once 65's Xen boots are done. Never beside
# another Xen boot: two of them (two host threads each) on two cores made
# each 3 to 5 times slower (guest spinlocks whose holder is descheduled).
set -uo pipefail
T=$(cd "$(dirname "$0")/.." && pwd)
. "$T/lib.sh"
debug_suite xen
if ! (cd "$REPO" && cargo build --release -q -p xen-backend); then
    rec fail "cargo build -p xen-backend failed (debug-xen)"
    exit 1
fi
# The backend must still offer every one (a renamed
# scenario fails here rather than silently drop out).
scenarios=${HOSTILE_DEBUG_SCENARIOS:-id-out-of-range,killed,late-write-after-response,late-write-bounce}
list=$("$REPO/target/release/blkif-backend" --list)
[ "$scenarios" != all ] || scenarios=$(echo "$list" | awk '{ print $1 }' | paste -sd,)
offered=" $(echo "$list" | awk '{ print $1 }' | tr '\n' ' ') "
for s in ${scenarios//,/ }; do
    [[ $offered == *" $s "* ]] || rec fail "blkif-backend --list lacks scenario $s (debug-xen)"
done
GUEST_ENV="SCRIPTS=debug-start,fio-verify,xen-removal,xen-faults,xen-hvm-guards,xen-hostile,debug-report VERIFY_MOD=xen_blkfront_rs VERIFY_DISK=xvda VERIFY_SIZE=8M VERIFY_LOADS=-,feature_persistent=0 HOSTILE_SCENARIOS=$scenarios HOSTILE_EXPECT=$(echo "$list" | tr ' ' : | paste -sd,) HOSTILE_WHO=ours" \
    KO_DIR=$KO DOMU_TYPE=pvh DOMU_MEM=768 DOMU_KERNEL=$KDBG/arch/x86/boot/bzImage DOMU_MODULES=$KDBG/drivers/block DOMU_APPEND="kmemleak=on log_buf_len=4M" \
    USERSPACE_BACKEND=1 bash "$T/xen-guest.sh" -l debug-xen -p 1 -s 256M -c 1 -t $((1800 + 120 * $(echo "${scenarios//,/ }" | wc -w))) "$T/guest/multi.sh"
exit 0
