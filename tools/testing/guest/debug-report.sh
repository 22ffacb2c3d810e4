#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
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
    grep -A12 '^unreferenced object' $K | head -40
    # One leak is the xenbus core's, not a driver's: a device whose probe
    # fails (the HVM guard refuses a CD-ROM vbd, as upstream does) keeps
    # dev->otherend, read by talk_to_otherend before the driver's probe;
    # only xenbus_dev_remove frees it, which a never-bound device does not
    # get (xenbus_dev_release frees the struct alone). Such an object is
    # the reply to that read: allocated in xenbus_thread, holding
    # "/local/domain/0/backend/vbd/...". Counted apart, and at most one
    # per failed probe in dmesg (the debug boots keep 4 MiB of it,
    # log_buf_len: the hostile scenarios' I/O errors pushed the probe's
    # line out of the default buffer); every other object fails the check.
    set -- $(awk '
        function done() { if (rec == "") return
            if (rec ~ /comm "xenbus"/ && rec ~ /xenbus_thread/ && rec ~ /\/local\/domain\/0\// && rec ~ /backend\/vbd\//) core++
            else other++
            rec = "" }
        /^unreferenced object/ { done() }
        { rec = rec " " $0 }
        END { done(); print other + 0, core + 0 }' $K)
    failed_probes=$(dmesg | grep -c 'xenbus_dev_probe on device/vbd/')
    expect_eq "kmemleak: unreferenced objects since debug-start (beside the xenbus core's otherend of $2 vbds whose probe failed)" "$1" 0
    check "kmemleak: xenbus core otherend leaks ($2) at most one per failed vbd probe ($failed_probes)" [ "$2" -le "$failed_probes" ]
else
    not_ok "kmemleak on (booted with kmemleak=on)"
fi
finish
