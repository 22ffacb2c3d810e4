# Demo: our virtio-blk driver binds the disk; show it and move some data.
. /guest/common.sh
check "insmod virtio_blk_rs" insmod /lib/modules/virtio_blk_rs.ko
sleep 1
lsblk -t 2>/dev/null || true
dmesg | grep -E 'virtio_blk_rs|vda' | tail -3
if [ -b /dev/vda ]; then
    dd if=/dev/urandom of=/tmp/pattern bs=1M count=4 2>/dev/null
    dd if=/tmp/pattern of=/dev/vda bs=1M oflag=direct 2>/dev/null
    dd if=/dev/vda of=/tmp/back bs=1M count=4 iflag=direct 2>/dev/null
    if cmp -s /tmp/pattern /tmp/back; then ok "DATA 4 MiB written and read back with O_DIRECT"; else not_ok "DATA 4 MiB read back differs"; fi
else
    not_ok "/dev/vda exists"
fi
finish
