# SPDX-License-Identifier: GPL-2.0
# Demo on QEMU virtio-blk: see demo.sh.
MOD=virtio_blk_rs DISK=vda
. /guest/demo.sh
