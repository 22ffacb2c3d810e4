# SPDX-License-Identifier: GPL-2.0
# Guest side of tools/testing/bench/seeds.sh (busybox sh). The host prepends
# the settings below and passes the result to virtio-guest.sh / xen-guest.sh
# as the guest's /test.sh:
#   EXPS     experiments to run here: indirect persist align; virtio;
#            memory (MEMDISKS virtio-blk disks of MEMSIZE, 2 queues each;
#            MEMPOINTS: disk counts measured between 1 and MEMDISKS);
#            attach (every virtio-blk device of the boot; ATTACHDISKS: the
#            counts timed besides all of them, ATTACHREPS repetitions,
#            default REPS); "memory attach" both;
#            latency (LWL workloads: qd1 qd32 seqwrite, over the first
#            LATSIZE of the disk, in MiB with an M: 64M) or xlatency (the
#            same on Xen, xen-guest.sh -2);
#            xmemory and/or xattach (Xen, one vbd of the userspace blkif
#            backend, xen-guest.sh with USERSPACE_BACKEND=1: its memory
#            once up and after fio, REPS repetitions; its attach time,
#            ATTACHREPS); "xmemory xattach" both;
#            xscale (Xen, xen-guest.sh -V 32: memory and attach time of
#            blkback vbds at XSCALE_POINTS (1 8 32), C, ours and ours
#            again; XSCALE_REP: this boot's repetition number);
#            calib; or compare and/or profile (one setup of both drivers
#            serves both), calib first in that setup if named too ("calib
#            compare profile": the smoke run's one boot for the three; C
#            owns both vbds for calib before it lets one go to ours).
#            calib, compare and profile need xen-guest.sh -2
#            (xvda and xvdb on one disk), profile also perf in the guest
#   PWL      profile workloads (of CWL)     PRT profile fio runtime (s)
#   PPAIRS   profile runs per driver and workload (C, ours alternating)
#   CWL      compare workloads: rr4k seqread seqwrite
#   REPS     repetitions per point          RT  fio runtime per rep (s)
#   REP0     compare: number of the first repetition minus one (the runs
#            of the two vbd assignments, SWAP=0 and 1, continue the count)
#   SEGS     max_indirect_segments (both)   BSS persist block sizes
#   ABSS     alignment write sizes          VWL virtio workloads
#   OPS      indirect/persist directions    PERSIST blkback feature_persistent
#   JOBS     concurrent fio jobs for persist (aggregate MB/s)
#   POPS     persist directions (default: randread, the seed's workload)
# Several domUs (xen-guest.sh -n): BLKDOMU/BLKNDOMU/BLKT0 come from the kernel
# command line; every step (load, each fio run, unload) then starts at a
# common wall-clock slot BLKT0 + k * (RT + SLOTPAD) so that the domUs' fio runs
# overlap; BENCH lines carry domu=I ndomu=N (the host sums MB/s over domUs).
# Prints one "BENCH exp=... key=value ..." line per measured repetition (the
# host computes min/median/max) and TAP lines for the steps that must work;
# latency prints fio's JSON instead ("BENCH-LAT ids {json}", one line).
# A number that could not be measured is printed as NA: the host rejects it.
. /guest/common.sh
: "${EXPS:=}" "${REPS:=3}" "${RT:=3}" "${SEGS:=32}" "${BSS:=4k 64k 1M}"
: "${ABSS:=512 2k 4k 8k}" "${VWL:=qd1 qd32 seqread seqwrite}" "${OPS:=write read}"
: "${PERSIST:=?}" "${JOBS:=1}" "${POPS:=randread}" "${CWL:=rr4k seqread seqwrite}"
: "${LWL:=qd1 qd32 seqwrite}" "${LATSIZE:=64M}" "${MEMPOINTS:=}" "${ATTACHDISKS:=1}"
: "${BLKNDOMU:=1}" "${BLKDOMU:=1}" "${BLKT0:=0}" "${SLOTPAD:=5}"
DOMU=; [ "$BLKNDOMU" -gt 1 ] && DOMU=" domu=$BLKDOMU ndomu=$BLKNDOMU"
K=0 LATE=0
# bench_line FIELDS: one "BENCH FIELDS" line, counted (with the profile's
# PROFILE-RUN lines) in a file, as the callers run in subshells too, for
# the closing check.
bench_line() { echo "BENCH $*"; echo >> /tmp/bench-lines; }
: > /tmp/bench-lines
slot() { # multi-domU: wait for the next common slot
    [ "$BLKNDOMU" -gt 1 ] || return 0
    K=$((K + 1))
    local target=$((BLKT0 + K * (RT + SLOTPAD))) now
    now=$(date +%s)
    if [ "$now" -lt "$target" ]; then sleep $((target - now)); else LATE=$((LATE + 1)); echo "slot $K late by $((now - target)) s" >&2; fi
}
echo 1 > /proc/sys/kernel/printk 2>/dev/null
MB=/tmp/bench

# fio_one NAME DEV RW BS EXTRA...: one time-based fio run; prints
# "KIB BW_KIBPS IOPS" summed over directions (NA NA NA on failure).
fio_one() {
    local dev=$1 rw=$2 bs=$3 out; shift 3
    out=$(fio --name=b --filename="/dev/$dev" --direct=1 --rw="$rw" --bs="$bs" \
        --runtime="$RT" --time_based --group_reporting \
        --output-format=terse --terse-version=3 "$@" 2>/tmp/fio.err | grep '^3;' | tail -1)
    if [ -z "$out" ]; then
        echo "fio failed: rw=$rw bs=$bs $*: $(head -c 300 /tmp/fio.err)" >&2
        echo "NA NA NA"; return 1
    fi
    echo "$out" | awk -F';' '{ printf "%d %d %d\n", $6 + $47, $7 + $48, $8 + $49 }'
}
mbps() { awk -v k="$1" 'BEGIN { if (k == "NA") print "NA"; else printf "%.2f", k * 1.024 / 1000 }'; }
per_mib() { # COUNT KIB
    awk -v c="$1" -v k="$2" 'BEGIN { if (c == "NA" || k == "NA" || k == 0) print "NA"; else printf "%.3f", c * 1024 / k }'
}
dl() { awk -v a="$1" -v b="$2" 'BEGIN { if (a ~ /^[0-9]+$/ && b ~ /^[0-9]+$/) print b - a; else print "NA" }'; }
per_req() { # COUNT REQUESTS [SCALE [DECIMALS]]: COUNT * SCALE / REQUESTS, or NA
    awk -v n="$1" -v q="$2" -v k="${3:-1}" -v d="${4:-3}" \
        'BEGIN { if (q ~ /^[0-9]+$/ && q > 0 && n ~ /^[0-9]+$/) printf "%." d "f", n * k / q; else print "NA" }'
}
diskios() { awk '{ print $1 + $5 }' "/sys/block/$1/stat" 2>/dev/null || echo NA; }

# ---------------------------------------------------------------- Xen ----
D=xvda
RSSTATS=/sys/kernel/debug/xen_blkfront_rs-$D/stats
rsstat() { # KEY [DISK]: a counter from our debugfs stats
    awk -v k="$1:" '$1 == k { print $2; f = 1 } END { if (!f) print "NA" }' \
        "/sys/kernel/debug/xen_blkfront_rs-${2:-$D}/stats" 2>/dev/null || echo NA
}
wait_disk() { # DEV [present|absent]
    local i
    for i in $(seq 1 60); do
        if [ "${2:-present}" = present ]; then [ -e "/sys/block/$1" ] && return 0
        else [ -e "/sys/block/$1" ] || return 0; fi
        sleep 0.25
    done
    return 1
}
xen_load() { # c|rs [PARAM=VALUE...]
    local drv=$1; shift
    if [ "$drv" = c ]; then insmod /lib/modules/xen-blkfront.ko "$@"
    else insmod /lib/modules/xen_blkfront_rs.ko "$@"; fi || { not_ok "insmod $drv${*:+ $*}"; return 1; }
    if ! wait_disk $D; then
        not_ok "$drv${*:+ $*}: $D appears"
        dmesg | tail -15 | sed 's/^/DMESG: /'
        xen_unload "$drv"
        return 1
    fi
    [ "$drv" = c ] || for i in $(seq 1 20); do [ -r "$RSSTATS" ] && break; sleep 0.25; done
    sleep 0.5
}
xen_unload() { # c|rs
    local dir=vbd mod=xen_blkfront dev
    [ "$1" = rs ] && { dir=xen_blkfront_rs; mod=xen_blkfront_rs; }
    for dev in /sys/bus/xen/drivers/$dir/vbd-*; do
        [ -e "$dev" ] && echo "$(basename "$dev")" > /sys/bus/xen/drivers/$dir/unbind
    done
    wait_disk $D absent
    unload $mod || not_ok "rmmod $mod"
}
# xen_point EXP DRIVER "ID-KEYS" RW BS [fio args]: REPS runs, one BENCH line
# each with MB/s, ring requests per MiB and (ours) bytes copied per MiB.
xen_point() {
    local exp=$1 drv=$2 ids=$3 rw=$4 bs=$5 r kib bw iops i0 i1 r0 r1 c0 c1 n0 n1 extra fargs; shift 5
    fargs="$*"
    for r in $(seq 1 "$REPS"); do
        slot
        i0=$(diskios $D); r0=$(rsstat requests); c0=$(rsstat bytes_copied); n0=$(rsstat notifications)
        set -- $(fio_one $D "$rw" "$bs" $fargs); kib=$1 bw=$2 iops=$3
        i1=$(diskios $D); r1=$(rsstat requests); c1=$(rsstat bytes_copied); n1=$(rsstat notifications)
        if [ "$drv" = rs ]; then
            extra="reqs_per_mib=$(per_mib "$(dl "$r0" "$r1")" "$kib") copied_per_mib=$(per_mib "$(dl "$c0" "$c1")" "$kib") notifs_per_req=$(per_req "$(dl "$n0" "$n1")" "$(dl "$r0" "$r1")") blk_reqs_per_mib=$(per_mib "$(dl "$i0" "$i1")" "$kib")"
        else
            extra="reqs_per_mib=$(per_mib "$(dl "$i0" "$i1")" "$kib")"
        fi
        bench_line "exp=$exp driver=$drv $ids$DOMU op=$rw bs=$bs rep=$r late=$LATE mbps=$(mbps "$bw") iops=$iops $extra"
    done
}
c_bounce() { dmesg | grep "blkfront: $D:" | tail -1 | grep -o 'bounce buffer: [a-z]*' | awk '{ print $3 }'; }

# The C xen-blkfront binds a vbd once per boot: after an unbind it stays
# Closed (it never goes back to Initialising), so a second insmod of it, with
# any parameters, never connects. Each Xen boot therefore loads C once, runs
# every Xen experiment of the boot, unloads it, then does the same with ours.
exp_indirect() { # DRIVER (loaded with max_indirect_segments=$SEGS)
    local op
    echo "BENCH-INFO exp=indirect driver=$1 segs=$SEGS max_segments=$(q $D max_segments) max_hw_kb=$(q $D max_hw_sectors_kb)"
    for op in $OPS; do
        xen_point indirect $1 "segs=$SEGS" "$op" 1M --size=256M
    done
}
exp_persist() { # DRIVER
    local bs op b
    if [ "$1" = c ]; then b=$(c_bounce); else b=$(rsstat bounce_buffer); fi
    echo "BENCH-INFO exp=persist driver=$1 persistent=$PERSIST$DOMU bounce=${b:-NA} dmesg=$(dmesg | grep -o "$D: flush.*" | tail -1 | tr ' ;' '_,')"
    for bs in $BSS; do
        for op in $POPS; do
            xen_point persist $1 "persistent=$PERSIST jobs=$JOBS" "$op" "$bs" --size=64M --numjobs="$JOBS" --offset_increment=64M
        done
    done
}
exp_align() { # DRIVER
    local drv=$1 bs start blk stride stripe
    bench_line "exp=aligntopo driver=$drv phys=$(q $D physical_block_size) logical=$(q $D logical_block_size) io_min=$(q $D minimum_io_size) io_opt=$(q $D optimal_io_size) align_off=$(cat /sys/block/$D/alignment_offset)"
    for bs in $ABSS; do
        xen_point align $drv "phys=$(q $D physical_block_size)" randwrite "$bs" --size=64M
    done
    # Partition with util-linux's default alignment, then mkfs.ext4 on it.
    start=NA blk=NA stride=NA stripe=NA
    if command -v sfdisk >/dev/null && echo 'label: dos
size=256MiB, type=L' | sfdisk -q /dev/$D >/tmp/sfdisk.out 2>&1; then
        wait_disk ${D}1 || sleep 1
        start=$(cat /sys/block/$D/${D}1/start 2>/dev/null || echo NA)
        ok "$drv: sfdisk partition at sector $start"
    else
        not_ok "$drv: sfdisk ($(head -c 200 /tmp/sfdisk.out 2>/dev/null))"
    fi
    if command -v mkfs.ext4 >/dev/null && [ -b /dev/${D}1 ] && mkfs.ext4 -F -E nodiscard,lazy_itable_init=1,lazy_journal_init=1 /dev/${D}1 >/tmp/mkfs.out 2>&1; then
        dumpe2fs -h /dev/${D}1 > /tmp/dumpe2fs.out 2>/dev/null
        blk=$(awk -F: '/^Block size:/ { gsub(/ /, "", $2); print $2 }' /tmp/dumpe2fs.out)
        stride=$(awk -F: '/^RAID stride:/ { gsub(/ /, "", $2); print $2 }' /tmp/dumpe2fs.out)
        stripe=$(awk -F: '/^RAID stripe width:/ { gsub(/ /, "", $2); print $2 }' /tmp/dumpe2fs.out)
        ok "$drv: mkfs.ext4"
    else
        not_ok "$drv: mkfs.ext4 ($(tail -c 200 /tmp/mkfs.out 2>/dev/null))"
    fi
    grep -i 'warn\|creating filesystem' /tmp/mkfs.out 2>/dev/null | sed "s/^/MKFS $drv: /"
    bench_line "exp=alignfs driver=$drv part_start=$start part_start_aligned=$(awk -v s="$start" -v p="$(q $D physical_block_size)" 'BEGIN { if (s == "NA") print "NA"; else print ((s * 512) % p == 0) ? 1 : 0 }') part_align_off=$(cat /sys/block/$D/${D}1/alignment_offset 2>/dev/null || echo NA) ext4_block=${blk:-NA} stride=${stride:-0} stripe_width=${stripe:-0}"
    dd if=/dev/zero of=/dev/$D bs=4k count=256 oflag=direct 2>/dev/null   # wipe the label
    blockdev --rereadpt /dev/$D 2>/dev/null
}
xen_driver() { # DRIVER: one load, every Xen experiment of this boot, unload
    local e
    slot
    xen_load $1 max_indirect_segments=$SEGS || return
    for e in $EXPS; do
        echo "BENCH-PHASE $e $1 start $(cut -d' ' -f1 /proc/uptime)"
        exp_$e $1
    done
    slot
    xen_unload $1
}

# ------------------------------------------------------------ compare ----
# C and ours loaded at once, on two vbds of the same dom0 disk (xen-guest.sh
# -2): xvda stays with C, xvdb goes to ours (C binds both, then lets xvdb
# go; SWAP=1 the other way round). Repetitions alternate C, ours, C, ours..., so both see the same boot,
# backing disk, data and host load, and neither always runs first.
# Backend notifications are counted in dom0: a mark asks dom0 (DOM0-CMD) to
# print the interrupt count of xen-blkback's event channels ("BENCH-DOM0
# mark=N irqs=X" in the log); only one driver does I/O between two marks.
M=0
mark() {
    M=$((M + 1))
    echo "DOM0-CMD: sh /run/payload/blkif-irqs mark=$M"
    sleep 2   # dom0 reads the count before anything else happens here
}
# The domU's counters around one fio run, to compare what each driver costs
# per request: busy CPU time (all CPUs, USER_HZ ticks of /proc/stat: user
# nice system irq softirq; not steal, the time Xen ran something else),
# interrupts from the blkif event channels (both drivers name theirs
# "blkif"; only one does I/O at a time: backend responses notified),
# context switches, and IPIs (the RES and CAL rows: Xen's own IPI event
# channels count there too).
counts() {
    awk 'FILENAME == "/proc/stat" && $1 == "cpu" { b = $2 + $3 + $4 + $7 + $8 }
         FILENAME == "/proc/stat" && $1 == "ctxt" { c = $2 }
         FILENAME == "/proc/interrupts" {
             n = 0; for (i = 2; i <= NF && $i ~ /^[0-9]+$/; i++) n += $i
             if ($NF == "blkif") q += n
             if ($1 == "RES:" || $1 == "CAL:") p += n
         }
         END { print b + 0, q + 0, c + 0, p + 0 }' /proc/stat /proc/interrupts
}
nth() { # K "BEFORE" "AFTER": the change of the Kth of counts' figures
    dl "$(echo $2 | cut -d' ' -f$1)" "$(echo $3 | cut -d' ' -f$1)"
}
compare_args() { # workload -> "RW BS fio-args"
    case $1 in
        rr4k) echo "randread 4k --ioengine=libaio --iodepth=32 --size=256M" ;;
        rr4k1) echo "randread 4k --ioengine=psync --size=256M" ;;
        seqread) echo "read 1M --ioengine=libaio --iodepth=4 --size=256M" ;;
        seqwrite) echo "write 1M --ioengine=libaio --iodepth=4 --size=256M" ;;
    esac
}
# Which vbd each driver gets: C xvda and ours xvdb, or the other way round
# with SWAP=1 (to tell a difference between the drivers from one between
# the two vbds).
if [ "${SWAP:-0}" = 1 ]; then CDEV=xvdb RSDEV=xvda; else CDEV=xvda RSDEV=xvdb; fi
vbd_of() { if [ "$1" = xvda ]; then echo vbd-51712; else echo vbd-51728; fi; }
dev_of() { # driver label -> its disk (calib: a and b are the two vbds)
    case $1 in rs) echo $RSDEV ;; c) echo $CDEV ;; a) echo xvda ;; b) echo xvdb ;; esac
}
# both_drivers_up EXP: C on $CDEV, ours on $RSDEV, 256 MiB of data written.
# c_on_both: the C driver binds xvda and xvdb.
c_on_both() {
    insmod /lib/modules/xen-blkfront.ko max_indirect_segments=$SEGS || { not_ok "insmod xen-blkfront"; return 1; }
    wait_disk xvda && wait_disk xvdb || { not_ok "C: xvda and xvdb appear"; return 1; }
}
# fill_region DEV: 256 MiB of data written first, so reads come from the
# same written blocks on both vbds (one backing disk).
fill_region() {
    dd if=/dev/urandom of=/tmp/r bs=1M count=1 2>/dev/null
    for i in $(seq 1 256); do cat /tmp/r; done | dd of=/dev/$1 bs=1M oflag=direct 2>/dev/null
}
both_drivers_up() {
    local drv dev f a b
    c_on_both || return 1
    case " $1 " in *" calib "*) calib_pairs ;; esac
    vbd_of $RSDEV > /sys/bus/xen/drivers/vbd/unbind
    wait_disk $RSDEV absent || { not_ok "C lets $RSDEV go"; return 1; }
    insmod /lib/modules/xen_blkfront_rs.ko max_indirect_segments=$SEGS || { not_ok "insmod xen_blkfront_rs"; return 1; }
    wait_disk $RSDEV || { not_ok "ours: $RSDEV appears"; dmesg | tail -15 | sed 's/^/DMESG: /'; return 1; }
    for i in $(seq 1 20); do [ -r /sys/kernel/debug/xen_blkfront_rs-$RSDEV/stats ] && break; sleep 0.25; done
    ok "C on $CDEV, ours on $RSDEV, one backing disk"
    for drv in c rs; do
        dev=$(dev_of $drv)
        echo "BENCH-INFO exp=$(echo $1 | tr " " +) driver=$drv dev=$dev persistent=$PERSIST segs=$SEGS max_segments=$(q $dev max_segments) max_hw_kb=$(q $dev max_hw_sectors_kb) connect=$(dmesg | grep -o "$dev: flush.*\|$dev: barrier.*" | tail -1 | tr ' ;' '_,')"
    done
    # The queue settings where the drivers differ (scheduler, depth,
    # limits), for the log: a difference in cost may come from blk-mq.
    for f in /sys/block/$CDEV/queue/*; do
        f=${f##*/}
        [ -f /sys/block/$CDEV/queue/$f ] || continue
        a=$(cat /sys/block/$CDEV/queue/$f 2>/dev/null) b=$(cat /sys/block/$RSDEV/queue/$f 2>/dev/null)
        [ "$a" = "$b" ] || echo "QUEUE-DIFF $f: C '$a' ours '$b'"
    done
    echo "QUEUE-DIFF hw queues: C $(ls -d /sys/block/$CDEV/mq/* | wc -l) ours $(ls -d /sys/block/$RSDEV/mq/* | wc -l)"
    # Both vbds show one backing disk: calib's fill serves compare too.
    [ -n "${FILLED:-}" ] || fill_region $CDEV
}
both_drivers_down() {
    sed "s/^/STATS $RSDEV: /" /sys/kernel/debug/xen_blkfront_rs-$RSDEV/stats
    vbd_of $RSDEV > /sys/bus/xen/drivers/xen_blkfront_rs/unbind
    unload xen_blkfront_rs || not_ok "rmmod xen_blkfront_rs"
    vbd_of $CDEV > /sys/bus/xen/drivers/vbd/unbind
    unload xen_blkfront || not_ok "rmmod xen_blkfront"
}
# measure_pairs EXP FIRST SECOND: the repetitions of every workload, the two
# labels alternating first; "rs" is ours (its own request and notification
# counters), any other label a C-driven disk (requests from its stat).
measure_pairs() {
    local exp=$1 first=$2 second=$3 w r drv dev kib bw iops q q0 q1 n0 n1 m0 c0 c1 order line
    for w in $CWL; do
        for r in $(seq $((${REP0:-0} + 1)) $((${REP0:-0} + REPS))); do
            # FIRST first in odd repetitions, SECOND first in even ones.
            order="$first $second"; [ $((r % 2)) = 0 ] && order="$second $first"
            for drv in $order; do
                dev=$(dev_of $drv)
                m0=$M
                if [ $drv = rs ]; then q0=$(rsstat requests $dev); n0=$(rsstat notifications $dev); else q0=$(diskios $dev); fi
                c0=$(counts)
                set -- $(fio_one $dev $(compare_args $w)); kib=$1 bw=$2 iops=$3
                c1=$(counts)
                if [ $drv = rs ]; then q1=$(rsstat requests $dev); n1=$(rsstat notifications $dev); else q1=$(diskios $dev); fi
                mark
                q=$(dl "$q0" "$q1")
                line="exp=$exp driver=$drv dev=$dev persistent=$PERSIST wl=$w rep=$r mbps=$(mbps "$bw") iops=$iops reqs=$q cpu_us_per_req=$(per_req "$(nth 1 "$c0" "$c1")" "$q" 10000 1) irqs_per_req=$(per_req "$(nth 2 "$c0" "$c1")" "$q") ctxsw_per_req=$(per_req "$(nth 3 "$c0" "$c1")" "$q") ipis_per_req=$(per_req "$(nth 4 "$c0" "$c1")" "$q") mark0=$m0 mark1=$M"
                [ $drv = rs ] && line="$line notifs_per_req=$(per_req "$(dl "$n0" "$n1")" "$q")"
                bench_line "$line"
            done
        done
    done
}
exp_compare() { # after both_drivers_up
    mark
    measure_pairs compare c rs
}

# ------------------------------------------------------------- calib -----
# The A/A calibration of compare: the C driver on both vbds ("a" = xvda,
# "b" = xvdb), measured exactly like compare. Identical drivers, so the
# spread of b/a per repetition is what the method itself contributes.
# calib_pairs: the measurement, with C bound to both vbds.
calib_pairs() {
    ok "A/A: C on xvda and xvdb, one backing disk"
    fill_region xvda; FILLED=1
    mark
    measure_pairs calib a b
}
exp_calib() {
    c_on_both || return
    calib_pairs
    vbd_of xvda > /sys/bus/xen/drivers/vbd/unbind
    vbd_of xvdb > /sys/bus/xen/drivers/vbd/unbind
    unload xen_blkfront || not_ok "rmmod xen_blkfront"
}

# ------------------------------------------------------------- profile ----
# Where each driver's domU CPU time goes under compare workloads ($PWL):
# perf (cpu-clock sampling at 1999 Hz, all CPUs, call chains) while fio runs
# on C's vbd, then on ours, $PPAIRS times (default 2) per workload. Samples
# of the idle loop (the blocked hypercall within three frames of
# default_idle) are dropped; interrupts taken while idle are kept. Prints
# per run "PROFILE-RUN drv wl=W KIB BW IOPS reqs=N ...", "PROFILE-BUSY drv
# W samples in_driver_module=S", the top leaves and chains
# "PROFILE[-LEAF] drv W samples leaf<caller", and every sample with a
# driver frame by leaf and the driver's innermost frame ("PROFILE-DRV drv
# W samples leaf@frame": all of them, so that they add up to S), and the
# samples whose leaf is in the driver module by instruction ("PROFILE-IP
# drv W samples sym+0xoff", to read against objdump -d of the .ko, where
# the samples of a function go); needs perf in the guest
# (xen-guest.sh DOMU_EXTRA_BINS=/usr/bin/perf).
profile_fold() { # "drv wl": perf script (comm,ip,sym,symoff,dso) on stdin -> PROFILE lines
    awk -v d="$1" '
        function flush() {
            if (n == 0) return
            for (i = 1; i <= 3 && i <= n; i++) if (f[i] ~ /^(default_idle|xen_safe_halt|pv_native_safe_halt)$/) idle = 1
            if (!idle) {
                busy++; k = f[1]; for (i = 2; i <= 6 && i <= n; i++) k = k "<" f[i]; c[k]++; leaf[f[1]]++
                if (drv) { indrv++; dk[f[1] "@" f[drv]]++ }
                if (leafoff != "") ip[leafoff]++
            }
            n = 0; idle = 0; drv = 0; leafoff = ""
        }
        /^[^ \t]/ { flush(); next }
        /^[ \t]*$/ { flush(); next }
        { s = $2; sub(/\+0x.*/, "", s); f[++n] = s
          if (!drv && $NF ~ /^\(\[xen_blkfront(_rs)?\]\)$/) { drv = n; if (n == 1) leafoff = $2 } }
        END {
            flush()
            print "PROFILE-BUSY " d " " busy + 0 " in_driver_module=" indrv + 0
            for (k in leaf) print "PROFILE-LEAF " d " " leaf[k] " " k
            for (k in c) print "PROFILE " d " " c[k] " " k
            for (k in dk) print "PROFILE-DRV " d " " dk[k] " " k
            for (k in ip) print "PROFILE-IP " d " " ip[k] " " k
        }' | sort -k4,4nr | awk '$1 == "PROFILE-BUSY" || $1 == "PROFILE-DRV" || $1 == "PROFILE-IP" || ($1 == "PROFILE-LEAF" && nl++ < 25) || ($1 == "PROFILE" && np++ < 25)'
}
exp_profile() { # after both_drivers_up
    local drv dev q0 q1 w RT=${PRT:-$RT}
    command -v perf > /dev/null || { not_ok "perf in the guest"; return; }
    for w in ${PWL:-seqread}; do for drv in $(for _ in $(seq 1 "${PPAIRS:-2}"); do echo c rs; done); do
        dev=$(dev_of $drv)
        q0=$(diskios $dev)
        fio_one $dev $(compare_args $w) > /tmp/fio.out &
        sleep 1
        perf record -q -g -a -e cpu-clock -F 1999 -o /tmp/perf.data -- sleep $((RT - 2)) 2>/tmp/perf.err ||
            { not_ok "perf record $drv: $(head -c 200 /tmp/perf.err)"; wait; continue; }
        wait
        q1=$(diskios $dev)
        echo "PROFILE-RUN $drv wl=$w $(cat /tmp/fio.out) reqs=$(dl "$q0" "$q1") (whole fio run; samples: $((RT - 2)) s of it)"
        echo >> /tmp/bench-lines
        perf script -i /tmp/perf.data -F comm,ip,sym,symoff,dso 2>/dev/null | profile_fold "$drv $w"
    done; done
}

# ------------------------------------------------------------- virtio ----
vdisk() { ls /sys/block | grep '^vd' | head -1; }
virtio_load() { # c|rs [PARAMS...]
    local drv=$1; shift
    if [ "$drv" = c ]; then insmod /lib/modules/virtio_blk.ko "$@"; else insmod /lib/modules/virtio_blk_rs.ko "$@"; fi ||
        { not_ok "insmod virtio $drv $*"; return 1; }
    set -- "$drv"
    for i in $(seq 1 40); do [ -n "$(vdisk)" ] && break; sleep 0.25; done
    [ -n "$(vdisk)" ] || { not_ok "virtio $1: disk appears"; return 1; }
    sleep 0.3
}
virtio_unload() { if [ "$1" = c ]; then unload virtio_blk; else unload virtio_blk_rs; fi; }
virtio_args() { # workload -> "RW BS fio-args"
    case $1 in
        qd1) echo "randread 4k --ioengine=psync --size=128M" ;;
        poll1) echo "randread 4k --ioengine=io_uring --hipri=1 --iodepth=1 --size=128M" ;;
        qd32) echo "randread 4k --ioengine=libaio --iodepth=32 --size=128M" ;;
        seqread) echo "read 1M --ioengine=libaio --iodepth=4 --size=128M" ;;
        seqwrite) echo "write 1M --ioengine=libaio --iodepth=4 --size=128M" ;;
    esac
}
exp_virtio() {
    local w drv r d kib bw iops line req nt npr
    virtio_load c && d=$(vdisk) && dd if=/dev/urandom of=/tmp/r bs=1M count=1 2>/dev/null &&
        for i in $(seq 0 127); do cat /tmp/r; done | dd of=/dev/$d bs=1M oflag=direct 2>/dev/null
    virtio_unload c
    for w in $VWL; do
        for drv in c rs; do
            for r in $(seq 1 "$REPS"); do
                # poll1: one of the disk's queues polled (QEMU gives it one
                # per vCPU), in both drivers.
                virtio_load $drv $([ "$w" = poll1 ] && echo poll_queues=1) || continue
                d=$(vdisk)
                set -- $(fio_one "$d" $(virtio_args $w)); kib=$1 bw=$2 iops=$3
                virtio_unload $drv
                npr=
                if [ "$drv" = rs ]; then
                    line=$(dmesg | grep 'removed:.*requests.*notifications' | tail -1)
                    req=$(echo "$line" | sed -n 's/.*removed: \([0-9]*\) requests, \([0-9]*\) notifications.*/\1/p')
                    nt=$(echo "$line" | sed -n 's/.*removed: \([0-9]*\) requests, \([0-9]*\) notifications.*/\2/p')
                    npr=" notifs_per_req=$(per_req "$nt" "$req")"
                fi
                bench_line "exp=virtio driver=$drv wl=$w rep=$r mbps=$(mbps "$bw") iops=$iops$npr"
            done
        done
    done
}

# ------------------------------------------------------------ latency ----
# Completion latency percentiles of both drivers on one disk, with an A/A
# comparison in the same repetitions: labels "a" and "b" are both the C
# driver, "rs" ours; every repetition runs the three, in an order that
# rotates (a rs b, rs b a, b a rs, ...) so that no label always runs first
# or last. ours/C is then rs/a per repetition and the A/A spread b/a per
# repetition: two runs of one repetition each time. Each run loads and
# unloads its driver, as in exp_virtio. fio prints JSON (percentile list
# below, at most fio's 20 entries: the host draws the CDF from them); the
# guest joins it into one "BENCH-LAT <ids> {json}" console line for
# report.py to parse.
LAT_PCTS=1:5:10:20:30:40:50:60:70:80:90:95:99:99.5:99.9:99.95:99.99
latency_args() { # workload -> "RW BS fio-args"
    case $1 in
        qd1) echo "randread 4k --ioengine=psync" ;;
        qd32) echo "randread 4k --ioengine=libaio --iodepth=32" ;;
        seqwrite) echo "write 1M --ioengine=libaio --iodepth=4" ;;
    esac
}
lat_fio() { # LABEL DEV WORKLOAD REP [IDS]: one fio run, its BENCH-LAT line
    local lab=$1 d=$2 w=$3 r=$4 ids=${5:-} rw bs json
    set -- $(latency_args "$w"); rw=$1 bs=$2; shift 2
    # Only the JSON object: fio may print notes before it.
    json=$(fio --name=lat --filename="/dev/$d" --direct=1 --rw="$rw" --bs="$bs" --size="${LATSIZE:-64M}" \
        --runtime="$RT" --time_based --group_reporting --output-format=json \
        --percentile_list=$LAT_PCTS "$@" 2>/tmp/fio.err | sed -n '/^{/,$p' | sed 's/^[[:space:]]*//' | tr -d '\n')
    if [ -z "$json" ]; then
        not_ok "latency $lab $w rep $r: fio ($(head -c 300 /tmp/fio.err))"
        return
    fi
    echo "BENCH-LAT exp=latency driver=$lab$ids wl=$w rep=$r $json"
    echo >> /tmp/bench-lines
}
lat_one() { # LABEL WORKLOAD REP: virtio, the label's driver loaded for the run
    local drv=c
    [ "$1" = rs ] && drv=rs
    virtio_load $drv || return
    lat_fio "$1" "$(vdisk)" "$2" "$3"
    virtio_unload $drv
}
# lat_prepare DEV: the region fio reads, written once (reads of
# never-written blocks of a sparse image would not touch its data), then
# one unmeasured run, so that the host's writeback of the fill and fio's
# first start weigh on no measured run.
lat_prepare() {
    local i
    dd if=/dev/urandom of=/tmp/r bs=1M count=1 2>/dev/null
    for i in $(seq 1 "${LATSIZE%M}"); do cat /tmp/r; done | dd of=/dev/$1 bs=1M oflag=direct 2>/dev/null
    fio --name=warm --filename="/dev/$1" --direct=1 --rw=randread --bs=4k --size="$LATSIZE" \
        --runtime="$RT" --time_based --ioengine=libaio --iodepth=32 > /dev/null 2>&1
}
exp_latency() {
    local w r order lab
    virtio_load c && lat_prepare "$(vdisk)"
    virtio_unload c
    for w in $LWL; do
        for r in $(seq 1 "$REPS"); do
            case $((r % 3)) in
                1) order="a rs b" ;;
                2) order="rs b a" ;;
                0) order="b a rs" ;;
            esac
            for lab in $order; do lat_one $lab "$w" "$r"; done
        done
    done
}

# Xen (EXPS=xlatency, xen-guest.sh -2): the C driver binds a vbd once per
# boot, so the three labels cannot share one phase as on virtio. As in
# calib and compare: C on xvda and xvdb first, labels "a" (xvda) and "b"
# (xvdb): the A/A spread, the difference between the two vbds in it; then
# xvdb goes to ours, labels "c" (C, xvda) and "rs" (ours, xvdb). The two
# labels of a phase alternate which runs first.
lat_xen_pairs() { # FIRST SECOND (repetitions numbered on from REP0)
    local w r lab
    for w in $LWL; do
        for r in $(seq $((${REP0:-0} + 1)) $((${REP0:-0} + REPS))); do
            for lab in $([ $((r % 2)) = 1 ] && echo "$1 $2" || echo "$2 $1"); do
                lat_fio $lab "$(dev_of $lab)" "$w" "$r" " persistent=$PERSIST"
            done
        done
    done
}
exp_xlatency() {
    c_on_both || return
    # One backing disk: the region written through xvda is xvdb's too.
    lat_prepare xvda
    ok "latency A/A: C on xvda and xvdb"
    lat_xen_pairs a b
    vbd_of $RSDEV > /sys/bus/xen/drivers/vbd/unbind
    wait_disk $RSDEV absent || { not_ok "C lets $RSDEV go"; return 1; }
    insmod /lib/modules/xen_blkfront_rs.ko max_indirect_segments=$SEGS || { not_ok "insmod xen_blkfront_rs"; return 1; }
    wait_disk $RSDEV || { not_ok "ours: $RSDEV appears"; return 1; }
    ok "latency: C on $CDEV, ours on $RSDEV"
    lat_xen_pairs c rs
    both_drivers_down
}

# ------------------------------------------------------------- memory ----
# What a driver takes per disk: every virtio-blk device of the boot (the
# host gives MEMDISKS of them, 2 queues each) is left unbound
# (drivers_autoprobe off), the driver loaded, one device bound
# (drivers_probe), then the others. Before the load, after the first disk,
# after each count of MEMPOINTS in between ("8": also with 8 disks) and
# after the last: free memory, Slab and SUnreclaim of /proc/meminfo,
# each after dropping the caches (a disk's partition scan fills the page
# cache) and giving every slab cache's empty slabs back (so that objects
# the previous driver freed do not serve the next one's allocations
# unseen). Free memory is MemFree plus the pages on the per-CPU free lists
# (/proc/zoneinfo's pageset counts, up to a few MiB that MemFree does not
# count and that move with every allocation). C first, then ours, each
# with its own baseline, after one unmeasured round of C with every disk
# and a fio run: what the kernel sets up once per boot (a first block
# device, fio's first start) then weighs on neither. Then 1 MiB sequential
# writes and reads on the first disk, all disks bound, C and ours
# alternating.
mem_snap() {
    local i f
    sync
    sleep 1
    for i in 1 2; do
        echo 3 > /proc/sys/vm/drop_caches
        for f in /sys/kernel/slab/*/shrink; do echo 1 > "$f"; done 2>/dev/null
        sleep 0.5
    done
    { cat /proc/meminfo; sed -n 's/^ *count: */pcp: /p' /proc/zoneinfo; } |
        awk '$1 == "MemFree:" { f += $2 } $1 == "pcp:" { f += $2 * 4 }
             $1 == "Slab:" { s = $2 } $1 == "SUnreclaim:" { u = $2 } END { print f, s, u }'
}
vblk_devs() { # the virtio-blk devices (virtio device id 2)
    local d
    for d in /sys/bus/virtio/devices/*; do
        [ "$(cat "$d/device" 2>/dev/null)" = 0x0002 ] && basename "$d"
    done
}
nvd() { ls /sys/block | grep -c '^vd'; }
wait_nvd() { # COUNT
    local i
    for i in $(seq 1 80); do [ "$(nvd)" -ge "$1" ] && return 0; sleep 0.25; done
    return 1
}
mem_line() { # DRIVER DISKS REP "BASE" "NOW" MODULE_KIB [EXP [IDS]]
    local drv=$1 disks=$2 rep=$3 exp=${7:-memory} ids=${8:-}
    shift 3
    set -- $1 $2 "$3"
    bench_line "exp=$exp driver=$drv disks=$disks$ids rep=$rep memfree_kib=$(($1 - $4)) slab_kib=$(($5 - $2)) sunreclaim_kib=$(($6 - $3)) module_kib=$7"
}
slab_kib() { # the slab caches' sizes in KiB (/proc/slabinfo: name, objects, object size)
    awk 'NR > 2 { printf "%s %d\n", $1, $3 * $4 / 1024 }' /proc/slabinfo
}
# slab_growth BASE DIVISOR FIELDS: a line "FIELDS cache=NAME
# kib_per_disk=N" per slab cache that grew by 4 KiB or more since BASE (a
# slab_kib output), the growth divided by DIVISOR.
slab_growth() {
    slab_kib | awk -v f="$3" -v n="$2" 'NR == FNR { k[$1] = $2; next }
        $2 - k[$1] >= 4 { printf "%s cache=%s kib_per_disk=%.1f\n", f, $1, ($2 - k[$1]) / n }' "$1" -
}
exp_memory() {
    local drv mod ko devs n base one all d r w kib bw iops mkib k
    devs=$(vblk_devs); n=$(echo $devs | wc -w)
    check "memory: $n virtio-blk devices (want ${MEMDISKS:-8})" [ "$n" -eq "${MEMDISKS:-8}" ] || return 1
    # Drivers bind only when told to: the disks come one by one.
    echo 0 > /sys/bus/virtio/drivers_autoprobe
    if insmod /lib/modules/virtio_blk.ko; then
        for d in $devs; do echo "$d" > /sys/bus/virtio/drivers_probe; done
        wait_nvd "$n"
        fio_one "$(vdisk)" write 1M --ioengine=libaio --iodepth=8 --size="${MEMSIZE:-64M}" > /dev/null
        unload virtio_blk
    fi
    # Each repetition measures C, then ours.
    for r in $(seq 1 "$REPS"); do for drv in c rs; do
        if [ $drv = c ]; then mod=virtio_blk ko=virtio_blk.ko; else mod=virtio_blk_rs ko=virtio_blk_rs.ko; fi
        one=
        base=$(mem_snap)
        insmod /lib/modules/$ko || { not_ok "memory: insmod $mod"; continue; }
        mkib=$(awk -v m=$mod '$1 == m { printf "%d", $2 / 1024 }' /proc/modules)
        set -- $devs
        echo "$1" > /sys/bus/virtio/drivers_probe
        check "memory $drv: the first disk appears" wait_nvd 1 && one=$(mem_snap) && slab_kib > /tmp/slab1
        shift
        # The devices bound so far; a snapshot at each count of MEMPOINTS
        # between 1 and all.
        k=1
        for d in "$@"; do
            echo "$d" > /sys/bus/virtio/drivers_probe
            k=$((k + 1))
            if [ -n "$one" ] && [ "$k" -lt "$n" ] && echo " $MEMPOINTS " | grep -q " $k " &&
                check "memory $drv: $k disks appear" wait_nvd "$k"; then
                mem_line $drv "$k" $r "$base" "$(mem_snap)" "$mkib"
            fi
        done
        if [ -n "$one" ] && check "memory $drv: $n disks appear" wait_nvd "$n"; then
            all=$(mem_snap)
            d=$(vdisk)
            echo "BENCH-INFO exp=memory driver=$drv disks=$n queues=$(ls -d /sys/block/$d/mq/* | wc -l) nr_requests=$(q $d nr_requests) max_segments=$(q $d max_segments)"
            mem_line $drv 1 $r "$base" "$one" "$mkib"
            mem_line $drv "$n" $r "$base" "$all" "$mkib"
            # Where the slab growth of the other disks went, for reading
            # the table: the caches that grew by 4 KiB or more.
            slab_growth /tmp/slab1 $((n - 1)) "MEMORY-SLAB driver=$drv rep=$r"
        fi
        check "memory: rmmod $mod" unload $mod
    done; done
    # Throughput: C and ours alternating per repetition (each load binds
    # every disk), so that the host's drift weighs on both alike.
    echo 1 > /sys/bus/virtio/drivers_autoprobe
    for r in $(seq 1 "$REPS"); do
        for drv in c rs; do
            virtio_load $drv || continue
            wait_nvd "$n"
            d=$(vdisk)
            for w in seqwrite seqread; do
                set -- $(fio_one "$d" "$([ $w = seqread ] && echo read || echo write)" 1M \
                    --ioengine=libaio --iodepth=8 --size="${MEMSIZE:-64M}"); kib=$1 bw=$2 iops=$3
                bench_line "exp=memory driver=$drv wl=$w rep=$r mbps=$(mbps "$bw") iops=$iops"
            done
            virtio_unload $drv
        done
    done
}

# ------------------------------------------------------------- attach ----
# How long a driver takes to bring disks up: both modules loaded while
# every virtio-blk device is unbound (drivers_autoprobe off), then per run
# the first COUNT devices written to the driver's bind file, one after the
# other, and the time from the first write until the COUNT-th disk is in
# /sys/block (probe, add_disk and its partition scan: what a user waits
# for before the disk can be opened), then every device unbound again.
# Each repetition runs C, ours and C again (c_again: C against C, the A/A
# spread), for each count of ATTACHDISKS and for all devices; one
# unmeasured round of each driver first takes what the boot and a
# driver's first bind set up once.
now_ns() { sed -n 's/^now at \([0-9]*\) nsecs$/\1/p;3q' /proc/timer_list; }
# ms_until T0 SECONDS CMD...: polls CMD every 10 ms until it succeeds and
# prints the milliseconds from T0 (now_ns) until then; NA (failing) once
# SECONDS have gone by.
ms_until() {
    local t0=$1 lim=$2 t1; shift 2
    until "$@"; do
        t1=$(now_ns)
        [ $((t1 - t0)) -lt $((lim * 1000000000)) ] || { echo NA; return 1; }
        usleep 10000
    done
    t1=$(now_ns)
    awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f\n", (b - a) / 1e6 }'
}
nvd_at_least() { [ "$(nvd)" -ge "$1" ]; }
vdrv_dir() { if [ "$1" = rs ]; then echo /sys/bus/virtio/drivers/virtio_blk_rs; else echo /sys/bus/virtio/drivers/virtio_blk; fi; }
attach_run() { # DRIVER COUNT: prints the milliseconds, or NA
    local dir t0 d
    dir=$(vdrv_dir "$1")
    set -- $(echo $devs | cut -d' ' -f1-"$2")
    t0=$(now_ns)
    for d in "$@"; do echo "$d" > "$dir/bind"; done
    ms_until "$t0" 30 nvd_at_least $#
}
attach_unbind() { # DRIVER
    local dir d
    dir=$(vdrv_dir "$1")
    for d in "$dir"/virtio*; do [ -e "$d" ] && echo "$(basename "$d")" > "$dir/unbind"; done
    for d in $(seq 1 80); do [ "$(nvd)" -eq 0 ] && return 0; sleep 0.25; done
    return 1
}
exp_attach() {
    local devs n r k drv ms
    echo "BENCH-PHASE attach start $(cut -d' ' -f1 /proc/uptime)"
    devs=$(vblk_devs); n=$(echo $devs | wc -w)
    check "attach: $n virtio-blk devices, none bound" [ "$n" -gt 0 -a "$(nvd)" -eq 0 ] || return 1
    echo 0 > /sys/bus/virtio/drivers_autoprobe
    check "attach: insmod virtio_blk" insmod /lib/modules/virtio_blk.ko || return 1
    check "attach: insmod virtio_blk_rs" insmod /lib/modules/virtio_blk_rs.ko || return 1
    for drv in c rs; do
        attach_run $drv "$n" > /dev/null
        check "attach: $drv: unbind after the unmeasured round" attach_unbind $drv || return 1
    done
    for r in $(seq 1 "${ATTACHREPS:-$REPS}"); do
        for k in $(echo $ATTACHDISKS | tr ' ' '\n' | awk -v n="$n" '$1 < n') "$n"; do
            for drv in c rs c_again; do
                ms=$(attach_run ${drv%_again} "$k")
                bench_line "exp=attach driver=$drv disks=$k rep=$r attach_ms=$ms"
                check "attach $drv $k: unbind" attach_unbind ${drv%_again} || return 1
            done
        done
    done
    check "attach: rmmod virtio_blk_rs" unload virtio_blk_rs
    check "attach: rmmod virtio_blk" unload virtio_blk
    echo 1 > /sys/bus/virtio/drivers_autoprobe
}

# ------------------------------------------------- xattach, xmemory ----
# Xen counterparts of attach and memory (xen-guest.sh with
# USERSPACE_BACKEND=1): the C driver binds a blkback vbd once per boot, but
# the userspace blkif backend (us_start in common.sh) creates a fresh vbd,
# xvdb, every time it is asked, so both drivers can be brought up again and
# again in one boot. Both modules register for "vbd": one loaded at a time.
# The xen bus's drivers_autoprobe is off while a module registers, so that
# neither binds the boot's blkback vbd xvda (it would count in the memory
# and could not be bound a second time), and on while the backend creates
# xvdb: the vbd is probed as a hot-plugged one is.
xbus=/sys/bus/xen
xfp_load() { # DRIVER (c, rs or c_again)
    echo 0 > $xbus/drivers_autoprobe
    if [ "${1%_again}" = c ]; then insmod /lib/modules/xen-blkfront.ko
    else insmod /lib/modules/xen_blkfront_rs.ko; fi || { echo 1 > $xbus/drivers_autoprobe; return 1; }
    echo 1 > $xbus/drivers_autoprobe
}
xfp_unload() { # DRIVER
    if [ "${1%_again}" = c ]; then unbind_vbds vbd; unload xen_blkfront
    else unbind_vbds xen_blkfront_rs; unload xen_blkfront_rs; fi
}
# xfp_up: asks dom0 for the vbd and prints the milliseconds from its
# frontend node's appearance (xs_read polled every 10 ms: what the request
# takes to reach dom0 does not count) until xvdb is in /sys/block (NA
# after 60 s). t0 is taken before the first read that finds the node.
xfp_up() {
    local t0 i=0
    us_start - >&2   # its DOM0-CMD to the console, not into $(...)
    while :; do
        t0=$(now_ns)
        xs_read "device/vbd/${US_DEVID:-51728}/state" > /dev/null && break
        i=$((i + 1)); [ $i -lt 6000 ] || { echo NA; return 1; }
        usleep 10000
    done
    ms_until "$t0" 60 [ -e /sys/block/${US_DISK:-xvdb} ]
}
xfp_down() { # EXP DRIVER: the vbd detached, the module unloaded
    local ans
    ans=$(us_stop)
    check "$1 $2: vbd detached (dom0: $ans)" [ "$ans" = exited ]
    check "$1 $2: xvdb gone" us_disk_gone 30
    check "$1 $2: rmmod" xfp_unload "$2"
}
# xmemory: per repetition C, ours and C again (c_again: the A/A spread),
# each: a snapshot (mem_snap), the module loaded, the vbd brought up, a
# snapshot ("up"), fio 4 KiB random reads QD32 then 1 MiB sequential
# writes QD8 (RT s each: the persistent grants and any bounce pages the
# driver keeps for the disk's lifetime grow with I/O), a snapshot ("io").
# One unmeasured round of C first, as in memory.
exp_xmemory() {
    local r drv base up io mkib ms
    echo "BENCH-PHASE xmemory start $(cut -d' ' -f1 /proc/uptime)"
    check "xmemory: the xen bus has drivers_autoprobe" [ -w $xbus/drivers_autoprobe ] || return 1
    for r in 0 $(seq 1 "$REPS"); do for drv in c rs c_again; do
        [ $r = 0 ] && [ $drv != c ] && continue
        base=$(mem_snap)
        slab_kib > /tmp/xslab0
        check "xmemory $drv: insmod" xfp_load $drv || continue
        mkib=$(awk -v m=$([ $drv = rs ] && echo xen_blkfront_rs || echo xen_blkfront) '$1 == m { printf "%d", $2 / 1024 }' /proc/modules)
        ms=$(xfp_up)
        if check "xmemory $drv: xvdb appears (${ms} ms)" [ "$ms" != NA ]; then
            up=$(mem_snap)
            # The caches that grew with the module and the vbd, for
            # reading the table.
            [ $r = 0 ] || slab_growth /tmp/xslab0 1 "XMEMORY-SLAB driver=$drv rep=$r stage=up"
            fio_one xvdb randread 4k --ioengine=libaio --iodepth=32 --size=64M > /dev/null
            fio_one xvdb write 1M --ioengine=libaio --iodepth=8 --size=64M > /dev/null
            io=$(mem_snap)
            if [ $r != 0 ]; then
                [ $r = 1 ] && echo "BENCH-INFO exp=xmemory driver=$drv persistent=$(us_stats persistent) nr_requests=$(q xvdb nr_requests) max_segments=$(q xvdb max_segments)"
                mem_line $drv 1 $r "$base" "$up" "$mkib" xmemory " stage=up"
                mem_line $drv 1 $r "$base" "$io" "$mkib" xmemory " stage=io"
            fi
        fi
        xfp_down xmemory $drv
    done; done
}
# xattach: per repetition C, ours and C again, each loading its module,
# timing xfp_up, then detaching and unloading; one unmeasured round of
# each driver first.
exp_xattach() {
    local r drv ms
    echo "BENCH-PHASE xattach start $(cut -d' ' -f1 /proc/uptime)"
    check "xattach: the xen bus has drivers_autoprobe" [ -w $xbus/drivers_autoprobe ] || return 1
    for r in 0 $(seq 1 "${ATTACHREPS:-$REPS}"); do for drv in c rs c_again; do
        [ $r = 0 ] && [ $drv = c_again ] && continue
        check "xattach $drv: insmod" xfp_load $drv || continue
        ms=$(xfp_up)
        [ $r = 0 ] || bench_line "exp=xattach driver=$drv rep=$r attach_ms=$ms"
        xfp_down xattach $drv
    done; done
}

# ------------------------------------------------------------ xscale ----
# Memory and attach time of many blkback vbds (xen-guest.sh -V 32: every
# vbd on one dom0 disk, persistent grants offered). The C driver binds a
# blkback vbd once per boot and only as the first driver (see xattach);
# ours binds again after it. So each boot runs C, ours, and ours again
# (ours bound a second time: the A/A spread), each growing from 1 to 8 to
# 32 vbds (XSCALE_POINTS) by writing the vbds' names to the driver's bind
# file: at each point the milliseconds from the first bind to the last new
# disk in /sys/block and a memory snapshot (mem_snap, against one taken
# before insmod); at the last, fio over all the disks (4 KiB random reads
# QD32, then 1 MiB writes QD8, RT s each) and one more snapshot. The
# repetition is the boot (XSCALE_REP).
xscale_vbds() { ls $xbus/devices | grep '^vbd-' | sort -t- -k2 -n; }
nxvd() { ls /sys/block | grep -c '^xvd'; }
nxvd_at_least() { [ "$(nxvd)" -ge "$1" ]; }
exp_xscale() {
    local drv ko mod dir vbds n base snap mkib prev k t0 ms v files rep=${XSCALE_REP:-1}
    echo "BENCH-PHASE xscale start $(cut -d' ' -f1 /proc/uptime)"
    echo 0 > $xbus/drivers_autoprobe
    vbds=$(xscale_vbds); n=$(echo $vbds | wc -w)
    check "xscale: $n vbds, none bound" [ "$n" -eq "${XSCALE_POINTS##* }" -a "$(nxvd)" -eq 0 ] || return 1
    for drv in c rs rs_again; do
        if [ $drv = c ]; then ko=xen-blkfront.ko mod=xen_blkfront dir=vbd
        else ko=xen_blkfront_rs.ko mod=xen_blkfront_rs dir=xen_blkfront_rs; fi
        base=$(mem_snap)
        check "xscale $drv: insmod" insmod /lib/modules/$ko || return 1
        mkib=$(awk -v m=$mod '$1 == m { printf "%d", $2 / 1024 }' /proc/modules)
        prev=0
        for k in $XSCALE_POINTS; do
            t0=$(now_ns)
            for v in $(echo $vbds | tr ' ' '\n' | sed -n "$((prev + 1)),${k}p"); do
                echo $v > $xbus/drivers/$dir/bind
            done
            ms=$(ms_until "$t0" 120 nxvd_at_least "$k")
            check "xscale $drv: $k disks ($((k - prev)) bound in $ms ms)" [ "$ms" != NA ] || return 1
            bench_line "exp=xscale_attach driver=$drv disks=$k bound=$((k - prev)) rep=$rep attach_ms=$ms"
            snap=$(mem_snap)
            mem_line $drv $k $rep "$base" "$snap" "$mkib" xscale " stage=up"
            prev=$k
        done
        files=$(ls /sys/block | grep '^xvd' | sed 's|^|/dev/|' | paste -sd:)
        for w in "randread 4k 32" "write 1M 8"; do
            set -- $w
            check "xscale $drv: fio $1 $2 over the $prev disks" fio --name=x --filename="$files" --file_service_type=roundrobin \
                --direct=1 --ioengine=libaio --rw=$1 --bs=$2 --iodepth=$3 --runtime="$RT" --time_based --size=64M \
                --output=/tmp/xscale-fio.out
        done
        snap=$(mem_snap)
        mem_line $drv $prev $rep "$base" "$snap" "$mkib" xscale " stage=io"
        unbind_vbds $dir
        check "xscale $drv: rmmod" unload $mod
    done
    echo 1 > $xbus/drivers_autoprobe
}

case $EXPS in
    virtio | calib | memory | latency | xlatency | attach | xmemory | xattach | xscale) exp_$EXPS ;;
    "memory attach") exp_memory; exp_attach ;;
    "xmemory xattach") exp_xmemory; exp_xattach ;;
    # C binds a vbd once per boot: compare and profile share one setup.
    compare | profile | "compare profile" | "calib compare profile")
        if both_drivers_up "$EXPS"; then
            for e in $EXPS; do [ $e = calib ] || exp_$e; done
            both_drivers_down
        fi ;;
    *)  xen_driver c
        xen_driver rs ;;
esac
echo "BENCH-PHASE end $(cut -d' ' -f1 /proc/uptime)"
check "the benchmark printed its figures ($(wc -l < /tmp/bench-lines) BENCH and PROFILE-RUN lines for '$EXPS')" [ -s /tmp/bench-lines ]
finish
