# Xen domU: baseline with the C frontend, then our module and its KUnit suite.
. /guest/common.sh
if insmod /lib/modules/xen-blkfront.ko; then
    for i in 1 2 3 4 5 6 7 8 9 10; do [ -e /sys/block/xvda ] && break; sleep 0.5; done
    if [ -e /sys/block/xvda ]; then
        echo "BASELINE C xen-blkfront:"; topology_line xvda
        ok "C xen-blkfront connects (baseline recorded)"
    else
        not_ok "C xen-blkfront connects"
    fi
    dmesg | grep blkfront | tail -3
    check "rmmod xen-blkfront" unload xen_blkfront
else
    not_ok "insmod xen-blkfront (C baseline)"
fi
check "insmod xen_blkfront_rs" insmod /lib/modules/xen_blkfront_rs.ko
ktap xen_blkfront_rs
dmesg | grep -i 'blkfront' | tail -3
check "rmmod xen_blkfront_rs" rmmod xen_blkfront_rs
finish
