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
# revoked or handed to a deferred release. C's outcome is recorded only.
# Once C hangs, its module can no longer unload: the scenarios after that
# get a vbd of their own (xvdc, xvdd, ...) from the stuck module, and say
# so in their notes.
. /guest/common.sh
BOUND=${HOSTILE_BOUND:-40}
SCENARIOS=$(echo "${HOSTILE_SCENARIOS:-}" | tr ',' ' ')
check "the host passed blkif-backend's scenario list ($(echo $SCENARIOS | wc -w) scenarios)" [ -n "$SCENARIOS" ]

# bounded SECONDS CMD...: runs CMD in the background; 0 if it ended (with
# status 0) within SECONDS, 1 if it failed, 2 if it is still running.
bounded() {
    local secs=$1 pid n=0; shift
    "$@" & pid=$!
    while kill -0 $pid 2>/dev/null && [ $n -lt $((secs * 2)) ]; do sleep 0.5; n=$((n + 1)); done
    kill -0 $pid 2>/dev/null && return 2
    wait $pid
}
# next_disk: the next vbd (xvdc, xvdd, ...: devid 202 << 8 | 16 * index).
US_INDEX=1
next_disk() {
    US_INDEX=$((US_INDEX + 1))
    US_DEVID=$((51712 + 16 * US_INDEX))
    US_DISK=xvd$(echo abcdefghijklmnopqrstuvwxyz | cut -c$((US_INDEX + 1)))
}
US_DEVID=51728 US_DISK=xvdb

# dsync_writes N: N 4 KiB O_DIRECT|O_DSYNC writes (REQ_FUA) to the disk.
dsync_writes() {
    fio --name=dsync --filename=/dev/$US_DISK --direct=1 --sync=dsync --ioengine=psync --rw=write \
        --bs=4k --size=$(($1 * 4))k --offset=128M > /dev/null 2>&1
}
# special SCENARIO WHO: what a scenario must show beyond surviving, while
# the disk is up (sets SPECIAL; a check for ours).
special() {
    local s=$1 who=$2 b0 b1 wc
    SPECIAL=
    case $s in
        barrier-only)
            b0=$(us_stats barriers); dsync_writes 16; b1=$(us_stats_at_least barriers $((b0 + 16)))
            SPECIAL="16 O_DSYNC writes: backend barriers $b0 -> $b1"
            [ $who = ours ] && check "$s: ours sends each forced write as a barrier ($SPECIAL)" [ "$b1" -ge $((b0 + 16)) ] ;;
        flush-not-supported)
            b0=$(us_stats flushes); dsync_writes 4; b1=$(us_stats_at_least flushes $((b0 + 1)))
            dsync_writes 4; sleep 1; wc=$(us_stats flushes)
            SPECIAL="flushes refused: $((b1 - b0)), then sent after the refusal: $((wc - b1)), write_cache '$(q $US_DISK write_cache)'"
            [ $who = ours ] && check "$s: ours stops flushing once the backend refused ($SPECIAL)" \
                [ "$b1" -gt "$b0" -a "$wc" = "$b1" ] ;;
    esac
}

STUCK=
hostile() { # SCENARIO WHO KO MOD XENBUS_DRIVER
    local s=$1 who=$2 ko=$3 mod=$4 drv=$5 fio_pid= ans rc n fio_end=no gone=no unloaded=no
    local outcome notes oops fault teardown
    dmesg -c > /dev/null
    [ -n "$STUCK" ] || insmod "/lib/modules/$ko.ko"
    us_start "$s"
    if us_disk_appears; then
        special "$s" "$who"
        fio --name=h --filename=/dev/$US_DISK --direct=1 --rw=randrw --bsrange=4k-128k --iodepth=16 \
            --ioengine=libaio --time_based --runtime=2 --size=64M > /tmp/h.out 2>&1 &
        fio_pid=$!
        sleep 3
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
    if [ -n "$STUCK" ]; then
        unloaded="not tried (the module is stuck since $STUCK)"
    else
        bounded 20 unbind_vbds "$drv"; rc=$?
        [ $rc = 2 ] || bounded 20 unload "$mod"; [ $? = 0 ] && [ $rc != 2 ] && unloaded=yes
    fi
    oops=$(dmesg | grep -cE 'BUG|Oops|WARNING|Call Trace|KASAN|lockdep|general protection')
    # The line naming the fault: the driver's own first, else the block
    # layer's I/O error.
    fault=$( { dmesg | grep -E "vbd-$US_DEVID|blkfront: $US_DISK" | grep -vE 'torn down|forcefully removed'
               dmesg | grep -E "$US_DISK"; } | head -1 | sed 's/^\[[ 0-9.]*\] //')
    teardown=$(dmesg | grep -o 'ring [0-9]* torn down: .*' | head -1)
    if [ "$oops" -gt 0 ]; then outcome=oops
    elif [ $fio_end = no ] || [ $gone = no ] || [ "$unloaded" = no ]; then outcome=hangs
    else outcome=survives; fi
    notes="$notes${SPECIAL:+; $SPECIAL}; detach: $ans; fio ended: $fio_end; disk gone: $gone; unloaded: $unloaded${fault:+; dmesg: $fault}"
    echo "HOSTILE $s $who $outcome $notes"
    if [ "$who" = ours ]; then
        check "$s: ours survives ($notes)" [ $outcome = survives ]
        # Grants: ours prints each ring's teardown: every grant made was
        # revoked (those still mapped by the backend through a deferred
        # release).
        case $teardown in
            *"grants granted"*)
                set -- $(echo "$teardown" | sed 's/.*: \([0-9]*\) grants granted, \([0-9]*\) revoked.*/\1 \2/')
                check "$s: ours revoked every grant it made ($teardown)" [ "$1" = "$2" ] ;;
        esac
    fi
    # A module that did not unload keeps its stuck disk: the next
    # scenarios get a vbd of their own.
    if [ "$unloaded" = no ] || [ $gone = no ]; then
        [ -n "$STUCK" ] || STUCK=$s
        next_disk
    fi
}

for who in ${HOSTILE_WHO:-ours C}; do
    STUCK=
    for s in $SCENARIOS; do
        case $who in
            ours) hostile "$s" ours xen_blkfront_rs xen_blkfront_rs xen_blkfront_rs ;;
            C) hostile "$s" C xen-blkfront xen_blkfront vbd ;;
        esac
    done
done
finish
