# SPDX-License-Identifier: GPL-2.0
# Xen PV domU whose vbds are served by QEMU's xen-block ("qdisk", xl's
# backendtype=qdisk; xen-guest.sh BACKEND=qdisk) instead of xen-blkback:
# xvda raw on a dom0 disk, xvdb a qcow2 file. The C driver, then ours, on the
# same vbds, each with fio crc32c verify at QD1 and QD32 on both disks. The
# backend's keys and both drivers' queue limits are printed; ours must equal
# C's in the sizes and equal or beat them where more is better.
# GUEST_ENV: QDISK_SIZE (fio's --size per disk and depth, default 64M).
. /guest/common.sh
SIZE=${QDISK_SIZE:-64M}
DISKS="xvda xvdb"
LIMITS="max_segments max_hw_sectors_kb nr_requests logical_block_size physical_block_size discard_max_hw_bytes write_cache"
# devid of xvda, xvdb: 202 << 8 | 16 * index
devid() { case $1 in xvda) echo 51712 ;; xvdb) echo 51728 ;; esac; }

for d in $DISKS; do
    be=$(xs_read "device/vbd/$(devid $d)/backend")
    echo "BACKEND $d: $be params=$(xs_read "$be/params" 2>/dev/null)"
    for k in feature-persistent feature-max-indirect-segments multi-queue-max-queues max-ring-page-order \
        feature-flush-cache feature-barrier feature-discard sector-size physical-sector-size; do
        printf '%s=%s ' "$k" "$(xs_read "$be/$k" 2>/dev/null || echo -)"
    done | sed "s/^/BACKEND-KEYS $d: /"; echo
    check "$d is served by QEMU's qdisk (backend $be)" sh -c "echo '$be' | grep -q '/backend/qdisk/'"
done

# run_driver MODULE_FILE MODULE XENBUS_DRIVER WHO
run_driver() {
    local ko=$1 mod=$2 drv=$3 who=$4 d i qd a
    check "$who: insmod" insmod "/lib/modules/$ko.ko"
    for d in $DISKS; do
        for i in $(seq 1 40); do [ -b /dev/$d ] && break; sleep 0.25; done
        [ -b /dev/$d ] || { not_ok "$who: /dev/$d appears"; continue; }
        for a in $LIMITS; do
            echo "$(q $d $a)" > "/tmp/$who-$d-$a"; printf '%s=%s ' "$a" "$(q $d $a)"
        done | sed "s/^/LIMITS $who $d: /"; echo
        for qd in 1 32; do fio_verify "$who $d" $d "$SIZE" $qd; done
    done
    unbind_vbds "$drv"
    check "$who: rmmod" unload "$mod"
}

run_driver xen-blkfront xen_blkfront vbd C
run_driver xen_blkfront_rs xen_blkfront_rs xen_blkfront_rs ours
dmesg | grep xen_blkfront_rs | grep -E 'persistent|rings|indirect' | tail -4
for d in $DISKS; do
    for a in max_segments max_hw_sectors_kb nr_requests; do
        c=$(cat /tmp/C-$d-$a 2>/dev/null) o=$(cat /tmp/ours-$d-$a 2>/dev/null)
        check "$d $a: ours ($o) at least C's ($c)" sh -c "[ -n '$o' ] && [ -n '$c' ] && [ '$o' -ge '$c' ]"
    done
    for a in logical_block_size physical_block_size write_cache; do
        expect_eq "$d $a: ours as C's" "$(cat /tmp/ours-$d-$a 2>/dev/null)" "$(cat /tmp/C-$d-$a 2>/dev/null)"
    done
done
check "no oops, warning or I/O error in dmesg" sh -c "! dmesg | grep -E 'BUG|WARNING|Oops|I/O error|Call Trace'"
finish
