# SPDX-License-Identifier: GPL-2.0
# Xen PV domU check (busybox sh) for Debian's stock kernel as the domU:
# xen_blkfront_rs built by tools/distro/debian-kdir.sh, loaded into Debian's
# own vmlinuz. Backing disk (xen-guest.sh -b 4096 -m 4096 -o 1048576):
# physical 4096, io sizes published by the hotplug script (block-topology).
# /lib/modules/xen-blkfront.ko is Debian's C frontend (baseline).
. /guest/common.sh
D=xvda
echo "UNAME: $(uname -r) $(uname -v)"
case "$(uname -r)" in *+deb*) ok "domU runs Debian's kernel ($(uname -r))" ;; *) not_ok "domU runs Debian's kernel: $(uname -r)" ;; esac
waitdisk() { local i; for i in $(seq 1 60); do [ -e /sys/block/$D ] && return 0; sleep 0.25; done; return 1; }

if [ -f /lib/modules/xen-blkfront.ko ] && insmod /lib/modules/xen-blkfront.ko; then
    if waitdisk; then
        topology_line $D | sed 's/^TOPOLOGY/C-TOPOLOGY/'
        q $D physical_block_size > /tmp/c-pbs
    fi
    unbind_vbds vbd
    check "rmmod Debian's xen-blkfront" unload xen_blkfront
    for i in $(seq 1 40); do [ -e /sys/block/$D ] || break; sleep 0.25; done
    check "C disk gone before loading ours" [ ! -e /sys/block/$D ]
fi

out=$(insmod /lib/modules/xen_blkfront_rs.ko 2>&1); rc=$?
echo "INSMOD xen_blkfront_rs: rc=$rc ${out:-(no output)}"
if [ $rc = 0 ]; then ok "insmod xen_blkfront_rs into Debian's $(uname -r)"; else not_ok "insmod xen_blkfront_rs: $out"; fi
if waitdisk; then ok "disk $D appears"; else not_ok "disk $D appears"; dmesg | tail -20; finish; exit; fi
dmesg | grep -E 'xen_blkfront_rs|blkfront: |taint|module verification' | tail -8
echo "MODULE-TAINT: $(cat /sys/module/xen_blkfront_rs/taint 2>/dev/null)"
topology_line $D
expect_eq "logical_block_size" "$(q $D logical_block_size)" 512
expect_eq "physical_block_size" "$(q $D physical_block_size)" 4096
expect_eq "minimum_io_size (published by the hotplug script)" "$(q $D minimum_io_size)" 4096
expect_eq "optimal_io_size (published by the hotplug script)" "$(q $D optimal_io_size)" 1048576
# The vbd's hotplug script (block-topology, see suites/60-debian-stock.sh)
# ran Xen's own block: its write_dev writes physical-device-path, which a
# script that writes physical-device itself (block-simple) does not. This
# domain may read its backend's directory.
fe=$(basename "$(readlink /sys/block/$D/device)")
be=$(xs_read "device/vbd/${fe#vbd-}/backend")
expect_eq "vbd's hotplug script ran Xen's block: physical-device-path in the backend directory" \
    "$(xs_read "$be/physical-device-path")" /dev/vdb
[ -s /tmp/c-pbs ] && expect_eq "physical_block_size same as Debian's xen-blkfront" "$(q $D physical_block_size)" "$(cat /tmp/c-pbs)"

for bs in 4k 1M; do
    roundtrip "$D: O_DIRECT pattern write/read back identical (bs=$bs)" $D $bs 8 5
done
check "$D: buffered write + fsync (flush)" sh -c "dd if=/tmp/p of=/dev/$D bs=1M seek=40 conv=fsync 2>/dev/null"
check "vbd bound to xen_blkfront_rs" sh -c 'ls /sys/bus/xen/drivers/xen_blkfront_rs/ | grep -q vbd-'
# xenbus holds a reference on a frontend module while it has a device bound
# (xenbus_dev_probe's try_module_get): unbind, then rmmod.
unbind_vbds
for i in $(seq 1 20); do [ -e /sys/block/$D ] || break; sleep 0.25; done
check "disk gone after unbind" [ ! -e /sys/block/$D ]
check "rmmod xen_blkfront_rs" unload xen_blkfront_rs
for i in $(seq 1 20); do [ -e /sys/block/$D ] || break; sleep 0.25; done
check "module gone after rmmod" [ ! -d /sys/module/xen_blkfront_rs ]
check "no warnings/oopses in dmesg" sh -c "! dmesg | grep -E 'WARNING:|BUG:|Oops|general protection|refcount_t|Unknown symbol|disagrees about version'"
finish
