# SPDX-License-Identifier: GPL-2.0
# dom0 side of one Xen test run (sh, sourced values come from run.env).
# Starts xenstored/xenconsoled, loads xen-blkback with the run's
# feature_persistent, then boots the PV domU with its console attached: the
# domU's own test script prints the check lines and GUEST-EXIT.
# With NDOMU > 1 (xen-guest.sh -n) domUs 2..N start first, detached, their
# consoles logged by xenconsoled; after domU 1 they are waited for and their
# logs appended (check lines renamed "domU<i>: ...").
. /run/payload/run.env
# xen-guest.sh VBD_SCRIPT=block-topology: beside Xen's block and
# block-common.sh, which it runs and sources from its own directory. Xen's
# lock (locking.sh's claim_lock) stats /dev/stdin, a link udev makes on a
# real dom0 and devtmpfs does not: without it claim_lock loops until libxl
# kills the script (its 40 s hotplug timeout).
for fd in 0:stdin 1:stdout 2:stderr; do
    [ -e "/dev/${fd#*:}" ] || ln -s "/proc/self/fd/${fd%:*}" "/dev/${fd#*:}"
done
[ -e /dev/fd ] || ln -s /proc/self/fd /dev/fd
if [ -f /run/payload/block-topology ]; then
    install -m 755 /run/payload/block-topology /etc/xen/scripts/block-topology ||
        echo "dom0: cannot install block-topology into /etc/xen/scripts"
fi
modprobe xen-blkback feature_persistent="$PERSISTENT" max_queues="${MAX_QUEUES:-1}" || echo "dom0: modprobe xen-blkback failed"
xenstored --pid-file /run/xenstored.pid
xen-init-dom0 >/dev/null
NDOMU=${NDOMU:-1}
# Guest consoles are logged: domUs 2..N are read back from the logs, and
# domU 1's "DOM0-CMD: <cmd>" lines are run here (backend-side events such as
# xl block-detach, timed by the guest script itself).
xenconsoled --log=guest
(
    while [ ! -e /var/log/xen/console/guest-blktest.log ]; do sleep 1; done
    tail -F -n +1 /var/log/xen/console/guest-blktest.log 2>/dev/null |
        sed -un 's/\r//g; s/^DOM0-CMD: //p' | while IFS= read -r cmd; do
            echo "dom0: running '$cmd'"; sh -c "$cmd"
        done
) &
relay=$!
echo "dom0: backing disk /dev/vdb: phys $(cat /sys/block/vdb/queue/physical_block_size) log $(cat /sys/block/vdb/queue/logical_block_size), blkback feature_persistent=$(cat /sys/module/xen_blkback/parameters/feature_persistent)"
# xen-guest.sh BACKEND=qdisk: the qcow2 file QEMU's qdisk serves as xvdb.
if [ -n "${QCOW2_SIZE:-}" ]; then
    qemu-img create -q -f qcow2 /var/tmp/vbd1.qcow2 "$QCOW2_SIZE" || echo "dom0: qemu-img create failed"
    echo "dom0: qdisk backing file: $(qemu-img info /var/tmp/vbd1.qcow2 | grep -E '^(file format|virtual size)' | tr '\n' ' ')"
fi
# A common start second for all domUs: after the last one has been created.
T0=$(( $(date +%s) + 30 + 45 * (NDOMU - 1) ))
sed "s/@T0@/$T0/" /run/payload/domU.cfg > /run/domU.cfg
# Elapsed time is measured on dom0's uptime (monotonic), not on `date`: a
# wall-clock step must not end the wait early; the time-out message gives
# both and the restores still in progress.
uptime_s() { read -r up _ </proc/uptime; echo "${up%.*}"; }
start=$(uptime_s)
wall_start=$(date +%s)
i=2
while [ "$i" -le "$NDOMU" ]; do
    sed "s/@T0@/$T0/" /run/payload/domU$i.cfg > /run/domU$i.cfg
    xl create /run/domU$i.cfg >/dev/null 2>&1 || echo "dom0: xl create domU$i failed"
    i=$((i + 1))
done
if [ "${DOMU_TYPE:-pv}" = hvm ]; then
    # `xl create -c` would attach to an HVM guest's emulated serial port;
    # its kernel writes to the PV console (hvc0), as PV and PVH guests do.
    xl create /run/domU.cfg && timeout "$DOMU_TIMEOUT" xl console -t pv blktest
else
    timeout "$DOMU_TIMEOUT" xl create -c /run/domU.cfg
fi
rc=$?
# The guest had itself saved and restored (save-restore): its console goes
# on from the log until the restored domain exits.
# A shell test of each flag, not `ls flag*`: when a save ends the domain an
# earlier call restored, that call's waiter removes its flag between the
# glob's expansion and ls's stat, ls fails although the new call's flag
# exists, the wait ends, and the `xl destroy` below kills the domain being
# restored ("Failed to populate physmap", "Non-existant domain", seen in
# clean CI runs).
restoring() { for f in /run/domU-restore.*; do [ -e "$f" ] && return 0; done; return 1; }
while restoring && [ $(( $(uptime_s) - start )) -lt "$DOMU_TIMEOUT" ]; do sleep 1; done
restoring && rc=124
i=2
while [ "$i" -le "$NDOMU" ]; do
    while xl list "blktest$i" >/dev/null 2>&1 && [ $(( $(uptime_s) - start )) -lt "$DOMU_TIMEOUT" ]; do sleep 1; done
    xl list "blktest$i" >/dev/null 2>&1 && { echo "dom0: domU$i timed out"; xl destroy "blktest$i"; }
    tr -d '\r' < /var/log/xen/console/guest-blktest$i.log 2>/dev/null |
        sed -e "s/^\(not \)\{0,1\}ok \([0-9]*\) - /\1ok \2 - domU$i: /" \
            -e "s/^GUEST-EXIT: 0\$/ok 0 - domU$i: guest exit status 0/" \
            -e "s/^GUEST-EXIT: \(.*\)/not ok 0 - domU$i: guest exit status \1/" \
            -e "s/KTAP-\\(BEGIN\\|END\\)/KTAP_\\1_domU$i/"
    grep -q '^GUEST-EXIT' /var/log/xen/console/guest-blktest$i.log 2>/dev/null ||
        echo "not ok 0 - domU$i: no GUEST-EXIT line (hang, panic or timeout)"
    i=$((i + 1))
done
[ $rc = 124 ] && echo "dom0: domU timed out: $DOMU_TIMEOUT s allowed, $(( $(uptime_s) - start )) s elapsed (wall clock: $(( $(date +%s) - wall_start )) s); restores in progress: $(echo /run/domU-restore.*)"
if [ -r /run/payload/dom0-after.sh ]; then sh /run/payload/dom0-after.sh; fi
xl destroy blktest 2>/dev/null
kill "$relay" 2>/dev/null
exit 0
