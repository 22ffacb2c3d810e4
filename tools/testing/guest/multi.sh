# SPDX-License-Identifier: GPL-2.0
# Runs several check scripts in one guest boot, in order: SCRIPTS (from
# GUEST_ENV; commas, since GUEST_ENV splits on spaces) names them, e.g.
# SCRIPTS=xen-compare,xen-io,xen-mq. Each runs in its own shell; its check
# lines are prefixed with its name, and its exit status is one more check.
# Saves a boot per script (a Xen boot under TCG costs about half a minute
# before its first check).
. /guest/common.sh
[ -n "$SCRIPTS" ] || { not_ok "multi.sh: SCRIPTS names no check script"; exit 1; }
: > /tmp/multi.out
for s in $(echo "$SCRIPTS" | tr , " "); do
    echo "=== $s (guest uptime $(cut -d" " -f1 /proc/uptime) s)"
    { sh "/guest/$s.sh"; echo "SCRIPT-EXIT $?"; } 2>&1 | while IFS= read -r line; do
        case $line in
            "ok "*" - "*) echo "$line" | sed "s/^\(ok [0-9]*\) - /\1 - $s: /" ;;
            "not ok "*" - "*) echo "$line" | sed "s/^\(not ok [0-9]*\) - /\1 - $s: /" ;;
            "SCRIPT-EXIT 0") echo "ok 0 - $s: script finished cleanly" ;;
            "SCRIPT-EXIT "*) echo "not ok 0 - $s: script exit status ${line#SCRIPT-EXIT }" ;;
            *) echo "$line" ;;
        esac
    done | tee -a /tmp/multi.out
done
! grep -q '^not ok' /tmp/multi.out
