#!/bin/bash
# xen_blkfront_rs on real Xen with Linux's xen-blkback: persistent grants on
# and off, 4K and 512-byte physical sectors, io sizes published by the
# hotplug script; the C xen-blkfront runs first in the compare run and its
# limits are recorded beside ours.
set -uo pipefail
T=$(dirname "$0")/..
GUEST_ENV="XEN_EXPECT_PHYS=4096 XEN_EXPECT_MIN_IO=4096 XEN_EXPECT_OPT_IO=1048576" \
    bash "$T/xen-guest.sh" -l xen-io-p1-b4096 -p 1 -b 4096 -m 4096 -o 1048576 "$T/guest/xen-io.sh"
GUEST_ENV="XEN_EXPECT_PHYS=512 XEN_EXPECT_MIN_IO=512 XEN_EXPECT_OPT_IO=0" \
    bash "$T/xen-guest.sh" -l xen-io-p0-b512 -p 0 -b 512 "$T/guest/xen-io.sh"
bash "$T/xen-guest.sh" -l xen-compare-p1-b4096 -p 1 -b 4096 -m 4096 -o 1048576 "$T/guest/xen-compare.sh"
bash "$T/xen-guest.sh" -l xen-untrusted-p1 -p 1 "$T/guest/xen-untrusted.sh"
bash "$T/xen-guest.sh" -l xen-resize -s 256M "$T/guest/xen-resize.sh"
bash "$T/xen-guest.sh" -l xen-detach "$T/guest/xen-detach.sh"
bash "$T/xen-guest.sh" -l xen-mq -c 2 "$T/guest/xen-mq.sh"
