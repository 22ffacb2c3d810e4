#!/bin/sh
# Xen domU: the ring breaks while fio has I/O in flight (the test-only
# fault-injection file, compiled in with CONFIG_FAULT_INJECTION, breaks it
# exactly as a bad backend response does). Every request must end: fio's
# in-flight I/O fails with EIO within a bounded time, dmesg names the fault
# once per ring, new I/O fails at once, no grant stays in use, the backend's
# detach completes, every grant granted is revoked at teardown, and the
# module unloads. Last in a boot: the disk is detached at the end.
. /guest/common.sh
D=xvda
check "insmod xen_blkfront_rs" insmod /lib/modules/xen_blkfront_rs.ko
for i in $(seq 1 40); do [ -e /sys/block/$D ] && break; sleep 0.25; done
[ -e /sys/block/$D ] && ok "disk $D appears" || { not_ok "disk $D appears"; finish; exit; }
DBG=/sys/kernel/debug/xen_blkfront_rs-$D
[ -w $DBG/inject ] && ok "fault-injection file present" || { not_ok "fault-injection file $DBG/inject present"; finish; exit; }
stat() { sed -n "s/^$1: //p" $DBG/stats; }
rings=$(stat rings)
dmesg -c >/dev/null

# 16 requests deep, a minute long unless the disk fails it.
fio --thread --name=inflight --filename=/dev/$D --direct=1 --ioengine=libaio \
    --iodepth=16 --rw=randwrite --bs=64k --size=64M --time_based --runtime=60 \
    > /tmp/fio-fault.log 2>&1 &
FIO=$!
sleep 3
check "fio has I/O in flight before the fault" kill -0 $FIO
t0=$(cut -d. -f1 /proc/uptime)
check "inject: break" sh -c "echo break > $DBG/inject"
# Bounded: fio must see its errors and exit well within 20 s.
n=0
while kill -0 $FIO 2>/dev/null && [ $n -lt 40 ]; do sleep 0.5; n=$((n + 1)); done
t1=$(cut -d. -f1 /proc/uptime)
if kill -0 $FIO 2>/dev/null; then
    not_ok "fio ended within 20 s of the fault"
    kill -9 $FIO 2>/dev/null
else
    ok "fio ended $((t1 - t0)) s after the fault"
fi
wait $FIO
rc=$?
check "fio failed (exit $rc), not completed" [ "$rc" != 0 ]
check "fio reports EIO" grep -q "Input/output error" /tmp/fio-fault.log
tail -3 /tmp/fio-fault.log
expect_eq "dmesg names the fault once per ring" "$(dmesg | grep -c 'fault injected on ring')" "$rings"
dmesg | grep 'fault injected on ring'
check "new I/O fails at once" sh -c "! timeout 10 dd if=/dev/$D of=/dev/null bs=4k count=1 iflag=direct 2>/dev/null"
expect_eq "no grant in use after the fault" "$(stat grants_in_use)" 0
expect_eq "backend errors counted" "$(stat backend_errors)" "$rings"

# The backend detaches the broken disk; it must go away and the module unload.
echo "DOM0-CMD: xl block-detach blktest xvda"
n=0
while [ -e /sys/block/$D ] && [ $n -lt 120 ]; do sleep 0.5; n=$((n + 1)); done
[ ! -e /sys/block/$D ] && ok "disk gone after backend detach" || not_ok "disk gone after backend detach (60 s)"
# One "ring torn down: G grants granted, R revoked" line per ring (dmesg
# was cleared before the fault).
dmesg | grep 'ring torn down:'
set -- $(dmesg | sed -n 's/.*ring torn down: \([0-9]*\) grants granted, \([0-9]*\) revoked.*/\1 \2/p' |
    awk '{ g += $1; r += $2; n++ } END { print n + 0, g + 0, r + 0 }')
expect_eq "one teardown line per ring" "$1" "$rings"
check "every grant granted is revoked ($2 granted, $3 revoked)" test "$2" -gt 0 -a "$2" = "$3"
check "rmmod xen_blkfront_rs" unload xen_blkfront_rs
finish
