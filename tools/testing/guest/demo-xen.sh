# Demo: our Xen frontend binds the disk; show it and move some data.
. /guest/common.sh
check "insmod xen_blkfront_rs" insmod /lib/modules/xen_blkfront_rs.ko
sleep 1
lsblk -t 2>/dev/null || true
dmesg | grep -E 'xen_blkfront_rs|xvda' | tail -3
if [ -b /dev/xvda ]; then
    dd if=/dev/urandom of=/tmp/pattern bs=1M count=4 2>/dev/null
    dd if=/tmp/pattern of=/dev/xvda bs=1M oflag=direct 2>/dev/null
    dd if=/dev/xvda of=/tmp/back bs=1M count=4 iflag=direct 2>/dev/null
    if cmp -s /tmp/pattern /tmp/back; then ok "DATA 4 MiB written and read back with O_DIRECT"; else not_ok "DATA 4 MiB read back differs"; fi
else
    not_ok "/dev/xvda exists"
fi
finish
