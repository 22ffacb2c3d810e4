#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Debian's stock kernel (no custom kernel): our modules built against a tree
# prepared from Debian packages (tools/distro/debian-kdir.sh: trixie chroot,
# linux-source + the linux-headers package's .config/Module.symvers,
# Debian's rustc/bindgen/gcc), then virtio_blk_rs.ko loaded into Debian's own
# vmlinuz (linux-binary-$KREL) under QEMU with two virtio-blk disks; plus the
# DKMS flow in the chroot. KUnit is off in Debian's kernel: functional checks.
#
#   suites/60-debian-stock.sh            (results appended to $RESULTS)
# Then the same kernel as the PV domU under the harness's Xen
# (xen-guest.sh with DOMU_KERNEL/DOMU_MODULES; dom0 is the test kernel) with
# xen_blkfront_rs.ko against xen-blkback.
# Environment: DISTRO_KREL (default 7.3.4+deb13-amd64), DEBIAN_STOCK_XEN=0
# skips the Xen run.
set -uo pipefail
T=$(cd "$(dirname "$0")/.." && pwd)
. "$T/lib.sh"
debian_suite debian-stock

# ---- tree + modules + dkms (cached after the first run) ------------------
plog=$LOGDIR/$L-prepare.log
t0=$(date +%s)
# The package for suites/65-debian-deploy.sh: only one made by this run.
rm -f "$CACHE/distro/deb/current"
# The package's modules are signed with a key of the user's (`make deb
# SIGN_KEY=... SIGN_CERT=...`): here one made for the test (self-signed, as
# a MOK is).
signer="blkfront-rs package test key"
sigdir=$CACHE/signing
if ! [ -s "$sigdir/package.pem" ]; then
    mkdir -p "$sigdir"
    openssl req -new -x509 -newkey rsa:2048 -nodes -days 36500 -subj "/CN=$signer/" \
        -keyout "$sigdir/package.pem" -out "$sigdir/package.x509" -outform PEM 2> "$LOGDIR/$L-signing-key.log" ||
        rec fail "make deb: a signing key made with openssl (log $LOGDIR/$L-signing-key.log)"
fi
if ! out=$(SIGN_KEY=$sigdir/package.pem SIGN_CERT=$sigdir/package.x509 \
    DISTRO_KREL=$KREL bash "$REPO/tools/distro/debian-kdir.sh" --dkms --deb 2> "$plog"); then
    rec fail "tree/modules/package for Debian $KREL: $(grep -E '^(refused|error):' "$plog" | tail -1) (log $plog)"
    exit 1
fi
# D_KDIR D_CHROOT D_OUT D_DEB (prefixed: KDIR from run-tests.sh is the test kernel,
# which xen-guest.sh still needs for dom0)
eval "$(echo "$out" | sed 's/^/D_/')"
CHROOT=$D_CHROOT OUT=$D_OUT
rec pass "tree for Debian $KREL prepared from Debian packages ($(($(date +%s) - t0))s this run; cold prepare $(cat "$D_KDIR/.prepare-seconds" 2>/dev/null)s)"
# Both modules, by name: a glob over what was built passes when one is
# missing. debian-kdir.sh refused any whose vermagic is not Debian's.
for m in virtio_blk_rs xen_blkfront_rs; do
    v=$(modinfo -F vermagic "$OUT/$m.ko" 2>/dev/null)
    if [[ $v == "$KREL "* ]]; then
        rec pass "$m.ko built in the $(basename "$CHROOT") chroot, vermagic '$v' = Debian's"
    else
        rec fail "$m.ko built in the $(basename "$CHROOT") chroot for $KREL (vermagic '$v')"
    fi
done
if [ -f "${D_DEB:-}" ]; then
    rec pass "make deb: $(basename "$D_DEB") built in the chroot, lintian without errors ($(grep -c '^[WIP]: ' "$(dirname "$D_DEB")/blkfront-rs-modules-$KREL.lintian" 2>/dev/null) warnings/notes)"
    echo "$D_DEB" > "$CACHE/distro/deb/current"
    x=$(mktemp -d)
    dpkg-deb -x "$D_DEB" "$x"
    signers=$(for m in virtio_blk_rs xen_blkfront_rs; do
        echo "$m: '$(modinfo -F signer "$(find "$x" -name "$m.ko")" 2>&1)'"; done | paste -sd' ')
    rm -rf "$x"
    if [ "$signers" = "virtio_blk_rs: '$signer' xen_blkfront_rs: '$signer'" ]; then
        rec pass "make deb SIGN_KEY=... SIGN_CERT=...: the package's modules are signed ($signers)"
    else
        rec fail "make deb SIGN_KEY=... SIGN_CERT=...: the package's modules signed by '$signer' (got $signers)"
    fi
else
    rec fail "make deb: no package (log $plog)"
fi
# The dom0 package: the hotplug script as a conffile in Xen's script
# directory, its README, and no dependency on the modules package (a dom0
# need not run our frontend).
if [ -f "${D_HOTPLUG_DEB:-}" ]; then
    hx=$(mktemp -d)
    dpkg-deb -x "$D_HOTPLUG_DEB" "$hx"
    got="mode $(stat -c %a "$hx/etc/xen/scripts/block-topology" 2>/dev/null)"
    got+=", conffiles '$(dpkg-deb -I "$D_HOTPLUG_DEB" conffiles 2>/dev/null | tr '\n' ' ')'"
    got+=", Depends '$(dpkg-deb -f "$D_HOTPLUG_DEB" Depends)'"
    if [ "$got" = "mode 755, conffiles '/etc/xen/scripts/block-topology ', Depends 'xen-utils-common'" ] &&
        cmp -s "$hx/etc/xen/scripts/block-topology" "$REPO/tools/hotplug/block-topology" &&
        [ -f "$hx/usr/share/doc/blkfront-rs-xen-hotplug/README.Debian" ]; then
        rec pass "make deb: $(basename "$D_HOTPLUG_DEB"): /etc/xen/scripts/block-topology ($got), README.Debian, lintian without errors"
    else
        rec fail "make deb: $(basename "$D_HOTPLUG_DEB"): want tools/hotplug/block-topology as /etc/xen/scripts/block-topology (mode 755, a conffile), README.Debian, Depends xen-utils-common only; got $got"
    fi
    rm -rf "$hx"
else
    rec fail "make deb: no blkfront-rs-xen-hotplug package (log $plog)"
fi
if grep -q '^dkms: ok' "$plog"; then
    rec pass "dkms add/build/install in the chroot against the prepared tree"
else
    rec fail "dkms add/build/install in the chroot (log $plog)"
fi

# The refusals: a kernel whose config names another rustc / gcc than the
# chroot's is refused in one line (the comparison the real run makes).
hcfg=$(find "$CACHE/distro/headers-$KREL" -name .config | head -1)
for what in rustc gcc; do
    sed "s/^\(CONFIG_RUSTC_VERSION_TEXT=\"rustc\) [0-9.]*/\1 1.95.0/" "$hcfg" > "$CACHE/distro/fake-$what.config"
    [ $what = gcc ] && sed "s/^\(CONFIG_CC_VERSION_TEXT=.*\) 14\.[0-9.]*\"/\1 14.9.9\"/" "$hcfg" > "$CACHE/distro/fake-$what.config"
    if r=$(DISTRO_KREL=$KREL DISTRO_CONFIG="$CACHE/distro/fake-$what.config" bash "$REPO/tools/distro/debian-kdir.sh" --check 2>&1 >/dev/null); then
        rec fail "kernel built with another $what was not refused"
    elif [ "$(echo "$r" | grep -c .)" = 1 ] && [[ $r == refused:* ]]; then
        rec pass "kernel built with another $what refused in one line: $r"
    else
        rec fail "kernel built with another $what: no one-line refusal: $(echo "$r" | tail -2 | tr '\n' ' ')"
    fi
    rm -f "$CACHE/distro/fake-$what.config"
done

# ---- Debian's kernel image and modules ------------------------------------
stock=$CACHE/distro/stock-$KREL
if [ ! -f "$stock/.ready" ]; then
    log "unpacking Debian's $KREL image and modules into $stock"
    rm -rf "$stock"; mkdir -p "$stock/root"
    for p in linux-binary-$KREL linux-modules-$KREL; do
        deb=$(ls "$DL/${p}"_*.deb 2>/dev/null | head -1)
        [ -n "$deb" ] || { (cd "$DL" && apt-get download -qq "$p/trixie-backports") 2>/dev/null; deb=$(ls "$DL/${p}"_*.deb | head -1); }
        dpkg-deb -x "$deb" "$stock/root"
    done
    # The packages carry no modules.dep (postinst runs depmod): make it.
    depmod -b "$stock/root/usr" "$KREL" 2>/dev/null || depmod -b "$stock/root" "$KREL"
    touch "$stock/.ready"
fi
MODROOT=$(dirname "$(find "$stock/root" -name modules.dep -path "*/$KREL/*" | head -1)")
VMLINUZ=$MODROOT/vmlinuz
[ -f "$VMLINUZ" ] && [ -f "$MODROOT/modules.dep" ] || { rec fail "Debian's vmlinuz/modules.dep not found under $stock"; exit 1; }

# unxz/unzstd a module file to DEST (busybox insmod loads plain ELF only).
plain_ko() { # SRC DEST
    case $1 in
        *.xz) xz -dc "$1" > "$2" ;; *.zst) zstd -dcq "$1" > "$2" ;; *.gz) zcat "$1" > "$2" ;; *) cp "$1" "$2" ;;
    esac
}
# Debian modules our module needs, in load order: modpost wrote the direct
# ones into .modinfo "depends" (from Debian's Module.symvers); modules.dep
# has each one's own dependencies (loaded first, deepest first).
load_order() { # our.ko
    local d dep
    for d in $(modinfo -F depends "$1" | tr ',' ' '); do
        dep=$(grep -E "(^|/)${d//[-_]/[-_]}\.ko(\.[a-z]+)?:" "$MODROOT/modules.dep" | head -1) || continue
        echo "$dep" | cut -d: -f2 | tr ' ' '\n' | grep . | tac
        echo "${dep%%:*}"
    done | awk '!seen[$0]++'
}
work=$(mktemp -d "$CACHE/debian-stock.XXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/mods/debian"
: > "$work/mods/deps.order"
for m in $(load_order "$OUT/virtio_blk_rs.ko"); do
    plain_ko "$MODROOT/$m" "$work/mods/debian/$(basename "${m%.ko*}").ko"
    echo "debian/$(basename "${m%.ko*}").ko" >> "$work/mods/deps.order"
done
c=$(grep -o '^[^:]*/virtio_blk\.ko[^:]*' "$MODROOT/modules.dep" | head -1)
[ -n "$c" ] && plain_ko "$MODROOT/$c" "$work/mods/debian/virtio_blk.ko"
echo "$KREL" > "$work/mods/EXPECT_KREL"
log "virtio_blk_rs depends on: '$(modinfo -F depends "$OUT/virtio_blk_rs.ko")'; load order: $(tr '\n' ' ' < "$work/mods/deps.order")"

files=("$T/guest/debian-stock-virtio.sh:/test.sh" "$T/guest/common.sh:/guest/common.sh"
    "$OUT/virtio_blk_rs.ko:/lib/modules/virtio_blk_rs.ko" "$work/mods/deps.order:/lib/modules/deps.order"
    "$work/mods/EXPECT_KREL:/lib/modules/EXPECT_KREL")
for f in "$work"/mods/debian/*.ko; do [ -f "$f" ] && files+=("$f:/lib/modules/debian/$(basename "$f")"); done
make_initramfs "$work/initramfs.cpio.gz" "${files[@]}"
truncate -s 64M "$work/d0.img" "$work/d1.img"
log="$LOGDIR/$L-virtio.log"
log "booting Debian's $KREL ($VMLINUZ) with virtio_blk_rs, log $log"
timeout --foreground -k 5 "${DEBIAN_STOCK_TIMEOUT:-420}" "${QEMU_LINUX[@]}" -smp 2 -m 1024 \
    -nographic -monitor none -serial stdio -no-reboot \
    -kernel "$VMLINUZ" -initrd "$work/initramfs.cpio.gz" \
    -append "console=ttyS0 panic=-1 quiet loglevel=6" \
    -drive "file=$work/d0.img,if=none,id=d0,format=raw,cache=unsafe" -device "virtio-blk-pci,drive=d0,serial=rsdisk0" \
    -drive "file=$work/d1.img,if=none,id=d1,format=raw,cache=unsafe" \
    -device "virtio-blk-pci,drive=d1,serial=rsdisk1,logical_block_size=512,physical_block_size=4096,min_io_size=4096,opt_io_size=1048576" \
    < /dev/null > "$log" 2>&1
(($? == 124)) && echo "GUEST-TIMEOUT" >> "$log"
collect_results "$log" "$L-virtio"

# Suspend to RAM with I/O in flight, ours then Debian's C driver: the test
# kernel has no CONFIG_SUSPEND, Debian's has (guest/virtio-reset.sh with
# RESET_HOW=s3; QEMU's monitor wakes the guest, one vCPU: virtio-guest.sh).
S3=1 KERNEL_IMAGE=$VMLINUZ KO_DIR=$OUT C_KO=$(ls "$work"/mods/debian/virtio_blk.ko 2>/dev/null) GUEST_ENV=RESET_HOW=s3 \
    bash "$T/virtio-guest.sh" -l "$L-s3" -t 600 -d 128M "$T/guest/virtio-reset.sh" || true
# Hibernation: the image written to and read back from a virtio_blk_rs
# disk, the same freeze/restore with fio verify across (two boots, the
# second resumes the image; the test kernel has no CONFIG_HIBERNATION).
HIBERNATE=1 KERNEL_IMAGE=$VMLINUZ KO_DIR=$OUT \
    bash "$T/virtio-guest.sh" -l "$L-hibernate" -t 600 -d 128M -d 256M "$T/guest/virtio-hibernate.sh" || true

# ---- Debian's kernel as the PV domU under Xen --------------------------------
if [ "${DEBIAN_STOCK_XEN:-1}" != 1 ]; then
    rec skip "Debian's kernel as the PV domU under Xen (SKIP DEBIAN_STOCK_XEN=${DEBIAN_STOCK_XEN})"
elif [ ! -f "$OUT/xen_blkfront_rs.ko" ]; then
    rec fail "Debian's kernel as the PV domU under Xen: no xen_blkfront_rs.ko built"
else
    mkdir -p "$work/xenmods"
    cp "$OUT/xen_blkfront_rs.ko" "$work/xenmods/"
    c=$(grep -o '^[^:]*/xen-blkfront\.ko[^:]*' "$MODROOT/modules.dep" | head -1)
    [ -n "$c" ] && plain_ko "$MODROOT/$c" "$work/xenmods/xen-blkfront.ko"
    # The vbd's hotplug script is the one a dom0 installs from the package
    # blkfront-rs-xen-hotplug: block-topology running Xen's own block.
    VBD_SCRIPT=block-topology KO_DIR=$OUT DOMU_KERNEL=$VMLINUZ DOMU_MODULES=$work/xenmods bash "$T/xen-guest.sh" -l "$L-xen" \
        -p 1 -b 4096 -m 4096 -o 1048576 "$T/guest/debian-stock-xen.sh" || true
fi
exit 0
