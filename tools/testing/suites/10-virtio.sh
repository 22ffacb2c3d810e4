#!/bin/bash
# virtio-blk guests: our driver's KUnit suite and disk checks.
set -uo pipefail
T=$(dirname "$0")/..
bash "$T/virtio-guest.sh" -l virtio-smoke -d '64M' -d '64M,logical_block_size=512,physical_block_size=4096,min_io_size=4096,opt_io_size=1048576' "$T/guest/virtio-smoke.sh"
