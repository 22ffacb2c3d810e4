# SPDX-License-Identifier: GPL-2.0
# Xen domU with XEN_VBDS vbds (xen-guest.sh -V), all on one dom0 disk:
# every vbd becomes a disk, with the C driver and then with ours, under
# the same names and device numbers. From the 17th (xvdq) on, libxl gives
# a vbd its extended id (1 << 28 | disk << 8), whose disk number upstream
# takes from the id's low bits. Each disk writes a block of its own and
# xvda, on the same backing disk, reads every block back where it
# belongs: each vbd reaches the backend, at its own place.
. /guest/common.sh
NV=${XEN_VBDS:?}
want=$(awk -v n="$NV" 'BEGIN { for (i = 0; i < n; i++) printf "%sxvd%c", (i ? " " : ""), 97 + i }')
disks() { ls /sys/block | grep '^xvd' | sort | paste -sd' '; }
run() { # LABEL KO MODULE DRIVER
    local i d got bad=0
    check "$1: insmod $3" insmod "/lib/modules/$2" || return
    for i in $(seq 1 120); do [ "$(disks)" = "$want" ] && break; sleep 0.5; done
    expect_eq "$1: the disks of $NV vbds" "$(disks)" "$want"
    for d in $want; do echo "$d $(cat /sys/block/$d/dev 2>/dev/null)"; done > /tmp/devs-$1
    echo "DEVICE-NUMBERS $1: $(paste -sd, /tmp/devs-$1)"
    i=0
    for d in $want; do
        printf 'vbd %s by %s' "$d" "$1" | dd of=/tmp/blk bs=4096 count=1 conv=sync 2>/dev/null
        dd if=/tmp/blk of=/dev/$d bs=4096 seek=$((256 * (i + 1))) oflag=direct 2>/dev/null || echo "WRITE-FAILED $d"
        i=$((i + 1))
    done
    i=0
    for d in $want; do
        got=$(dd if=/dev/xvda bs=4096 skip=$((256 * (i + 1))) count=1 iflag=direct 2>/dev/null | tr -d '\000')
        [ "$got" = "vbd $d by $1" ] || { bad=$((bad + 1)); echo "MISPLACED $d: '$got'"; }
        i=$((i + 1))
    done
    expect_eq "$1: blocks the $NV disks wrote that xvda does not read back in their place" "$bad" 0
    unbind_vbds "$4"
    check "$1: rmmod $3" unload "$3"
}
run C xen-blkfront.ko xen-blkfront vbd
run RS xen_blkfront_rs.ko xen_blkfront_rs xen_blkfront_rs
expect_eq "ours names the $NV disks and numbers them as the C driver does" \
    "$(paste -sd, /tmp/devs-RS)" "$(paste -sd, /tmp/devs-C 2>/dev/null)"
finish
