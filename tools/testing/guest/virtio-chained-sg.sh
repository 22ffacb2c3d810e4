# SPDX-License-Identifier: GPL-2.0
# virtio guest: requests of many more data segments than a request's inline
# scatterlist (2 entries, as upstream), up to the largest seg_max QEMU
# offers. Run with a disk of seg_max 1022, -d '64M,queue-size=1024' (QEMU
# offers seg_max = queue size - 2), named by CHAIN_DISK (default vdb).
# Checks: max_segments is the device's seg_max (not capped to the inline
# entries); 4 MiB direct writes and reads from a buffer whose
# pages are not physically adjacent (so each page is a segment of its own)
# verify (crc32c); the removal line counts requests that took a chained
# table; no chained table is left behind when the tag set goes.
. /guest/common.sh
D=${CHAIN_DISK:-vdb}
check "insmod virtio_blk_rs" insmod /lib/modules/virtio_blk_rs.ko
for i in $(seq 1 40); do [ -b /dev/$D ] && break; sleep 0.5; done
expect_eq "$D: max_segments is the device's seg_max (queue-size 1024 - 2)" "$(q $D max_segments)" 1022
hw=$(q $D max_hw_sectors_kb)
echo $((hw < 4096 ? hw : 4096)) > /sys/block/$D/queue/max_sectors_kb
echo "CHAIN $D: max_segments=$(q $D max_segments) max_sectors_kb=$(q $D max_sectors_kb) max_segment_size=$(q $D max_segment_size)"
# fio's buffer: a tmpfs file whose pages were allocated one by one in turn
# with another file's, so no two of them are adjacent in memory and blk-mq
# cannot merge them into fewer segments (a fresh buffer's pages usually
# come in physically contiguous runs). printf is a shell builtin: 2048
# page-sized writes without a fork each.
mkdir -p /tmp/chain && mount -t tmpfs -o size=16m tmpfs /tmp/chain
exec 3> /tmp/chain/buf 4> /tmp/chain/gap
i=0
while [ $i -lt 1024 ]; do
    printf '%4096s' x >&3
    printf '%4096s' x >&4
    i=$((i + 1))
done
exec 3>&- 4>&-
fio --name=chain --filename=/dev/$D --direct=1 --rw=write --bs=4M --size=32M --iodepth=1 \
    --ioengine=psync --iomem=mmapshared:/tmp/chain/buf --verify=crc32c --do_verify=1 --verify_fatal=1 \
    --output=/tmp/chain.out > /dev/null 2>&1
fio_checked "fio 4 MiB direct writes + crc32c verify from a scattered buffer" /tmp/chain.out $?
check "rmmod virtio_blk_rs" rmmod virtio_blk_rs
chained=$(removal_count $D "chained scatterlists")
check "requests took a chained table ($D: ${chained:-no count})" [ "${chained:-0}" -gt 0 ]
check "every chained table was given back" sh -c "! dmesg | grep -q 'chained scatterlist tables not given back'"
umount /tmp/chain
finish
