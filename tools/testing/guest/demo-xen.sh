# SPDX-License-Identifier: GPL-2.0
# Demo on Xen with xen-blkback: see demo.sh.
MOD=xen_blkfront_rs DISK=xvda
. /guest/demo.sh
