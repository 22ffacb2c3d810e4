#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The rules the build enforces, each a check that fails on a violation:
#  - rustfmt: host crates (cargo fmt) and the kernel modules (rustfmt with
#    the kernel tree's settings, following the modules' `#[path]` includes);
#  - cargo clippy -D warnings over the host workspace, fuzz targets included;
#  - every `.rs` file under drivers/ and rust/ (tests and generated
#    bindings aside) is at most 600 lines;
#  - no `unsafe` in driver files (the compiler enforces it too:
#    `#![deny(unsafe_code)]` in each module's root; only the abstractions
#    under rust/ are exempt);
#  - no blanket `allow(dead_code)` in the modules (`#[expect]` with a reason);
#  - licence: every source file starts with the kernel's SPDX line for
#    GPL-2.0 (after the #! line of a script), every Cargo.toml says
#    `license = "GPL-2.0"` (or takes the workspace's), and COPYING holds
#    the GPL-2.0 text.
# `make CLIPPY=1` without warnings is checked where the kernel is built
# (run-tests.sh).
#
# Prints "pass NAME" / "fail NAME: why" lines; exits non-zero if any failed.
#
#   tools/testing/check-style.sh
set -uo pipefail
. "$(dirname "$0")/lib.sh"
cd "$REPO" || exit 1
failed=0
pass() { echo "pass $1"; }
fail() { echo "fail $1"; failed=1; }

if out=$(cargo fmt --all --check 2>&1); then
    pass "rustfmt: host crates"
else
    fail "rustfmt: host crates: $(echo "$out" | grep -c '^Diff in') diffs (cargo fmt --all)"
fi

# The kernel's .rustfmt.toml is `edition = "2021"`, `newline_style = "Unix"`.
if out=$(rustfmt --check --edition 2021 --config newline_style=Unix drivers/block/*/*.rs 2>&1); then
    pass "rustfmt: kernel modules"
else
    fail "rustfmt: kernel modules: $(echo "$out" | grep '^Diff in' | head -3 | tr '\n' ' ')"
fi

if out=$(cargo clippy -q --workspace --all-targets --features blkcore/fuzzing -- -D warnings 2>&1); then
    pass "cargo clippy -D warnings"
else
    fail "cargo clippy -D warnings: $(echo "$out" | grep -m3 -E '^(error|warning)' | tr '\n' ' ')"
fi

long=$(find drivers rust -name '*.rs' ! -name 'bindings_generated.rs' ! -path '*/tests/*' \
    -exec awk 'END { if (NR > 600) print FILENAME " (" NR ")" }' {} \;)
if [ -z "$long" ]; then
    pass "files under drivers/ and rust/ at most 600 lines"
else
    fail "files over 600 lines: $(echo $long)"
fi

unsafe_hits=$(grep -nwE 'unsafe' drivers/block/*/*.rs | grep -vE '^\S+:[0-9]+:\s*//' \
    | grep -vE 'deny\(unsafe_code\)|allow\(unsafe_code' || true)
if [ -z "$unsafe_hits" ]; then
    pass "no unsafe in driver files"
else
    fail "unsafe in driver files: $(echo "$unsafe_hits" | head -3 | tr '\n' ' ')"
fi
roots_deny=1
for root in drivers/block/xen-blkfront/xen_blkfront.rs drivers/block/virtio-blk/virtio_blk.rs; do
    grep -q '^#!\[deny(unsafe_code)\]' "$root" || roots_deny=0
done
((roots_deny)) && pass "driver roots deny unsafe_code" || fail "a driver root lacks #![deny(unsafe_code)]"

# Every `#[allow(...)]` naming dead_code, except on bindgen's output.
blanket=$(python3 - <<'PY'
import pathlib, re
for p in list(pathlib.Path("drivers").rglob("*.rs")) + list(pathlib.Path("rust").rglob("*.rs")):
    if p.name == "bindings_generated.rs":
        continue
    for m in re.finditer(r"#!?\[allow\((.*?)\)\]", p.read_text(), re.S):
        if "dead_code" in m.group(1) and "bindgen" not in m.group(1):
            print(p)
PY
)
if [ -z "$blanket" ]; then
    pass "no allow(dead_code) in the modules (bindgen output aside)"
else
    fail "allow(dead_code) in: $(echo $blanket)"
fi

# Source files: what git tracks (or would add) under these paths that is
# Rust, C, a header, a script (.sh, .py or a #! line) or a Makefile/Kbuild.
# Data (.patch files git apply reads, Cargo.lock, .txt/.allow/.json, config
# fragments, Debian control data) carries no identifier. The line is the
# kernel's (checkpatch): `// ` in .rs and .c, `/* */` in .h, `# ` elsewhere,
# on the first line, or the second after a #! line.
spdx_missing=()
while IFS= read -r f; do
    [ -f "$f" ] || continue
    want='# SPDX-License-Identifier: GPL-2.0' script=1
    case $f in
        *.rs | *.c) want='// SPDX-License-Identifier: GPL-2.0' script=0 ;;
        *.h) want='/* SPDX-License-Identifier: GPL-2.0 */' script=0 ;;
        *.sh | *.py | Makefile | */Makefile | Kbuild | */Kbuild) ;;
        Cargo.toml | */Cargo.toml)
            grep -qE '^license(\.workspace = true| = "GPL-2\.0")$' "$f" ||
                spdx_missing+=("$f(no license = \"GPL-2.0\")")
            continue ;;
        *) [ "$(head -c2 "$f" | tr -d '\0')" = '#!' ] || continue ;;
    esac
    l1= l2=
    { IFS= read -r l1; IFS= read -r l2; } < "$f"
    ((script)) && [[ $l1 == '#!'* ]] && l1=$l2
    [ "$l1" = "$want" ] || spdx_missing+=("$f")
done < <(git ls-files --cached --others --exclude-standard -- .ci/run Makefile Kbuild Cargo.toml \
    drivers rust tools packaging | sort -u)
if ((${#spdx_missing[@]} == 0)); then
    pass "SPDX identifier on every source file"
else
    fail "SPDX identifier on every source file: ${#spdx_missing[@]} lack it: ${spdx_missing[*]}"
fi

# COPYING: the kernel's LICENSES/preferred/GPL-2.0 text (what follows its
# License-Text: line) as its tail, when the kernel source is at hand;
# otherwise the licence's first and last lines.
gpl=$SRC_DIR/LICENSES/preferred/GPL-2.0
if [ ! -f COPYING ]; then
    fail "COPYING holds the GPL-2.0 text: no COPYING"
elif [ -f "$gpl" ]; then
    text=$(sed '1,/^License-Text:$/d' "$gpl")
    if [ -n "$text" ] && [ "$(tail -n "$(wc -l <<< "$text")" COPYING)" = "$text" ]; then
        pass "COPYING holds the GPL-2.0 text"
    else
        fail "COPYING holds the GPL-2.0 text: COPYING does not end with $gpl's License-Text"
    fi
elif grep -q 'GNU GENERAL PUBLIC LICENSE' COPYING && grep -q 'Version 2, June 1991' COPYING &&
    grep -q 'Public License instead of this License\.' COPYING; then
    pass "COPYING holds the GPL-2.0 text"
else
    fail "COPYING holds the GPL-2.0 text: COPYING lacks the GPL-2.0 text"
fi

# Every named mutation still applies: one that no longer does guards
# nothing (mutate.sh would call it stale, but it runs outside CI).
stale=
for m in tools/testing/mutations/*.patch; do
    sed -n '/^diff --git/,$p' "$m" | git apply --check - 2> /dev/null || stale="$stale $(basename "$m" .patch)"
done
if [ -z "$stale" ]; then
    pass "every mutation in tools/testing/mutations applies to the tree"
else
    fail "every mutation in tools/testing/mutations applies to the tree: stale:$stale"
fi

exit $failed
