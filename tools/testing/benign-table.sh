#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Documentation/benign.md from the guest logs of guest/virtio-benign.sh
# and guest/xen-benign.sh: their "BENIGN <row> <ours|C> <failed> <reads>
# <seconds>" lines, one table row per row and driver pair. The page is
# generated, never edited. Every row (BENIGN_FULL=1, the page's logs):
#
#   bash tools/testing/benign-table.sh --run > Documentation/benign.md
#
# makes the two boots first (virtio about 22 minutes, Xen about 15, on a
# 2-core machine without KVM): $CACHE/logs/virtio-benign-full.log and
# xen-benign-full.log. Without --run the page is made from the LOGs given,
# or those two; a log whose name starts with "virtio" holds virtio rows,
# any other Xen rows; a row run in two logs is taken from the first:
#
#   tools/testing/benign-table.sh [LOG...] > Documentation/benign.md
#
# README's test command runs a subset of the rows (suite 10's boot
# virtio-benign, suite 20's xen-p0-b512), each checked there.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
if [ "${1:-}" = --run ]; then
    shift
    (cd "$REPO" && make -s KDIR="$(bash tools/testing/build-kernel.sh)") >&2 || die "make failed"
    RESULTS=$CACHE/benign-results.txt
    export RESULTS
    : > "$RESULTS"
    GUEST_ENV="BENIGN_FULL=1 BENIGN_VUB=1" VHOST_USER=1 bash "$REPO/tools/testing/virtio-guest.sh" -l virtio-benign-full -t 2400 \
        -d 64M -d '64M,num-queues=2' "$REPO/tools/testing/guest/virtio-benign.sh" >&2
    GUEST_ENV="SCRIPTS=xen-benign BENIGN_FULL=1 BENIGN_SLOW=1" USERSPACE_BACKEND=1 bash "$REPO/tools/testing/xen-guest.sh" \
        -l xen-benign-full -p 0 -b 512 -s 256M -t 2400 "$REPO/tools/testing/guest/multi.sh" >&2
    grep -v '^pass' "$RESULTS" >&2 || true
fi
(($#)) || set -- "$CACHE/logs/virtio-benign-full.log" "$CACHE/logs/xen-benign-full.log"
for f in "$@"; do [ -f "$f" ] || die "no log $f: run the suites first (README)"; done

# rows LOG: "driver row who failed reads secs" lines.
rows() {
    local d=xen
    case $(basename "$1") in virtio*) d=virtio ;; esac
    tr -d '\r' < "$1" | sed 's/^\[ *[0-9.]*\] //' | awk -v d="$d" '$1 == "BENIGN" { print d, $2, $3, $4, $5, $6 }'
}
all=$(for f in "$@"; do rows "$f"; done)

cat <<'HEAD'
# An honest backend or device that is merely slow

The fault users meet most is not a hostile backend but an honest one whose
storage stalls or crawls: a throttled cloud disk with a deep queue, a
multipath failover, a long discard. The C drivers wait it out and lose
nothing; so must ours. Each row below is an honest slow backend or device
that answers every request, late; ours must have no I/O error wherever C
has none. The request timeout's policy is in `xen-blkfront.md` and
`virtio-blk.md` ("patient with a slow backend, bounded at removal").

| driver | row | what | ours: reads failed (time), or fio's errors | C: the same |
|---|---|---|---|---|
HEAD
what() {
    case $1 in
        slow-32-t5) echo "2 requests/s (QEMU throttle), 32 concurrent 4 KiB O_DIRECT reads (waits up to 16 s), io_timeout 5 s" ;;
        slow-32-t5-lim) echo "the same with give_up_after_ms=5000" ;;
        slow-80) echo "2 requests/s, 80 concurrent reads (waits up to 40 s), the default io_timeout (30 s)" ;;
        poll-stopped-*) echo "fio io_uring --hipri on a poll queue, the fio process stopped (SIGSTOP) ${1#poll-stopped-} s with requests in flight; io_timeout 5 s, give_up_after_ms=5000" ;;
        stall-*-t5) echo "the disk stalls ${1#stall-}, then resumes (throttled to 1 byte/s, then not), fio randwrite + crc32c verify at queue depth 32, io_timeout 5 s" | sed 's/-t5,/ s,/' ;;
        stall-*) echo "the disk stalls ${1#stall-} s, then resumes, fio randwrite + crc32c verify at queue depth 32, the default io_timeout (30 s)" ;;
        flush-40-t5) echo "every flush answered after 40 s (the test backend's or device's --flush-ms), fio randwrite + crc32c verify at queue depth 32 with its end fsync, io_timeout 5 s for ours" ;;
        discard-40-t5) echo "every discard answered after 40 s (--discard-ms): blkdiscard from 64 MiB to the disk's end while fio writes and verifies its first 4 MiB at queue depth 32, io_timeout 5 s for ours (virtio: four discards of 16 MiB, 160 s)" ;;
        restart) echo "the backend process killed (SIGKILL) and started again on the vbd 5 s into fio's 20 s of randwrite + crc32c verify at queue depth 32 (it goes back to InitWait); io_timeout 5 s for ours" ;;
        full-ring-60-t5) echo "every read and write answered after 0.5 s (--request-ms), fio randwrite + crc32c verify for 60 s at twice the ring's depth (Xen: one ring of 32 slots, depth 64; virtio: the disk's depth in flight, the virtqueue full): requests wait for room; io_timeout 5 s for ours" ;;
        *) echo "$1" ;;
    esac
}
# cell DRIVER ROW WHO: "failed of reads (seconds)" for a row of reads, "no
# error" or fio's exit for a fio row.
cell() {
    awk -v d="$1" -v r="$2" -v w="$3" '$1 == d && $2 == r && $3 == w {
        if ($5 != "-") print $4 " of " $5 " (" $6 " s)"
        else if ($4 == "0") print "no error"
        else print $4
        f = 1 }
        END { if (!f) print "not run" }' <<< "$all" | head -1
}
awk '{ print $1, $2 }' <<< "$all" | awk '!seen[$0]++' | while read -r d r; do
    c=$(cell "$d" "$r" C)
    [ "$c" = "not run" ] && c="not run (ours only: a setting or queue type C lacks)"
    echo "| $d | $r | $(what "$r") | $(cell "$d" "$r" ours) | $c |"
done
cat <<TAIL

Xen: blkback in dom0 on a disk QEMU throttles, and for the flush,
discard, full-ring and restart rows the project's userspace blkif backend
(tools/testing/xen-backend, honest but slow: \`--flush-ms\`,
\`--discard-ms\`, \`--request-ms\`; \`xen/us-backend restart\` kills it
and starts it again on the vbd); ours and C in turn in one PV domU.
virtio: QEMU's virtio-blk-pci with its drive throttled
(\`block_set_io_throttle\`), and for the flush and discard rows the
project's vhost-user-blk device (tools/testing/virtio-backend, honest but
slow: \`--flush-ms\`, \`--discard-ms\`), ours and C in turn in one guest. Each row
proves it struck, checked in the guest: the reads took the throttle's
time (at least a quarter of N/2 s), a stall held fio's requests in flight
at its middle, the stopped fio had polled requests in flight, the slow
backend or device counted the requests it answered late (and, for the
full ring, the Xen ring held 31 of its 32 slots unanswered, the virtio
disk its whole depth in flight), the restarted backend wrote its node
and ours named the reconnect, and ours
counted request timeouts (its removal line, or debugfs
\`request_timeouts\`): $(cat "$@" | tr -d '\r' | sed -n 's/.*BENIGN-TIMEOUTS \([a-z]*\) \([0-9a-z]*\).*/\1 \2/p' | paste -sd, - | sed 's/,/, /g').

Made by \`bash tools/testing/benign-table.sh --run > Documentation/benign.md\`
(every row: two boots, virtio about 22 minutes and Xen about 15 on a
2-core machine without KVM). README's test command runs the rows that
guard the code and checks each there: virtio slow-32-t5-lim (it fails if
a timeout ever gives up on a queue that answers), poll-stopped and C's
slow-32-t5 (suite 10's boot \`virtio-benign\`, about a minute and a
half); Xen ours' slow-32-t5-lim and C's slow-32-t5 (the first script of
suite 20's boot \`xen-p0-b512\`, about a minute).
TAIL
