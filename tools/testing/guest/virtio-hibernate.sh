# SPDX-License-Identifier: GPL-2.0
# virtio guest: hibernation (suspend to disk) with the image on a
# virtio_blk_rs disk, while fio writes and verifies on another; needs a
# kernel with CONFIG_HIBERNATION (Debian's: suites/60-debian-stock.sh; the
# test kernel has none) and virtio-guest.sh's HIBERNATE=1, which boots the
# guest a second time on the same disks.
#   vda: fio's disk   vdb: the swap area that holds the image
# Boot 1: the driver is frozen for the snapshot, restored (thawed) to write
# the image to vdb, and the guest powers off.
# Boot 2 ("blkfront_resume" on the command line): this script loads the
# driver and points /sys/power/resume at vdb; the boot kernel reads the image
# through our driver, freezes it and jumps into the image, whose driver is
# restored on a reset device. The image goes on after its "echo disk" below:
# fio carries on and verifies, and the checks run there.
#   KERNEL_IMAGE=vmlinuz HIBERNATE=1 virtio-guest.sh -d 128M -d 256M virtio-hibernate.sh
. /guest/common.sh
swap=vdb

if grep -qw blkfront_resume /proc/cmdline; then
    check "resume boot: insmod virtio_blk_rs" insmod /lib/modules/virtio_blk_rs.ko
    sleep 1
    dev=$(cat /sys/block/$swap/dev)
    echo "resume boot: resuming from $swap ($dev)"
    echo "$dev" > /sys/power/resume
    # Reached only when the boot kernel found no image it could restore.
    not_ok "resume boot: the image on $swap ($dev) was restored"
    dmesg | grep -iE 'PM: |hibernat|swsusp|virtio_blk_rs' | tail -10
    exit 1
fi

check "insmod virtio_blk_rs" insmod /lib/modules/virtio_blk_rs.ko
sleep 1
check "the kernel offers hibernation ($(cat /sys/power/state))" grep -qw disk /sys/power/state
check "mkswap on $swap" mkswap /dev/$swap
check "swapon $swap" swapon /dev/$swap
# Power off once the image is written (no platform S4), the smallest image,
# and the "image restored" line the checks below look for.
echo shutdown > /sys/power/disk
echo 0 > /sys/power/image_size
echo 1 > /sys/power/pm_debug_messages
# This run's kernel lines: those after the mark (the image's log has it).
dmesg_mark hibernate
fio --name=hibernate --filename=/dev/vda --direct=1 --ioengine=libaio --iodepth=16 \
    --rw=randwrite --bs=16k --size=64M --loops=4 --verify=crc32c --verify_fatal=1 \
    --do_verify=1 --eta=never --output=/tmp/fio-hibernate.log &
fio_pid=$!
sleep 2
# Hibernate while requests are in flight (sampled for up to 2 s).
inflight=$(inflight_sample vda)
echo "HIBERNATING: $inflight requests in flight on vda"
echo disk > /sys/power/state
rc=$?
# From here on: the restored image in boot 2 (or boot 1 if hibernation
# failed, which the checks show).
expect_eq "echo disk > /sys/power/state: exit status" "$rc" 0
check "the image was restored (boot 2), not a failed hibernation in boot 1" \
    sh -c "dmesg | grep -q 'Hibernation image restored successfully'"
check "requests were in flight when hibernating ($inflight)" [ "$inflight" -gt 0 ]
expect_eq "our freeze lines (the snapshot's freeze, one per disk)" \
    "$(dmesg_since hibernate | grep -c 'freeze: requests held until the restore')" 2
expect_eq "our restore lines (after the image's restore, one per disk)" \
    "$(dmesg_since hibernate | grep -c 'virtio_blk_rs.*restored: .* restore [0-9]')" 2
check "fio still running after the resume" kill -0 $fio_pid
wait $fio_pid
frc=$?
grep -E "err=|verify|bad" /tmp/fio-hibernate.log | head -5
expect_eq "fio write+verify across the hibernation: exit status" "$frc" 0
check "swapoff $swap (the swap area reads back)" swapoff /dev/$swap
roundtrip "data round trip on $swap after the resume" $swap 64k 16 100
check "no oops, warning or I/O error in dmesg" \
    [ "$(dmesg_since hibernate | grep -cE 'BUG|WARNING|Oops|I/O error|Call Trace')" = 0 ]
check "rmmod virtio_blk_rs" unload virtio_blk_rs
finish
