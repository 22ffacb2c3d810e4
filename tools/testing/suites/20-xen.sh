#!/bin/bash
# Real Xen: the C xen-blkfront baseline, then ours, on the same backend.
set -uo pipefail
T=$(dirname "$0")/..
bash "$T/xen-guest.sh" -l xen-smoke-p1-b4096 -p 1 -b 4096 -m 4096 -o 1048576 "$T/guest/xen-smoke.sh"
