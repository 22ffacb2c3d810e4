# SPDX-License-Identifier: GPL-2.0
# virtio guest: kmemleak over load / I/O / resize-free unload cycles.
# Cycles 2 and 4 load with get_id_timeout_ms=0: the GET_ID buffers are then
# freed by a late answer or after the reset at remove (virtio-serial.sh).
# Needs a kernel with CONFIG_DEBUG_KMEMLEAK booted with kmemleak=on (no
# kmemleak: a failure when booted so, a skip otherwise).
#   KERNEL_APPEND=kmemleak=on virtio-guest.sh -d 64M -d 64M tools/testing/guest/virtio-kmemleak.sh
. /guest/common.sh
K=/sys/kernel/debug/kmemleak
if [ ! -w $K ]; then
    no_kmemleak
    finish; exit
fi
echo clear > $K
for i in 1 2 3 4 5; do
    p=; [ $((i % 2)) = 0 ] && p=get_id_timeout_ms=0
    insmod /lib/modules/virtio_blk_rs.ko $p || not_ok "insmod $i $p"
    sleep 0.5
    cat /sys/block/vda/serial > /dev/null 2>&1
    dd if=/dev/urandom of=/dev/vdb bs=64k count=64 oflag=direct 2>/dev/null
    dd if=/dev/vda of=/dev/null bs=1M count=8 2>/dev/null
    blkdiscard -o 0 -l 1048576 /dev/vdb 2>/dev/null
    rmmod virtio_blk_rs || not_ok "rmmod $i"
done
# kmemleak reports objects unreferenced for 5 s and seen in two scans.
sleep 6; echo scan > $K; sleep 6; echo scan > $K
n=$(grep -c '^unreferenced object' $K)
echo "KMEMLEAK: $n unreferenced objects after 5 load/unload cycles"
grep -A12 '^unreferenced object' $K | head -60
expect_eq "kmemleak: unreferenced objects" "$n" 0
finish
