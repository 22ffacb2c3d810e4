# SPDX-License-Identifier: GPL-2.0
# The hostile backend: for every scenario of blkif-backend
# (tools/testing/xen-backend; the host passes the names of its `--list`
# as HOSTILE_SCENARIOS, commas between them, and the whole list as
# HOSTILE_EXPECT, each line's words joined by ':' and the lines by ','),
# a driver meets a userspace backend that misbehaves that way (once the
# disk is connected and fio has requests in flight, for most), then the
# vbd is detached as xl block-detach does.
# HOSTILE_WHO names the drivers, in order ("ours C" by default; suite 25
# runs "ours", tools/testing/hostile-table.sh --run-c runs "C"). Each run
# prints one line
#   HOSTILE <scenario> <ours|C> <survives|hangs|oops> <notes>
# which tools/testing/hostile-table.sh turns into
# Documentation/hostile-backend.md. Ours must survive every scenario: no
# oops or warning, fio ended within HOSTILE_BOUND seconds of the detach,
# the disk gone, the module unloaded, each ring torn down with every grant
# it made revoked (or handed to a deferred release). And ours must show
# what the scenario's line of `--list` declares (scenario::Expect in the
# backend): the disk up or the probe refused, the backend's test-fired
# node where it strikes after its 64th request, fio's requests all
# succeeded, failed with EIO or failed, the fault named in one dmesg line.
# C's outcome is recorded only.
# A driver that hangs takes xenbus with it (the removal that hangs runs in
# the xenwatch thread, which every later probe and state change waits
# for): its remaining scenarios are not run in this boot, each printed as
# "HOSTILE-NOT-RUN <scenario> <who>" (hostile-table.sh --run-c goes on in
# a fresh boot; for ours each is a failed check).
. /guest/common.sh
BOUND=${HOSTILE_BOUND:-40}
SCENARIOS=$(echo "${HOSTILE_SCENARIOS:-}" | tr ',' ' ')
check "the host passed blkif-backend's scenario list ($(echo $SCENARIOS | wc -w) scenarios)" [ -n "$SCENARIOS" ]
US_DEVID=51728 US_DISK=xvdb



# backend_record NODE SECS: the backend's node NODE (its own record of
# what it did), waiting up to SECS s for it; fails if none came.
backend_record() {
    local be n=0
    be=$(xs_read "device/vbd/$US_DEVID/backend") || return 1
    while [ $n -lt $(($2 * 2)) ]; do
        xs_read "$be/$1" && return 0
        sleep 0.5; n=$((n + 1))
    done
    return 1
}

# special SCENARIO WHO: what a scenario must show beyond surviving, while
# the disk is up (sets SPECIAL; a check for ours).
special() {
    local s=$1 who=$2 b0 b1 wc rc rc2 n
    SPECIAL=
    case $s in
        barrier-only)
            # Barriers that carry the write: empty ones (a pre-flush) do
            # not make the write itself durable.
            b0=$(us_stats barrier_writes); dsync_writes $US_DISK 16 128M > /dev/null 2>&1; b1=$(us_stats_at_least barrier_writes $((b0 + 16)))
            SPECIAL="16 O_DSYNC writes: backend barriers with data $b0 -> $b1"
            [ $who = ours ] && check "$s: ours sends each forced write as a barrier ($SPECIAL)" [ "$b1" -ge $((b0 + 16)) ] ;;
        flush-not-supported)
            b0=$(us_stats flushes); dsync_writes $US_DISK 4 128M > /dev/null 2>&1; b1=$(us_stats_at_least flushes $((b0 + 1)))
            dsync_writes $US_DISK 4 128M > /dev/null 2>&1; sleep 1; wc=$(us_stats flushes)
            SPECIAL="flushes refused: $((b1 - b0)), then sent after the refusal: $((wc - b1)), write_cache '$(q $US_DISK write_cache)'"
            [ $who = ours ] && check "$s: ours stops flushing once the backend refused ($SPECIAL)" \
                [ "$b1" -gt "$b0" -a "$wc" = "$b1" ]
            # The queue says so: the block layer stops sending flushes.
            [ $who = ours ] && expect_eq "$s: ours clears the queue's volatile write cache once the backend refused a flush" \
                "$(q $US_DISK write_cache)" "write through" ;;
        discard-not-supported)
            # The refusal withdraws discard from the live queue: later
            # discards fail in the block layer as not supported (fstrim
            # says so) instead of reaching the driver. blkdiscard's own
            # exit status says nothing: the block layer reports a refused
            # discard as done (blkdev_issue_discard drops EOPNOTSUPP).
            b0=$(q $US_DISK discard_max_bytes)
            blkdiscard -o 0 -l 1048576 /dev/$US_DISK > /dev/null 2>&1; rc=$?
            wc=$(us_stats_at_least discards 1); b1=$(q $US_DISK discard_max_bytes)
            mkdir -p /mnt/trim
            if mkfs.ext4 -q -F -E nodiscard /dev/$US_DISK > /dev/null 2>&1 && mount /dev/$US_DISK /mnt/trim; then
                fstrim /mnt/trim > /tmp/trim.out 2>&1; rc2=$?
                umount /mnt/trim
            else
                rc2=mkfs-or-mount-failed; echo > /tmp/trim.out
            fi
            SPECIAL="discard_max_bytes $b0, blkdiscard exit $rc (backend discards $wc), then discard_max_bytes $b1; fstrim: exit $rc2 '$(head -1 /tmp/trim.out)'"
            [ $who = ours ] && check "$s: ours stops advertising discard once the backend refused one ($SPECIAL)" \
                [ "$b0" -gt 0 -a "$wc" -ge 1 -a "$b1" = 0 ]
            [ $who = ours ] && check "$s: fstrim on ours reports discard not supported ($SPECIAL)" \
                grep -qi 'not supported' /tmp/trim.out ;;
        flush-error)
            b0=$(us_stats flushes); dsync_writes $US_DISK 4 128M > /dev/null 2>&1; rc=$?; b1=$(us_stats_at_least flushes $((b0 + 1)))
            dsync_writes $US_DISK 4 128M > /dev/null 2>&1; rc2=$?; wc=$(us_stats_at_least flushes $((b1 + 1)))
            SPECIAL="4 O_DSYNC writes: exit $rc, flushes $b0 -> $b1; again: exit $rc2, flushes -> $wc; write_cache '$(q $US_DISK write_cache)'"
            [ $who = ours ] && check "$s: ours fails the forced writes whose flush failed and goes on flushing ($SPECIAL)" \
                [ "$rc" != 0 -a "$rc2" != 0 -a "$b1" -gt "$b0" -a "$wc" -gt "$b1" ] ;;
        stall-connected)
            # 5 s, not blk-mq's 30: at the detach ours gives up on a ring
            # that answered nothing for one io_timeout (after 5 to 10 s).
            # (C's queue has no io_timeout: its driver has no timeout
            # handler.)
            if [ -e /sys/block/$US_DISK/queue/io_timeout ]; then echo 5000 > /sys/block/$US_DISK/queue/io_timeout; fi
            wc=$(q $US_DISK io_timeout 2> /dev/null)
            SPECIAL="io_timeout ${wc:-absent}${wc:+ ms}" ;;
        map-predicted-grants)
            # 64 readers at once fill the ring with reads; the backend then
            # leaves it full for 5 s and maps every grant reference it saw
            # before that no request on the ring carries, writes 0x5A over
            # those still mapped 3 s after it serves again, and counts them.
            # A request meets a full ring only when the disk has more tags
            # than the ring slots: ours connected with 4-page rings (128
            # slots, the disk's depth; hostile() loads it so), then the
            # backend is started again offering one page (32 slots), and
            # ours reconnects to it with the disk's depth unchanged. The
            # test kernel's grant-delay (a request granted while its ring
            # has no room waits 2 s before it goes back) gives such a
            # backend the window a frontend that grants before it knows
            # the ring has room leaves open; ours grants nothing it does
            # not send, so it never waits. (C ignores a backend started
            # again: its run keeps its 4-page ring.)
            if [ $who = ours ]; then
                b0=$(xs_read "device/vbd/$US_DEVID/backend")
                echo "DOM0-CMD: sh /run/payload/us-backend restart $s $US_DEVID --ring-order 0"
                n=0
                while [ $n -lt 60 ] && ! { xs_read "$b0/test-restarted" > /dev/null && [ "$(xs_read "$b0/state")" = 4 ] &&
                    [ "$(xs_read "device/vbd/$US_DEVID/state")" = 4 ]; }; do sleep 0.5; n=$((n + 1)); done
            fi
            # Writes at depth 128 first (a read would strike): the grant
            # references the disk's requests cycle through all reach the
            # backend, which predicts from them. Beyond late-write-check's
            # blocks.
            fio --name=w --filename=/dev/$US_DISK --direct=1 --ioengine=libaio --rw=randwrite --bs=4k \
                --iodepth=128 --offset=64M --size=16M > /dev/null 2>&1
            [ $who = ours ] && echo grant-delay > /sys/kernel/debug/xen_blkfront_rs-$US_DISK/inject
            bounded 90 late-write-check --readers 64 /dev/$US_DISK 256 10 > /tmp/lw.out 2>&1; rc=$?
            wc=$(backend_record test-predicted 15)
            b1=$(head -1 /tmp/lw.out)
            SPECIAL="ring slots $(cat /sys/kernel/debug/xen_blkfront_rs-$US_DISK/stats 2> /dev/null | sed -n 's/^ring_slots: //p' | head -1), disk depth $(q $US_DISK nr_requests); ${b1:-late-write-check still running after 90 s}; the backend: ${wc:-no count within 15 s}"
            [ $who = ours ] && check "$s: the backend mapped no grant reference ours did not send, and no buffer ours handed back changed ($SPECIAL)" \
                [ $rc = 0 -a "${wc%% *}" = 0 ] ;;
        never-unmaps-forced)
            # An io_timeout of 5 s: the writes held in the removal's last
            # drain (detach_lingering) end at their timeout.
            if [ -e /sys/block/$US_DISK/queue/io_timeout ]; then echo 5000 > /sys/block/$US_DISK/queue/io_timeout; fi
            SPECIAL="io_timeout $(q $US_DISK io_timeout 2> /dev/null || echo absent)" ;;
        late-write-after-response | late-write-cached | late-write-bounce | late-write-persistent)
            # 96 blocks: the backend strikes during the writes, so the first
            # read is the one it answers with its pages (or bounce frames,
            # or persistent frames) still mapped and writes 3 s later; 4 s
            # outlasts that. Bounded: a driver that never ends that read
            # leaves the program blocked in it (its line comes at its end:
            # none yet).
            # late-write-cached reads through the page cache (dropped
            # first) and reads again from it after the wait.
            bounded 60 late-write-check $([ $s = late-write-cached ] && echo --cached) /dev/$US_DISK 96 4 > /tmp/lw.out 2>&1; rc=$?
            SPECIAL=$(head -1 /tmp/lw.out)
            SPECIAL=${SPECIAL:-late-write-check still running after 60 s}
            [ $who = ours ] && check "$s: no buffer ours handed back changes after completion ($SPECIAL)" [ $rc = 0 ] ;;
        late-read-after-response)
            # The backend keeps the first write after its trigger mapped
            # and reads its page 3 s later; late-write-check writes every
            # block from one buffer, so a page handed back at the response
            # holds a later block by then.
            bounded 60 late-write-check /dev/$US_DISK 96 0 > /tmp/lw.out 2>&1; rc=$?
            wc=$(backend_record test-late-read 10)
            b1=$(head -1 /tmp/lw.out)
            SPECIAL="${b1:-late-write-check still running after 60 s}; the backend's late read: ${wc:-none within 10 s}"
            [ $who = ours ] && check "$s: the page of a write ours has not ended still holds what was written when the backend reads it late ($SPECIAL)" \
                [ "${wc%%:*}" = unchanged ] ;;
        closing-after-answering)
            # One write at a time: the write in flight when the backend
            # strikes is answered (without a notification) before it goes
            # Closing, so every write the backend answered must succeed
            # and the next one fail (the backend is closing).
            bounded 60 dd if=/dev/zero of=/dev/$US_DISK bs=4k count=4000 oflag=direct > /tmp/dd.out 2>&1; rc=$?
            b1=$(sed -n 's/^\([0-9]*\)+[0-9]* records out$/\1/p' /tmp/dd.out)
            wc=$(us_stats writes)
            SPECIAL="dd: ${b1:-no count (still running after 60 s)} block(s) written, exit $rc; the backend answered $wc write(s)"
            [ $who = ours ] && check "$s: every write the backend answered before Closing succeeded on ours, the next failed ($SPECIAL)" \
                [ "$b1" = "$wc" -a "$rc" != 0 ] ;;
    esac
}

# detach_lingering SCENARIO WHO: the detach of a backend that never unmaps
# (never-unmaps, never-unmaps-forced): it stays, its mappings held, until
# dom0 kills it. Ours must end the removal before that, without the
# backend's unmap; never-unmaps: with xenbus free meanwhile, a second vbd
# attached during the removal comes up before the first backend is
# killed. Sets ans (dom0's answer) and LINGER (what was seen; a check for
# ours).
detach_lingering() {
    local s=$1 who=$2 seq stop_pid n=0 second=- second_killed=- gone=no gone_killed=- abandoned
    local holder= expire= dirty=
    if [ $s = never-unmaps-forced ]; then
        # The removal's last drain: del_gendisk writes the page cache's
        # dirty pages after the driver's own wait for held requests. 4 MiB
        # left dirty for it: the disk held open (its last close would write
        # them back) and no writeback before an hour (restored below).
        sleep 600 < /dev/$US_DISK &
        holder=$!
        expire=$(cat /proc/sys/vm/dirty_expire_centisecs)
        echo 360000 > /proc/sys/vm/dirty_expire_centisecs
        dd if=/dev/urandom of=/dev/$US_DISK bs=64k count=64 seek=3200 2> /dev/null
        dirty=$(sed -n 's/^Dirty: *//p' /proc/meminfo)
    fi
    us_stop 60 > /tmp/stop.out &
    stop_pid=$!
    sleep 1
    seq=$(cat /tmp/us-backend.seq)
    if [ $s = never-unmaps ]; then
        US_DEVID=51744 us_start - --file /var/tmp/us-vbd2.img --size 16
        second=absent
        while [ $n -lt 100 ]; do
            [ -b /dev/xvdc ] && { second=up; break; }
            sleep 0.5; n=$((n + 1))
        done
        xs_read "data/us-backend/$seq" > /dev/null && second_killed=yes || second_killed=no
        if [ $second = up ]; then
            dd if=/dev/xvdc of=/dev/null bs=64k count=16 iflag=direct 2> /dev/null && second="up after $((n / 2)) s, 1 MiB read" || second="up after $((n / 2)) s, read failed"
            US_DEVID=51744 us_stop > /dev/null
        fi
    fi
    n=0
    while [ -b /dev/$US_DISK ] && [ $n -lt 100 ]; do sleep 0.5; n=$((n + 1)); done
    if [ ! -b /dev/$US_DISK ]; then
        gone=yes
        xs_read "data/us-backend/$seq" > /dev/null && gone_killed=yes || gone_killed=no
    fi
    us_kill
    wait $stop_pid
    ans=$(cat /tmp/stop.out)
    if [ -n "$holder" ]; then
        kill $holder
        echo $expire > /proc/sys/vm/dirty_expire_centisecs
    fi
    abandoned=$(dmesg_since "$mark" | grep -c "vbd-$US_DEVID: ring [0-9]*: the backend still maps the pages of [0-9]* held requests at removal")
    LINGER="${dirty:+dirty before the detach: $dirty; }disk gone: $gone (backend killed by then: $gone_killed); held requests failed at removal: $abandoned ring line(s); second vbd: $second (first backend killed by then: $second_killed)"
    if [ $who = ours ]; then
        check "$s: ours ends the removal while the backend still maps the held pages ($LINGER)" \
            [ $gone = yes -a $gone_killed = no -a "$abandoned" -ge 1 ]
        [ $s = never-unmaps ] && check "$s: a vbd attached during that removal comes up on ours before the first backend is killed ($LINGER)" \
            [ "${second%% *}" = up -a "${second#*s, }" = "1 MiB read" -a $second_killed = no ]
    fi
}

hostile() { # SCENARIO WHO KO MOD XENBUS_DRIVER
    local s=$1 who=$2 ko=$3 mod=$4 drv=$5 fio_pid= fio_rc= fio_eio= ans rc n be up=no fe_state= fired
    local fio_end=no gone=no unloaded=no outcome notes oops fault fault_lines teardown rings revoked_all fired_early
    local mark=hostile-$s-$who since marked=yes
    declared "$s"; rc=$?
    notes="strikes=$WANT_STRIKES disk=$WANT_DISK io=$WANT_IO fault=$WANT_FAULT"
    [ "$who" = ours ] && check "$s: blkif-backend --list declares what ours must show ($notes)" [ $rc = 0 ]
    rm -f /tmp/h.out
    dmesg_mark "$mark"
    # Ours with a limit (give_up_after_ms=5000): a ring that answers
    # nothing for 5 s is given up on. By default ours waits, as C does,
    # and gives up at the removal: stall-connected, whose backend stays
    # Connected and silent, runs with the default, so that its detach
    # shows the removal ending.
    insmod "/lib/modules/$ko.ko" $([ $who = ours ] && [ $s != stall-connected ] && echo give_up_after_ms=5000) \
        $([ $s = map-predicted-grants ] && echo max_ring_page_order=2)
    us_start "$s"
    if us_disk_appears; then
        up=yes
        special "$s" "$who"
        be=$(xs_read "device/vbd/$US_DEVID/backend")
        # A scenario that struck during special() (before fio) has its
        # outcome in fio's own requests: fio must get to them before the
        # detach.
        fired_early=$(xs_read "$be/test-fired") || fired_early=
        # allow_file_create=0: fio started after the disk went would
        # otherwise write a regular file /dev/$US_DISK and succeed.
        fio --name=h --filename=/dev/$US_DISK --allow_file_create=0 --direct=1 --rw=randrw \
            --bsrange=4k-128k --iodepth=16 --ioengine=libaio --size=64M --number_ios=400 > /tmp/h.out 2>&1 &
        fio_pid=$!
        # The backend strikes after its 64th request and then writes its
        # test-fired node: wait for that (a KASAN guest under TCG takes
        # seconds to get there) or for fio's end (the scenarios that strike
        # in the keys, on every flush or at teardown, or struck already),
        # then give the fault a second. Where fio's requests must all
        # succeed, wait for its end: the detach would fail those still in
        # flight.
        n=0
        while kill -0 $fio_pid 2>/dev/null && [ $n -lt 120 ]; do
            [ "$WANT_IO" != ok ] && [ -z "$fired_early" ] && xs_read "$be/test-fired" > /dev/null && break
            sleep 0.5; n=$((n + 1))
        done
        sleep 1
        notes="disk up"
        # The shrink reaches the disk through the state watch: its size,
        # not fio's requests (which may all be done by then), shows it.
        if [ "$s" = sectors-shrink ] && [ $who = ours ]; then
            n=0
            while [ "$(cat /sys/block/$US_DISK/size)" != 8 ] && [ $n -lt 20 ]; do sleep 0.5; n=$((n + 1)); done
            check "$s: ours takes the backend's new size (/sys/block/$US_DISK/size $(cat /sys/block/$US_DISK/size), want 8)" \
                [ "$(cat /sys/block/$US_DISK/size)" = 8 ]
        fi
    else
        # Closing (5) or Closed (6) when the driver refused the backend.
        fe_state=$(xs_read "device/vbd/$US_DEVID/state")
        be=$(xs_read "device/vbd/$US_DEVID/backend")
        notes="no disk (frontend state ${fe_state:-gone})" SPECIAL=
    fi
    # Read before the detach removes the backend's node.
    fired=$(xs_read "$be/test-fired") || fired=
    LINGER=
    case $s in
        never-unmaps | never-unmaps-forced) detach_lingering "$s" "$who" ;;
        *) ans=$(us_stop) ;;
    esac
    if [ -n "$fio_pid" ]; then
        n=0
        while kill -0 $fio_pid 2>/dev/null && [ $n -lt $((BOUND * 2)) ]; do sleep 0.5; n=$((n + 1)); done
        if kill -0 $fio_pid 2>/dev/null; then
            kill -9 $fio_pid 2>/dev/null
        else
            fio_end=yes; wait $fio_pid; fio_rc=$?
            fio_eio=no; grep -q 'Input/output error' /tmp/h.out && fio_eio=yes
            notes="$notes; fio exit $fio_rc$([ $fio_eio = yes ] && echo ' (EIO)')"
        fi
    else
        fio_end=yes
    fi
    us_disk_gone "$BOUND" && gone=yes
    bounded 20 unbind_vbds "$drv"; rc=$?
    [ $rc = 2 ] || bounded 20 unload "$mod"; [ $? = 0 ] && [ $rc != 2 ] && unloaded=yes
    # The kernel's lines since the mark: this scenario's (all of them, and
    # a failure, once the log no longer holds the mark).
    since=$(dmesg_since "$mark") || marked=no
    oops=$(printf '%s\n' "$since" | grep -cE 'BUG|Oops|WARNING|Call Trace|KASAN|lockdep|general protection')
    # The driver's lines at warning level or above (busybox dmesg -r
    # keeps the <level> prefix; the mark's has the user facility's bit),
    # xenbus's note of the removal and ours' of held requests failed at
    # removal (detach_lingering's) aside; the first names the fault,
    # else the block layer's first I/O error.
    dmesg -r | sed -n "/blkfront-test: mark $mark\$/,\$p" | sed -n 's/^<\([0-4]\)>\[[ 0-9.]*\] //p' |
        grep -v -e 'forcefully removed' -e 'held requests at removal' > /tmp/h.warn
    fault_lines=$(grep -cE "vbd-$US_DEVID|blkfront: $US_DISK" /tmp/h.warn)
    fault=$( { grep -E "vbd-$US_DEVID|blkfront: $US_DISK" /tmp/h.warn; grep "$US_DISK" /tmp/h.warn; } | head -1)
    # Ours prints each ring's teardown: grants granted, and revoked (those
    # still mapped by the backend through a deferred release).
    teardown=$(printf '%s\n' "$since" | grep -o "vbd-$US_DEVID: ring [0-9]* torn down: .*")
    rings=$(echo "$teardown" | grep -c 'torn down')
    revoked_all=$(echo "$teardown" | sed -n 's/.*: \([0-9]*\) grants granted, \([0-9]*\) revoked.*/\1 \2/p' |
        awk '$1 == $2 { n++ } END { print n + 0 }')
    if [ "$oops" -gt 0 ]; then outcome=oops
    elif [ $fio_end = no ] || [ $gone = no ] || [ "$unloaded" = no ]; then outcome=hangs
    else outcome=survives; fi
    notes="$notes${SPECIAL:+; $SPECIAL}${LINGER:+; $LINGER}; detach: $ans; fio ended: $fio_end; disk gone: $gone; unloaded: $unloaded${fault:+; dmesg: $fault}"
    echo "HOSTILE $s $who $outcome $notes"
    if [ "$who" = ours ]; then
        check "$s: ours survives ($notes)" [ $outcome = survives ]
        check "$s: the kernel log still holds the scenario's mark (the lines read are its own)" [ $marked = yes ]
        case $WANT_DISK in
            up) check "$s: ours brings the disk up" [ $up = yes ] ;;
            refused)
                case $up:$fe_state in
                    no:5 | no:6) ok "$s: ours refuses the backend at probe (no disk, frontend state $fe_state)" ;;
                    *) not_ok "$s: ours refuses the backend at probe: disk up: $up, frontend state '$fe_state' (want 5 or 6)" ;;
                esac ;;
        esac
        if [ "$WANT_STRIKES" = trigger ]; then
            check "$s: the backend struck (its test-fired node: '$fired')" [ -n "$fired" ]
        fi
        case $WANT_IO in
            ok) check "$s: fio's requests all succeed with ours (fio exit ${fio_rc:-none})" [ "$fio_rc" = 0 ] ;;
            eio) check "$s: ours fails fio's requests with EIO (fio exit ${fio_rc:-none}, EIO: ${fio_eio:-none})" fio_failed eio ;;
            fail) check "$s: fio's requests fail with ours (fio exit ${fio_rc:-none})" fio_failed ;;
        esac
        # A fault the driver sees is named once (not once per request).
        if [ "$WANT_FAULT" = named ]; then
            check "$s: ours names the fault in one dmesg line ($fault_lines: $fault)" [ "$fault_lines" = 1 ]
        fi
        # A disk that came up had rings to tear down; a refused one may
        # have set some up before refusing.
        if [ $up = yes ] || [ "$rings" -gt 0 ]; then
            check "$s: ours tore down $rings ring(s), each having revoked every grant it made ($(echo "$teardown" | head -1))" \
                [ "$rings" -ge 1 -a "$revoked_all" = "$rings" ]
        fi
    fi
    [ $outcome = survives ]
}

# hostile ... fails (returns 1) when the driver did not survive.
any_stuck=
for who in ${HOSTILE_WHO:-ours C}; do
    stuck=
    for s in $SCENARIOS; do
        if [ -n "$stuck" ]; then
            echo "HOSTILE-NOT-RUN $s $who"
            [ $who = ours ] && not_ok "$s: ours not run (xenbus stuck since $stuck)"
            continue
        fi
        case $who in
            ours) hostile "$s" ours xen_blkfront_rs xen_blkfront_rs xen_blkfront_rs || stuck=$s ;;
            C) hostile "$s" C xen-blkfront xen_blkfront vbd || stuck=$s ;;
        esac
    done
    any_stuck=$any_stuck$stuck
done
# A hung driver holds its disk and that device's lock: the init's sync and
# even a forced power-off (device_shutdown takes the lock) wait forever.
# Say the exit status here and have dom0 destroy the domain.
if [ -n "$any_stuck" ]; then
    finish; rc=$?
    echo "GUEST-EXIT: $rc"
    echo "DOM0-CMD: xl destroy blktest"
    sleep 60
fi
finish
