#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Instructions the Xen data path (rust/blkcore) executes per request and per
# segment, mapping (before the ring lock), submission and completion apart,
# counted by callgrind on the host simulator (tools/testing/blkback-sim,
# example datapath_cost), which runs the code the kernel driver runs. A
# count, not a time: the same code gives the same figure on any machine,
# so two revisions compare exactly, unlike the domU profile under TCG
# (seeds.sh --exp profile), whose per-request figures vary several-fold
# from run to run. Only blkcore's own functions
# are counted: the simulated grant table and backend, and the kernel's
# grant calls, are not (each costs the same for any revision).
#
# Built as the kernel builds blkcore: opt-level 2, overflow checks on.
#
# Usage: datapath-instructions.sh [--base REV] [SEGS...]   (default 1 32 256)
#   --base REV  also count REV (a git worktree of it, with this example) and
#               print both side by side.
# Needs valgrind (setup-host.sh installs it). Figures only: exits non-zero
# when a run fails, never because a figure is high.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
command -v valgrind > /dev/null || die "valgrind is not installed (tools/testing/setup-host.sh installs it)"

base=
segs=()
while (($#)); do
    case $1 in
        --base) base=${2:?--base REV}; shift ;;
        -h|--help) sed -n '3,20p' "$0"; exit 0 ;;
        *) segs+=("$1") ;;
    esac
    shift
done
((${#segs[@]})) || segs=(1 32 256)
rounds=8

# count TREE MODE SEGS TOGGLE -> "REQUESTS INSTRUCTIONS": requests the run
# completed, blkcore's instructions inside the calls TOGGLE matches
count() {
    local tree=$1 mode=$2 n=$3 toggle=$4 out reqs
    out=$(mktemp)
    reqs=$(valgrind --tool=callgrind --callgrind-out-file="$out" "--toggle-collect=$toggle" \
        "$tree/target/release/examples/datapath_cost" "$mode" "$n" $rounds 2> /dev/null |
        awk '$1 == "requests" { print $2 }') || die "datapath_cost $mode $n failed in $tree"
    [ -n "$reqs" ] && [ "$reqs" -gt 0 ] || die "datapath_cost $mode $n completed no request in $tree"
    echo "$reqs $(callgrind_annotate --show-percs=no --threshold=100 "$out" 2> /dev/null |
        awk '$2 ~ /^\?\?\?:<?blkcore::/ { gsub(",", "", $1); s += $1 } END { print s + 0 }')"
    rm -f "$out"
}

build() { # TREE
    (cd "$1/tools/testing/blkback-sim" &&
        CARGO_PROFILE_RELEASE_OPT_LEVEL=2 CARGO_PROFILE_RELEASE_OVERFLOW_CHECKS=true \
            cargo build -q --release --example datapath_cost) || die "build failed in $1"
}

trees=("$REPO")
labels=("HEAD")
if [ -n "$base" ]; then
    wt=$(mktemp -d)/base
    git -C "$REPO" worktree add -q --detach "$wt" "$base"
    trap 'git -C "$REPO" worktree remove --force "$wt"' EXIT
    mkdir -p "$wt/tools/testing/blkback-sim/examples"
    cp "$REPO/tools/testing/blkback-sim/examples/datapath_cost.rs" "$wt/tools/testing/blkback-sim/examples/"
    trees=("$wt" "$REPO")
    labels=("$base" "HEAD")
fi
for t in "${trees[@]}"; do build "$t"; done

# map/req: what runs before the ring lock: mapping the request's pages to
# segments (datapath::map_request, with bounce frames), or mapping and
# granting them (PreGranted::grant_pieces, without); revisions before
# map_request mapped inside queue, those before grant_pieces granted there.
printf '%-10s %-10s %5s %9s %9s %12s %12s %12s %9s\n' revision persistent segs requests map/req submit/req complete/req total/req total/seg
for mode in p0 p1; do
    for n in "${segs[@]}"; do
        for i in "${!trees[@]}"; do
            read -r _ m1 < <(count "${trees[$i]}" $mode "$n" '*datapath*map_request*')
            read -r _ m2 < <(count "${trees[$i]}" $mode "$n" '*PreGranted*grant_pieces*')
            m=$((m1 + m2))
            read -r reqs s < <(count "${trees[$i]}" $mode "$n" '*DataPath*::queue*')
            read -r _ c < <(count "${trees[$i]}" $mode "$n" '*DataPath*::drain*')
            awk -v r="${labels[$i]:0:10}" -v p="${mode#p}" -v n="$n" -v q="$reqs" -v m="$m" -v s="$s" -v c="$c" \
                'BEGIN { printf "%-10s %-10s %5d %9d %9.0f %12.0f %12.0f %12.0f %9.1f\n", r, p, n, q, m / q, s / q, c / q, (m + s + c) / q, (m + s + c) / q / n }'
        done
    done
done
