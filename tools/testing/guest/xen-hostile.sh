# The hostile backend (issue 13): for every scenario of blkif-backend
# (tools/testing/xen-backend; the host passes its `--list` as
# HOSTILE_SCENARIOS, commas between names), a driver meets a userspace
# backend that misbehaves that way once the disk is connected and fio has
# requests in flight; then the vbd is detached as xl block-detach does.
# HOSTILE_WHO names the drivers, in order ("ours C" by default; suite 20
# runs "ours", tools/testing/hostile-table.sh --run-c runs "C"). Each run
# prints one line
#   HOSTILE <scenario> <ours|C> <survives|hangs|oops> <notes>
# which tools/testing/hostile-table.sh turns into
# Documentation/hostile-backend.md. Ours must survive every scenario: no
# oops or warning, fio ended (with EIO or success) within HOSTILE_BOUND
# seconds of the detach, the disk gone, the module unloaded, every grant
# revoked or handed to a deferred release, the fault named in one dmesg
# line. C's outcome is recorded only.
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

# bounded SECONDS CMD...: runs CMD in the background; 0 if it ended (with
# status 0) within SECONDS, 1 if it failed, 2 if it is still running.
bounded() {
    local secs=$1 pid n=0; shift
    "$@" & pid=$!
    while kill -0 $pid 2>/dev/null && [ $n -lt $((secs * 2)) ]; do sleep 0.5; n=$((n + 1)); done
    kill -0 $pid 2>/dev/null && return 2
    wait $pid
}

# special SCENARIO WHO: what a scenario must show beyond surviving, while
# the disk is up (sets SPECIAL; a check for ours).
special() {
    local s=$1 who=$2 b0 b1 wc
    SPECIAL=
    case $s in
        barrier-only)
            b0=$(us_stats barriers); dsync_writes $US_DISK 16 128M > /dev/null 2>&1; b1=$(us_stats_at_least barriers $((b0 + 16)))
            SPECIAL="16 O_DSYNC writes: backend barriers $b0 -> $b1"
            [ $who = ours ] && check "$s: ours sends each forced write as a barrier ($SPECIAL)" [ "$b1" -ge $((b0 + 16)) ] ;;
        flush-not-supported)
            b0=$(us_stats flushes); dsync_writes $US_DISK 4 128M > /dev/null 2>&1; b1=$(us_stats_at_least flushes $((b0 + 1)))
            dsync_writes $US_DISK 4 128M > /dev/null 2>&1; sleep 1; wc=$(us_stats flushes)
            SPECIAL="flushes refused: $((b1 - b0)), then sent after the refusal: $((wc - b1)), write_cache '$(q $US_DISK write_cache)'"
            [ $who = ours ] && check "$s: ours stops flushing once the backend refused ($SPECIAL)" \
                [ "$b1" -gt "$b0" -a "$wc" = "$b1" ] ;;
    esac
}

hostile() { # SCENARIO WHO KO MOD XENBUS_DRIVER
    local s=$1 who=$2 ko=$3 mod=$4 drv=$5 fio_pid= ans rc n be fio_end=no gone=no unloaded=no
    local outcome notes oops fault fault_lines teardown
    dmesg -c > /dev/null
    insmod "/lib/modules/$ko.ko"
    us_start "$s"
    if us_disk_appears; then
        special "$s" "$who"
        be=$(xs_read "device/vbd/$US_DEVID/backend")
        fio --name=h --filename=/dev/$US_DISK --direct=1 --rw=randrw --bsrange=4k-128k --iodepth=16 \
            --ioengine=libaio --size=64M --number_ios=400 > /tmp/h.out 2>&1 &
        fio_pid=$!
        # The backend strikes after its 64th request and then writes its
        # test-fired node: wait for that (a KASAN guest under TCG takes
        # seconds to get there) or for fio's end (the scenarios that strike
        # at connect or on every flush), then give the fault a second.
        n=0
        while kill -0 $fio_pid 2>/dev/null && ! xs_read "$be/test-fired" > /dev/null && [ $n -lt 120 ]; do
            sleep 0.5; n=$((n + 1))
        done
        sleep 1
        notes="disk up"
    else
        notes="no disk (probe refused)" SPECIAL=
    fi
    ans=$(us_stop)
    if [ -n "$fio_pid" ]; then
        n=0
        while kill -0 $fio_pid 2>/dev/null && [ $n -lt $((BOUND * 2)) ]; do sleep 0.5; n=$((n + 1)); done
        if kill -0 $fio_pid 2>/dev/null; then
            kill -9 $fio_pid 2>/dev/null
        else
            fio_end=yes; wait $fio_pid; rc=$?
            notes="$notes; fio exit $rc$(grep -q 'Input/output error' /tmp/h.out && echo ' (EIO)')"
        fi
    else
        fio_end=yes
    fi
    us_disk_gone "$BOUND" && gone=yes
    bounded 20 unbind_vbds "$drv"; rc=$?
    [ $rc = 2 ] || bounded 20 unload "$mod"; [ $? = 0 ] && [ $rc != 2 ] && unloaded=yes
    oops=$(dmesg | grep -cE 'BUG|Oops|WARNING|Call Trace|KASAN|lockdep|general protection')
    # The driver's lines at warning level or above (busybox dmesg -r
    # keeps the <level> prefix), xenbus's note of the removal aside; the
    # first names the fault, else the block layer's first I/O error.
    dmesg -r | sed -n 's/^<\([0-4]\)>\[[ 0-9.]*\] //p' | grep -v 'forcefully removed' > /tmp/h.warn
    fault_lines=$(grep -cE "vbd-$US_DEVID|blkfront: $US_DISK" /tmp/h.warn)
    fault=$( { grep -E "vbd-$US_DEVID|blkfront: $US_DISK" /tmp/h.warn; grep "$US_DISK" /tmp/h.warn; } | head -1)
    teardown=$(dmesg | grep -o "vbd-$US_DEVID: ring [0-9]* torn down: .*" | head -1)
    if [ "$oops" -gt 0 ]; then outcome=oops
    elif [ $fio_end = no ] || [ $gone = no ] || [ "$unloaded" = no ]; then outcome=hangs
    else outcome=survives; fi
    notes="$notes${SPECIAL:+; $SPECIAL}; detach: $ans; fio ended: $fio_end; disk gone: $gone; unloaded: $unloaded${fault:+; dmesg: $fault}"
    echo "HOSTILE $s $who $outcome $notes"
    if [ "$who" = ours ]; then
        check "$s: ours survives ($notes)" [ $outcome = survives ]
        # A fault the driver sees is named once (not once per request).
        case $s in
            id-* | duplicate-id | wrong-operation | unknown-status | rsp-prod-* | indirect-bad-operation | \
                stall | closing-mid-io | killed | garbage-optional-keys | huge-values | flush-not-supported)
                check "$s: ours names the fault in one dmesg line ($fault_lines: $fault)" [ "$fault_lines" = 1 ] ;;
        esac
        # Grants: ours prints each ring's teardown: every grant made was
        # revoked (those still mapped by the backend through a deferred
        # release).
        case $teardown in
            *"grants granted"*)
                set -- $(echo "$teardown" | sed 's/.*: \([0-9]*\) grants granted, \([0-9]*\) revoked.*/\1 \2/')
                check "$s: ours revoked every grant it made ($teardown)" [ "$1" = "$2" ] ;;
        esac
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
