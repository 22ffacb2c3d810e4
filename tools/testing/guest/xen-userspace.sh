# SPDX-License-Identifier: GPL-2.0
# The userspace blkif backend (tools/testing/xen-backend, run in dom0 by
# xen/us-backend) well-behaved: it creates xvdb, and each driver (C, then
# ours) probes it, passes fio crc32c verify at QD32 and QD1, has its
# flushes reach the backend, shows the backend's VDISK_REMOVABLE, and lets
# the vbd detach and the module unload.
# GUEST_ENV: US_VERIFY_SIZE (fio --size at QD32 for ours, default 256M;
# C's run is the backend's baseline: 16M at both depths).
. /guest/common.sh
SIZE=${US_VERIFY_SIZE:-256M}
run_driver() { # MODULE_FILE MODULE XENBUS_DRIVER WHO
    local ko=$1 mod=$2 drv=$3 who=$4 ans
    check "$who: insmod" insmod "/lib/modules/$ko.ko"
    # VDISK_REMOVABLE in the backend's info: the disk says removable
    # (upstream: GENHD_FL_REMOVABLE).
    us_start - --info 2
    if check "$who: xvdb appears, served by the userspace backend" us_disk_appears; then
        use_disk "$who"
    else
        echo "DIAG: frontend state $(xs_read device/vbd/51728/state) backend $(xs_read device/vbd/51728/backend) state $(xs_read "$(xs_read device/vbd/51728/backend)/state")"
        dmesg | tail -5
    fi
    ans=$(us_stop)
    check "$who: vbd detached (dom0: $ans)" [ "$ans" = exited ]
    check "$who: xvdb gone" us_disk_gone 30
    unbind_vbds "$drv"
    check "$who: rmmod" unload "$mod"
}

use_disk() { # WHO
    local who=$1 be f0 f1
    be=$(xs_read device/vbd/51728/backend)
    check "$who: xvdb's backend is blkif-backend's node ($be)" sh -c "echo '$be' | grep -q '/backend/vbd-user/'"
    expect_eq "$who: VDISK_REMOVABLE: /sys/block/xvdb/removable" "$(cat /sys/block/xvdb/removable)" 1
    echo "LIMITS $who: $(for a in max_segments max_hw_sectors_kb logical_block_size physical_block_size write_cache; do printf '%s=%s ' $a "$(q xvdb $a)"; done)"
    fio_verify "$who" xvdb "$([ "$who" = ours ] && echo "$SIZE" || echo 16M)" 32
    fio_verify "$who" xvdb 16M 1
    f0=$(us_stats flushes)
    dsync_writes xvdb 16 0 > /dev/null 2>&1
    echo "BACKEND-STATS $who: $(xs_read "$be/test-stats") (requests reads writes flushes barriers discards errors indirect persistent barrier_writes delayed most_waiting)"
    f1=$(us_stats_at_least flushes $((f0 + 16)))
    check "$who: 16 O_DIRECT|O_DSYNC writes: the backend counted >= 16 flushes ($f0 -> $f1)" [ "$f1" -ge $((f0 + 16)) ]
    check "$who: indirect requests reached the backend ($(us_stats indirect))" [ "$(us_stats indirect)" -gt 0 ]
}

run_driver xen-blkfront xen_blkfront vbd C
run_driver xen_blkfront_rs xen_blkfront_rs xen_blkfront_rs ours
check "no oops, warning or I/O error in dmesg" sh -c "! dmesg | grep -E 'BUG|WARNING|Oops|I/O error|Call Trace'"
finish
