# Sourced by guest check scripts (busybox sh). Each check prints one TAP line
# ("ok N - name" / "not ok N - name") that the host counts as a result.
N=0
# Parameters and expectations a suite passed in (GUEST_ENV on the host).
[ -r /guest/env.sh ] && . /guest/env.sh
ok()     { N=$((N + 1)); echo "ok $N - $*"; }
not_ok() { N=$((N + 1)); echo "not ok $N - $*"; FAILED=1; }
# check NAME CMD...: passes when CMD exits 0.
check() { local name=$1; shift; if "$@"; then ok "$name"; else not_ok "$name"; fi; }
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
# Prints the lsblk -t style line for a disk from sysfs (busybox has no lsblk).
topology_line() { # dev
    local d=$1
    echo "TOPOLOGY $d: size=$(cat /sys/block/$d/size) log-sec=$(q $d logical_block_size) phy-sec=$(q $d physical_block_size) align=$(cat /sys/block/$d/alignment_offset) min-io=$(q $d minimum_io_size) opt-io=$(q $d optimal_io_size) rota=$(q $d rotational) max-hw-kb=$(q $d max_hw_sectors_kb) max-segs=$(q $d max_segments)"
}
FAILED=0
finish() { [ "$FAILED" = 0 ]; }
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
