# SPDX-License-Identifier: GPL-2.0
# Xen domU: a backend value that fails validation is refused with one
# message that names the key and the value, no disk appears, nothing panics
# and the module unloads. dom0 (DOM0-CMD, see xen-guest.sh) overwrites our
# extension key minimum-io-size before the driver loads: blkback never
# writes that key, so the bad value is what the frontend reads at connect.
. /guest/common.sh
B='/local/domain/0/backend/vbd/$(xl domid blktest)/51712'
echo "DOM0-CMD: xenstore-write $B/minimum-io-size 3000"
sleep 8
check "insmod xen_blkfront_rs" insmod /lib/modules/xen_blkfront_rs.ko
sleep 5
check "no disk for minimum-io-size = 3000" [ ! -e /sys/block/xvda ]
dmesg | grep -E "xen_blkfront_rs|vbd-" | tail -4
n=$(dmesg | grep -c "'minimum-io-size' = '3000'")
expect_eq "messages naming the key and the value" "$n" 1
# xenbus_dev_fatal prints "<driver> vbd-N: <errno> <what>": one refusal, one line.
n=$(dmesg | grep -cE "xen_blkfront_rs vbd-[0-9]+: [0-9]+ ")
expect_eq "xenbus error lines" "$n" 1
check "no oops or warning" sh -c "! dmesg | grep -qE 'WARNING:|BUG:|Oops|Kernel panic'"
unbind_vbds
check "rmmod xen_blkfront_rs" unload xen_blkfront_rs
finish
