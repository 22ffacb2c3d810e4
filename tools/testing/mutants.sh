#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Mutation testing of the pure core (rust/blkcore) with cargo-mutants: each
# mutant is one small change to the code (a condition negated, an operator
# swapped, a function body replaced by a default value); the host tests
# must fail on it. Prints the score per file (caught / missed / unviable /
# timeout) and every missed mutant. Too slow for CI (one release build and
# test run per mutant); see Documentation/testing.md.
#
#   tools/testing/mutants.sh [CARGO-MUTANTS-ARGS...]
#
# e.g. `-j 2`, `--file rust/blkcore/src/negotiate.rs` (replaces the default
# file set), `--list`. Environment: MUTANTS_TEST_TIMEOUT (s, per mutant's
# test run, default 60), MUTANTS_BUILD_TIMEOUT (s, per build, default 900),
# BLKFRONT_CACHE.
#
# Default files: those that validate backend or device input (xenstore
# values, negotiation, virtio config space, queue limits, responses on the
# ring) and those that run the request lifecycle (mapping, grants, ring
# slots, submission, completion, teardown). Not mutated: naming and bitmap
# (no backend input), the fuzz entry points (src/fuzz*, ring::fuzz_entry),
# the host storage and the host-side SliceRing (test doubles).
#
# cargo-mutants mutates copies of a copy of the working tree
# ($CACHE/mutants/tree), never the repo. In that copy, src/lib.rs includes
# the module list of src/tree.rs directly instead of through
# `#[path = "tree.rs"] mod tree;`: cargo-mutants looks for the modules of a
# `#[path]` file in src/tree/ and would find none. Same modules, same
# paths, same line numbers in every mutated file.
#
# Output: $CACHE/mutants/mutants.out (cargo-mutants' own: outcomes.json,
# caught.txt, missed.txt, unviable.txt, timeout.txt, a log per mutant) and
# $CACHE/mutants/score.md (the table printed at the end).
# Exit status: cargo-mutants' (0 all caught, 2 some missed, 3 some timed
# out, 4 the unmutated tests failed).
set -uo pipefail
. "$(dirname "$0")/lib.sh"
OUT=$CACHE/mutants
TREE=$OUT/tree
mkdir -p "$OUT"

command -v cargo-mutants > /dev/null ||
    die "cargo-mutants not installed: cargo install --locked cargo-mutants"

FILES=(
    # Backend / device input.
    rust/blkcore/src/xenstore.rs
    rust/blkcore/src/negotiate.rs
    rust/blkcore/src/virtio.rs
    rust/blkcore/src/virtio/parse.rs
    rust/blkcore/src/limits.rs
    rust/blkcore/src/blkif.rs
    rust/blkcore/src/ring.rs
    rust/blkcore/src/ring/inflight.rs
    # Request lifecycle.
    rust/blkcore/src/virtio/request.rs
    rust/blkcore/src/mapping.rs
    rust/blkcore/src/grants.rs
    rust/blkcore/src/datapath.rs
    rust/blkcore/src/datapath/build.rs
    rust/blkcore/src/datapath/submit.rs
    rust/blkcore/src/datapath/complete.rs
    rust/blkcore/src/datapath/pregrant.rs
)

own_files=0 listing=0
for a in "$@"; do
    case $a in
    -f | --file | --file=*) own_files=1 ;;
    --list | --list-files) listing=1 ;;
    esac
done
file_args=()
if ((!own_files)); then
    for f in "${FILES[@]}"; do file_args+=(--file "$f"); done
fi

# The working tree as it is (tracked and new files, not the ignored ones).
rm -rf "$TREE"
mkdir -p "$TREE"
(cd "$REPO" && git ls-files -z --cached --others --exclude-standard |
    tar --null --ignore-failed-read -T - -cf - 2> /dev/null) | tar -C "$TREE" -xf - ||
    die "copying the working tree to $TREE failed"
python3 - "$TREE/rust/blkcore/src" <<'PY' || die "could not inline tree.rs into lib.rs"
import pathlib, re, sys
src = pathlib.Path(sys.argv[1])
lib = (src / "lib.rs").read_text()
tree = "".join(l for l in (src / "tree.rs").read_text().splitlines(True)
               if not l.startswith("//"))
new, n = re.subn(r'#\[path = "tree.rs"\]\s*mod tree;\s*pub use tree::\*;\n', tree, lib)
if n != 1:
    sys.exit("lib.rs: no `#[path = \"tree.rs\"] mod tree; pub use tree::*;`")
(src / "lib.rs").write_text(new)
PY

# Repeatable property tests; the same tests and profile as
# `cargo test -p blkcore --release` (doctests aside: there are none).
# Incremental release builds: a mutant recompiles blkcore and its tests
# only. The dependencies stay built in $CACHE/mutants/target from one run
# to the next (each run's blkcore is another package to cargo: its copies
# live under another path).
export PROPTEST_RNG_SEED=${PROPTEST_RNG_SEED:-1}
export CARGO_TARGET_DIR=$OUT/target
export CARGO_PROFILE_RELEASE_INCREMENTAL=true
export TMPDIR=$OUT/tmp
mkdir -p "$TMPDIR"
# Incremental state of earlier runs' copies: of no use to this one.
rm -rf "$CARGO_TARGET_DIR/release/incremental"
args=(-p blkcore "${file_args[@]}" --exclude-re '\bfuzz_entry\b' --output "$OUT"
    --profile release --cargo-test-arg=--tests
    --timeout "${MUTANTS_TEST_TIMEOUT:-60}"
    --build-timeout "${MUTANTS_BUILD_TIMEOUT:-900}" "$@")
cd "$TREE" || exit 1
if ((listing)); then
    exec cargo mutants "${args[@]}"
fi
start=$(date +%s)
cargo mutants "${args[@]}"
rc=$?
((rc != 1)) || exit 1
elapsed=$(($(date +%s) - start))

res=$OUT/mutants.out
echo
echo "Score per file ($((elapsed / 60)) min $((elapsed % 60)) s, $(nproc) CPUs):"
for k in caught missed unviable timeout; do
    [ -f "$res/$k.txt" ] && sed "s/^\([^:]*\):.*/\1 $k/" "$res/$k.txt"
done | awk '
    { n[$1 " " $2]++; files[$1] = 1 }
    END {
        for (f in files)
            printf "| %-38s | %6d | %6d | %8d | %7d |\n", f,
                n[f " caught"], n[f " missed"], n[f " unviable"], n[f " timeout"]
    }' | sort > "$OUT/score.txt"
{
    printf "| %-38s | %6s | %6s | %8s | %7s |\n" file caught missed unviable timeout
    echo "|----------------------------------------|--------|--------|----------|---------|"
    cat "$OUT/score.txt"
    awk -F'|' '{ c += $3; m += $4; u += $5; t += $6 }
        END { printf "| %-38s | %6d | %6d | %8d | %7d |\n", "total", c, m, u, t }' "$OUT/score.txt"
} | tee "$OUT/score.md"
if [ -s "$res/missed.txt" ]; then
    echo
    echo "Missed:"
    cat "$res/missed.txt"
fi
if [ -s "$res/timeout.txt" ]; then
    echo
    echo "Timed out:"
    cat "$res/timeout.txt"
fi
exit $rc
