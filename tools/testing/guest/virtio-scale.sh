# SPDX-License-Identifier: GPL-2.0
# virtio guest: one request queue per CPU when the device has more queues
# than CPUs, mapped to CPUs as the C driver maps them (the fixed cap of 16
# is gone, as upstream has none; the test kernel's NR_CPUS=4 keeps a guest
# from showing more than 4). Boot with a disk of more queues than CPUs:
#   SMP=4 virtio-guest.sh -d '64M,num-queues=8' tools/testing/guest/virtio-scale.sh
# SCALE_DISK names the disk (default vda).
. /guest/common.sh
d=${SCALE_DISK:-vda}
ncpu=$(grep -c '^processor' /proc/cpuinfo)
last=$((ncpu - 1))
check "guest has more than 2 CPUs ($ncpu)" test "$ncpu" -gt 2
lsmod | grep -q '^virtio_blk_rs ' || check "insmod virtio_blk_rs" insmod /lib/modules/virtio_blk_rs.ko
sleep 1
expect_eq "$d: one hardware queue per CPU" "$(ls /sys/block/$d/mq | wc -l)" "$ncpu"
cpumap() { for h in $(ls /sys/block/$d/mq | sort -n); do printf '%s:%s ' $h "$(cat /sys/block/$d/mq/$h/cpu_list)"; done; }
cpumap > /tmp/scale-map-rs
echo "SCALE $d queue:CPUs (ours): $(cat /tmp/scale-map-rs)"
dd if=/dev/urandom of=/tmp/scale bs=64k count=16 2>/dev/null
taskset -c "$last" dd if=/tmp/scale of="/dev/$d" bs=64k oflag=direct 2>/dev/null
taskset -c "$last" dd if="/dev/$d" of=/tmp/scale.back bs=64k count=16 iflag=direct 2>/dev/null
check "$d: O_DIRECT data round trip from CPU $last" cmp -s /tmp/scale /tmp/scale.back
check "rmmod virtio_blk_rs" unload virtio_blk_rs
check "removal line counts $ncpu queues" sh -c "dmesg | grep -q 'removed: .* on $ncpu queues'"
if [ -f /lib/modules/virtio_blk.ko ]; then
    check "insmod virtio_blk (C)" insmod /lib/modules/virtio_blk.ko
    sleep 1
    expect_eq "$d: CPUs mapped to queues as by the C driver" "$(cpumap)" "$(cat /tmp/scale-map-rs)"
    check "rmmod virtio_blk (C)" unload virtio_blk
fi
check "no warnings/oopses" sh -c "! dmesg | grep -E 'WARNING:|BUG:|Oops'"
finish
