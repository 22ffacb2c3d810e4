#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The dom0 hotplug script tools/hotplug/block-topology against Xen 4.17's own
# hotplug scripts (Debian's xen-utils-common, downloaded by setup-host.sh),
# run as libxl runs them, on the host: a xenstore kept in files (fake
# xenstore-* commands first on PATH) and real loop devices of known topology.
# Xen's `block` runs unchanged, through a wrapper that records its calls;
# its library's three host paths (log file, lock directory, the PATH it
# prepends) point into a scratch directory.
#
# Prints one "pass|fail dom0-hotplug: CHECK" line per check; exits 1 if one
# failed. Needs root (losetup).
#
#   tools/testing/block-topology-check.sh [SCRIPT]   (default: tools/hotplug/block-topology)
set -uo pipefail
. "$(dirname "$0")/lib.sh"
SCRIPT=$(readlink -f "${1:-$REPO/tools/hotplug/block-topology}")
failed=0
pass() { echo "pass dom0-hotplug: $1"; }
fail() { echo "fail dom0-hotplug: $1"; failed=1; }

deb=$(ls "$DL"/xen-utils-common_4.17*.deb 2>/dev/null | head -1 || true)
if [ -z "$deb" ]; then
    fail "Xen's hotplug scripts: no xen-utils-common 4.17 package in $DL (tools/testing/setup-host.sh downloads it)"
    exit 1
fi

w=$(mktemp -d /tmp/block-topology-check.XXXXXX)
cleanup() {
    local l
    # Loop devices of this run's files only: ours and any Xen's block made.
    for f in "$w"/*.img; do
        [ -f "$f" ] || continue
        for l in $(losetup -j "$f" -O NAME -n 2>/dev/null); do losetup -d "$l" 2>/dev/null || echo "cannot detach $l" >&2; done
    done
    [ -n "${KEEP:-}" ] || rm -rf "$w"
}
trap cleanup EXIT

# ---- Xen's scripts, with the host paths moved into $w ------------------
S=$w/scripts B=$w/bin
{ dpkg-deb -x "$deb" "$w/pkg" && cp -a "$w/pkg/etc/xen/scripts" "$S" && mkdir -p "$B" "$w/lock" "$w/xs"; } ||
    { fail "Xen's hotplug scripts: cannot unpack $deb"; exit 1; }
sed -i -e "s|^bindir=.*|bindir=\"$B\"|" -e "s|^sbindir=.*|sbindir=\"$B\"|" "$S/hotplugpath.sh"
sed -i "s|/var/log/xen/xen-hotplug.log|$w/xen-hotplug.log|" "$S/xen-hotplug-common.sh"
sed -i "s|^LOCK_BASEDIR=.*|LOCK_BASEDIR=$w/lock|" "$S/locking.sh"
grep -q "^bindir=\"$B\"" "$S/hotplugpath.sh" && grep -q "$w/xen-hotplug.log" "$S/xen-hotplug-common.sh" &&
    grep -q "^LOCK_BASEDIR=$w/lock" "$S/locking.sh" ||
    { fail "Xen's hotplug scripts in $(basename "$deb") no longer have the paths this check moves"; exit 1; }
mv "$S/block" "$S/block.xen"
cat > "$S/block" <<EOF
#!/bin/bash
echo "block \$* \$XENBUS_PATH" >> "$w/calls"
exec "$S/block.xen" "\$@"
EOF
chmod 755 "$S/block"
install -m 755 "$SCRIPT" "$S/block-topology"

# A xenstore in files: node P is directory \$XS_ROOT/P, its value P/.value;
# relative paths are dom0's (/local/domain/0/...), as in the real store.
cat > "$B/xenstore" <<'EOF'
#!/bin/bash
set -euo pipefail
node() { case $1 in /*) echo "$XS_ROOT$1" ;; *) echo "$XS_ROOT/local/domain/0/$1" ;; esac; }
case ${0##*/} in
xenstore-read)
    for p; do
        [ -f "$(node "$p")/.value" ] || { echo "xenstore-read: couldn't read path $p" >&2; exit 1; }
        cat "$(node "$p")/.value"; echo
    done ;;
xenstore-write)
    while (($#)); do
        mkdir -p "$(node "$1")"; printf %s "$2" > "$(node "$1")/.value"
        echo "write $1 $2" >> "$XS_LOG"; shift 2
    done ;;
xenstore-list)
    [ -d "$(node "$1")" ] || { echo "xenstore-list: couldn't list $1" >&2; exit 1; }
    for d in "$(node "$1")"/*/; do [ -d "$d" ] && basename "$d"; done; true ;;
xenstore-rm)
    for p; do rm -rf "$(node "$p")"; echo "rm $p" >> "$XS_LOG"; done ;;
*) echo "fake xenstore: ${0##*/}?" >&2; exit 1 ;;
esac
EOF
chmod 755 "$B/xenstore"
for c in read write list rm; do ln -s xenstore "$B/xenstore-$c"; done
printf '#!/bin/sh\necho "logger $*" >> "%s"\n' "$w/syslog" > "$B/logger"
printf '#!/bin/sh\necho "flock $*" >> "%s"\nexec %s "$@"\n' "$w/calls" "$(command -v flock)" > "$B/flock"
chmod 755 "$B/logger" "$B/flock"
export XS_ROOT=$w/xs XS_LOG=$w/xs.log
: > "$XS_LOG"; : > "$w/calls"

xs() { PATH=$B:$PATH xenstore-read "$1" 2>/dev/null; }
has() { [ -f "$XS_ROOT/local/domain/0/$1/.value" ]; }
# A vbd as libxl prepares it before the script runs (frontend domid,
# device id, params, mode); state 2 (InitWait): blkback has probed.
vbd() { # DOMID DEVID PARAMS MODE
    PATH=$B:$PATH xenstore-write "/local/domain/$1/vm" "/vm/00000000-0000-0000-0000-00000000000$1" \
        "backend/vbd/$1/$2/params" "$3" "backend/vbd/$1/$2/mode" "$4" "backend/vbd/$1/$2/type" phy \
        "backend/vbd/$1/$2/frontend-id" "$1" "backend/vbd/$1/$2/state" 2
}
# libxl's environment for a vbd script (libxl_linux.c), the command as $1;
# the fake xenstore commands stand in for dom0's /usr/bin ones.
run() { # DOMID DEVID COMMAND
    env -i PATH="$B:/usr/sbin:/usr/bin:/sbin:/bin" XS_ROOT="$XS_ROOT" XS_LOG="$XS_LOG" \
        script="$S/block-topology" XENBUS_TYPE=vbd XENBUS_BASE_PATH=backend \
        XENBUS_PATH="backend/vbd/$1/$2" "$S/block-topology" "$3" >> "$w/out" 2>&1
}
order_ok() { # VBD: every topology key written before physical-device
    awk -v p="$1/" 'index($2, p) == 1 { k = substr($2, length(p) + 1)
            if (k == "physical-device") dev = NR
            else if (k ~ /^(physical-sector-size|minimum-io-size|optimal-io-size)$/) last = NR }
        END { exit !(dev && last && last < dev) }' "$XS_LOG"
}

# ---- a block device with 4096-byte sectors, for domain 1 ----------------
truncate -s 16M "$w/phys4k.img"
loop=$(losetup --sector-size 4096 -f --show "$w/phys4k.img") || { fail "losetup --sector-size 4096 failed"; exit 1; }
q=/sys/class/block/$(basename "$loop")/queue
topo="$(cat "$q/physical_block_size") $(cat "$q/minimum_io_size") $(cat "$q/optimal_io_size")"
[ "$topo" = "4096 4096 0" ] || { fail "the test device $loop has topology '$topo', not '4096 4096 0'"; exit 1; }
V1=backend/vbd/1/51712
vbd 1 51712 "$loop" w
rc=0; run 1 51712 add || rc=$?
mm=$(stat -L -c %t:%T "$loop")
why="exit $rc, calls: $(tr '\n' ';' < "$w/calls"), physical-device '$(xs $V1/physical-device)', physical-device-path '$(xs $V1/physical-device-path)', hotplug-status '$(xs $V1/hotplug-status)'"
if ((rc == 0)) && grep -qx "block add $V1" "$w/calls" && grep -q '^flock -x ' "$w/calls" &&
    [ "$(xs $V1/physical-device)" = "$mm" ] && [ "$(xs $V1/physical-device-path)" = "$loop" ] &&
    [ "$(xs $V1/hotplug-status)" = connected ]; then
    pass "add $loop: Xen's block ran under its lock and wrote physical-device $mm, physical-device-path, hotplug-status connected"
else
    fail "add $loop: Xen's block did not run or did not connect the device ($why)"
fi
got="$(xs $V1/physical-sector-size) $(xs $V1/minimum-io-size) $(has $V1/optimal-io-size && xs $V1/optimal-io-size || echo absent)"
if [ "$got" = "4096 4096 absent" ] && order_ok "$V1"; then
    pass "add $loop (4096-byte sectors): physical-sector-size 4096, minimum-io-size 4096, no optimal-io-size (0), all before physical-device"
else
    fail "add $loop (4096-byte sectors): want physical-sector-size, minimum-io-size, optimal-io-size '4096 4096 absent' written before physical-device; got '$got', writes: $(grep " $V1/" "$XS_LOG" | cut -d' ' -f2 | sed "s|$V1/||" | tr '\n' ' ')"
fi

# ---- the same device for writing, for domain 2: Xen's sharing check ----
V2=backend/vbd/2/51712
vbd 2 51712 "$loop" w
: > "$w/calls"
rc=0; run 2 51712 add || rc=$?
left=$(for k in physical-device physical-sector-size minimum-io-size optimal-io-size; do has "$V2/$k" && echo "$k"; done | tr '\n' ' ')
if ((rc != 0)) && [ "$(xs $V2/hotplug-status)" = busy ] && [[ $(xs $V2/hotplug-error) == *"in a guest domain"* ]] &&
    [ -z "$left" ] && grep -qx "block add $V2" "$w/calls"; then
    pass "add $loop for a second domain while domain 1 writes it: refused by Xen's block (exit $rc, hotplug-status busy, '$(xs $V2/hotplug-error | head -1)'), no key left"
else
    fail "add $loop for a second domain while domain 1 writes it: want Xen's refusal (non-zero exit, hotplug-status busy, no key left); got exit $rc, hotplug-status '$(xs $V2/hotplug-status)', keys left: '$left'"
fi

# ---- a file: Xen's block makes the loop device ---------------------------
truncate -s 16M "$w/file.img"
V3=backend/vbd/1/51728
vbd 1 51728 "$w/file.img" w
: > "$w/calls"
rc=0; run 1 51728 add || rc=$?
node=$(xs $V3/node || true)
got="$(xs $V3/physical-sector-size) $(xs $V3/minimum-io-size) $(has $V3/optimal-io-size && xs $V3/optimal-io-size || echo absent)"
if ((rc == 0)) && grep -qx "block add $V3" "$w/calls" && grep -q '^flock -x ' "$w/calls" &&
    [ -b "$node" ] && [ "$(losetup -n -O BACK-FILE "$node" 2>/dev/null)" = "$w/file.img" ] &&
    [ "$(xs $V3/physical-device-path)" = "$node" ] && [ "$got" = "512 512 absent" ]; then
    pass "add of a file: Xen's block made $node under its lock, then physical-sector-size 512, minimum-io-size 512, no optimal-io-size"
else
    fail "add of a file: want Xen's block to make the loop device (under its lock) and keys '512 512 absent'; got exit $rc, node '$node', physical-device-path '$(xs $V3/physical-device-path)', keys '$got', calls: $(tr '\n' ';' < "$w/calls")"
fi

# ---- remove: Xen's block only --------------------------------------------
: > "$w/calls"
rc1=0; run 1 51728 remove || rc1=$?
rc2=0; run 1 51712 remove || rc2=$?
if ((rc1 == 0 && rc2 == 0)) && grep -qx "block remove $V3" "$w/calls" && grep -qx "block remove $V1" "$w/calls" &&
    grep -q '^flock -x ' "$w/calls" && [ -n "$node" ] && [ -z "$(losetup -n -O BACK-FILE "$node" 2>/dev/null)" ]; then
    pass "remove: Xen's block ran for both vbds and detached the file's loop device $node under its lock"
else
    fail "remove: want Xen's block for both vbds and the file's loop device detached; got exits $rc1/$rc2, calls: $(tr '\n' ';' < "$w/calls"), $node backed by '$(losetup -n -O BACK-FILE "$node" 2>/dev/null)'"
fi

((failed == 0)) || sed 's/^/block-topology output: /' "$w/out" >&2
exit $failed
