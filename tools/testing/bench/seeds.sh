#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Reproduces the seed threads' measurements with our drivers and the C drivers
# side by side, each pair in the same boot (see Documentation/benchmarks.md):
#
#   tools/testing/bench/seeds.sh [--smoke] [--exp LIST] [--out DIR]
#
#  1. Xen indirect sweep   max_indirect_segments 11..256, 1 MiB seq O_DIRECT
#  2. persistent grants    blkback feature_persistent 1 and 0, bs 4k/64k/1M
#  3. alignment            4096-byte physical sectors: 512B..8K random writes,
#                          reported topology, sfdisk + mkfs.ext4 results
#  4. virtio               4k QD1/QD32 randread, 4k QD1 polled randread
#                          (poll_queues=1, io_uring hipri), 1M seq read/write
#  4b. memory              virtio: memory per disk (MemFree, Slab,
#                          SUnreclaim) with 1, 8 and 32 disks of 2 queues,
#                          and 1M seq read/write QD8, C and ours in one boot
#  4e. attach              virtio: time from binding 1 and 32 disks to the
#                          driver until the last is in /sys/block; C, ours
#                          and C again alternating (the A/A spread), in
#                          memory's boot when both are asked for
#  4c. latency             virtio: completion latency p50/p99/p99.9 (fio
#                          JSON) of 4k randread QD1 and QD32 and 1M seq
#                          write QD4; C, ours and C again alternating in
#                          one boot (C against C: the A/A spread)
#  4d. xlatency            (only when asked for) latency on Xen, blkback
#                          feature_persistent 1 and 0, two boots each: C on
#                          two vbds of one disk (A/A), then C and ours (ours
#                          on xvdb, then on xvda in the second boot)
#  4f. xattach             (only when asked for) Xen: time from a fresh
#                          vbd's frontend node to its disk in /sys/block,
#                          the userspace blkif backend creating it again
#                          for every run; C, ours and C again alternating
#  4g. xmemory             (only when asked for) Xen: memory of one vbd
#                          (MemFree, Slab, SUnreclaim) once it is up and
#                          after fio, persistent grants on; C, ours and C
#                          again; in xattach's boot when both are asked for
#  4h. xscale             (only when asked for) Xen: memory and attach
#                          time of 1, 8 and 32 blkback vbds on one dom0
#                          disk (persistent grants offered), C, ours and
#                          ours again (the A/A spread: C binds a blkback
#                          vbd once per boot) growing the count in each
#                          boot; one boot per repetition
#  5. compare              Xen, C and ours on two vbds of one dom0 disk
#                          (swapped in a second boot), alternating: 4k
#                          randread QD1 and QD32, 1M seq read/write, blkback
#                          feature_persistent 1 and 0; backend
#                          notifications per request counted in dom0, the
#                          domU's CPU, interrupts, context switches and
#                          IPIs per request
#  6. calib                (only when asked for) compare's A/A run: C on
#                          both vbds, so ours/C can be read against the
#                          spread the method gives identical drivers
#  7. profile              (only when asked for) where the domU's CPU time
#                          goes, C and ours, 4k QD32 and 1M seq read,
#                          persistent off:
#                          perf in the domU (needs the host's perf binary)
#
# --exp LIST: only these experiments (comma-separated names above; default
# 1-5 with 4b, 4c and 4e). `seeds.sh --exp compare,calib` is the Xen C-vs-ours benchmark with
# its calibration. Compare, calib and profile pin dom0 and the domU to their
# own CPU (xen-guest.sh -P).
# Prints the tables; writes <exp>.csv, <exp>.png, logs/ and checks.txt into
# DIR (default $BLKFRONT_CACHE/bench-results). --smoke: one point per
# experiment, one repetition (a few minutes). Exits non-zero when a guest run
# failed or a number is missing; never because a number is low.
# Environment: KDIR, KO_DIR as for the guest runners; BENCH_REPS, BENCH_RT
# override repetitions and fio runtime (s); BENCH_PROFILE_PAIRS the
# profile's C/ours run pairs per workload (default 2; the smoke run 1);
# BENCH_CWL compare's workloads (of rr4k1 rr4k seqread seqwrite), BENCH_PWL
# the profile's;
# BENCH_PERSIST the feature_persistent settings of the Xen boots ("1 0").
set -uo pipefail
. "$(dirname "$0")/../lib.sh"
T=$REPO/tools/testing

smoke=0 out= exps=indirect,persist,align,virtio,memory,attach,latency,compare
while (($#)); do
    case $1 in
        --smoke) smoke=1 ;;
        --out) out=${2:?--out DIR}; shift ;;
        --out=*) out=${1#--out=} ;;
        --exp) exps=${2:?--exp LIST}; shift ;;
        --exp=*) exps=${1#--exp=} ;;
        -h|--help) sed -n '3,65p' "$0"; exit 0 ;;
        *) die "usage: $0 [--smoke] [--exp LIST] [--out DIR]" ;;
    esac
    shift
done
for e in ${exps//,/ }; do
    [[ $e =~ ^(indirect|persist|align|virtio|memory|attach|latency|xlatency|xattach|xmemory|xscale|compare|calib|profile)$ ]] || die "--exp: unknown experiment '$e'"
done
want() { [[ ,$exps, == *,$1,* ]]; }
out=${out:-$CACHE/bench-results}
mkdir -p "$out"
out=$(cd "$out" && pwd)
rm -rf "$out/logs"; rm -f "$out"/*.csv "$out"/*.png "$out"/*.dat "$out"/*.gp
mkdir -p "$out/logs"
export LOGDIR=$out/logs RESULTS=$out/checks.txt
: > "$RESULTS"
start=$(date +%s)

command -v fio >/dev/null || die "fio not installed on the host (the guests get the host's fio): run tools/testing/setup-host.sh"
KDIR=${KDIR:-$(bash "$T/build-kernel.sh")} || die "no test kernel"
export KDIR
grep -q '^CONFIG_SYSVIPC=y' "$KDIR/.config" || log "warning: $KDIR has no CONFIG_SYSVIPC: fio will not run in the guests"
if [ -z "${KO_DIR:-}" ]; then
    make -s -C "$REPO" KDIR="$KDIR" > "$out/make.log" 2>&1 || die "module build failed (see $out/make.log)"
fi

if ((smoke)); then
    reps=${BENCH_REPS:-1} rt=${BENCH_RT:-2}
    # Persistent grants off: the profile's setting, so that the profile
    # runs in the compare boot (one Xen boot fewer).
    segs="32" bss="1M" abss="4k" vwl="qd1" ops="write" pops="randread" persist="0" ndomu=1 jobs=4
else
    reps=${BENCH_REPS:-3} rt=${BENCH_RT:-3}
    segs="11 32 64 128 256" bss="4k 64k 1M" abss="512 2k 4k 8k" vwl="qd1 poll1 qd32 seqread seqwrite" ops="write read" pops="randread" persist="1 0"
    ndomu=${BENCH_NDOMU:-2} jobs=1
fi
js() { printf '[%s]' "$(echo "$1" | sed 's/[^ ][^ ]*/"&"/g; s/ /,/g')"; }
# compare: more, longer repetitions (its ratios are the figure to read).
chalf=$(( (${BENCH_REPS:-$((smoke ? 2 : 6))} + 1) / 2 )) crt=${BENCH_RT:-$((smoke ? 2 : 5))}
creps=$((2 * chalf))
# Compare boots both orders (see below); the smoke run only the first: the
# swapped boot runs the same code.
swaps="0 1"; ((smoke)) && swaps=0
ppairs=${BENCH_PROFILE_PAIRS:-$((smoke ? 1 : 2))}
# memory, attach: 32 small disks of 2 queues (QEMU's default 256 requests
# each), memory also measured at 8 of them; the smoke run 8 disks and a
# point at 4 (the same code, in a boot a third as long).
memdisks=$((smoke ? 8 : 32)) mempoints=$((smoke ? 4 : 8)) memsize=64M
# attach: 1 disk besides all of them; 8 repetitions (a run takes well
# under a second, and TCG timing needs them for a spread to read).
attachdisks=1 areps=${BENCH_REPS:-$((smoke ? 1 : 8))}
# xattach: as attach; xmemory: the repetitions and fio runtime of the
# others. xscale: 3 boots (the smoke run 1, at 1 and 4 vbds).
xsreps=${BENCH_REPS:-$((smoke ? 1 : 3))} xspoints=$( ((smoke)) && echo 1 4 || echo 1 8 32)
xsmax=${xspoints##* }
# latency, xlatency: 5 s per fio run (virtio: thousands of requests even at
# QD1 under TCG, so that p99.9 rests on more than a handful of samples; a
# Xen domU does a few hundred), 4 repetitions of each label (virtio: C,
# ours, C again; Xen: C and C, then C and ours); the smoke run 1 s, one
# repetition.
lreps=${BENCH_REPS:-$((smoke ? 1 : 4))} lrt=${BENCH_RT:-$((smoke ? 1 : 5))}
lwl="qd1 qd32 seqwrite"
# compare: 4k random reads at QD1 (one request's round trip: latency and
# cost per request with nothing to batch) besides the seed's three; the
# smoke run the three.
cwl=${BENCH_CWL:-$( ((smoke)) && echo rr4k seqread seqwrite || echo rr4k1 rr4k seqread seqwrite)}
pwl=${BENCH_PWL:-$( ((smoke)) && echo seqread || echo rr4k seqread)}
persist=${BENCH_PERSIST:-$persist}
cat > "$out/config.json" <<JSON
{"smoke": $smoke, "reps": $reps, "runtime": $rt, "exps": $(js "${exps//,/ }"),
 "compare_reps": $((chalf * $(echo $swaps | wc -w))), "cwl": $(js "$cwl"), "pwl": $(js "$pwl"), "profile_pairs": $ppairs,
 "segs": $(js "$segs"), "bss": $(js "$bss"), "abss": $(js "$abss"), "vwl": $(js "$vwl"),
 "ops": $(js "$ops"), "pops": $(js "$pops"), "persistent": $(js "$persist"), "jobs": $jobs, "ndomu": $ndomu,
 "memdisks": $memdisks, "mempoints": $(js "$(echo 1 $mempoints $memdisks | tr ' ' '\n' | awk '$1 > 0' | sort -nu | tr '\n' ' ' | sed 's/ $//')"),
 "attachdisks": $(js "$(echo $attachdisks $memdisks | tr ' ' '\n' | sort -nu | tr '\n' ' ' | sed 's/ $//')"), "attach_reps": $areps, "xscale_reps": $xsreps, "xscale_points": $(js "$xspoints"), "latency_reps": $lreps, "latency_runtime": $lrt, "lwl": $(js "$lwl")}
JSON

# guest_script NAME VAR=VALUE...: the guest script with its settings.
guest_script() {
    local f=$out/logs/$1.sh; shift
    { echo '#!/bin/sh'; for kv in "$@"; do echo "$kv"; done; cat "$T/bench/guest-bench.sh"; } > "$f"
    echo "$f"
}
common=("REPS=$reps" "RT=$rt" "BSS='$bss'" "ABSS='$abss'" "VWL='$vwl'" "OPS='$ops'" "POPS='$pops'" "JOBS=$jobs")
failed=0
run() { # label runner args...
    local label=$1 t0=$(date +%s); shift
    log "bench: $label"
    bash "$@"
    # The guest's own verdict (a runner can also fail after a clean guest).
    if ! guest_exited_cleanly "$LOGDIR/$label.log"; then
        log "bench: $label: guest run failed (see $LOGDIR/$label.log)"
        failed=1
    fi
    echo "$label $(( $(date +%s) - t0 ))s" >> "$out/timing.txt"
}
: > "$out/timing.txt"

# The C xen-blkfront connects once per boot (see guest-bench.sh), so every
# Xen boot of experiments 1-3 runs C, then ours, with the same module
# parameters; compare keeps both loaded (two vbds) and alternates.
if ((smoke)); then
    # One Xen boot for experiments 1-3 (4K physical sectors do not change
    # 1 MiB sequential or 1 MiB-block numbers).
    xe=$(for e in indirect persist align; do want $e && echo -n "$e "; done)
    [ -n "$xe" ] && run bench-xen "$T/xen-guest.sh" -l bench-xen -p $persist -b 4096 -m 4096 -o 1048576 -t 420 \
        "$(guest_script bench-xen "${common[@]}" SEGS=32 "EXPS='${xe% }'" PERSIST=$persist)"
else
    want indirect && for s in $segs; do
        run bench-xen-s$s "$T/xen-guest.sh" -l bench-xen-s$s -p 1 -b 512 -t 600 \
            "$(guest_script bench-xen-s$s "${common[@]}" SEGS=$s "EXPS=indirect" PERSIST=1)"
    done
    # The seed summed fio over several guests running at once: $ndomu domUs,
    # each on its own backing disk, steps in common time slots.
    want persist && for p in $persist; do
        run bench-xen-persist$p "$T/xen-guest.sh" -l bench-xen-persist$p -n "$ndomu" -p "$p" -b 512 -t 900 \
            "$(guest_script bench-xen-persist$p "${common[@]}" SEGS=32 "EXPS=persist" PERSIST=$p)"
    done
    want align && run bench-xen-align "$T/xen-guest.sh" -l bench-xen-align -p 1 -b 4096 -m 4096 -o 1048576 -t 600 \
        "$(guest_script bench-xen-align "${common[@]}" SEGS=32 "EXPS=align" PERSIST=1)"
fi
# Compare: two boots per setting, C on xvda and ours on xvdb, then the
# other way round (SWAP=1; C binds a vbd once per boot, so the swap needs a
# new boot): a difference between the two vbds then weighs on both drivers
# alike. Each boot runs half the repetitions, numbered on from the first.
# The profile (persistent grants off) needs perf in the domU; the smoke run
# profiles in its compare boot (p0, swap 0), a full run in a boot of its own.
prt=$((crt < 8 ? 8 : crt))
perf=
if want profile; then
    perf=$(command -v perf) || die "--exp profile: no perf on the host (apt-get install linux-perf)"
fi
# The smoke run also calibrates in that boot (C owns both vbds first;
# guest-bench.sh), with compare's repetitions: one Xen boot for the three.
profile_in_compare=0 calib_in_compare=0
((smoke)) && want compare && want profile && [ "$persist" = 0 ] && profile_in_compare=1
((profile_in_compare)) && want calib && calib_in_compare=1
want compare && for p in $persist; do
    for swap in $swaps; do
        l=bench-xen-compare-p$p-s$swap e=compare bins=
        ((profile_in_compare && swap == 0)) && e="compare profile" bins=$perf
        ((calib_in_compare && swap == 0)) && e="calib $e"
        DOMU_EXTRA_BINS=$bins run $l "$T/xen-guest.sh" -l $l -2 -P -p "$p" -b 512 -t 900 \
            "$(guest_script $l "${common[@]}" "REPS=$chalf" "REP0=$((swap * chalf))" SWAP=$swap "RT=$crt" "CWL='$cwl'" SEGS=32 "EXPS='$e'" PERSIST=$p PRT=$prt "PWL='$pwl'" PPAIRS=$ppairs)"
    done
done
want calib && ((!calib_in_compare)) && for p in $persist; do
    run bench-xen-calib-p$p "$T/xen-guest.sh" -l bench-xen-calib-p$p -2 -P -p "$p" -b 512 -t 900 \
        "$(guest_script bench-xen-calib-p$p "${common[@]}" "REPS=$creps" "RT=$crt" "CWL='$cwl'" SEGS=32 "EXPS=calib" PERSIST=$p)"
done
want profile && ((!profile_in_compare)) && DOMU_EXTRA_BINS=$perf run bench-xen-profile "$T/xen-guest.sh" -l bench-xen-profile -2 -P -p 0 -b 512 -t 600 \
    "$(guest_script bench-xen-profile "${common[@]}" "RT=$prt" SEGS=32 "EXPS=profile" PERSIST=0 "PWL='$pwl'" PPAIRS=$ppairs)"
# The profile's lines, from whichever boot ran it (report.py reads the same).
want profile && grep -ah '^PROFILE' "$LOGDIR"/bench-xen-*.log | tr -d '\r' > "$out/profile.txt"
want virtio && run bench-virtio "$T/virtio-guest.sh" -l bench-virtio -d 1G -t $((smoke ? 240 : 900)) \
    "$(guest_script bench-virtio "${common[@]}" "EXPS=virtio")"
# memory and attach: one boot with $memdisks disks when both are asked
# for. The disks sit behind PCI bridges, 16 to a bridge: the pc machine's
# own bus has fewer than 32 free slots.
mexps=$(for e in memory attach; do want $e && echo -n "$e "; done)
mexps=${mexps% }
ml=bench-${mexps%% *}
[ -n "$mexps" ] && QEMU_BUSES="$(for b in $(seq 0 $(((memdisks - 1) / 16))); do echo -n "-device pci-bridge,id=pb$b,chassis_nr=$((b + 1)) "; done)" \
    run $ml "$T/virtio-guest.sh" -l $ml -t $((smoke ? 420 : 1800)) \
    $(for i in $(seq 0 $((memdisks - 1))); do echo "-d $memsize,num-queues=2,bus=pb$((i / 16)),addr=$((i % 16 + 1))"; done) \
    "$(guest_script $ml "${common[@]}" "EXPS='$mexps'" MEMDISKS=$memdisks "MEMPOINTS='$mempoints'" MEMSIZE=$memsize "ATTACHDISKS='$attachdisks'" ATTACHREPS=$areps)"
# latency: one small disk; 64 MiB of it written first, then read or
# written by every run.
want latency && run bench-latency "$T/virtio-guest.sh" -l bench-latency -d 256M -t $((smoke ? 240 : 1200)) \
    "$(guest_script bench-latency "${common[@]}" "EXPS=latency" "REPS=$lreps" "RT=$lrt" "LWL='$lwl'" LATSIZE=64M)"
# xlatency: as compare, two vbds of one dom0 disk, dom0 and the domU pinned.
# Ours on xvdb in one boot and on xvda in a second (SWAP=1, as compare),
# half the repetitions in each: a difference between the vbds weighs on
# both drivers alike.
lhalf=$(( (lreps + 1) / 2 ))
want xlatency && for p in $persist; do
    for swap in $swaps; do
        l=bench-xen-latency-p$p-s$swap
        run $l "$T/xen-guest.sh" -l $l -2 -P -p "$p" -b 512 -t 1500 \
            "$(guest_script $l "${common[@]}" "EXPS=xlatency" "REPS=$lhalf" "REP0=$((swap * lhalf))" SWAP=$swap "RT=$lrt" "LWL='$lwl'" LATSIZE=64M SEGS=32 PERSIST=$p)"
    done
done
# xmemory and xattach: one boot when both are asked for, the vbd served by
# the userspace blkif backend (persistent grants offered, its default);
# dom0 and the domU pinned, so that the backend process does not share the
# domU's CPU.
xexps=$(for e in xmemory xattach; do want $e && echo -n "$e "; done)
xexps=${xexps% }
xl=bench-${xexps%% *}
[ -n "$xexps" ] && USERSPACE_BACKEND=1 run $xl "$T/xen-guest.sh" -l $xl -P -p 1 -b 512 -t $((smoke ? 600 : 1800)) \
    "$(guest_script $xl "${common[@]}" "EXPS='$xexps'" ATTACHREPS=$areps)"

# xscale: one boot per repetition (C binds a vbd once per boot), 32 vbds
# on one dom0 disk; the domU gets 1 GiB: C and ours keep a persistent
# grant pool per vbd.
want xscale && for r in $(seq 1 $xsreps); do
    DOMU_MEM=1024 run bench-xen-scale-$r "$T/xen-guest.sh" -l bench-xen-scale-$r -P -p 1 -b 512 -V $xsmax -s 256M -t 1500 \
        "$(guest_script bench-xen-scale-$r "${common[@]}" "EXPS=xscale" "XSCALE_POINTS='$xspoints'" XSCALE_REP=$r)"
done

python3 "$T/bench/report.py" "$out" | tee "$out/report.txt"
rc=${PIPESTATUS[0]}
grep '^fail ' "$RESULTS" | sed 's/^fail /guest check failed: /'
echo "elapsed: $(( $(date +%s) - start ))s ($(tr '\n' ' ' < "$out/timing.txt"))"
((rc == 0 && failed == 0))
