#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Xen domU: the disk is removed in the reconnect window. fio keeps requests
# on the ring (dom0's disk throttled), dom0 saves and restores the domain
# (the requests go back to blk-mq to wait for the new backend), fault
# injection (`hold-reconnect`, kernels with CONFIG_FAULT_INJECTION) keeps
# the frontend from reconnecting, and dom0 detaches the vbd: the held
# requests must fail with EIO, the disk go away in bounded time (before
# the fix, del_gendisk waited forever for requests nobody would issue) and
# the module unload. Then dom0 attaches the vbd again for the next script.
. /guest/common.sh
D=xvda
fault_injection_disk $D || { finish; exit; }
vbd=$(basename "$(readlink /sys/block/$D/device)")
dmesg_mark removal

# 24 writes in flight against dom0's throttled disk. At 8 IOPS the 16
# that were in flight drained while a slow guest froze for the save (a
# KASAN domU under a loaded host: 0 held); from the save on
# it serves 1 IOPS, so 24 outlast the freezer's 20 s timeout (as in
# xen-suspend.sh).
echo "HOST-CMD: block_set_io_throttle vbd 0 0 0 8 0 0"
sleep 2
fio --name=held --filename=/dev/$D --direct=1 --ioengine=libaio \
    --iodepth=24 --rw=randwrite --bs=64k --size=64M --time_based --runtime=600 \
    > /tmp/fio-held.log 2>&1 &
FIO=$!
fio_on_rings "before the save" 16
check "inject: hold-reconnect" sh -c "echo hold-reconnect > $DBG/inject"
echo "HOST-CMD: block_set_io_throttle vbd 0 0 0 1 0 0"
echo "DOM0-CMD: sh /run/payload/save-restore"
for i in $(seq 1 360); do dmesg_since removal | grep -q "not reconnecting" && break; sleep 0.5; done
echo "HOST-CMD: block_set_io_throttle vbd 0 0 0 0 0 0"
check "restored, the reconnect held by fault injection" \
    [ "$(dmesg_since removal | grep -c 'fault injection: not reconnecting')" -gt 0 ]
held=$(dmesg_since removal | sed -n 's/.*resuming: \([0-9]*\) requests in flight.*/\1/p' | tail -1)
check "requests in flight at the suspend wait for the new backend (${held:-none})" [ "${held:-0}" -gt 0 ]
check "fio still waits for them" kill -0 $FIO

# The backend goes away while the disk waits for it.
t0=$(cut -d. -f1 /proc/uptime)
echo "DOM0-CMD: xl block-detach blktest $D"
n=0
while [ -e /sys/block/$D ] && [ $n -lt 120 ]; do sleep 0.5; n=$((n + 1)); done
t1=$(cut -d. -f1 /proc/uptime)
[ ! -e /sys/block/$D ] && ok "disk removed in the reconnect window, $((t1 - t0)) s after the detach" ||
    not_ok "disk removed in the reconnect window (60 s)"
fio_fails_with_eio $FIO /tmp/fio-held.log "the removal" $t1
dmesg | grep -E "xen_blkfront_rs|blkfront" | tail -8
check "no oops or warning" sh -c "! dmesg | grep -qE 'WARNING:|BUG:|Oops|Kernel panic'"
check "rmmod xen_blkfront_rs" unload xen_blkfront_rs

# The vbd back for whatever runs next in this boot.
echo "DOM0-CMD: xl block-attach blktest format=raw,vdev=$D,access=rw,script=/run/payload/block-simple,target=/dev/vdb"
n=0
while [ ! -e /sys/bus/xen/devices/$vbd ] && [ $n -lt 120 ]; do sleep 0.5; n=$((n + 1)); done
check "dom0 attached $vbd again" test -e /sys/bus/xen/devices/$vbd
finish
