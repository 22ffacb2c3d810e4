#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The seeds benchmark (tools/testing/bench/seeds.sh) in --smoke mode: one
# point per experiment, one repetition, so the tool cannot silently rot.
# Fails when a guest run fails or a number is missing or does not parse;
# never because a number is low (TCG timings are noise, and the smoke runs
# beside other suites: its figures are not the benchmark's).
# This suite runs the Xen experiments; 55-bench-smoke-virtio.sh runs the
# virtio ones through it (SMOKE_LABEL, SMOKE_EXPS, SMOKE_OUT).
set -uo pipefail
T=$(dirname "$0")/..
. "$T/lib.sh"
RESULTS=${RESULTS:-$CACHE/results.txt}
L=${SMOKE_LABEL:-bench-smoke}
exps=${SMOKE_EXPS:-indirect,persist,align,compare,calib,profile}
out=${SMOKE_OUT:-$CACHE/bench-smoke}
log=$(mktemp)
RESULTS=$out/checks.txt bash "$T/bench/seeds.sh" --smoke --exp "$exps" --out "$out" > "$log" 2>&1
rc=$?
# Each experiment's CSV (persist writes persistent.csv).
for exp in $(echo "$exps" | tr , ' ' | sed 's/\bpersist\b/persistent/'); do
    if [ -s "$out/$exp.csv" ] && [ "$(wc -l < "$out/$exp.csv")" -gt 1 ]; then
        echo "pass $L: $exp.csv written ($(($(wc -l < "$out/$exp.csv") - 1)) rows)"
    else
        echo "fail $L: $exp.csv missing or empty (see $out)"
    fi
done >> "$RESULTS"
grep '^MISSING: ' "$log" | sed "s/^MISSING: /fail $L: number missing: /" >> "$RESULTS"
grep '^fail ' "$out/checks.txt" 2>/dev/null | sed "s/^fail /fail $L: guest check: /" >> "$RESULTS"
# A guest run seeds.sh judged failed (its own GUEST-EXIT check), by name.
sed -n "s/.*bench: \(.*\): guest run failed.*/fail $L: \1: no \"GUEST-EXIT: 0\" in its log/p" "$log" >> "$RESULTS"
if ((rc == 0)); then
    echo "pass $L: seeds.sh --smoke ($(grep '^elapsed' "$log"))" >> "$RESULTS"
else
    echo "fail $L: seeds.sh --smoke exited $rc (log: $out/seeds.log; its last line: $(tail -1 "$log"))" >> "$RESULTS"
fi
cp "$log" "$out/seeds.log" 2>/dev/null
rm -f "$log"
exit $rc
