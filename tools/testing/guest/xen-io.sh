#!/bin/sh
# Xen domU check for xen_blkfront_rs: connect, queue limits from sysfs, the
# per-disk dmesg line, data integrity with fio (direct segments, indirect
# requests, discard), debugfs statistics, KUnit, clean unload.
# Optional expectations come from the kernel command line of the domU or
# the environment: XEN_EXPECT_PHYS, XEN_EXPECT_MIN_IO, XEN_EXPECT_OPT_IO.
. /guest/common.sh
D=xvda
check "insmod xen_blkfront_rs" insmod /lib/modules/xen_blkfront_rs.ko
for i in $(seq 1 40); do [ -e /sys/block/$D ] && break; sleep 0.25; done
if [ ! -e /sys/block/$D ]; then
    not_ok "disk $D appears"
    dmesg | tail -30
    finish; exit
fi
ok "disk $D appears"
topology_line $D
line=$(dmesg | grep "blkfront: $D:" | tail -1)
echo "DMESG: $line"
case "$line" in
*"persistent grants:"*"indirect descriptors:"*"bounce buffer:"*"io_min:"*) ok "dmesg line in upstream form with io_min/io_opt" ;;
*) not_ok "dmesg line in upstream form with io_min/io_opt" ;;
esac
expect_eq "logical_block_size" "$(q $D logical_block_size)" 512
[ -n "$XEN_EXPECT_PHYS" ] && expect_eq "physical_block_size" "$(q $D physical_block_size)" "$XEN_EXPECT_PHYS"
[ -n "$XEN_EXPECT_MIN_IO" ] && expect_eq "minimum_io_size" "$(q $D minimum_io_size)" "$XEN_EXPECT_MIN_IO"
[ -n "$XEN_EXPECT_OPT_IO" ] && expect_eq "optimal_io_size" "$(q $D optimal_io_size)" "$XEN_EXPECT_OPT_IO"
expect_eq "max_segments (indirect, default max_indirect_segments=32)" "$(q $D max_segments)" 32
expect_eq "max_hw_sectors_kb" "$(q $D max_hw_sectors_kb)" 128
expect_eq "max_segment_size" "$(q $D max_segment_size)" 4096

# Raw write/read back with O_DIRECT through dd (4 KiB, direct segments).
dd if=/dev/urandom of=/tmp/pat bs=4096 count=256 2>/dev/null
check "dd write 1 MiB O_DIRECT" dd if=/tmp/pat of=/dev/$D bs=4096 count=256 oflag=direct 2>/dev/null
dd if=/dev/$D of=/tmp/back bs=4096 count=256 iflag=direct 2>/dev/null
expect_eq "dd read back matches" "$(md5sum < /tmp/back | cut -d' ' -f1)" "$(md5sum < /tmp/pat | cut -d' ' -f1)"
if command -v fio >/dev/null; then
    for bs in 4k 64k 128k 1m; do
        check "fio verify bs=$bs (direct, qd 8)" fio --name=v$bs --filename=/dev/$D --direct=1 \
            --ioengine=libaio --iodepth=8 --rw=randwrite --bs=$bs --size=16M --offset=32M \
            --verify=crc32c --do_verify=1 --verify_fatal=1 --output-format=terse --minimal >/tmp/fio.$bs 2>&1
    done
    fio --name=seqr --filename=/dev/$D --direct=1 --ioengine=libaio --iodepth=16 --rw=read \
        --bs=128k --size=64M --runtime=5 --time_based --group_reporting 2>&1 | grep -E "READ:|IOPS" | head -2
    fio --name=seqw --filename=/dev/$D --direct=1 --ioengine=libaio --iodepth=16 --rw=write \
        --bs=128k --size=64M --runtime=5 --time_based --group_reporting 2>&1 | grep -E "WRITE:|IOPS" | head -2
fi
if [ "$(q $D discard_max_bytes)" != 0 ]; then
    check "blkdiscard 1 MiB" sh -c "blkdiscard -o 0 -l 1048576 /dev/$D 2>/dev/null || true"
fi
check "flush (sync) succeeds" sync
S=/sys/kernel/debug/xen_blkfront_rs-$D/stats
if [ -r "$S" ]; then
    echo "STATS:"; cat "$S"
    req=$(grep '^requests:' "$S" | cut -d' ' -f2)
    [ "${req:-0}" -gt 0 ] && ok "debugfs stats count requests ($req)" || not_ok "debugfs stats count requests"
    ind=$(grep '^indirect_requests:' "$S" | cut -d' ' -f2)
    [ "${ind:-0}" -gt 0 ] && ok "indirect requests used ($ind)" || not_ok "indirect requests used"
else
    not_ok "debugfs stats at $S"
fi
dmesg | grep -iE 'blkfront|xen_blkfront_rs' | tail -5
ktap xen_blkfront_rs
check "rmmod xen_blkfront_rs" rmmod xen_blkfront_rs
[ ! -e /sys/block/$D ] && ok "disk gone after rmmod" || not_ok "disk gone after rmmod"
finish
