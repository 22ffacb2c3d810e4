# SPDX-License-Identifier: GPL-2.0
# The hostile device: for every scenario of virtio-blk-backend
# (tools/testing/virtio-backend; the host passes the names of its `--list`
# as HOSTILE_SCENARIOS, commas between them, and the whole list as
# HOSTILE_EXPECT, each line's words joined by ':' and the lines by ','),
# a driver meets a vhost-user-blk device that misbehaves that way (after
# its 64th request, while fio has requests in flight, for most; in its
# config from the start, or on one kind of request, for the others), then
# the device is unplugged as `device_del` does. The guest runs on
# virtio-guest.sh with VHOST_USER=1: "HOST-CMD: vub-attach SCENARIO N"
# hot-plugs device N, "HOST-CMD: vub-detach N" unplugs it.
# HOSTILE_WHO names the drivers, in order ("ours C" by default; suite 15
# runs "ours", tools/testing/hostile-table.sh --virtio --run-c runs "C").
# Each run prints one line
#   VHOSTILE <scenario> <ours|C> <survives|hangs|oops> <notes>
# which hostile-table.sh turns into Documentation/hostile-device.md. Ours
# must survive every scenario: no oops or warning, fio ended within
# HOSTILE_BOUND seconds of the unplug, no data that fio's crc32c verify
# flags as corrupt without an I/O error, the disk gone, the module
# unloaded. And ours must show what the scenario's line of `--list`
# declares: the disk up or the probe refused, fio's requests all
# succeeded, failed with EIO or failed, the fault named in one dmesg line
# at warning level or above. That the device struck is checked on the
# host (the device's "fired" lines). C's outcome is recorded only.
# A driver that hangs in a removal holds the ACPI hotplug thread, which
# every later plug waits for: its remaining scenarios are not run in this
# boot ("VHOSTILE-NOT-RUN <scenario> <who>"; for ours a failed check).
. /guest/common.sh
BOUND=${HOSTILE_BOUND:-40}
SCENARIOS=$(echo "${HOSTILE_SCENARIOS:-}" | tr ',' ' ')
check "the host passed virtio-blk-backend's scenario list ($(echo $SCENARIOS | wc -w) scenarios)" [ -n "$SCENARIOS" ]
mount -t debugfs none /sys/kernel/debug 2> /dev/null


# block_virtio: the virtio devices of device id 2 (block), one a line.
block_virtio() {
    local d
    for d in /sys/bus/virtio/devices/virtio*; do
        [ "$(cat $d/device 2>/dev/null)" = 0x0002 ] && basename $d
    done
}

# new_device BEFORE: waits up to 60 s for a block virtio device not in
# BEFORE and prints its name.
new_device() {
    local n=0 v
    while [ $n -lt 120 ]; do
        for v in $(block_virtio); do
            case " $1 " in *" $v "*) ;; *) echo $v; return 0 ;; esac
        done
        sleep 0.5; n=$((n + 1))
    done
    return 1
}

# disk_of VIRTIO: waits up to 30 s for its disk (or its probe's end
# without one) and prints the disk's name.
disk_of() {
    local n=0 d
    while [ $n -lt 60 ]; do
        d=$(ls /sys/bus/virtio/devices/$1/block 2>/dev/null | head -1)
        [ -n "$d" ] && [ -b /dev/$d ] && { echo $d; return 0; }
        sleep 0.5; n=$((n + 1))
    done
    return 1
}

# special SCENARIO WHO DISK: what a scenario must show beyond surviving,
# while the disk is up (sets SPECIAL; a check for ours).
special() {
    local s=$1 who=$2 d=$3 rc max
    SPECIAL=
    case $s in
        discard-errors)
            # The device fails discards: the discard fails, and fio's
            # reads and writes do not.
            blkdiscard -o 0 -l 1048576 /dev/$d > /dev/null 2>&1; rc=$?
            SPECIAL="blkdiscard of 1 MiB: exit $rc"
            [ $who = ours ] && check "$s: ours fails the discard the device failed ($SPECIAL)" [ $rc != 0 ] ;;
        get-id-never-answered)
            # The serial request the device keeps must not take the room
            # a largest request needs on an otherwise idle ring.
            max=$(q $d max_sectors_kb)
            dd if=/dev/zero of=/dev/$d bs=${max}k count=1 oflag=direct > /dev/null 2>&1; rc=$?
            # A driver that sends GET_ID when the file is read (upstream)
            # hangs the reader: in the background, read after 2 s.
            rm -f /tmp/serial; (cat /sys/block/$d/serial > /tmp/serial 2>&1 &); sleep 2
            SPECIAL="one ${max} KiB direct write (max_sectors_kb): exit $rc; serial read within 2 s: '$(cat /tmp/serial)'"
            [ $who = ours ] && check "$s: a largest request completes beside the unanswered GET_ID ($SPECIAL)" [ $rc = 0 ] ;;
    esac
}


hostile() { # SCENARIO WHO N KO MOD
    local s=$1 who=$2 n=$3 ko=$4 mod=$5 fio_pid= fio_rc= fio_eio= fio_corrupt= rc up=no v= d= before
    local fio_end=no gone=no unloaded=no outcome notes oops fault fault_lines waited most limit
    local mark=vhostile-$s-$who since marked=yes
    declared "$s"; rc=$?
    notes="strikes=$WANT_STRIKES disk=$WANT_DISK io=$WANT_IO fault=$WANT_FAULT"
    [ "$who" = ours ] && check "$s: virtio-blk-backend --list declares what ours must show ($notes)" [ $rc = 0 ]
    rm -f /tmp/h.out
    dmesg_mark "$mark"
    # Ours with a limit (give_up_after_ms): a device that answers nothing
    # for 5 s is given up on, as the table's scenarios of a stalled or
    # broken queue expect. By default ours waits, as C does
    # (virtio-benign.sh), and gives up at the removal: the stall scenario
    # runs with the default, so that its unplug shows the removal ending.
    limit=5000
    [ $s = stall ] && limit=0
    insmod "/lib/modules/$ko.ko" $([ $who = ours ] && echo give_up_after_ms=$limit)
    before=$(block_virtio | tr '\n' ' ')
    echo "HOST-CMD: vub-attach $s $n"
    if v=$(new_device "$before") && d=$(disk_of $v); then
        up=yes
        # 5 s, not blk-mq's 30: ours checks the limit at each timeout.
        echo 5000 > /sys/block/$d/queue/io_timeout
        special "$s" "$who" "$d"
        # Written and read back with crc32c checks interleaved (the reads
        # start early, so read-side scenarios strike on them too) and a
        # flush every 16 writes, by two jobs, one on each CPU (so on each
        # queue), each on a 16 MiB region of its own.
        fio --name=h --filename=/dev/$d --allow_file_create=0 --direct=1 --rw=randwrite \
            --bsrange=4k-128k --iodepth=16 --ioengine=libaio --size=16M --offset_increment=16M \
            --numjobs=2 --cpus_allowed=0,1 --cpus_allowed_policy=split --fsync=16 \
            --verify=crc32c --verify_backlog=8 --verify_fatal=1 > /tmp/h.out 2>&1 &
        fio_pid=$!
        # Until fio ends, at most 60 s: the scenarios of a stalled or
        # broken queue end their requests on their own (a timeout) or
        # at the unplug. Without a limit a stalled queue holds fio's
        # requests until the unplug: 15 s (the stall strikes after the
        # 64th request).
        waited=0 most=120
        [ $who = ours ] && [ $limit = 0 ] && most=30
        while kill -0 $fio_pid 2>/dev/null && [ $waited -lt $most ]; do sleep 0.5; waited=$((waited + 1)); done
        notes="disk $d up; fio ran $((waited / 2)) s before the unplug"
    else
        notes="no disk (device ${v:-none}, driver $(basename "$(readlink /sys/bus/virtio/devices/$v/driver 2>/dev/null)" 2>/dev/null))"
        SPECIAL=
    fi
    echo "HOST-CMD: vub-detach $n"
    if [ -n "$fio_pid" ]; then
        waited=0
        while kill -0 $fio_pid 2>/dev/null && [ $waited -lt $((BOUND * 2)) ]; do sleep 0.5; waited=$((waited + 1)); done
        if kill -0 $fio_pid 2>/dev/null; then
            kill -9 $fio_pid 2>/dev/null
        else
            fio_end=yes; wait $fio_pid; fio_rc=$?
            fio_eio=no; grep -q 'Input/output error' /tmp/h.out && fio_eio=yes
            fio_corrupt=no; grep -qE 'verify: bad|crc32c: verify failed|bad magic' /tmp/h.out && fio_corrupt=yes
            notes="$notes; fio exit $fio_rc$([ $fio_eio = yes ] && echo ' (EIO)')$([ $fio_corrupt = yes ] && echo ', verify flagged corrupt data')"
        fi
    else
        fio_end=yes
    fi
    # The device gone (the removal done) within the bound.
    waited=0
    while [ -n "$v" ] && [ -e /sys/bus/virtio/devices/$v ] && [ $waited -lt $((BOUND * 2)) ]; do sleep 0.5; waited=$((waited + 1)); done
    [ -z "$v" ] || [ ! -e /sys/bus/virtio/devices/$v ] && gone=yes
    [ $gone = yes ] && { bounded 20 rmmod "$mod"; [ $? = 0 ] && unloaded=yes; }
    since=$(dmesg_since "$mark") || marked=no
    oops=$(printf '%s\n' "$since" | grep -cE 'BUG|Oops|WARNING|Call Trace|KASAN|lockdep|general protection')
    # The driver's and the virtio core's lines about this device at
    # warning level or above (busybox dmesg -r keeps the <level>
    # prefix): the first names the fault, else the block layer's first
    # I/O error line. The driver's own are counted: the virtio core's
    # ("virtioN: req.0:id 133 out of range") and the driver core's ("probe
    # with driver ... failed") are not the driver's.
    dmesg -r | sed -n "/blkfront-test: mark $mark\$/,\$p" | sed -n 's/^<\([0-4]\)>\[[ 0-9.]*\] //p' > /tmp/h.warn
    fault_lines=0
    [ -n "$v" ] && fault_lines=$(grep " $v: " /tmp/h.warn | grep -cvE " $v: (req\.[0-9]+:|probe with driver )")
    fault=$( { [ -n "$v" ] && grep " $v: " /tmp/h.warn; [ -n "$d" ] && grep "$d" /tmp/h.warn; } | head -1)
    if [ "$oops" -gt 0 ]; then outcome=oops
    elif [ $fio_end = no ] || [ $gone = no ] || [ "$unloaded" = no ]; then outcome=hangs
    # io=any: the device itself writes the data after answering (the
    # notes say what fio saw).
    elif [ "$fio_corrupt" = yes ] && [ "$fio_eio" != yes ] && [ "$WANT_IO" != any ]; then outcome=corrupts
    else outcome=survives; fi
    notes="$notes${SPECIAL:+; $SPECIAL}; fio ended: $fio_end; device gone: $gone; unloaded: $unloaded${fault:+; dmesg: $fault}"
    echo "VHOSTILE $s $who $outcome $notes"
    if [ "$who" = ours ]; then
        check "$s: ours survives ($notes)" [ $outcome = survives ]
        check "$s: the kernel log still holds the scenario's mark (the lines read are its own)" [ $marked = yes ]
        case $WANT_DISK in
            up) check "$s: ours brings the disk up" [ $up = yes ] ;;
            refused) check "$s: ours refuses the device at probe (device ${v:-none})" [ -n "$v" -a $up = no ] ;;
        esac
        case $WANT_IO in
            ok) check "$s: fio's requests all succeed with ours (fio exit ${fio_rc:-none})" [ "$fio_rc" = 0 ] ;;
            eio) check "$s: ours fails fio's requests with EIO (fio exit ${fio_rc:-none}, EIO: ${fio_eio:-none})" fio_failed eio ;;
            fail) check "$s: fio's requests fail with ours (fio exit ${fio_rc:-none})" fio_failed ;;
        esac
        if [ "$WANT_FAULT" = named ]; then
            check "$s: ours names the fault in one dmesg line ($fault_lines: $fault)" [ "$fault_lines" = 1 ]
        fi
    fi
    [ $outcome = survives ]
}

any_stuck= n=0
for who in ${HOSTILE_WHO:-ours C}; do
    stuck=
    for s in $SCENARIOS; do
        n=$((n + 1))
        if [ -n "$stuck" ]; then
            echo "VHOSTILE-NOT-RUN $s $who"
            [ $who = ours ] && not_ok "$s: ours not run (the hotplug thread stuck since $stuck)"
            continue
        fi
        case $who in
            ours) hostile "$s" ours $n virtio_blk_rs virtio_blk_rs || { [ -e /sys/module/virtio_blk_rs ] && stuck=$s; } ;;
            C) hostile "$s" C $n virtio_blk virtio_blk || { [ -e /sys/module/virtio_blk ] && stuck=$s; } ;;
        esac
    done
    any_stuck=$any_stuck$stuck
done
# A hung removal holds its device's lock: the init's sync and even a
# forced power-off (device_shutdown takes the lock) wait forever. Say the
# exit status here and have QEMU quit.
if [ -n "$any_stuck" ]; then
    finish; rc=$?
    echo "GUEST-EXIT: $rc"
    echo "HOST-CMD: quit"
    sleep 60
fi
finish
