#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Builds the test kernel (allnoconfig + .config.fragments/*.config) out of the
# source tree into $CACHE/kbuild-<key>, where <key> hashes the source package,
# the fragments and the toolchain. A finished build is reused as is.
# Prints the build directory (the KDIR for our modules) on stdout.
#
#   build-kernel.sh [--debug]
#
# --debug: the debug test kernel (without the *.test.config fragments, plus
# .config.fragments/debug/*.config:
# KASAN, lockdep, ...) in $CACHE/kbuild-debug-<key>.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

flavour=
[ "${1:-}" = --debug ] && flavour=debug
key=$(kernel_key $flavour)
prefix=$CACHE/kbuild-${flavour:+$flavour-}
out=$prefix$key
if [ -f "$out/.blkfront-done" ]; then
    echo "$out"; exit 0
fi
# One build at a time: a second caller waits for the first and reuses it.
exec 9> "$CACHE/kbuild.lock"
flock 9
if [ -f "$out/.blkfront-done" ]; then
    echo "$out"; exit 0
fi
log "building ${flavour:-test} kernel in $out (key $key); takes ~10 minutes on 2 cores"
# Seed from the newest finished build of the same flavour: kbuild's
# per-option dependency tracking then rebuilds only what the configuration
# change touches.
prev=$(ls -dt "$prefix"*/.blkfront-done 2>/dev/null | grep -v "^$CACHE/kbuild-debug-" | head -1 || true)
[ -n "$flavour" ] && prev=$(ls -dt "$prefix"*/.blkfront-done 2>/dev/null | head -1 || true)
rm -rf "$out"
if [ -n "$prev" ]; then
    log "seeding from $(dirname "$prev")"
    cp -a "$(dirname "$prev")" "$out"
    rm -f "$out/.blkfront-done"
fi
mkdir -p "$out"
mk() { make -C "$SRC_DIR" O="$out" LLVM=-19 ARCH=x86_64 "$@"; }
mk allnoconfig >/dev/null
KCONFIG_CONFIG="$out/.config" "$SRC_DIR"/scripts/kconfig/merge_config.sh \
    -m -O "$out" "$out/.config" $(kernel_fragments $flavour) >/dev/null
mk olddefconfig >/dev/null
# Every option a fragment asks for must have survived olddefconfig (the
# last fragment that sets or unsets an option wins, as in merge_config.sh).
bad=0
while IFS= read -r line; do
    grep -qx "$line" "$out/.config" || { echo "fragment option not set: $line" >&2; bad=1; }
done < <(kernel_fragments $flavour | xargs cat |
    awk -F= '/^CONFIG_/ { v[$1] = $0 } /^# CONFIG_[A-Za-z0-9_]+ is not set/ { split($0, w, " "); delete v[w[2]] }
             END { for (k in v) print v[k] }')
((bad == 0)) || die "kernel config does not satisfy .config.fragments (see above); is the Rust toolchain usable (make rustavailable)?"
mk -j"$(nproc)" $(kernel_make_vars $flavour) bzImage modules > "$out/build.log" 2>&1 || {
    tail -40 "$out/build.log" >&2; die "kernel build failed, log in $out/build.log"; }
touch "$out/.blkfront-done"
echo "$out"
