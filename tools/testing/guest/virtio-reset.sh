# SPDX-License-Identifier: GPL-2.0
# virtio guest: PCI function level resets of the disk under I/O, for our
# driver and then for the C one, the same sequence. The reset goes through
# the driver's reset_prepare/reset_done, which are also its freeze/restore
# (suspend, hibernation), as in upstream's virtio_blk: requests in flight
# end, new ones are held, the device is reset and its virtqueues deleted,
# then found again and the held requests sent. fio writes and verifies
# across the resets: no I/O error, no mismatch.
# RESET_HOW=s3 suspends the guest to RAM instead (ACPI S3: the driver's
# freeze, QEMU resets the device, the driver's restore) and the host's
# monitor relay wakes it; that needs a kernel with CONFIG_SUSPEND (Debian's:
# suites/60-debian-stock.sh) and S3=1.
#   PCIE=1 virtio-guest.sh -d 128M tools/testing/guest/virtio-reset.sh
#   S3=1 GUEST_ENV=RESET_HOW=s3 virtio-guest.sh -d 128M tools/testing/guest/virtio-reset.sh
. /guest/common.sh
RESETS=3
RESET_HOW=${RESET_HOW:-flr}
# fio writes and verifies RESET_SIZE RESET_LOOPS times: long enough to
# outlast the resets (about 8 s) on the test kernel; the debug boot, about
# ten times slower, passes smaller values in GUEST_ENV.
RESET_SIZE=${RESET_SIZE:-96M} RESET_LOOPS=${RESET_LOOPS:-8}
reset_under_io() { # MODULE
    local mod=$1 pci i inflight held=0 rc
    check "$mod: insmod" insmod "/lib/modules/$mod.ko"
    sleep 1
    if [ $RESET_HOW = s3 ]; then
        # "deep" is S3; s2idle would leave the device powered.
        echo deep > /sys/power/mem_sleep 2>/dev/null
        check "$mod: the kernel suspends to RAM (S3) ($(cat /sys/power/mem_sleep 2>&1))" \
            grep -q '\[deep\]' /sys/power/mem_sleep
    else
        # /sys/block/vda/device is the virtio device; its parent the PCI
        # function.
        pci=$(basename "$(dirname "$(readlink -f /sys/block/vda/device)")")
        check "$mod: $pci offers a function level reset ($(cat /sys/bus/pci/devices/$pci/reset_method 2>&1))" \
            grep -qw flr "/sys/bus/pci/devices/$pci/reset_method"
        echo flr > "/sys/bus/pci/devices/$pci/reset_method"
    fi
    # This run's kernel lines: those after the mark.
    dmesg_mark "reset-$mod"
    [ $RESET_HOW = s3 ] && s3_done=$(cat /sys/power/suspend_stats/success)
    fio --name=reset --filename=/dev/vda --direct=1 --ioengine=libaio --iodepth=16 \
        --rw=randwrite --bs=16k --size="$RESET_SIZE" --loops="$RESET_LOOPS" --verify=crc32c --verify_fatal=1 \
        --do_verify=1 --eta=never --output=/tmp/fio-reset.log &
    local fio_pid=$!
    for i in $(seq 1 $RESETS); do
        sleep 2
        # Reset while requests are in flight (fio switches between writing
        # and verifying): sampled for up to 2 s.
        inflight=$(inflight_sample vda)
        [ "$inflight" -gt 0 ] && held=$((held + 1))
        echo "reset $i ($RESET_HOW): $inflight requests in flight"
        if [ $RESET_HOW = s3 ]; then
            echo "HOST-CMD: system_wakeup-when-suspended"
            echo mem > /sys/power/state || echo "reset $i: suspend failed"
        else
            echo 1 > "/sys/bus/pci/devices/$pci/reset" || echo "reset $i: write to reset failed"
        fi
    done
    check "$mod: fio still running after the last reset" kill -0 $fio_pid
    wait $fio_pid
    rc=$?
    grep -E "err=|verify|bad" /tmp/fio-reset.log | head -5
    expect_eq "$mod: fio write+verify across $RESETS resets ($RESET_HOW): exit status" "$rc" 0
    check "$mod: requests were in flight at a reset ($held of $RESETS)" [ "$held" -gt 0 ]
    if [ $RESET_HOW = s3 ]; then
        # The guest did sleep: S3 entered and left each time.
        expect_eq "$mod: suspends to RAM that succeeded" \
            "$(($(cat /sys/power/suspend_stats/success) - s3_done))" "$RESETS"
        expect_eq "$mod: wake-ups from S3 in dmesg" \
            "$(dmesg_since "reset-$mod" | grep -c 'Waking up from system sleep state S3')" "$RESETS"
    fi
    if [ "$mod" = virtio_blk_rs ]; then
        expect_eq "$mod: a restore line per reset ($RESET_HOW)" \
            "$(dmesg_since "reset-$mod" | grep -c 'virtio_blk_rs.*restored: .* restore [0-9]')" "$RESETS"
        expect_eq "$mod: a freeze line per reset ($RESET_HOW)" \
            "$(dmesg_since "reset-$mod" | grep -c 'freeze: requests held until the restore')" "$RESETS"
        # The virtqueue names are made once per binding, not per restore.
        check "$mod: interrupts still named req.0 after the resets" grep -q 'req\.0' /proc/interrupts
    fi
    roundtrip "$mod: data round trip after the resets" vda 64k 16 2000
    check "$mod: no oops, warning or I/O error in dmesg" \
        [ "$(dmesg_since "reset-$mod" | grep -cE 'BUG|WARNING|Oops|I/O error|Call Trace')" = 0 ]
    check "$mod: rmmod" unload "$mod"
}
# RESET_DRIVERS: the debug boot runs ours only (the checkers are there for
# our code; the C driver's run is the baseline of the other boots).
for mod in ${RESET_DRIVERS:-virtio_blk_rs virtio_blk}; do
    reset_under_io $mod
done
finish
