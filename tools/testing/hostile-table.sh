#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Documentation/hostile-backend.md from the guest logs of
# guest/xen-hostile.sh (their "HOSTILE <scenario> <ours|C> <outcome>
# <notes>" lines): one table row per scenario, in the order they ran. The
# page is generated, never edited:
#
#   tools/testing/hostile-table.sh [--virtio] [--run-c] [LOG...] > Documentation/hostile-backend.md
#   tools/testing/hostile-table.sh [--virtio] --update LOG... > page.new
#   tools/testing/hostile-table.sh [--virtio] --check [LOG]
#
# --update keeps the page's rows for what the LOGs did not run: each
# scenario's run (ours, C) comes from the first LOG that has it, else from
# the committed page's row (its cells read back as that run's line); rows
# in the page's order, new scenarios last. For runs of a few scenarios
# (new ones, or ours again) without every C run again.
#
# --virtio: the same for the virtio driver and virtio-blk-backend
# (tools/testing/virtio-backend, guest/virtio-hostile.sh, its "VHOSTILE"
# lines): Documentation/hostile-device.md from suite 15's virtio-hostile
# boot and the C runs ($CACHE/logs/virtio-hostile-c-*.log).
#
# --check says whether the committed page is stale: a scenario of
# `blkif-backend --list` without a row or a row for one it no longer has,
# or (given suite 25's log, default $CACHE/logs/xen-userspace.log when it
# exists) an outcome of ours that differs from the page's. One line each,
# "stale: ...", and exit 1; "current: ..." and exit 0 otherwise.
#
# The LOGs default to suite 25's boot ($CACHE/logs/xen-userspace.log:
# ours, asserted) and the C driver's runs ($CACHE/logs/xen-hostile-c-*.log).
# --run-c makes those C runs first: every scenario for C with the bounds
# ours has. A hang takes the domU's xenbus with it, so the scenarios
# after one run in a fresh Xen boot: one boot per hang, about a minute
# each plus the scenarios. Not in run-tests.sh: C's outcomes are recorded,
# not asserted.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
PAGE=$REPO/Documentation/hostile-backend.md PKG=xen-backend BIN=blkif-backend TAG=HOSTILE
OURS_LOG=xen-userspace C_LOGS=xen-hostile-c
if [ "${1:-}" = --virtio ]; then
    shift
    PAGE=$REPO/Documentation/hostile-device.md PKG=virtio-backend BIN=virtio-blk-backend TAG=VHOSTILE
    OURS_LOG=virtio-hostile C_LOGS=virtio-hostile-c
fi
if [ "${1:-}" = --check ]; then
    (cd "$REPO" && cargo build --release -q -p $PKG) || die "cargo build -p $PKG failed"
    want=$("$REPO/target/release/$BIN" --list | awk '{ print $1 }' | sort)
    rows=$(sed -n 's/^| \([a-z0-9-]*\) | \([a-z]*\) | \([a-z-]*\) | .*/\1 \2/p' "$PAGE")
    have=$(awk '{ print $1 }' <<< "$rows" | sort)
    stale=0
    for s in $(comm -23 <(echo "$want") <(echo "$have")); do echo "stale: no row for scenario $s"; stale=1; done
    for s in $(comm -13 <(echo "$want") <(echo "$have")); do echo "stale: a row for $s, which $BIN --list no longer has"; stale=1; done
    log=${2:-$CACHE/logs/$OURS_LOG.log}
    if [ -f "$log" ]; then
        while read -r _ s who outcome _; do
            [ "$who" = ours ] || continue
            page=$(awk -v s="$s" '$1 == s { print $2 }' <<< "$rows")
            [ -z "$page" ] || [ "$page" = "$outcome" ] ||
                { echo "stale: $s: ours $outcome in $log, $page on the page"; stale=1; }
        done < <(tr -d '\r' < "$log" | sed 's/^\[ *[0-9.]*\] //' | grep "^$TAG ")
    fi
    ((stale)) && exit 1
    echo "current: $(wc -l <<< "$have") scenarios, every one of $BIN --list$([ -f "$log" ] && echo ", ours' outcomes as in $log")"
    exit 0
fi
if [ "${1:-}" = --run-c ]; then
    shift
    (cd "$REPO" && cargo build --release -q -p $PKG)
    list=$("$REPO/target/release/$BIN" --list)
    remaining=$(echo "$list" | awk '{ print $1 }' | tr '\n' ' ')
    rm -f "$CACHE"/logs/$C_LOGS-*.log
    boot=0
    while [ -n "${remaining// /}" ] && ((boot < 30)); do
        boot=$((boot + 1)) label=$C_LOGS-$(printf %02d $boot)
        env="HOSTILE_SCENARIOS=$(echo $remaining | tr ' ' ,) HOSTILE_EXPECT=$(echo "$list" | tr ' ' : | paste -sd,) HOSTILE_WHO=C"
        if [ $TAG = VHOSTILE ]; then
            GUEST_ENV=$env VHOST_USER=1 RESULTS=$CACHE/results-hostile-c.txt \
                bash "$REPO/tools/testing/virtio-guest.sh" -l "$label" -t 3000 \
                "$REPO/tools/testing/guest/virtio-hostile.sh" >&2 || true
        else
            GUEST_ENV=$env USERSPACE_BACKEND=1 RESULTS=$CACHE/results-hostile-c.txt \
                bash "$REPO/tools/testing/xen-guest.sh" -l "$label" -c 1 -t 3000 \
                "$REPO/tools/testing/guest/xen-hostile.sh" >&2 || true
        fi
        log=$CACHE/logs/$label.log
        grep -q "^$TAG [^ ]* C " <(tr -d '\r' < "$log") || die "C run $label printed no outcome (see $log)"
        remaining=$(tr -d '\r' < "$log" | sed -n "s/^$TAG-NOT-RUN \([^ ]*\) C\$/\1/p" | tr '\n' ' ')
    done
fi
update=
if [ "${1:-}" = --update ]; then
    shift
    (($#)) || die "--update needs the LOGs of the new runs"
    # The page's rows as the lines they were made from: "| s | ours | C |
    # ours: NOTES. C: CNOTES. |" (a C cell not-run: no C line).
    update=$(sed -n 's/^| \([a-z0-9-]*\) | \([a-z-]*\) | \([a-z-]*\) | ours: \(.*\)\. C: \(.*\)\. |$/\1\t\2\t\3\t\4\t\5/p' "$PAGE" |
        sed 's/\\|/|/g' | awk -F'\t' -v t="$TAG" '{ print t, $1, "ours", $2, $4; if ($3 != "not-run") print t, $1, "C", $3, $5 }')
    [ -n "$update" ] || die "no rows read back from $PAGE"
fi
if (($# == 0)); then
    set -- "$CACHE/logs/$OURS_LOG.log"
    for l in "$CACHE"/logs/$C_LOGS-*.log; do [ -f "$l" ] && set -- "$@" "$l"; done
fi
lines=$( { for log in "$@"; do tr -d '\r' < "$log" | sed 's/^(XEN) //; s/^\[ *[0-9.]*\] //'; done |
    grep "^$TAG "; echo "$update"; } | grep "^$TAG " | awk '!seen[$0]++' || true)
[ -n "$lines" ] || die "no HOSTILE lines in $*"
field() { # SCENARIO WHO N: field N (4: outcome, 5: the notes) of that run
    echo "$lines" | awk -v s="$1" -v w="$2" -v n="$3" '$2 == s && $3 == w {
        out = $n; if (n == 5) { for (i = 6; i <= NF; i++) out = out " " $i }; print out; exit }' | sed 's/|/\\|/g'
}
if [ $TAG = VHOSTILE ]; then
cat <<HEAD
# The hostile device, scenario by scenario

Generated by \`tools/testing/hostile-table.sh --virtio --run-c\` from the logs
of suite 15's \`virtio-hostile\` boot (ours) and of the C driver's runs, in
QEMU (TCG) with the test kernel; do not edit by hand. Each row is one
misbehaviour of \`virtio-blk-backend --misbehave NAME\`
(tools/testing/virtio-backend, a vhost-user-blk device; \`virtio-blk-backend
--list\` names them all), hot-plugged into the guest and met by our driver
and then by Linux's C virtio_blk (guest/virtio-hostile.sh; C in boots of
its own, the same QEMU and guest, one more boot after each hang): the
device behaves until it has answered 64 requests (or misbehaves in its
config from the start, or on one kind of request), fio writes and reads
back with crc32c checks (the disk's io_timeout set to 5 s; ours loaded
with \`give_up_after_ms=5000\`, but for stall, which runs with the default
and gives up at the unplug), then the device is unplugged as \`device_del\`
does. Suite 15 runs a few of them
again for ours on the debug kernel (KASAN, lockdep, kmemleak;
\`HOSTILE_DEBUG_SCENARIOS=all\` runs every one there).

- **survives**: no oops or kernel warning, fio ended (with an I/O error or
  success) within 40 s of the unplug (the same bound for both), no data
  that fio's verify flags as corrupt without an I/O error (but for
  late-write-after-used, whose device writes fio's buffers itself after
  answering: recorded only, for both), the device
  went away, the module unloaded. For ours this is asserted (a failed
  check otherwise); C's outcome is only recorded.
- **hangs**: fio, the device or the module was still there past the bound.
- **corrupts**: fio read data its verify flagged, with no I/O error.
- **oops**: a BUG, Oops, WARNING or KASAN/lockdep report in dmesg.

A hang holds the ACPI hotplug thread (every later plug and unplug waits
for it): after a C hang the remaining scenarios run for C in a fresh boot.

| scenario | ours | C | notes |
| --- | --- | --- | --- |
HEAD
else
cat <<HEAD
# The hostile backend, scenario by scenario

Generated by \`tools/testing/hostile-table.sh --run-c\` from the logs of
suite 25's \`xen-userspace\` boot (ours) and of the C driver's runs, on Xen
4.17 under QEMU (TCG) with the test kernel; do not edit by hand. Each row is one
misbehaviour of \`blkif-backend --misbehave NAME\` (tools/testing/xen-backend,
\`blkif-backend --list\` names them all), met by our driver and then by
Linux's C xen-blkfront (guest/xen-hostile.sh; C in boots of its own, the
same Xen and domU setup, one more boot after each hang): the backend
behaves until the frontend has sent 64 requests, fio has requests in flight
when it strikes, then the vbd is detached as \`xl block-detach\` does
(ours loaded with \`give_up_after_ms=5000\`; for stall-connected, with the
default, whose disk's io_timeout is 5 s, the backend stays Connected and
the frontend's node is removed first, as \`xl block-detach --force\`
leaves it: ours gives up at the removal).
Suite 35-debug-xen runs four of them again for ours on the
debug kernel (KASAN, lockdep, kmemleak; \`HOSTILE_DEBUG_SCENARIOS=all\`
runs every one there).

- **survives**: no oops or kernel warning, fio ended (with an I/O error or
  success) within 40 s of the detach (the same bound for both), the disk went away, the
  module unloaded. For ours this is asserted (a failed check otherwise);
  C's outcome is only recorded.
- **hangs**: fio, the disk or the module was still there past the bound.
- **oops**: a BUG, Oops, WARNING or KASAN/lockdep report in dmesg.
- **not-run**: no C run of the scenario was recorded yet.

A hang takes the domU's xenbus with it (the removal that hangs runs in
the xenwatch thread, which every later probe waits for): after a C hang
the remaining scenarios run for C in a fresh Xen boot.

| scenario | ours | C | notes |
| --- | --- | --- | --- |
HEAD
fi
for s in $( { echo "$update"; echo "$lines"; } | awk 'NF { print $2 }' | awk '!seen[$0]++'); do
    # A scenario without a C run (none of the logs has its line) says so.
    c=$(field "$s" C 4) c_notes=$(field "$s" C 5)
    echo "| $s | $(field "$s" ours 4) | ${c:-not-run} | ours: $(field "$s" ours 5). C: ${c_notes:-not run}. |"
done
