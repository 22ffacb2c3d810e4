#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The seeds benchmark's virtio experiments in --smoke mode (one boot each
# of a single-threaded QEMU), through 50-bench-smoke.sh.
SMOKE_LABEL=bench-smoke-virtio SMOKE_EXPS=virtio,memory,attach,latency \
    SMOKE_OUT=${BLKFRONT_CACHE:-/var/cache/blkfront-rs}/bench-smoke-virtio \
    exec bash "$(dirname "$0")/50-bench-smoke.sh"
