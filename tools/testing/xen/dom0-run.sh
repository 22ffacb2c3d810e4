# dom0 side of one Xen test run (sh, sourced values come from run.env).
# Starts xenstored/xenconsoled, loads xen-blkback with the run's
# feature_persistent, then boots the PV domU with its console attached: the
# domU's own test script prints the check lines and GUEST-EXIT.
. /run/payload/run.env
modprobe xen-blkback feature_persistent="$PERSISTENT" || echo "dom0: modprobe xen-blkback failed"
xenstored --pid-file /run/xenstored.pid
xen-init-dom0 >/dev/null
xenconsoled --log=none
echo "dom0: backing disk /dev/vdb: phys $(cat /sys/block/vdb/queue/physical_block_size) log $(cat /sys/block/vdb/queue/logical_block_size), blkback feature_persistent=$(cat /sys/module/xen_blkback/parameters/feature_persistent)"
cat /run/payload/domU.cfg > /run/domU.cfg
timeout "$DOMU_TIMEOUT" xl create -c /run/domU.cfg
rc=$?
[ $rc = 124 ] && echo "dom0: domU timed out after $DOMU_TIMEOUT s"
if [ -r /run/payload/dom0-after.sh ]; then sh /run/payload/dom0-after.sh; fi
xl destroy blktest 2>/dev/null
exit 0
