# virtio guest: PCI function level resets of the disk under I/O, for our
# driver and then for the C one, the same sequence. The reset goes through
# the driver's reset_prepare/reset_done, which are also its freeze/restore
# (suspend, hibernation), as in upstream's virtio_blk: requests in flight
# end, new ones are held, the device is reset and its virtqueues deleted,
# then found again and the held requests sent. fio writes and verifies
# across the resets: no I/O error, no mismatch.
#   PCIE=1 virtio-guest.sh -d 128M tools/testing/guest/virtio-reset.sh
. /guest/common.sh
RESETS=3
# fio writes and verifies RESET_SIZE RESET_LOOPS times: long enough to
# outlast the resets (about 8 s) on the test kernel; the debug boot, about
# ten times slower, passes smaller values in GUEST_ENV.
RESET_SIZE=${RESET_SIZE:-96M} RESET_LOOPS=${RESET_LOOPS:-8}
since() { dmesg | tail -n +$((base + 1)); }
reset_under_io() { # MODULE
    local mod=$1 pci i try inflight held=0 rc base
    check "$mod: insmod" insmod "/lib/modules/$mod.ko"
    sleep 1
    # /sys/block/vda/device is the virtio device; its parent the PCI function.
    pci=$(basename "$(dirname "$(readlink -f /sys/block/vda/device)")")
    check "$mod: $pci offers a function level reset ($(cat /sys/bus/pci/devices/$pci/reset_method 2>&1))" \
        grep -qw flr "/sys/bus/pci/devices/$pci/reset_method"
    echo flr > "/sys/bus/pci/devices/$pci/reset_method"
    # This run's kernel lines (the log is not cleared: debug-report.sh,
    # after this script in a debug boot, reads all of it).
    base=$(dmesg | wc -l)
    fio --name=reset --filename=/dev/vda --direct=1 --ioengine=libaio --iodepth=16 \
        --rw=randwrite --bs=16k --size="$RESET_SIZE" --loops="$RESET_LOOPS" --verify=crc32c --verify_fatal=1 \
        --do_verify=1 --output=/tmp/fio-reset.log &
    local fio_pid=$!
    for i in $(seq 1 $RESETS); do
        sleep 2
        # Reset while requests are in flight (fio switches between writing
        # and verifying): sample up to 2 s for a moment that has some.
        for try in $(seq 1 100); do
            inflight=$(awk '{print $1 + $2}' /sys/block/vda/inflight)
            [ "$inflight" -gt 0 ] && break
            usleep 20000
        done
        [ "$inflight" -gt 0 ] && held=$((held + 1))
        echo "reset $i: $inflight requests in flight"
        echo 1 > "/sys/bus/pci/devices/$pci/reset" || echo "reset $i: write to reset failed"
    done
    check "$mod: fio still running after the last reset" kill -0 $fio_pid
    wait $fio_pid
    rc=$?
    grep -E "err=|verify|bad" /tmp/fio-reset.log | head -5
    expect_eq "$mod: fio write+verify across $RESETS resets: exit status" "$rc" 0
    check "$mod: requests were in flight at a reset ($held of $RESETS)" [ "$held" -gt 0 ]
    if [ "$mod" = virtio_blk_rs ]; then
        expect_eq "$mod: a restore line per reset" \
            "$(since | grep -c 'virtio_blk_rs.*restored: .* restore [0-9]')" "$RESETS"
        expect_eq "$mod: a freeze line per reset" \
            "$(since | grep -c 'freeze: requests held until the restore')" "$RESETS"
        # The virtqueue names are made once per binding, not per restore.
        check "$mod: interrupts still named req.0 after the resets" grep -q 'req\.0' /proc/interrupts
    fi
    roundtrip "$mod: data round trip after the resets" vda 64k 16 2000
    check "$mod: no oops, warning or I/O error in dmesg" \
        sh -c "! dmesg | tail -n +$((base + 1)) | grep -E 'BUG|WARNING|Oops|I/O error|Call Trace'"
    check "$mod: rmmod" unload "$mod"
}
reset_under_io virtio_blk_rs
reset_under_io virtio_blk
finish
