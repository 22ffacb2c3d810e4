# SPDX-License-Identifier: GPL-2.0
# Xen domU: the guest is the kind the boot asked for (GUEST_ENV
# EXPECT_GUEST_TYPE: PV, PVH or HVM, as /sys/hypervisor/guest_type says),
# and its xvda vbd is there for a PV driver (an HVM guest has unplugged the
# emulated disk).
. /guest/common.sh
expect_eq "guest type" "$(cat /sys/hypervisor/guest_type 2>&1)" "${EXPECT_GUEST_TYPE:?}"
check "the xvda vbd is there (vbd-51712)" test -e /sys/bus/xen/devices/vbd-51712
finish
