# SPDX-License-Identifier: GPL-2.0
# Guest check (busybox sh) for Debian's stock kernel: virtio_blk_rs built by
# tools/distro/debian-kdir.sh, loaded into Debian's own vmlinuz.
# Expects two disks:
#   vda: plain (512/512)
#   vdb: logical 512, physical_block_size=4096, min_io_size=4096, opt_io_size=1048576
# /lib/modules/deps.order lists Debian modules to insmod first (from
# modules.dep), /lib/modules/debian/virtio_blk.ko is Debian's C driver,
# /lib/modules/EXPECT_KREL the release the host expects.
. /guest/common.sh

echo "UNAME: $(uname -r) $(uname -v)"
expect_eq "running Debian's kernel release" "$(uname -r)" "$(cat /lib/modules/EXPECT_KREL)"
if [ -s /lib/modules/deps.order ]; then
    while read -r m; do
        check "insmod Debian dependency $(basename "$m")" insmod "/lib/modules/$m"
    done < /lib/modules/deps.order
else
    echo "NOTE: no Debian modules needed before virtio_blk_rs (virtio, virtio_pci, blk-mq built in)"
fi

# The C driver first, for the limits it reports on the same disks.
if [ ! -f /lib/modules/debian/virtio_blk.ko ]; then
    ok "Debian's virtio_blk as the baseline # SKIP the host found no virtio_blk.ko in the kernel's modules"
elif check "insmod Debian's virtio_blk (the baseline)" insmod /lib/modules/debian/virtio_blk.ko; then
    sleep 1
    for d in vda vdb; do [ -e /sys/block/$d ] && topology_line $d | sed 's/^TOPOLOGY/C-TOPOLOGY/'; done
    for a in logical_block_size physical_block_size minimum_io_size optimal_io_size; do
        echo "$(q vdb $a)" > /tmp/c-vdb-$a
    done
    check "rmmod Debian's virtio_blk" unload virtio_blk
fi

taint0=$(cat /proc/sys/kernel/tainted)
out=$(insmod /lib/modules/virtio_blk_rs.ko 2>&1); rc=$?
echo "INSMOD virtio_blk_rs: rc=$rc ${out:-(no output)}"
if [ $rc = 0 ]; then ok "insmod virtio_blk_rs into Debian's $(uname -r)"; else not_ok "insmod virtio_blk_rs into Debian's $(uname -r): $out"; fi
sleep 1
echo "DMESG:"; dmesg | grep -E 'virtio_blk_rs|virtio[0-9]+: \[vd|taint|module verification|Loading of' | tail -12
echo "TAINT: before=$taint0 after=$(cat /proc/sys/kernel/tainted)"
[ -r /sys/module/virtio_blk_rs/taint ] && echo "MODULE-TAINT: $(cat /sys/module/virtio_blk_rs/taint)"
check "module in /sys/module" [ -d /sys/module/virtio_blk_rs ]
check "virtio devices bound to virtio_blk_rs" sh -c 'ls /sys/bus/virtio/drivers/virtio_blk_rs/ | grep -q virtio'

for d in vda vdb; do
    if [ -b /dev/$d ]; then ok "/dev/$d exists"; topology_line $d; else not_ok "/dev/$d exists"; fi
done
expect_eq "vda size (64 MiB in 512 B sectors)" "$(cat /sys/block/vda/size 2>/dev/null)" 131072
expect_eq "vda logical_block_size" "$(q vda logical_block_size)" 512
expect_eq "vda physical_block_size" "$(q vda physical_block_size)" 512
expect_eq "vdb logical_block_size" "$(q vdb logical_block_size)" 512
expect_eq "vdb physical_block_size" "$(q vdb physical_block_size)" 4096
expect_eq "vdb minimum_io_size" "$(q vdb minimum_io_size)" 4096
expect_eq "vdb optimal_io_size" "$(q vdb optimal_io_size)" 1048576
expect_eq "vda max_segments (QEMU seg_max = queue-size - 2)" "$(q vda max_segments)" 254
for a in logical_block_size physical_block_size minimum_io_size optimal_io_size; do
    [ -s /tmp/c-vdb-$a ] && expect_eq "vdb $a same as Debian's virtio_blk" "$(q vdb $a)" "$(cat /tmp/c-vdb-$a)"
done
echo "LIMITS vda: write_cache=$(q vda write_cache) discard_max_hw_bytes=$(q vda discard_max_hw_bytes) write_zeroes_max_bytes=$(q vda write_zeroes_max_bytes) nr_requests=$(q vda nr_requests) max_hw_sectors_kb=$(q vda max_hw_sectors_kb) hw_queues=$(ls /sys/block/vda/mq | wc -l)"

# Data: O_DIRECT pattern write and read back, both disks, plus a 4k-granular one on vdb.
for d in vda vdb; do
    roundtrip "$d: 8 MiB O_DIRECT pattern write/read back identical" $d 1M 8 3
done
roundtrip "vdb: 4k O_DIRECT at an odd 4k offset read back identical" vdb 4k 64 7
check "vda: buffered write + fsync (flush)" sh -c 'dd if=/tmp/p of=/dev/vda bs=4k seek=900 conv=fsync 2>/dev/null'

check "rmmod virtio_blk_rs" unload virtio_blk_rs
check "disks gone after rmmod" sh -c '[ ! -e /sys/block/vda ] && [ ! -e /sys/block/vdb ]'
check "module gone after rmmod" [ ! -d /sys/module/virtio_blk_rs ]
check "no warnings/oopses in dmesg" sh -c "! dmesg | grep -E 'WARNING:|BUG:|Oops|general protection|refcount_t|Unknown symbol|disagrees about version'"
dmesg | grep -E 'Unknown symbol|disagrees' | head -5
finish
