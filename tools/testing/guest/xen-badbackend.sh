# SPDX-License-Identifier: GPL-2.0
# Xen domU: a backend value that fails validation in an optional key (our
# extension key minimum-io-size) is ignored with its default, in one
# message that names the key and the value: the disk comes up, nothing
# panics and the module unloads. (A bad value in a key without which no I/O
# is possible fails the probe instead: the hostile backend's huge-values
# scenario, guest/xen-hostile.sh.) dom0 (DOM0-CMD, see xen-guest.sh)
# overwrites minimum-io-size before the driver loads: blkback never writes
# that key, so the bad value is what the frontend reads at connect.
. /guest/common.sh
B='/local/domain/0/backend/vbd/$(xl domid blktest)/51712'
echo "DOM0-CMD: xenstore-write $B/minimum-io-size 3000"
sleep 8
check "insmod xen_blkfront_rs" insmod /lib/modules/xen_blkfront_rs.ko
sleep 5
check "the disk comes up with minimum-io-size = 3000 ignored" [ -e /sys/block/xvda ]
dmesg | grep -E "xen_blkfront_rs|vbd-" | tail -4
n=$(dmesg | grep -c "ignoring 1 optional backend key(s), defaults used; the first: backend key 'minimum-io-size' = '3000'")
expect_eq "messages naming the key and the value" "$n" 1
expect_eq "minimum_io_size is the default, the physical block size" \
    "$(cat /sys/block/xvda/queue/minimum_io_size 2>&1)" "$(cat /sys/block/xvda/queue/physical_block_size 2>&1)"
# xenbus_dev_fatal prints "<driver> vbd-N: <errno> <what>": none here.
n=$(dmesg | grep -cE "xen_blkfront_rs vbd-[0-9]+: [0-9]+ ")
expect_eq "xenbus error lines" "$n" 0
check "no oops or warning" sh -c "! dmesg | grep -qE 'WARNING:|BUG:|Oops|Kernel panic'"
check "a read from the disk" dd if=/dev/xvda of=/dev/null bs=4k count=16 iflag=direct
unbind_vbds
check "rmmod xen_blkfront_rs" unload xen_blkfront_rs
finish
