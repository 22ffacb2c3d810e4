# virtio guest: load our module, read its KUnit results, check the disk.
. /guest/common.sh
if insmod /lib/modules/virtio_blk_rs.ko; then ok "insmod virtio_blk_rs"; else not_ok "insmod virtio_blk_rs"; fi
ktap virtio_blk_rs
dmesg | grep -i 'virtio_blk_rs\|virtio_blk' | tail -5
if [ -e /sys/block/vda ]; then
    topology_line vda
fi
check "rmmod virtio_blk_rs" rmmod virtio_blk_rs
finish
