#!/bin/sh
# Last script of a debug-kernel boot (suites/30-debug-virtio.sh, 35-debug-xen.sh), after the checks
# before it loaded, exercised and unloaded the modules: KASAN, lockdep,
# might_sleep, debugobjects and kmemleak must have nothing to report. A
# report fails the boot with its first lines.
. /guest/common.sh
report() { # NAME REGEX
    local n
    n=$(dmesg | grep -cE "$2")
    if [ "$n" = 0 ]; then
        ok "no $1 report"
    else
        not_ok "$1: $n report lines, first: $(dmesg | grep -m1 -E "$2")"
        dmesg | grep -m1 -A20 -E "$2"
    fi
}
report KASAN 'BUG: KASAN'
report lockdep 'WARNING: possible|inconsistent lock state|INFO: possible|suspicious RCU usage|WARNING: bad unlock'
report "sleep in atomic context" 'BUG: sleeping function called from invalid context|BUG: scheduling while atomic'
report debugobjects 'ODEBUG:'
report "oops/BUG/WARN" 'Oops|general protection fault|kernel BUG|^\[ *[0-9.]*\] (BUG|WARNING):'
K=/sys/kernel/debug/kmemleak
if [ -w $K ]; then
    # kmemleak reports objects unreferenced for 5 s and seen in two scans.
    sleep 6; echo scan > $K; sleep 6; echo scan > $K
    n=$(grep -c '^unreferenced object' $K)
    grep -A12 '^unreferenced object' $K | head -40
    expect_eq "kmemleak: unreferenced objects since debug-start" "$n" 0
else
    not_ok "kmemleak on (booted with kmemleak=on)"
fi
finish
