# SPDX-License-Identifier: GPL-2.0
# Shared paths and helpers for the harness scripts (sourced, not run).
# Everything large lives outside the repo under $BLKFRONT_CACHE, keyed so that
# a rerun with the same inputs reuses it.
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CACHE=${BLKFRONT_CACHE:-/var/cache/blkfront-rs}
DL=$CACHE/debs
SRC_DIR=$CACHE/linux-source-7.3
XEN_ELF=$CACHE/xen-4.17
mkdir -p "$CACHE"
export PATH=$HOME/.cargo/bin:$PATH

# How QEMU runs a Linux kernel directly (virtio boots, Debian's stock kernel).
# One host thread for all vCPUs: under multi-threaded TCG a vCPU can still run
# a stale translation of an int3 that another vCPU's text_poke already
# replaced, so the kernel dies with "Oops: int3" when a static key flips while
# another CPU runs that code. 7.3 flips clocksource_read_inlined in
# ktime_get_mono_fast_ns when it switches to the TSC clocksource at ~2 s
# (seen on Debian's stock kernel). Round-robin vCPUs
# see every code write before they run again. Xen boots keep multi-threaded
# TCG for speed: their Linux guests use the xen clocksource, so the flip that
# hit does not happen there, and no int3 oops has been seen in a Xen boot.
QEMU_LINUX=(qemu-system-x86_64 -accel tcg,thread=single -cpu qemu64)
log() { echo "[$(date +%H:%M:%S)] $*" >&2; }
die() { echo "error: $*" >&2; exit 1; }
# The preamble of a suite on Debian's stock kernel: its label L, RESULTS
# and LOGDIR (run-tests.sh's, or the defaults), the release KREL (and
# OTHER_KREL, a kernel our modules are not built for); `rec VERDICT TEXT`
# records one check under the label.
debian_suite() { # LABEL
    L=$1
    RESULTS=${RESULTS:-$CACHE/results.txt}
    LOGDIR=${LOGDIR:-$CACHE/logs}
    KREL=${DISTRO_KREL:-7.3.4+deb13-amd64}
    OTHER_KREL=${DISTRO_OTHER_KREL:-7.2.12+deb13-amd64}
    mkdir -p "$LOGDIR"
}
rec() { echo "$1 $L: $2" >> "$RESULTS"; }

# The preamble of a debug-kernel suite (30-debug-virtio, 35-debug-xen):
# the debug kernel (cached after the first build) and our modules built
# against it in a copy of the sources under $CACHE/debug-modules/LABEL (the
# repo's own .ko files are the test kernel's; each suite has its own copy,
# as the two run side by side). Sets KDBG and KO; records both builds
# under "debug:" and fails the suite when either fails.
debug_suite() { # LABEL
    L=debug RESULTS=${RESULTS:-$CACHE/results.txt} LOGDIR=${LOGDIR:-$CACHE/logs}
    mkdir -p "$LOGDIR"
    if ! KDBG=$(bash "$REPO/tools/testing/build-kernel.sh" --debug 2> "$LOGDIR/debug-kernel-$1.log"); then
        rec fail "debug kernel build (log $LOGDIR/debug-kernel-$1.log)"
        exit 1
    fi
    rec pass "debug kernel built for $1 ($(basename "$KDBG"))"
    # The debug kernel's command line in a virtio guest on QEMU's pc
    # machine: kmemleak on, a log that holds the whole run, and no ACPI
    # IRQ routing: the machine's _PRT method (a While loop over 128
    # entries) ran past ACPICA's 30 s loop timeout under KASAN and TCG at
    # every PCI device's enable (three at boot, one per hot-plug: 90 s of
    # a boot). virtio-pci takes MSI-X vectors; nothing here uses INTx.
    DEBUG_VIRTIO_APPEND="kmemleak=on log_buf_len=4M acpi=noirq"
    KO=$CACHE/debug-modules/$1
    # The same sources against the same debug kernel (another suite with
    # this label built them earlier in the run): the modules are reused.
    local src stamp
    src=$(mktemp)
    (cd "$REPO" && git ls-files -z --cached --others --exclude-standard Kbuild Makefile drivers rust |
        tar --null -T - --mtime=@0 --owner=0 --group=0 --sort=name -cf -) > "$src"
    stamp="$(sha256sum < "$src" | cut -c1-16) $KDBG"
    if [ "$(cat "$KO/.built-from" 2>/dev/null)" = "$stamp" ] && ls "$KO"/*.ko > /dev/null 2>&1; then
        rm -f "$src"
        rec pass "modules build against the debug kernel ($1; built earlier in this run from the same sources)"
        return 0
    fi
    rm -rf "$KO"; mkdir -p "$KO"
    tar -C "$KO" -xf "$src"; rm -f "$src"
    if make -s -C "$KO" KDIR="$KDBG" > "$LOGDIR/debug-modules-$1.log" 2>&1; then
        echo "$stamp" > "$KO/.built-from"
        rec pass "modules build against the debug kernel ($1)"
    else
        rec fail "modules build against the debug kernel ($1; log $LOGDIR/debug-modules-$1.log)"
        exit 1
    fi
}

# run_suite NAME: runs tools/testing/suites/NAME; a suite that exits
# non-zero (a syntax error, a command failing under its own set -e)
# dropped the checks after that point, which is a failure of its own.
run_suite() { # NAME
    bash "$REPO/tools/testing/suites/$1"
    local rc=$?
    ((rc == 0)) || echo "fail suites: $1 exited $rc" >> "${RESULTS:-$CACHE/results.txt}"
    return $rc
}

# Config fragments of a test kernel flavour: "" (the test kernel) or
# "debug" (the same plus .config.fragments/debug/*.config).
# Top-level fragments named *.test.config are the test kernel's only (the
# debug kernel, built for its checkers, stays without them).
kernel_fragments() { # [flavour]
    if [ -z "${1:-}" ]; then
        ls "$REPO"/.config.fragments/*.config
    else
        ls "$REPO"/.config.fragments/*.config | grep -v '\.test\.config$'
        ls "$REPO"/.config.fragments/"$1"/*.config
    fi
}

# make variables of a flavour's build. debug: a Xen PVH guest runs
# xen_pvh_init() (arch/x86/xen/enlighten_pvh.c) from its entry point, before
# KASAN has a shadow, and 7.3 instruments it: the domU triple-faults in
# __asan_store4. Not instrumenting that one file lets the KASAN kernel boot
# as a PVH domU (as arch/x86/platform/pvh/ already is not).
kernel_make_vars() { # [flavour]
    [ "${1:-}" != debug ] || echo KASAN_SANITIZE_enlighten_pvh.o=n
}

# Key of a test kernel build: source version, config fragments, make
# variables, toolchain.
kernel_key() { # [flavour]
    {
        ls "$DL"/linux-source-7.3_*.deb 2>/dev/null | xargs -n1 basename
        kernel_fragments "${1:-}" | xargs cat
        kernel_make_vars "${1:-}"
        rustc --version; bindgen --version; clang-19 --version | head -1
    } | sha256sum | cut -c1-16
}

# Builds a gzip'd initramfs: static busybox, /init running /test.sh, plus the
# files given as "SRC:DEST" pairs (and $GUEST_ENV, see below). The guest's init prints the test script's
# exit status as "GUEST-EXIT: N" and powers off.
make_initramfs() { # out.cpio.gz SRC:DEST...
    local out=$1; shift
    local root; root=$(mktemp -d)
    mkdir -p "$root"/{bin,sbin,proc,sys,dev,tmp,mnt,lib/modules,usr/bin,usr/sbin,run}
    cp /bin/busybox "$root/bin/busybox"
    for a in $("$root/bin/busybox" --list); do
        [ -e "$root/bin/$a" ] || ln -s busybox "$root/bin/$a"
    done
    cat > "$root/init" <<'INIT'
#!/bin/sh
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev 2>/dev/null
mount -t debugfs debugfs /sys/kernel/debug
mkdir -p /dev/pts && mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /tmp
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
sh /test.sh
echo "GUEST-EXIT: $?"
sync
poweroff -f
INIT
    chmod +x "$root/init"
    # GUEST_ENV="VAR=value ..." becomes /guest/env.sh, which guest/common.sh
    # sources: how a suite passes expectations and parameters to a script.
    if [ -n "${GUEST_ENV:-}" ]; then
        mkdir -p "$root/guest"
        for pair in $GUEST_ENV; do echo "export $pair"; done > "$root/guest/env.sh"
    fi
    local pair src dest
    for pair in "$@"; do
        src=${pair%%:*}; dest=${pair#*:}
        mkdir -p "$root/$(dirname "$dest")"
        cp -L "$src" "$root/$dest"
    done
    (cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) > "$out"
    rm -rf "$root"
}

# "SRC:DEST" pairs for a dynamically linked host binary and its libraries.
binary_with_libs() { # /usr/bin/fio
    local bin=$1 lib
    echo "$bin:$bin"
    for lib in $(ldd "$bin" | grep -o '/[^ ]*'); do echo "$lib:$lib"; done
}

# Names of what tools/testing/setup-host.sh installs: its packages and the
# commands they ship (dpkg file lists), plus rust-src and bindgen. A check
# that skips for want of one of these is a broken harness, not a skip.
setup_host_provides() {
    local p
    for p in $(sed -n '/^host_pkgs=(/,/)/{s/^host_pkgs=(//; s/)//; p}' "$REPO/tools/testing/setup-host.sh"); do
        echo "$p"
        dpkg -L "$p" 2>/dev/null | sed -n 's#^/\(usr/\)\{0,1\}s\{0,1\}bin/\([^/]*\)$#\2#p'
    done | grep -vx kvm   # qemu's /usr/bin/kvm wrapper: KVM itself is the host's
    echo rust-src; echo bindgen
}
# skip_result LABEL NAME REASON: "skip LABEL: NAME (REASON)", or a failure
# when REASON names (as a word) something setup-host.sh installs.
skip_result() {
    local label=$1 name=$2 reason=$3 w
    [ -n "${SETUP_HOST_WORDS+x}" ] || SETUP_HOST_WORDS=" $(setup_host_provides | sort -u | tr '\n' ' ') "
    for w in $(echo "$reason" | tr -c 'A-Za-z0-9._+-' ' '); do
        if [[ $SETUP_HOST_WORDS == *" $w "* ]]; then
            echo "fail $label: $name: skipped for want of '$w', which setup-host.sh installs (SKIP $reason)"
            return
        fi
    done
    echo "skip $label: $name (SKIP $reason)"
}

# guest_exited_cleanly LOG: the guest's init printed "GUEST-EXIT: 0" in the
# console log. The status ends its line, or a kernel message the console
# wrote into it follows ("GUEST-EXIT: 0[ 1100.54] ...": the debug domU's
# clocksource watchdog prints every few seconds); a "(XEN) " or "[ time] "
# prefix is the console's. One check for every runner and the benchmark.
# No `| grep -q` here: under pipefail grep's exit at the first match can
# kill the writer with SIGPIPE and fail a clean run (seeds.sh's check did,
# in CI's smoke suite).
guest_exited_cleanly() { # console.log
    grep -qE '^GUEST-EXIT: 0($|\[ *[0-9]+\.[0-9]+\])' \
        <(tr -d '\r' < "$1" | sed 's/^(XEN) //; s/^\[ *[0-9.]*\] //')
}

# A guest runner (virtio-guest.sh, xen-guest.sh) that stops before it
# collects the guest's results (a script bug under set -e, a missing file)
# would leave no result at all and pass unseen: its EXIT trap records one
# failure then, stops its monitor relay and removes its work directory.
RUNNER_COLLECTED=0
runner_exit() { # work-dir label
    local rc=$?
    [ -n "${relay:-}" ] && stop_monitor_relay "$relay"
    rm -rf "$1"
    if [ "$RUNNER_COLLECTED" = 0 ]; then
        echo "fail $2: $(basename "$0") stopped (exit $rc) before collecting the guest's results" \
            >> "${RESULTS:-$CACHE/results.txt}"
    fi
}

# Kernel reports the harness looks for in every console log, whatever the
# check scripts do: a line the kernel printed (after its "[ seconds] "
# stamp) that opens a WARN, BUG, oops, panic, KASAN, UBSAN, lockdep,
# debugobjects, kmemleak, RCU-stall or hung-task report; and Xen's own
# assertion, BUG, WARN and panic lines ("(XEN) ..."). Reports expected by
# design are listed, each with its reason, in tools/testing/kernel-reports.allow.
KERNEL_REPORT_RE='(WARNING: |BUG: |kernel BUG at |Oops|general protection fault|Kernel panic|Unable to handle kernel|INFO: task .* blocked for more than|rcu: INFO: |INFO: rcu_|INFO: possible |UBSAN: |ODEBUG: |kmemleak: [0-9]+ new suspected memory leak|list_(add|del) corruption|refcount_t: |double fault)'
XEN_REPORT_RE="(Assertion '.*' failed|Xen BUG at|Xen WARN at|\\*\\*\\*\\* Panic on CPU|FATAL PAGE FAULT)"
KERNEL_REPORTS_ALLOW=$REPO/tools/testing/kernel-reports.allow

trim() { sed 's/^[[:space:]]*//; s/[[:space:]]*$//' <<< "$1"; }
# kernel_reports LOG LABEL: the report lines of a console log (stamp
# removed, each once) that no entry of kernel-reports.allow for LABEL
# covers. An entry is "LABEL-GLOB | ERE | reason"; one without a reason is
# itself printed as a report, so the allowlist cannot grow silently.
kernel_reports() { # console.log label
    local log=$1 label=$2 glob re reason
    local found; found=$(
        tr -d '\r' < "$log" | grep -aoE "\[ *[0-9]+\.[0-9]+\] $KERNEL_REPORT_RE.*" |
            sed 's/^\[ *[0-9.]*\] //'
        tr -d '\r' < "$log" | grep -aoE "^\(XEN\) .*$XEN_REPORT_RE.*"
    )
    [ -n "$found" ] || return 0
    found=$(awk '!seen[$0]++' <<< "$found")
    while IFS='|' read -r glob re reason; do
        glob=$(trim "$glob") re=$(trim "$re") reason=$(trim "$reason")
        [ -n "$glob" ] && [[ $glob != \#* ]] || continue
        if [ -z "$reason" ]; then
            echo "kernel-reports.allow: entry '$glob | $re' gives no reason"
            continue
        fi
        # shellcheck disable=SC2053
        [[ $label == $glob ]] || continue
        found=$(grep -avE -- "$re" <<< "$found")
        [ -n "$found" ] || return 0
    done < "$KERNEL_REPORTS_ALLOW"
    echo "$found"
}

# scan_kernel_reports LOG LABEL: one failed result per kernel report in the
# log (at most five, then their count), the lines around the first on
# stderr.
scan_kernel_reports() { # console.log label
    local log=$1 label=$2 results=${RESULTS:-$CACHE/results.txt} reports n first
    reports=$(kernel_reports "$log" "$label")
    [ -n "$reports" ] || return 0
    n=$(wc -l <<< "$reports")
    head -5 <<< "$reports" | sed "s/^/fail $label: kernel report on the console: /" >> "$results"
    ((n <= 5)) || echo "fail $label: $((n - 5)) more kernel reports on the console (log $log)" >> "$results"
    first=$(head -1 <<< "$reports")
    echo "$label: kernel report in $log:" >&2
    tr -d '\r' < "$log" | grep -aF -m1 -A 20 -- "$first" >&2
}

# Turns a guest console log into results: every "ok N - name" / "not ok N -
# name" line the guest checks printed is one result, "ok N - name # SKIP
# reason" a skip (TAP directive, any case); every KTAP block (between
# "KTAP-BEGIN" and "KTAP-END") is parsed with the kernel tree's kunit.py
# (its JSON) and each test case counts as one result. Every kernel report
# on the console is a failure (scan_kernel_reports), and so is a boot that
# printed no check at all. Appends "pass name" / "fail name" / "skip name"
# lines to $RESULTS (default $CACHE/results.txt); see skip_result for skips
# that count as failures.
collect_results() { # console.log label
    local log=$1 label=$2 results=${RESULTS:-$CACHE/results.txt}
    RUNNER_COLLECTED=1
    local tmp; tmp=$(mktemp -d)
    # Kernel timestamps go. The guest's check lines and the kernel's
    # messages share the console, and a check line can land inside a
    # kernel message ("[ 136.133349] x" + "ok 4 - ..." + the rest of the
    # message on the next line): the text between the timestamp and a
    # check line goes too. Conservative: a "not ok" anywhere after a
    # timestamp wins over an "ok" later in the line.
    perl -pe 's/\r//g; s/^\(XEN\) //; s/^\[ *[0-9.]+\] (?:.*?(?=(?:not )?ok [0-9]+ - ))?//' "$log" > "$tmp/log"
    local skip_re='^(.*[^[:space:]])[[:space:]]+#[[:space:]]*[Ss][Kk][Ii][Pp][[:alnum:]]*([[:space:]]+(.*))?$'
    # A line seen twice is one check printed twice (after xl restore, the
    # restored domU's console reaches the log twice): counted once.
    grep -E '^(not )?ok [0-9]+ - ' "$tmp/log" | awk '!seen[$0]++' | while read -r line; do
        case $line in
            "not ok"*) echo "fail $label: ${line#not ok * - }" ;;
            *)  line=${line#ok * - }
                if [[ $line =~ $skip_re ]]; then
                    skip_result "$label" "${BASH_REMATCH[1]}" "${BASH_REMATCH[3]:-no reason given}"
                else
                    echo "pass $label: $line"
                fi ;;
        esac
    done >> "$tmp/res"
    awk '/KTAP-BEGIN/{f=1; n++; next} /KTAP-END/{f=0} f{print > ("'"$tmp"'/ktap" n)}' "$tmp/log"
    local k suites=0
    for k in "$tmp"/ktap*; do
        [ -f "$k" ] || continue
        suites=$((suites + 1))
        python3 "$SRC_DIR"/tools/testing/kunit/kunit.py parse --json="$k.json" "$k" > "$k.parsed" 2>&1
        if ! python3 - "$k.json" "$label" >> "$tmp/res" <<'PY'
import json, sys
label = sys.argv[2]
def walk(group, prefix):
    n = 0
    for case in group.get("test_cases", []):
        name = prefix + case["name"]
        status = case["status"]
        if status == "PASS":
            print(f"pass {label}: kunit {name}")
        elif status == "SKIP":
            print(f"skip {label}: kunit {name} (KUnit skip)")
        else:
            print(f"fail {label}: kunit {name} ({status})")
        n += 1
    for sub in group.get("sub_groups", []):
        n += walk(sub, sub["name"] + ".")
    return n
with open(sys.argv[1]) as f:
    sys.exit(0 if walk(json.load(f), "") else 1)
PY
        then
            echo "fail $label: KTAP block $suites did not parse to any test case" >> "$tmp/res"
            cat "$k.parsed" >&2
        fi
        if grep -q '\[ERROR\]' "$k.parsed"; then
            grep '\[ERROR\]' "$k.parsed" | sed "s/^/fail $label: kunit.py: /" >> "$tmp/res"
        fi
    done
    if [ ! -s "$tmp/res" ]; then
        echo "fail $label: the boot printed no check (log $log)" >> "$tmp/res"
    fi
    if ! guest_exited_cleanly "$tmp/log"; then
        echo "fail $label: guest did not finish cleanly ($(grep -m1 '^GUEST-EXIT' "$tmp/log" || echo 'no GUEST-EXIT line: hang, panic or timeout'))" >> "$tmp/res"
    fi
    # The init prints GUEST-EXIT before `sync; poweroff -f`: a driver that
    # hangs the sync or the power-off shows only as QEMU killed at the
    # runner's timeout, after a clean exit line.
    if grep -q '^GUEST-TIMEOUT' "$tmp/log"; then
        echo "fail $label: the guest never powered off: $(grep -m1 '^GUEST-TIMEOUT' "$tmp/log") (a hang after its last line: sync, power-off)" >> "$tmp/res"
    fi
    # One append: two lanes' runners share $RESULTS.
    cat "$tmp/res" >> "$results"
    scan_kernel_reports "$log" "$label"
    rm -rf "$tmp"
}

# Relays guest lines "HOST-CMD: <command>" from a console log that QEMU is
# writing to the QEMU monitor socket (human monitor protocol), so a guest
# script can resize or unplug its own disks at the right moment. Prints the
# relay's pid; stop it with stop_monitor_relay.
# "HOST-CMD: system_wakeup-when-suspended" waits for the guest's S3 suspend
# and then sends system_wakeup (the guest cannot ask once suspended).
start_monitor_relay() { # log monitor.sock
    local log=$1 sock=$2
    (
        tail -F -n +1 "$log" 2>/dev/null | sed -un 's/\r//g; s/^HOST-CMD: //p' | while IFS= read -r cmd; do
            case $cmd in
                vub-attach\ * | vub-detach\ *) vhost_user_cmd "$sock" $cmd ;;
                *) monitor_send "$sock" "$cmd" ;;
            esac
        done
    ) > /dev/null 2>&1 &
    echo $!
}
# monitor_send MONITOR.SOCK CMD: one command to QEMU's human monitor.
monitor_send() {
    python3 - "$1" "$2" <<'PY'
import socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
time.sleep(0.2); s.recv(4096)
cmd = sys.argv[2]
if cmd == "system_wakeup-when-suspended":
    # The guest asks before it suspends (it cannot once it has): wait up
    # to 120 s for QEMU to report the suspend, then wake it.
    for _ in range(600):
        s.sendall(b"info status\n"); time.sleep(0.2)
        if b"suspended" in s.recv(65536):
            cmd = "system_wakeup"
            break
    else:
        sys.exit(1)
s.sendall((cmd + "\n").encode())
time.sleep(0.5)
PY
}
# vhost_user_cmd MONITOR.SOCK vub-attach SCENARIO N [ARGS...] |
# vub-detach N: the guest's requests for a device of virtio-blk-backend
# (tools/testing/virtio-backend) in a guest whose RAM is shared
# (virtio-guest.sh with VHOST_USER=1, which sets VUB_DIR and VUB_BIN).
# Attach starts the device on a fresh 128 MiB file, misbehaving as
# SCENARIO ("well" or "-": not at all), with ARGS as more device options
# (e.g. "--flush-ms 40000": an honest device that is slow to flush), and
# hot-plugs it as vhost-user-blk-pci "vub<N>" (2 queues); detach unplugs
# it (the guest's removal then runs).
# The device appends "fired SCENARIO" to $VUB_DIR/fired when it strikes.
vhost_user_cmd() {
    local sock=$1 n i
    case $2 in
        vub-attach)
            local scenario=$3
            n=$4
            shift 4
            truncate -s 128M "$VUB_DIR/vub$n.img"
            rm -f "$VUB_DIR/vub$n.sock"
            # shellcheck disable=SC2046
            setsid "$VUB_BIN" --socket "$VUB_DIR/vub$n.sock" --file "$VUB_DIR/vub$n.img" --fired "$VUB_DIR/fired" \
                $([ "$scenario" = well ] || [ "$scenario" = - ] || echo --misbehave "$scenario") "$@" \
                >> "$VUB_DIR/device.log" 2>&1 < /dev/null &
            echo $! >> "$VUB_DIR/pids"
            for ((i = 0; i < 50; i++)); do [ -S "$VUB_DIR/vub$n.sock" ] && break; sleep 0.1; done
            monitor_send "$sock" "chardev-add socket,id=vubc$n,path=$VUB_DIR/vub$n.sock"
            monitor_send "$sock" "device_add vhost-user-blk-pci,chardev=vubc$n,id=vub$n,num-queues=2" ;;
        vub-detach) monitor_send "$sock" "device_del vub$3" ;;
    esac
}
# Children first: once the subshell is gone they belong to init.
stop_monitor_relay() { pkill -P "$1" 2>/dev/null || true; kill "$1" 2>/dev/null || true; }
