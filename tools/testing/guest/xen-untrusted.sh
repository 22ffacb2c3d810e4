#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Xen domU: xen_blkfront_rs with trusted=0 feature_persistent=0: data must
# be bounced (copied) through frontend pages and every grant revoked after
# each request (no persistent grants), and still be correct.
. /guest/common.sh
D=xvda
check "insmod trusted=0 feature_persistent=0" insmod /lib/modules/xen_blkfront_rs.ko trusted=0 feature_persistent=0
for i in $(seq 1 40); do [ -e /sys/block/$D ] && break; sleep 0.25; done
[ -e /sys/block/$D ] && ok "disk $D appears" || { not_ok "disk $D appears"; dmesg | tail -20; finish; exit; }
line=$(dmesg | grep "blkfront: $D:" | tail -1); echo "DMESG: $line"
case "$line" in
*"persistent grants: disabled; indirect descriptors: enabled; bounce buffer: enabled"*) ok "untrusted: bounce without persistent grants" ;;
*) not_ok "untrusted: bounce without persistent grants" ;;
esac
dd if=/dev/urandom of=/tmp/p bs=1M count=4 2>/dev/null
dd if=/tmp/p of=/dev/$D bs=128k seek=32 oflag=direct 2>/dev/null
dd if=/dev/$D of=/tmp/b bs=64k skip=64 count=64 iflag=direct 2>/dev/null
expect_eq "bounced data verified" "$(md5sum < /tmp/b | cut -d' ' -f1)" "$(md5sum < /tmp/p | cut -d' ' -f1)"
S=/sys/kernel/debug/xen_blkfront_rs-$D/stats
cat $S
g=$(grep '^grants_granted:' $S | cut -d' ' -f2); r=$(grep '^grants_revoked:' $S | cut -d' ' -f2)
check "every grant revoked (non-persistent): $g granted, $r revoked" [ "$g" -gt 0 -a "$r" = "$g" ]
c=$(grep '^bytes_copied:' $S | cut -d' ' -f2)
[ "${c:-0}" -ge 8388608 ] && ok "bytes copied through bounce pages ($c)" || not_ok "bytes copied ($c)"
unbind_vbds
check "rmmod xen_blkfront_rs" rmmod xen_blkfront_rs
finish
