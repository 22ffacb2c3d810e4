#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Deployment as a guest administrator does it, on Debian's stock kernel: the
# package that `make deb` built (suites/60-debian-stock.sh builds it and
# writes its path to $CACHE/distro/deb/current) is installed with dpkg into a
# trixie root (build-debian-root.sh: debootstrap + linux-image-$KREL), whose
# postinst runs depmod and update-initramfs there; the root becomes an ext4
# disk image and boots with Debian's vmlinuz and that initramfs:
#   virtio: root on vda (virtio-blk-pci), init= the check script
#   guest/deploy-boot.sh:
#     installed  virtio_blk_rs drives vda from the first mount, virtio_blk
#                not loaded, root rw; a marker file is written;
#   Xen PV: the same disk as the root (xvda) of a PV domU on xen-blkback
#     under the harness's Xen (xen-guest.sh; dom0 is the test kernel), the
#     domU booting Debian's vmlinuz and the same initramfs:
#     reboot     xen_blkfront_rs drives xvda from the first mount,
#                xen-blkfront not loaded; the marker reads back;
#   other      Debian's other kernel (OTHER_KREL, installed in the root
#              beside KREL: the next kernel upload, which our modules are
#              not built for), its initramfs made with the package
#              installed: the C driver drives vda, and as a Xen PV domU
#              xvda, the marker reads back;
#   then `dpkg -r` in the image (mounted on the host: its postrm rebuilds
#   the initramfs without ours; under TCG update-initramfs takes minutes,
#   the maintainer scripts are the same), and virtio again:
#     removed    booted from the initramfs postrm made: virtio_blk drives
#                vda again, the marker reads back.
# Before all that, in a copy of the root of its own (deploy-dkms.sh): dkms
# with our DKMS source added, then apt installs linux-headers-$KREL and
# OTHER_KREL's image and headers: apt succeeds, the kernel gets its
# initramfs, and our modules get one line per DKMS hook.
# DEPLOY_XEN=0 leaves the Xen boot out.
set -uo pipefail
T=$(cd "$(dirname "$0")/.." && pwd)
. "$T/lib.sh"
debian_suite debian-deploy

DEB=$(cat "$CACHE/distro/deb/current" 2>/dev/null)
[ -f "$DEB" ] || { rec fail "no package from make deb (suites/60-debian-stock.sh did not build one this run)"; exit 1; }
t0=$(date +%s)
if ! root=$(bash "$T/build-debian-root.sh"); then
    rec fail "trixie root with linux-image-$KREL (see $CACHE/deploy/*.log)"; exit 1
fi
rec pass "trixie root with Debian's linux-image-$KREL and its initramfs ($(($(date +%s) - t0))s this run; cold build $(cat "$root/.build-seconds")s)"

# ---- DKMS: a kernel install with our DKMS source added (a chroot step) ---
# deploy-dkms.sh works in a copy of its own; the checks below use another.
t0=$(date +%s)
while read -r verdict name; do
    rec "$verdict" "$name"
done < <(bash "$T/deploy-dkms.sh" "$root" "$KREL" "$OTHER_KREL" "$LOGDIR/$L-dkms")
log "deploy: DKMS kernel-install checks took $(($(date +%s) - t0))s"

work=$(mktemp -d "$CACHE/deploy/run.XXXX")
cleanup() {
    umount -l "$work/root/proc" "$work/mnt/proc" 2>/dev/null
    umount -l "$work/mnt" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT
cp -a "$root" "$work/root"
R=$work/root
inroot() { chroot "${IN:-$R}" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive "$@"; }

# ---- install the package the way an administrator does -------------------
mount -t proc proc "$R/proc"
cp "$DEB" "$R/tmp/"
if inroot dpkg -i "/tmp/$(basename "$DEB")" > "$LOGDIR/$L-dpkg.log" 2>&1; then
    rec pass "dpkg -i $(basename "$DEB") in the trixie root"
else
    rec fail "dpkg -i $(basename "$DEB") in the trixie root (log $LOGDIR/$L-dpkg.log)"; exit 1
fi
grep -q "update-initramfs: Generating /boot/initrd.img-$KREL" "$LOGDIR/$L-dpkg.log" &&
    rec pass "postinst regenerated the initramfs of $KREL" ||
    rec fail "postinst did not regenerate the initramfs (log $LOGDIR/$L-dpkg.log)"
for m in virtio_blk_rs xen_blkfront_rs; do
    f=$(inroot modinfo -k "$KREL" -F filename "$m" 2>&1)
    # trixie is merged-/usr: kmod names it /lib/modules/..., dpkg /usr/lib/...
    [[ $f =~ ^(/usr)?/lib/modules/"$KREL"/updates/blkfront-rs/"$m"\.ko$ ]] &&
        rec pass "modinfo -k $KREL finds $m in updates/ (depmod ran)" ||
        rec fail "modinfo -k $KREL $m: '$f'"
done
# modprobe by alias, as udev loads a driver (dry run): ours is the only
# module inserted (both modules carry the alias; the C driver's load runs
# the modprobe.d file's install command, which loads ours instead).
for a in "virtio:d00000002v00001AF4 virtio_blk_rs" "xen:vbd xen_blkfront_rs"; do
    set -- $a
    got=$(inroot modprobe -S "$KREL" -b -n -v "$1" 2>&1 | sed -n 's|^insmod .*/\([^/]*\)\.ko.*|\1|p' | tr '\n' ' ')
    [ "$got" = "$2 " ] && rec pass "modprobe -b $1 loads $2, and only it" ||
        rec fail "modprobe -b -n $1 would load '$got', want $2 only"
done
# The next kernel's initramfs, made with the package installed (as the
# kernel's postinst or any initramfs trigger makes it): the C drivers, the
# modprobe.d file, none of ours.
if inroot update-initramfs -u -k "$OTHER_KREL" > "$LOGDIR/$L-other-initramfs.log" 2>&1; then
    lso=$(inroot lsinitramfs "/boot/initrd.img-$OTHER_KREL")
    grep -q '/virtio_blk\.ko' <<< "$lso" && grep -q '/xen-blkfront\.ko' <<< "$lso" &&
        grep -q 'lib/modprobe.d/blkfront-rs.conf$' <<< "$lso" &&
        ! grep -qE '/(virtio_blk_rs|xen_blkfront_rs)\.ko' <<< "$lso" &&
        rec pass "$OTHER_KREL's initramfs: both C drivers and the modprobe.d file, none of ours" ||
        rec fail "$OTHER_KREL's initramfs: want both C drivers, the modprobe.d file and none of ours"
else
    rec fail "update-initramfs -k $OTHER_KREL with the package installed (log $LOGDIR/$L-other-initramfs.log)"
fi
lsi=$(inroot lsinitramfs "/boot/initrd.img-$KREL")
for f in virtio_blk_rs.ko xen_blkfront_rs.ko lib/modprobe.d/blkfront-rs.conf; do
    # A here-string, not `echo | grep -q`: under pipefail grep's early exit
    # fails the pipeline (SIGPIPE) when the listing is long.
    grep -q "$f\$" <<< "$lsi" && rec pass "initramfs contains $f" || rec fail "initramfs lacks $f"
done
umount "$R/proc"

# ---- the root disk image -------------------------------------------------
mkdir -p "$R/guest"
cp "$T/guest/common.sh" "$R/guest/common.sh"
install -m 755 "$T/guest/deploy-boot.sh" "$R/usr/local/sbin/blkfront-deploy-check"
cp "$R/boot/vmlinuz-$KREL" "$work/vmlinuz"
cp "$R/boot/initrd.img-$KREL" "$work/initrd.installed"
cp "$R/boot/vmlinuz-$OTHER_KREL" "$work/vmlinuz.other"
cp "$R/boot/initrd.img-$OTHER_KREL" "$work/initrd.other"
img=$work/root.img
truncate -s $(( $(du -sm "$R" | cut -f1) + 1024 ))M "$img"
mke2fs -q -t ext4 -L root -d "$R" "$img" || { rec fail "mke2fs -d of the trixie root"; exit 1; }
rm -rf "$R"

args() { # PHASE DISK OURS C
    echo "init=/usr/local/sbin/blkfront-deploy-check blkfront_test=$1 blkfront_disk=$2 blkfront_ours=$3 blkfront_c=$4"
}
# boot_virtio PHASE INITRD [VMLINUZ]: Debian's vmlinuz (KREL's by default),
# root on a virtio-blk disk.
boot_virtio() {
    local phase=$1 initrd=$2 kernel=${3:-$work/vmlinuz} log=$LOGDIR/$L-virtio-$1.log
    log "deploy: booting Debian's $(basename "$kernel") from vda ($phase), log $log"
    timeout --foreground -k 5 "${DEPLOY_TIMEOUT:-600}" "${QEMU_LINUX[@]}" -smp 2 -m 1024 \
        -nographic -monitor none -serial stdio -no-reboot \
        -kernel "$kernel" -initrd "$initrd" \
        -append "root=/dev/vda rw console=ttyS0 panic=-1 loglevel=5 $(args "$phase" vda virtio_blk_rs virtio_blk)" \
        -drive "file=$img,if=none,id=root,format=raw,cache=unsafe" -device virtio-blk-pci,drive=root \
        < /dev/null > "$log" 2>&1
    (($? == 124)) && echo "GUEST-EXIT-TIMEOUT" >> "$log"
    collect_results "$log" "$L-virtio-$phase"
}
boot_virtio installed "$work/initrd.installed"
if [ "${DEPLOY_XEN:-1}" = 1 ]; then
    log "deploy: the same root as xvda of a Xen PV domU"
    VBD0_IMAGE=$img DOMU_KERNEL=$work/vmlinuz DOMU_RAMDISK=$work/initrd.installed DOMU_MEM=768 \
        DOMU_CMDLINE="root=/dev/xvda rw console=hvc0 loglevel=5 $(args reboot xvda xen_blkfront_rs xen_blkfront)" \
        bash "$T/xen-guest.sh" -l "$L-xen-pv" -t 600 "$T/guest/deploy-boot.sh" || true
fi
boot_virtio other "$work/initrd.other" "$work/vmlinuz.other"
if [ "${DEPLOY_XEN:-1}" = 1 ]; then
    log "deploy: $OTHER_KREL as a Xen PV domU on the same root"
    VBD0_IMAGE=$img DOMU_KERNEL=$work/vmlinuz.other DOMU_RAMDISK=$work/initrd.other DOMU_MEM=768 \
        DOMU_CMDLINE="root=/dev/xvda rw console=hvc0 loglevel=5 $(args other xvda xen_blkfront_rs xen_blkfront)" \
        bash "$T/xen-guest.sh" -l "$L-xen-pv-other" -t 600 "$T/guest/deploy-boot.sh" || true
fi
# ---- the package removed (dpkg -r in the image) --------------------------
PKG=blkfront-rs-modules-$KREL
M=$work/mnt
mkdir -p "$M"
if mount -o loop "$img" "$M" && mount -t proc proc "$M/proc"; then
    if IN=$M inroot dpkg -r "$PKG" > "$LOGDIR/$L-dpkg-r.log" 2>&1; then
        rec pass "dpkg -r $PKG in the image (postrm: depmod, update-initramfs)"
    else
        rec fail "dpkg -r $PKG in the image (log $LOGDIR/$L-dpkg-r.log)"
    fi
    lsr=$(IN=$M inroot lsinitramfs "/boot/initrd.img-$KREL")
    ! grep -qE '/(virtio_blk_rs|xen_blkfront_rs)\.ko' <<< "$lsr" &&
        rec pass "ours gone from the initramfs postrm made" ||
        rec fail "ours still in the initramfs after dpkg -r"
    grep -q '/virtio_blk\.ko' <<< "$lsr" && grep -q '/xen-blkfront\.ko' <<< "$lsr" &&
        rec pass "both C drivers in that initramfs" ||
        rec fail "a C driver missing from the initramfs after dpkg -r"
    cp "$M/boot/initrd.img-$KREL" "$work/initrd.removed"
    umount "$M/proc"; umount "$M"
else
    rec fail "mounting the root image to remove the package"
fi
if [ -f "$work/initrd.removed" ] && ! cmp -s "$work/initrd.installed" "$work/initrd.removed"; then
    boot_virtio removed "$work/initrd.removed"
else
    rec fail "no new initramfs in the image after dpkg -r"
fi
exit 0
