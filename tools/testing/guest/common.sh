# SPDX-License-Identifier: GPL-2.0
# Sourced by guest check scripts (busybox sh). Each check prints one TAP line
# ("ok N - name" / "not ok N - name") that the host counts as a result.
N=0
# Parameters and expectations a suite passed in (GUEST_ENV on the host).
[ -r /guest/env.sh ] && . /guest/env.sh
ok()     { N=$((N + 1)); echo "ok $N - $*"; }
not_ok() { N=$((N + 1)); echo "not ok $N - $*"; FAILED=1; }
# check NAME CMD...: passes when CMD exits 0; returns CMD's success.
check() { local name=$1; shift; if "$@"; then ok "$name"; else not_ok "$name"; return 1; fi; }
# expect_eq NAME ACTUAL EXPECTED
expect_eq() {
    if [ "$2" = "$3" ]; then ok "$1 ($2)"; else not_ok "$1: got '$2', want '$3'"; fi
}
# Copies a KUnit suite's KTAP out of debugfs, framed for the host parser.
# The suite ran when its module was loaded; results vanish at rmmod.
ktap() { # suite
    local f=/sys/kernel/debug/kunit/$1/results
    if [ -r "$f" ]; then
        echo "KTAP-BEGIN $1"; cat "$f"; echo "KTAP-END"
    else
        not_ok "KUnit results for suite $1 present in debugfs"
    fi
}
# roundtrip NAME DEV BS COUNT SEEK: COUNT blocks of BS random bytes written
# at block SEEK of /dev/DEV with O_DIRECT, read back; passes if equal.
roundtrip() {
    dd if=/dev/urandom of=/tmp/p bs="$3" count="$4" 2>/dev/null
    dd if=/tmp/p of="/dev/$2" bs="$3" seek="$5" oflag=direct 2>/dev/null
    dd if="/dev/$2" of=/tmp/b bs="$3" skip="$5" count="$4" iflag=direct 2>/dev/null
    check "$1" cmp -s /tmp/p /tmp/b
}
# q DEV ATTR: a queue limit from sysfs.
q() { cat "/sys/block/$1/queue/$2"; }
# dmesg_mark NAME: writes "blkfront-test: mark NAME" into the kernel log,
# for dmesg_since. Scripts mark the log and never clear it: the host and
# debug-report.sh read all of it. Info level: off the console
# (loglevel=6) and out of dmesg -r's warnings.
dmesg_mark() { echo "<6>blkfront-test: mark $1" > /dev/kmsg; }
# dmesg_since NAME: the dmesg lines after the last mark NAME (a word:
# letters, digits, - and _). Without one (the ring buffer wrapped past it)
# all of them, a note on stderr and status 1: a check then sees more
# lines, never fewer.
dmesg_since() {
    local log=/tmp/dmesg-since.$$ n
    dmesg > $log
    n=$(grep -n "blkfront-test: mark $1\$" $log | tail -1 | cut -d: -f1)
    if [ -n "$n" ]; then
        tail -n +$((n + 1)) $log
    else
        echo "dmesg_since: no mark '$1' in the kernel log: all of it read" >&2
        cat $log
    fi
    rm -f $log
    [ -n "$n" ]
}
# no_kmemleak: the result line when /sys/kernel/debug/kmemleak is missing:
# a failure on a kernel booted with kmemleak=on (the suites boot so, on
# kernels with CONFIG_DEBUG_KMEMLEAK), a skip otherwise.
no_kmemleak() {
    if grep -qw 'kmemleak=on' /proc/cmdline; then
        not_ok "kmemleak: /sys/kernel/debug/kmemleak present (booted with kmemleak=on)"
    else
        ok "kmemleak # SKIP no /sys/kernel/debug/kmemleak (boot with kmemleak=on)"
    fi
}
# removal_count DISK WHAT: the count before WHAT ("ring-full retries",
# "chained scatterlists", "batches", ...) in virtio_blk_rs's last removal
# line for DISK ("[vda] removed: N requests, ..."), empty without one.
removal_count() {
    dmesg | grep -E "\[$1\] removed: [0-9]+ requests" | tail -1 | sed -n "s/.* \([0-9][0-9]*\) $2.*/\1/p"
}
# fio_checked LABEL OUT RC: the summary of a fio run that wrote its report
# to OUT and exited RC, and two checks: it exited 0, it reported err=0.
fio_checked() {
    grep -E 'err=|WRITE:|READ:' "$2" | sed 's/^/FIO: /'
    check "$1 (exit $3)" [ "$3" = 0 ]
    check "$1: fio reports err=0" grep -q 'err= 0' "$2"
}
# Prints the lsblk -t style line for a disk from sysfs (busybox has no lsblk).
topology_line() { # dev
    local d=$1
    echo "TOPOLOGY $d: size=$(cat /sys/block/$d/size) log-sec=$(q $d logical_block_size) phy-sec=$(q $d physical_block_size) align=$(cat /sys/block/$d/alignment_offset) min-io=$(q $d minimum_io_size) opt-io=$(q $d optimal_io_size) rota=$(q $d rotational) max-hw-kb=$(q $d max_hw_sectors_kb) max-segs=$(q $d max_segments)"
}
FAILED=0
finish() { [ "$FAILED" = 0 ]; }
# fio_verify LABEL DISK SIZE QD: fio writes SIZE of random 4 KiB..256 KiB
# blocks to /dev/DISK at queue depth QD (psync at 1, libaio above) and
# verifies them (crc32c): one check line, LABEL first; fio's summary lines
# printed as "FIO LABEL qdQD: ...". Passes when fio exited 0 and every job
# reported err=0.
fio_verify() {
    local label=$1 d=$2 size=$3 qd=$4 engine=libaio out rc errs
    [ "$qd" = 1 ] && engine=psync
    out=$(fio --name=verify-$d-qd$qd --filename=/dev/$d --direct=1 --rw=randwrite \
        --bsrange=4k-256k --size=$size --ioengine=$engine --iodepth=$qd \
        --verify=crc32c --do_verify=1 --verify_fatal=1 --randrepeat=0 2>&1)
    rc=$?
    echo "$out" | grep -E "^ *(READ|WRITE):|err=|verify:" | sed "s/^ */FIO ${label:+$label }qd$qd: /"
    # The sorted set of err= values: "0 " when all are 0, empty when none.
    errs=$(echo "$out" | sed -n 's/.*err= *\([0-9]*\).*/\1/p' | sort -u | tr '\n' ' ')
    check "${label:+$label: }fio crc32c verify, $size random writes, QD$qd: exit $rc, err=${errs:-none}" \
        [ "$rc" = 0 -a "$errs" = "0 " ]
}
# inflight_sample DISK: waits up to 2 s for a moment with requests in
# flight on DISK and prints their number (0 if none came).
inflight_sample() {
    local try n=0
    for try in $(seq 1 100); do
        n=$(awk '{print $1 + $2}' "/sys/block/$1/inflight")
        [ "$n" -gt 0 ] && break
        usleep 20000
    done
    echo "$n"
}
# unload MODULE: rmmod, retried for a few seconds (a disk that was just
# scanned can hold a module reference for a moment).
unload() {
    local i
    for i in 1 2 3 4 5 6 7 8 9 10; do
        rmmod "$1" 2>/dev/null && return 0
        sleep 0.5
    done
    rmmod "$1"
}

# ---- Xen domU helpers -----------------------------------------------------
# unbind_vbds [DRIVER]: unbinds every vbd from DRIVER (default
# xen_blkfront_rs; Linux's C frontend is "vbd"). xenbus holds a module
# reference per bound device (xenbus_dev_probe's try_module_get): unbind,
# then rmmod.
unbind_vbds() {
    local drv=${1:-xen_blkfront_rs} dev
    for dev in /sys/bus/xen/drivers/$drv/vbd-*; do
        [ -e "$dev" ] && echo "$(basename "$dev")" > /sys/bus/xen/drivers/$drv/unbind
    done
    return 0
}
# xs_read PATH: prints a xenstore value, through /dev/xen/xenbus (the domU
# has no xenstore tools): an XS_READ message (header: type 2, req_id, tx_id,
# length, all u32 LE; then the NUL-terminated path), one reply read back.
# Fails on a xenstore error reply (ENOENT, EACCES...). PATH is absolute or
# relative to this domain's /local/domain/<domid>.
xs_read() {
    local n=$((${#1} + 1)) r=/tmp/xs-reply.$$
    [ "$n" -lt 256 ] || return 1
    exec 7<>/dev/xen/xenbus || return 1
    printf "\\002\\000\\000\\000\\000\\000\\000\\000\\000\\000\\000\\000\\$(printf %03o $n)\\000\\000\\000%s\\000" "$1" >&7
    dd bs=65536 count=1 <&7 >$r 2>/dev/null
    exec 7<&-
    # Reply type 2 (XS_READ) carries the value; 16 (XS_ERROR) an errno name.
    if [ "$(od -An -tu4 -N4 $r | tr -d ' ')" = 2 ]; then
        tail -c +17 $r; rm -f $r
    else
        rm -f $r; return 1
    fi
}
# vbd_of DISK: "DOMID DEVID" of DISK's vbd, from its frontend node's
# "backend" path (/local/domain/0/backend/vbd/DOMID/DEVID).
vbd_of() {
    local fe be
    fe=$(basename "$(readlink "/sys/block/$1/device")")
    case $fe in vbd-*) ;; *) return 1 ;; esac
    be=$(xs_read "device/vbd/${fe#vbd-}/backend") || return 1
    echo "$be" | awk -F/ '$(NF-1) ~ /^[0-9]+$/ && $NF ~ /^[0-9]+$/ { print $(NF-1), $NF; ok = 1 } END { exit !ok }'
}
# vbd_counters DISK: prints "rd_req wr_req f_req ds_req" of DISK's vbd as
# dom0's xen-blkback counts them now. Asks dom0 (DOM0-CMD, see xen-guest.sh;
# the relay only reads domU 1's console) to run xen/vbd-stats, which
# publishes the counters in xenstore under this domain's
# data/vbd-stats/<seq>, readable by this domain; waits up to 60 s.
vbd_counters() {
    local v seq i=0
    set -- $(vbd_of "$1")
    [ -n "$2" ] || { echo "vbd-stats: no vbd behind this disk" >&2; return 1; }
    seq=$(( $(cat /tmp/vbd-stats.seq 2>/dev/null || echo 0) + 1 )); echo $seq > /tmp/vbd-stats.seq
    echo "DOM0-CMD: sh /run/payload/vbd-stats $1 $2 $seq" >&2
    while [ $i -lt 120 ]; do
        if v=$(xs_read "/local/domain/$1/data/vbd-stats/$seq"); then
            case $v in
                *[!0-9\ ]*|"") echo "vbd-stats: dom0 answered '$v'" >&2; return 1 ;;
            esac
            echo "$v"; return 0
        fi
        sleep 0.5; i=$((i + 1))
    done
    echo "vbd-stats: no answer from dom0 in 60 s" >&2
    return 1
}
# durability LABEL DISK [N]: end-to-end durability as the backend sees it.
# N (32) 4 KiB writes with O_DIRECT only, then N with O_DIRECT|O_DSYNC (fio
# sync=dsync: REQ_FUA writes), at 192 MiB of DISK; dom0's xen-blkback must
# count >= N write requests for each batch, no flush for the plain batch
# and >= N flushes (BLKIF_OP_FLUSH_DISKCACHE or WRITE_BARRIER: f_req) for
# the forced one: each forced write reached the backend with its flush.
# dsync_writes DISK N OFFSET: N 4 KiB O_DIRECT|O_DSYNC writes (fio
# sync=dsync: REQ_FUA) at OFFSET of DISK; fio's output to stdout.
dsync_writes() {
    fio --name=dsync --filename=/dev/$1 --direct=1 --sync=dsync --ioengine=psync --rw=write \
        --bs=4k --size=$(($2 * 4))k --offset=$3
}
durability() {
    local label=$1 d=$2 n=${3:-32} c0 c1 c2 rc
    if ! c0=$(vbd_counters "$d"); then
        not_ok "$label: xen-blkback counters of $d's vbd from dom0"; return 1
    fi
    fio --name=plain --filename=/dev/$d --direct=1 --ioengine=psync --rw=write \
        --bs=4k --size=$((n * 4))k --offset=192M > /tmp/durability.out 2>&1
    rc=$?
    c1=$(vbd_counters "$d") || { not_ok "$label: xen-blkback counters of $d's vbd from dom0"; return 1; }
    dsync_writes "$d" "$n" 192M >> /tmp/durability.out 2>&1
    rc=$rc$?
    c2=$(vbd_counters "$d") || { not_ok "$label: xen-blkback counters of $d's vbd from dom0"; return 1; }
    echo "DURABILITY $label $d: blkback rd wr f ds: $c0 -> $c1 (plain) -> $c2 (dsync)"
    set -- $c0 $c1 $c2
    local pw=$((${6} - ${2})) pf=$((${7} - ${3})) sw=$((${10} - ${6})) sf=$((${11} - ${7}))
    expect_eq "$label: fio exit status, $n O_DIRECT and $n O_DIRECT|O_DSYNC 4 KiB writes" "$rc" 00
    check "$label: $n O_DIRECT writes: blkback wr_req +$pw (>= $n), f_req +$pf (0)" \
        [ "$pw" -ge "$n" -a "$pf" = 0 ]
    check "$label: $n O_DIRECT|O_DSYNC writes: blkback wr_req +$sw (>= $n), f_req +$sf (>= $n)" \
        [ "$sw" -ge "$n" -a "$sf" -ge "$n" ]
}
# fio_fails_with_eio PID LOG EVENT T0: the fio run PID (output in LOG)
# must end within 20 s, having failed (not completed, not killed) with an
# I/O error, because of EVENT (for the check names) at uptime second T0.
fio_fails_with_eio() {
    local pid=$1 log=$2 event=$3 t0=$4 n=0 rc
    while kill -0 "$pid" 2>/dev/null && [ $n -lt 40 ]; do sleep 0.5; n=$((n + 1)); done
    if kill -0 "$pid" 2>/dev/null; then
        not_ok "fio ended within 20 s of $event"
        kill -9 "$pid" 2>/dev/null
    else
        ok "fio ended $(($(cut -d. -f1 /proc/uptime) - t0)) s after $event"
    fi
    wait "$pid"
    rc=$?
    check "fio failed (exit $rc), not completed nor killed" [ "$rc" != 0 -a "$rc" -lt 128 ]
    check "fio reports EIO" grep -q "Input/output error" "$log"
    tail -3 "$log"
}
# fault_injection_disk DISK: loads xen_blkfront_rs and waits for DISK;
# sets DBG to its debugfs directory, which must have the fault-injection
# file (CONFIG_FAULT_INJECTION). Returns 1 (after a failed check) if not.
fault_injection_disk() {
    check "insmod xen_blkfront_rs" insmod /lib/modules/xen_blkfront_rs.ko
    for i in $(seq 1 40); do [ -e /sys/block/$1 ] && break; sleep 0.25; done
    [ -e /sys/block/$1 ] && ok "disk $1 appears" || { not_ok "disk $1 appears"; return 1; }
    DBG=/sys/kernel/debug/xen_blkfront_rs-$1 FI_DISK=$1
    [ -w $DBG/inject ] && ok "fault-injection file present" || { not_ok "fault-injection file $DBG/inject present"; return 1; }
}
# dstat NAME: a counter of DBG/stats (see fault_injection_disk).
dstat() { sed -n "s/^$1: //p" $DBG/stats; }
# fio_on_rings WHEN MIN: waits (at most 60 s) until MIN of fio's requests
# are in flight on the disk of fault_injection_disk, and checks that they
# are (and hold grants), WHEN. Grants in use alone said too little: one
# 64 KiB write holds 17. MIN below fio's depth: a completed request is
# resubmitted a moment later.
fio_on_rings() {
    local n=0 inflight grants
    while [ "$(awk '{ print $1 + $2 }' /sys/block/$FI_DISK/inflight)" -lt $2 ] && [ $n -lt 120 ]; do
        sleep 0.5; n=$((n + 1))
    done
    inflight=$(awk '{ print $1 + $2 }' /sys/block/$FI_DISK/inflight) grants=$(dstat grants_in_use)
    check "fio has requests on the rings $1 ($inflight in flight, $grants grants in use)" \
        [ "$inflight" -ge $2 -a "$grants" -ge 16 ]
}
# ---- the userspace blkif backend (tools/testing/xen-backend) ---------------
# It serves a vbd from dom0 when asked through xen/us-backend: US_DEVID
# (default 51728) named US_DISK (default xvdb) in this domU.
# us_start [SCENARIO [ARGS...]]: asks dom0 for the vbd served by
# blkif-backend (SCENARIO "-": well-behaved; ARGS: more blkif-backend
# options).
us_start() {
    local s=${1:--}
    [ $# = 0 ] || shift
    echo "DOM0-CMD: sh /run/payload/us-backend start $s ${US_DEVID:-51728} $*"
}
# us_stop [WAIT]: asks dom0 to detach the vbd (its backend killed after
# WAIT seconds, 45 by default, if still there); prints dom0's answer
# (waits 90 s). Dom0 runs the detach in the background: other DOM0-CMDs
# go on meanwhile (another vbd's start, us_kill).
us_stop() {
    local i=0 v seq
    # The sequence number lives in a file: callers run this in $(...).
    seq=$(( $(cat /tmp/us-backend.seq 2>/dev/null || echo 0) + 1 )); echo $seq > /tmp/us-backend.seq
    echo "DOM0-CMD: sh /run/payload/us-backend stop $seq ${US_DEVID:-51728} ${1:-45} &" >&2
    while [ $i -lt 180 ]; do
        v=$(xs_read "data/us-backend/$seq") && { echo "$v"; return 0; }
        sleep 0.5; i=$((i + 1))
    done
    echo "no answer from dom0"; return 1
}
# us_kill: the detach of the vbd (us_stop) kills its backend now.
us_kill() {
    echo "DOM0-CMD: touch /run/us-backend.${US_DEVID:-51728}.kill"
}
# us_disk_appears: the disk is there within 60 s; gives up early once the
# frontend went Closing or Closed (the driver refused the backend).
us_disk_appears() {
    local i
    for i in $(seq 1 120); do
        [ -b "/dev/${US_DISK:-xvdb}" ] && return 0
        case $(xs_read "device/vbd/${US_DEVID:-51728}/state") in 5 | 6) return 1 ;; esac
        sleep 0.5
    done
    return 1
}
# us_disk_gone SECONDS: the disk went away within SECONDS.
us_disk_gone() {
    local i
    for i in $(seq 1 $((2 * $1))); do [ -b "/dev/${US_DISK:-xvdb}" ] || return 0; sleep 0.5; done
    return 1
}
# us_stats_at_least KEY N: us_stats KEY once it is N or more, or after 5 s
# (the backend publishes its counters after it answers).
us_stats_at_least() {
    local i=0
    while [ $i -lt 10 ] && [ "$(us_stats "$1")" -lt "$2" ]; do sleep 0.5; i=$((i + 1)); done
    us_stats "$1"
}
# us_stats KEY: one counter of the backend (io::Stats::line's order).
us_stats() {
    local be; be=$(xs_read "device/vbd/${US_DEVID:-51728}/backend") || return 1
    # No node yet: nothing served yet.
    set -- "$1" $(xs_read "$be/test-stats" || echo 0 0 0 0 0 0 0 0 0 0 0 0)
    case $1 in
        requests) echo "$2" ;; reads) echo "$3" ;; writes) echo "$4" ;; flushes) echo "$5" ;;
        barriers) echo "$6" ;; discards) echo "$7" ;; errors) echo "$8" ;; indirect) echo "$9" ;;
        persistent) echo "${10}" ;; barrier_writes) echo "${11}" ;; delayed) echo "${12}" ;;
        most_waiting) echo "${13}" ;;
    esac
}

# bounded SECONDS CMD...: runs CMD in the background; 0 if it ended (with
# status 0) within SECONDS, 1 if it failed, 2 if it is still running.
bounded() {
    local secs=$1 pid n=0; shift
    "$@" & pid=$!
    while kill -0 $pid 2>/dev/null && [ $n -lt $((secs * 2)) ]; do sleep 0.5; n=$((n + 1)); done
    kill -0 $pid 2>/dev/null && return 2
    wait $pid
}

# The hostile scripts (xen-hostile.sh, virtio-hostile.sh):
# declared SCENARIO: sets WANT_STRIKES, WANT_DISK, WANT_IO and WANT_FAULT
# from the scenario's line in HOSTILE_EXPECT (the backend's or device's
# `--list`); fails unless each of the four has a known value. When a
# scenario strikes: in the Xen backend's keys, on flushes, on discards,
# after its 64th request or at teardown; in the virtio device's config at probe, after
# its 64th answer or on one kind of request.
declared() {
    local w
    WANT_STRIKES= WANT_DISK= WANT_IO= WANT_FAULT=
    for w in $(echo "${HOSTILE_EXPECT:-}" | tr ',' '\n' | grep "^$1:" | head -1 | tr ':' ' '); do
        case $w in
            strikes=keys | strikes=flushes | strikes=discards | strikes=trigger | strikes=teardown | strikes=probe | strikes=request) WANT_STRIKES=${w#*=} ;;
            disk=up | disk=refused) WANT_DISK=${w#*=} ;;
            io=ok | io=eio | io=fail | io=none | io=any) WANT_IO=${w#*=} ;;
            fault=named | fault=optional) WANT_FAULT=${w#*=} ;;
        esac
    done
    [ -n "$WANT_STRIKES" ] && [ -n "$WANT_DISK" ] && [ -n "$WANT_IO" ] && [ -n "$WANT_FAULT" ]
}

# fio_failed [eio]: fio (its exit status in fio_rc, fio_eio yes when it
# saw EIO) ended on its own with a failure (with EIO).
fio_failed() {
    [ -n "$fio_rc" ] && [ "$fio_rc" -ne 0 ] && [ "$fio_rc" -lt 128 ] && { [ "${1:-}" != eio ] || [ "$fio_eio" = yes ]; }
}

# ---- honest slow disks (guest/virtio-benign.sh, guest/xen-benign.sh) ------
# The disk BENIGN_DISK, whose backing drive the QEMU monitor calls
# BENIGN_DRIVE, is throttled by QEMU (block_set_io_throttle): each row
# prints "BENIGN <row> <who> <failed> <reads or -> <seconds>", which
# tools/testing/benign-table.sh turns into Documentation/benign.md.
# throttle BPS IOPS: the drive's limits (0 0: none).
throttle() { echo "HOST-CMD: block_set_io_throttle $BENIGN_DRIVE $1 0 0 $2 0 0"; sleep 2; }
# benign_reads NAME WHO COUNT: COUNT concurrent 4 KiB direct reads of
# distinct blocks on a disk throttled to 2 requests a second; checks that
# none failed and that they took at least a quarter of COUNT/2 s (less:
# the throttle did not hold them, the row did not strike).
benign_reads() {
    local name=$1 who=$2 n=$3 i t0 secs failed=0
    rm -f /tmp/rd.*
    t0=$(date +%s)
    for i in $(seq 1 "$n"); do
        (dd if=/dev/$BENIGN_DISK of=/dev/null bs=4k count=1 skip=$((i * 16)) iflag=direct 2> /dev/null; echo $? > /tmp/rd.$i) &
    done
    wait
    secs=$(($(date +%s) - t0))
    for i in $(seq 1 "$n"); do [ "$(cat /tmp/rd.$i 2> /dev/null)" = 0 ] || failed=$((failed + 1)); done
    echo "BENIGN $name $who $failed $n $secs"
    check "$name: $who: $n throttled reads took ${secs}s (at least $((n / 4))s: the disk was slow)" [ "$secs" -ge $((n / 4)) ]
    check "$name: $who: no read failed ($failed of $n)" [ "$failed" = 0 ]
}
# benign_stall NAME WHO SECS: fio writes and verifies (crc32c, queue depth
# 32) while the disk stalls for SECS s (throttled to one byte a second,
# then not at all); checks fio's end and that the stall struck (fio's
# requests in flight in its middle).
benign_stall() {
    local name=$1 who=$2 secs=$3 pid rc held errs
    fio --name=s --filename=/dev/$BENIGN_DISK --direct=1 --ioengine=libaio --iodepth=32 --rw=randwrite \
        --bs=4k --size=4M --time_based --runtime=$((secs + 8)) --verify=crc32c --verify_backlog=64 \
        --verify_fatal=1 --output=/tmp/stall.out > /dev/null 2>&1 &
    pid=$!
    sleep 3
    echo "HOST-CMD: block_set_io_throttle $BENIGN_DRIVE 1 0 0 0 0 0"
    sleep $((secs / 2))
    held=$(awk '{ print $1 + $2 }' /sys/block/$BENIGN_DISK/inflight)
    sleep $((secs - secs / 2))
    echo "HOST-CMD: block_set_io_throttle $BENIGN_DRIVE 0 0 0 0 0 0"
    wait $pid; rc=$?
    errs=$(sed -n 's/.*err= *\([0-9]*\).*/\1/p' /tmp/stall.out | sort -u | paste -sd, -)
    echo "BENIGN $name $who $([ $rc = 0 ] && [ "$errs" = 0 ] && echo 0 || echo "fio-exit-$rc,err=${errs:-none}") - $secs"
    check "$name: $who: the stall held fio's requests ($held in flight at its middle)" [ "${held:-0}" -gt 0 ]
    check "$name: $who: fio wrote and verified through a $secs s stall (exit $rc, err=${errs:-none})" [ $rc = 0 -a "$errs" = 0 ]
}
