#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Named mutations of the drivers and of the harness, each with the check
# that must fail when it is applied: "this test fails when the fix is
# reverted" as a command anyone can repeat.
#
#   tools/testing/mutate.sh [--list] [NAME...]    (default: every mutation)
#
# A mutation is tools/testing/mutations/NAME.patch: a unified diff against
# the tree, after a header of
#   Check: <bash command run in the mutated copy's top directory>
#   Killed-by: <ERE a failed result of the check must match>
#   Why: <what the mutation breaks, and which check guards it>
# For each, a copy of the tree (git ls-files) gets the patch and runs the
# check with its own RESULTS file and the shared kernel cache. The mutation
# is killed when the check recorded a failed result matching Killed-by
# (any other failure, or none, is "survived": a check that fails for
# another reason proves nothing), stale when the patch no longer applies.
# Prints one line per mutation and "N killed, N survived, N stale"; exits
# non-zero unless every mutation was killed. Not run by run-tests.sh: the
# checks are guest boots.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
MUT_DIR=$REPO/tools/testing/mutations
header() { sed -n "s/^$2: //p" "$1" | head -1; }

if [ "${1:-}" = --list ]; then
    for p in "$MUT_DIR"/*.patch; do
        printf '%-28s %s\n' "$(basename "$p" .patch)" "$(header "$p" Why)"
    done
    exit 0
fi
names=("$@")
((${#names[@]})) || for p in "$MUT_DIR"/*.patch; do names+=("$(basename "$p" .patch)"); done

killed=0 survived=0 stale=0
for name in "${names[@]}"; do
    patch=$MUT_DIR/$name.patch
    [ -f "$patch" ] || die "no mutation $name (tools/testing/mutate.sh --list)"
    check=$(header "$patch" Check) want=$(header "$patch" Killed-by)
    [ -n "$check" ] && [ -n "$want" ] || die "$name: the header lacks Check: or Killed-by:"
    work=$CACHE/mutations/$name
    rm -rf "$work"; mkdir -p "$work/tree"
    (cd "$REPO" && git ls-files -z --cached --others --exclude-standard | tar --null -T - -cf -) | tar -C "$work/tree" -xf -
    if ! (cd "$work/tree" && git apply "$patch") 2> "$work/apply.log"; then
        echo "stale    $name: the patch does not apply ($(head -1 "$work/apply.log"))"
        stale=$((stale + 1)); continue
    fi
    log "mutation $name: $check"
    : > "$work/results.txt"
    (cd "$work/tree" && RESULTS=$work/results.txt LOGDIR=$work/logs bash -c "$check") > "$work/check.log" 2>&1
    rc=$?
    hit=$(grep '^fail ' "$work/results.txt" | grep -E -m1 -- "$want")
    if [ -n "$hit" ]; then
        echo "killed   $name: ${hit#fail }"
        killed=$((killed + 1))
    else
        echo "SURVIVED $name: no failed result matches '$want' (check exit $rc; $(grep -c '^fail ' "$work/results.txt") other failures; see $work)"
        survived=$((survived + 1))
    fi
done
echo "$killed killed, $survived survived, $stale stale"
((survived == 0 && stale == 0))
