#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# All tests, in order of cost: host (cargo test, fuzz runs, build checks),
# then the modules in QEMU guests (virtio-blk) and under real Xen (blkback).
# Prints one line per failure, one per skip, then "N passed, N failed,
# N skipped" and closes with the same counts in cargo test's form
# ("test result: ok. N passed; N failed; N ignored; ...", skips as ignored),
# which CI reads. A skip for want of something setup-host.sh installs is a
# failure (lib.sh).
#
#   tools/testing/run-tests.sh [--host-only]
set -uo pipefail
. "$(dirname "$0")/lib.sh"
mode=${1:-} # the modinfo check below sets the positional parameters
export RESULTS=$CACHE/results-$$.txt
: > "$RESULTS"
start=$(date +%s)
record() { echo "$1 $2" >> "$RESULTS"; }

bash "$REPO/tools/testing/setup-host.sh" || die "host setup failed"
# A clone without a target/ builds its crates' dependencies once, in the
# cache, not on every run (a clean clone: 64 s of cargo test's 72, against
# 23 with them cached). A checkout with its own target/ keeps it.
if [ ! -e "$REPO/target" ]; then
    mkdir -p "$CACHE/cargo-target" && ln -s "$CACHE/cargo-target" "$REPO/target"
fi

# ---- host: cargo test over the workspace --------------------------------
log "cargo test (blkcore, simulator)"
(cd "$REPO" && cargo test --workspace --release 2>&1) | tee "$CACHE/cargo-test.log" | grep -E '^test result|FAILED|panicked' >&2
cargo_rc=${PIPESTATUS[0]}
# Each test by name ("cargo test: CRATE::NAME"), the crate from the
# "Running ... (target/release/deps/CRATE-hash)" line above it; the names
# must add up to the runners' own "test result:" counts.
awk '/^ *Running .*\(target\/.*deps\//{c=$NF; sub(/.*\//, "", c); sub(/-[0-9a-f]+\)$/, "", c)}
     /^ *Doc-tests /{c=$2 "(doc)"}
     /^test .* \.\.\. (ok|FAILED|ignored)/{v=$NF; sub(/^test /, ""); sub(/ \.\.\. .*$/, "");
        print (v == "ok" ? "pass" : v == "FAILED" ? "fail" : "skip") " cargo test: " c "::" $0}' \
    "$CACHE/cargo-test.log" > "$CACHE/cargo-tests.txt"
cat "$CACHE/cargo-tests.txt" >> "$RESULTS"
read -r cp cf ci < <(awk '/^test result:/{for(i=1;i<=NF;i++){if($i=="passed;")p+=$(i-1); if($i=="failed;")f+=$(i-1); if($i=="ignored;")g+=$(i-1)}} END{print p+0, f+0, g+0}' "$CACHE/cargo-test.log")
named=$(wc -l < "$CACHE/cargo-tests.txt")
((named == cp + cf + ci)) || record fail "cargo test: $named tests by name, $((cp + cf + ci)) in the runners' counts (see $CACHE/cargo-test.log)"
((cargo_rc == 0)) || ((cf > 0)) || record fail "cargo test: cargo test exited $cargo_rc (build error? see $CACHE/cargo-test.log)"

# ---- host: the rules the build enforces (rustfmt, clippy, file sizes, ...) -
log "style and rules (check-style.sh)"
style_out=$(bash "$REPO/tools/testing/check-style.sh" 2>&1)
style_rc=$?
while read -r verdict name; do
    case $verdict in
        pass | fail) record "$verdict" "style: $name" ;;
    esac
done <<< "$style_out"
((style_rc == 0)) || grep -q '^fail ' <<< "$style_out" ||
    record fail "style: check-style.sh exited $style_rc with no failed check (its last line: $(tail -1 <<< "$style_out"))"

# ---- host: fuzz targets for a fixed number of executions ----------------
FUZZ_MALLOC=glibc.malloc.mmap_threshold=268435456:glibc.malloc.trim_threshold=268435456
if [ -d "$REPO/rust/blkcore/fuzz-runner" ]; then
    log "fuzz runner"
    # Each datapath execution allocates and frees the buffers of a ring
    # (some above glibc's mmap threshold): without the tunables two thirds
    # of the run is mmap/munmap in the kernel (100k executions: 20 s, 3.6 s
    # with them).
    if (cd "$REPO" && GLIBC_TUNABLES=$FUZZ_MALLOC cargo run --release -q -p blkcore-fuzz-runner -- "${FUZZ_EXECS:-200000}") > "$CACHE/fuzz.log" 2>&1; then
        # "fuzz TARGET: N execs, 0 crashes" and then "(M inputs accepted by
        # the parser, ...)": a target whose every input was rejected fuzzed
        # nothing past its parser's first check.
        while read -r verdict line; do record "$verdict" "$line"; done < <(awk '
            /^fuzz /{if (t != "") print "fail", t " (no count of accepted inputs)"; t = $0; next}
            t != "" && /inputs accepted/{n = $1; sub(/^\(/, "", n)
                print (n + 0 > 0 ? "pass" : "fail"), t "; " n " inputs accepted"; t = ""}
            END{if (t != "") print "fail", t " (no count of accepted inputs)"}' "$CACHE/fuzz.log")
        grep -q '^fuzz ' "$CACHE/fuzz.log" || record fail "fuzz: the fuzz runner printed no target (see $CACHE/fuzz.log)"
    else
        record fail "fuzz: the fuzz runner crashed (see $CACHE/fuzz.log)"; tail -5 "$CACHE/fuzz.log" >&2
    fi
fi

# ---- host: make refuses trees it cannot build against --------------------
fake=$(mktemp -d); mkdir -p "$fake/include/config"; echo 'all:' > "$fake/Makefile"
echo 'CONFIG_MODULES=y' > "$fake/include/config/auto.conf"
out=$(make -s -C "$REPO" KDIR="$fake" 2>&1 | head -3)
if [ "$(echo "$out" | wc -l)" = 1 ] && [[ $out == *"without CONFIG_RUST=y"* ]]; then
    record pass "build: make against a tree without Rust stops with a one-line error"
else
    record fail "build: make against a tree without Rust: got '$out'"
fi
rm -rf "$fake"

# ---- host: the dom0 hotplug script against Xen's own scripts ------------
log "dom0 hotplug script (block-topology-check.sh)"
hp_out=$(bash "$REPO/tools/testing/block-topology-check.sh" 2>&1)
hp_rc=$?
grep -E '^(pass|fail) ' <<< "$hp_out" >> "$RESULTS"
grep -vE '^(pass|fail) ' <<< "$hp_out" >&2
((hp_rc == 0)) || grep -q '^fail ' <<< "$hp_out" ||
    record fail "dom0-hotplug: block-topology-check.sh exited $hp_rc with no failed check (its last line: $(tail -1 <<< "$hp_out"))"

if [ "$mode" != --host-only ]; then
    # ---- Debian's trees, beside the kernel build ----------------------------
    # On a cold cache the trixie chroot and root (debootstrap and apt: mostly
    # network and disk) are made while the kernel builds (mostly CPU).
    # Suites 60 and 65 run the same scripts again, which wait on the scripts'
    # locks and reuse what is there: a failure here is theirs to report.
    mkdir -p "$CACHE/logs"
    (
        bash "$REPO/tools/distro/debian-kdir.sh" --prepare-only
        bash "$REPO/tools/testing/build-debian-root.sh"
    ) > "$CACHE/logs/debian-trees.log" 2>&1 &
    debian_trees=$!
    # ---- kernel tree + modules --------------------------------------------
    if KDIR=$(bash "$REPO/tools/testing/build-kernel.sh"); then
        export KDIR
        # With clippy: a warning (rustc's, clippy's or objtool's: a panic
        # path objtool does not know) fails the check.
        if make -s -C "$REPO" KDIR="$KDIR" CLIPPY=1 > "$CACHE/make.log" 2>&1; then
            record pass "build: modules build against $(basename "$KDIR")"
            if grep -qE '^(warning|error)|: warning: objtool' "$CACHE/make.log"; then
                record fail "build: make CLIPPY=1: $(grep -cE '^warning|: warning: objtool' "$CACHE/make.log") warnings (see $CACHE/make.log)"
            else
                record pass "build: make CLIPPY=1 without warnings"
            fi
            # Autoload: the modaliases udev and the initramfs load by.
            for want in "virtio_blk_rs virtio:d00000002v*" "xen_blkfront_rs xen:vbd"; do
                read -r mod alias <<< "$want"; set -- "$mod" "$alias"
                got=$(modinfo -F alias "$REPO/$1.ko" 2>/dev/null | tr '\n' ' ')
                case " $got" in
                    *" $2 "*) record pass "build: modinfo -F alias $1 lists $2" ;;
                    *) record fail "build: modinfo -F alias $1 is '$got', want $2" ;;
                esac
            done
        else
            record fail "build: modules build (see $CACHE/make.log)"; tail -30 "$CACHE/make.log" >&2
        fi
        # The debug kernel (suites 30 and 35) before the guests: on a cold
        # cache its build takes both cores, which the guests beside each
        # other need. The suites record whether it built (cached: no-op).
        log "debug kernel"
        bash "$REPO/tools/testing/build-kernel.sh" --debug > "$CACHE/logs/debug-kernel.log" 2>&1
        # ---- guests ---------------------------------------------------------
        # The guest suites run in stages of two lanes ("lane 1 | lane 2",
        # each lane's suites one after the other); a stage starts when both
        # lanes of the one before are done. A QEMU with one host thread
        # (QEMU_LINUX in lib.sh: the virtio boots, Debian's kernel) leaves
        # the other core to the other lane. A Xen boot runs two host threads
        # (multi-threaded TCG; one thread crashes a PVH domU), about 1.1
        # cores on average: beside a single-threaded QEMU it ran a third
        # slower (215 s against 160 alone), beside another Xen boot both ran
        # 3 to 5 times slower (a guest spinlock's holder descheduled), so
        # no two Xen boots run at once. Stage 1: lane 1 the Debian suites
        # (one Xen boot each, at their ends; 65 deploys what 60 built), then
        # the virtio suites 10 and 15 and the debug kernel's reset boot
        # (32); lane 2 the debug virtio boots (30), the benchmark smoke's
        # virtio boots (55: after them suite 35's Xen boot starts when 65's
        # are done), the debug Xen boot (35) and the benchmark smoke's Xen
        # boots (50: it asserts no figure, so it need not have the machine
        # alone), then the userspace backend's Xen boot (25: lane 1 is in
        # its virtio suites by then). Measured: lane 1 60+65 6.8 min, 10
        # 5.7, 15 6.5, 32 2.5: 21.5; lane 2 30 5.3, 55 1.7, 35 8.4, 50
        # 3.8, 25 7.6: 26.8. Stage 2: suite 20 (five Xen boots, 9.5 min)
        # alone.
        # Every suite is in exactly one stage (a new one fails loudly).
        stages=(
            "60-debian-stock.sh 65-debian-deploy.sh 10-virtio.sh 15-virtio-hostile.sh 32-debug-virtio-reset.sh | 30-debug-virtio.sh 55-bench-smoke-virtio.sh 35-debug-xen.sh 50-bench-smoke.sh 25-xen-userspace.sh"
            "20-xen.sh"
        )
        staged=" ${stages[*]} "
        for t in "$REPO"/tools/testing/suites/*.sh; do
            n=$(basename "$t")
            [ "$(grep -o " $n " <<< "$staged" | wc -l)" = 1 ] ||
                record fail "stages: suite $n is not in exactly one stage"
        done
        for n in ${staged//|/}; do
            [ -f "$REPO/tools/testing/suites/$n" ] || record fail "stages: a stage names suite $n, which does not exist"
        done
        run_lane() { # SUITE... (one after the other)
            for n in "$@"; do
                log "suite $n"
                run_suite "$n"
            done
        }
        for stage in "${stages[@]}"; do
            lane2=
            [[ $stage == *"|"* ]] && lane2=${stage#*|}
            read -r -a second <<< "$lane2"
            read -r -a first <<< "${stage%%|*}"
            lane2_job=
            if ((${#second[@]})); then
                run_lane "${second[@]}" &
                lane2_job=$!
            fi
            run_lane "${first[@]}"
            [ -z "$lane2_job" ] || wait "$lane2_job"
        done
        # The committed hostile tables against the scenarios of the backend
        # and the device, and ours' outcomes in suites 20 and 15.
        for kind in "hostile-backend.md" "hostile-device.md --virtio"; do
            read -r page flag <<< "$kind"
            # shellcheck disable=SC2086
            if table=$(bash "$REPO/tools/testing/hostile-table.sh" $flag --check 2>&1); then
                record pass "docs: Documentation/$page is $table"
            else
                while read -r line; do record fail "docs: Documentation/$page is $line"; done <<< "$table"
            fi
        done
    else
        record fail "build: test kernel build (see $CACHE/logs)"
    fi
    wait "$debian_trees"
fi

# ---- every expected check ran (tools/testing/expected-checks.txt) -------
manifest=$(bash "$REPO/tools/testing/manifest.sh" check "$RESULTS" "$mode")
grep '^fail ' <<< "$manifest" >> "$RESULTS"
[[ $(tail -1 <<< "$manifest") =~ ^expected\ ([0-9]+),\ ran\ ([0-9]+)$ ]] || record fail "manifest: manifest.sh check printed no count"
expected=${BASH_REMATCH[1]:-0} ran=${BASH_REMATCH[2]:-0}

pass=$(grep -c '^pass ' "$RESULTS"); fail=$(grep -c '^fail ' "$RESULTS"); skip=$(grep -c '^skip ' "$RESULTS")
# The whole run in KTAP (the kernel's test format), also kept beside the
# results.
awk -v total="$((pass + fail + skip))" 'BEGIN{print "KTAP version 1"; print "1.." total}
    /^(pass|fail|skip) /{v = $1; sub(/^[a-z]+ /, ""); gsub(/#/, "No."); n++
        if (v == "pass") print "ok " n " " $0
        else if (v == "fail") print "not ok " n " " $0
        else print "ok " n " " $0 " # SKIP"}' "$RESULTS" | tee "${RESULTS%.txt}.ktap"
grep '^fail ' "$RESULTS" | sed 's/^fail /FAILED: /'
grep '^skip ' "$RESULTS" | sed 's/^skip /SKIPPED: /'
elapsed=$(( $(date +%s) - start ))
echo "elapsed: ${elapsed}s; details: $RESULTS (KTAP: ${RESULTS%.txt}.ktap), guest logs: $CACHE/logs"
echo "checks: $expected expected by tools/testing/expected-checks.txt, $ran of them ran; $((pass + fail + skip)) results in all"
echo "$pass passed, $fail failed, $skip skipped"
# The closing line in cargo test's form, which runners parse: skips are its
# "ignored" (they are not passes).
st=ok; ((fail == 0)) || st=FAILED
echo "test result: $st. $pass passed; $fail failed; $skip ignored; 0 measured; 0 filtered out; finished in ${elapsed}.00s"
((fail == 0))
