# Xen domU: save and restore of the whole guest (xl save / xl restore, run
# by dom0) while our disk is busy. The disk must stay the same block device
# (no remove/re-add: an fd opened before keeps working), requests in flight
# at the suspend are resubmitted on the new backend, nothing fails and
# every byte written before and across the save reads back. Upstream:
# blkfront_resume / blkif_recover.
. /guest/common.sh
D=xvda
check "insmod xen_blkfront_rs" insmod /lib/modules/xen_blkfront_rs.ko
for i in $(seq 1 40); do [ -e /sys/block/$D ] && break; sleep 0.25; done
[ -e /sys/block/$D ] || { not_ok "disk $D appears"; finish; exit; }
devt=$(cat /sys/block/$D/dev)
dd if=/dev/urandom of=/tmp/a bs=1M count=8 2>/dev/null
dd if=/dev/urandom of=/tmp/b bs=1M count=32 2>/dev/null
dd if=/tmp/a of=/dev/$D bs=1M oflag=direct 2>/dev/null
# An fd opened before the save, read after the restore.
exec 3</dev/$D
# Writes in flight across the save: 1 MiB O_DIRECT, several requests each.
( dd if=/tmp/b of=/dev/$D bs=1M seek=64 oflag=direct 2>/tmp/dd.err; echo $? > /tmp/dd.rc ) &
writer=$!
sleep 1
echo "DOM0-CMD: sh /run/payload/save-restore"
wait $writer
expect_eq "writer across save/restore exits" "$(cat /tmp/dd.rc)" 0
cat /tmp/dd.err
# Give the restore time if the writer finished before the save.
for i in $(seq 1 240); do dmesg | grep -q "xen_blkfront_rs.*resum" && break; sleep 0.5; done
dmesg | grep -E "xen_blkfront_rs|PM:|Freezing|suspend" | tail -12
check "driver reports the resume" sh -c "dmesg | grep -q 'xen_blkfront_rs.*resum'"
expect_eq "same block device after restore" "$(cat /sys/block/$D/dev 2>/dev/null)" "$devt"
dd if=/dev/$D of=/tmp/a2 bs=1M count=8 iflag=direct 2>/dev/null
check "data written before the save reads back" cmp -s /tmp/a /tmp/a2
dd if=/dev/$D of=/tmp/b2 bs=1M skip=64 count=32 iflag=direct 2>/dev/null
check "data written across the save reads back" cmp -s /tmp/b /tmp/b2
check "fd opened before the save still reads" sh -c "dd bs=4k count=1 <&3 >/dev/null 2>&1"
exec 3<&-
dd if=/tmp/a of=/dev/$D bs=1M seek=128 oflag=direct 2>/dev/null
dd if=/dev/$D of=/tmp/a3 bs=1M skip=128 count=8 iflag=direct 2>/dev/null
check "new writes after the restore read back" cmp -s /tmp/a /tmp/a3
check "no I/O errors" sh -c "! dmesg | grep -qiE 'I/O error|critical target error'"
check "no oops or warning" sh -c "! dmesg | grep -qE 'WARNING:|BUG:|Oops|Kernel panic'"
cat /sys/kernel/debug/xen_blkfront_rs-$D/stats 2>/dev/null | head -20
for dev in /sys/bus/xen/drivers/xen_blkfront_rs/vbd-*; do
    [ -e "$dev" ] && echo "$(basename "$dev")" > /sys/bus/xen/drivers/xen_blkfront_rs/unbind
done
check "rmmod xen_blkfront_rs" unload xen_blkfront_rs
finish
