#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Binary Debian package of both modules for one stock kernel release, built
# inside the chroot made by debian-kdir.sh (Debian's dpkg-deb and lintian):
#
#   make-deb.sh CHROOT OUTDIR_OF_MODULES KERNELRELEASE DEST_DIR
#
# Package blkfront-rs-modules-<release>: the two .ko under
# /usr/lib/modules/<release>/updates/blkfront-rs/ (trixie is merged-/usr:
# that is /lib/modules/...), packaging/modprobe.d/blkfront-rs.conf in
# /usr/lib/modprobe.d/, packaging/initramfs-tools/hooks/blkfront-rs in
# /usr/share/initramfs-tools/hooks/; postinst/postrm run depmod and
# update-initramfs for that release. SIGN_KEY and SIGN_CERT: the modules
# are signed (see the Makefile's signing).
# Package blkfront-rs-xen-hotplug (Architecture: all), for Xen dom0s and
# independent of the first: tools/hotplug/block-topology in /etc/xen/scripts/
# (a conffile, as Xen's own scripts there) and a README.Debian on using it.
# Lintian runs on each: an error (E:) fails; its full output is in
# DEST_DIR/<package>.lintian.
# Prints "HOTPLUG_DEB=<path>", then "DEB=<path>" (the modules) last.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
CH=$1 OUT=$2 KREL=$3 DEST=$4
P=$REPO/packaging
inch() { chroot "$CH" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 "$@"; }

base=$(sed -n 's/^PACKAGE_VERSION="\(.*\)"/\1/p' "$REPO/dkms.conf")
# A version that grows with every commit, and dates from the commit (the
# same tree gives the same package). The commit's hash goes into the
# changelog, not the version: with it the file name passes lintian's 80
# characters (package-has-long-file-name) for no kernel release.
if epoch=$(git -C "$REPO" log -1 --format=%ct 2>/dev/null); then
    VERSION=$base+git$(date -u -d "@$epoch" +%Y%m%d%H%M) COMMIT=$(git -C "$REPO" log -1 --format=%h)
else
    epoch=$(date +%s) VERSION=$base COMMIT=unknown
fi
PKG=blkfront-rs-modules-$KREL
# Maintainer (control) and changelog signer: the project's committer identity,
# `git log -1 --format='%an <%ae>'` (every commit carries it), written here
# rather than read at build time so that the package does not change with
# whoever committed last, nor need a git checkout.
MAINTAINER='Seed 212320d2 maintainers <maintainers@users.noreply.a-seed-212320d2.example>'

stage=/tmp/blkfront-deb/$PKG        # inside the chroot
S=$CH$stage
rm -rf "$CH/tmp/blkfront-deb"
mkdir -p "$S/DEBIAN" "$S/usr/lib/modules/$KREL/updates/blkfront-rs" "$S/usr/lib/modprobe.d" \
    "$S/usr/share/initramfs-tools/hooks" "$S/usr/share/doc/$PKG"
# Signed when SIGN_KEY and SIGN_CERT (host paths) are given, as `make`
# signs: with the prepared tree's scripts/sign-file (SIGN_TREE, a path in
# the chroot), after the strip, which a signature would not survive.
signing=
if [ -n "${SIGN_KEY:-}${SIGN_CERT:-}" ]; then
    [ -f "${SIGN_KEY:-}" ] || { echo "error: make deb: SIGN_KEY='${SIGN_KEY:-}' is not a file" >&2; exit 1; }
    [ -f "${SIGN_CERT:-}" ] || { echo "error: make deb: SIGN_CERT='${SIGN_CERT:-}' is not a file" >&2; exit 1; }
    [ -x "$CH${SIGN_TREE:-/nonexistent}/scripts/sign-file" ] ||
        { echo "error: make deb: no scripts/sign-file in the prepared tree '${SIGN_TREE:-}'" >&2; exit 1; }
    signing=/tmp/blkfront-sign
    rm -rf "${CH:?}$signing"
    trap 'rm -rf "${CH:?}$signing"' EXIT
    install -d -m 700 "$CH$signing"
    install -m 600 "$SIGN_KEY" "$CH$signing/key"
    install -m 644 "$SIGN_CERT" "$CH$signing/cert"
fi
for m in virtio_blk_rs xen_blkfront_rs; do
    [ -f "$OUT/$m.ko" ] || { echo "error: make deb: $OUT/$m.ko missing" >&2; exit 1; }
    # Debug info out, as Debian's own kernel modules.
    strip --strip-debug -o "$S/usr/lib/modules/$KREL/updates/blkfront-rs/$m.ko" "$OUT/$m.ko"
    if [ -n "$signing" ]; then
        inch "$SIGN_TREE/scripts/sign-file" sha256 "$signing/key" "$signing/cert" \
            "$stage/usr/lib/modules/$KREL/updates/blkfront-rs/$m.ko" ||
            { echo "error: make deb: sign-file failed on $m.ko" >&2; exit 1; }
        echo "make-deb: $m.ko signed with $(basename "$SIGN_CERT")" >&2
    fi
done
install -m 644 "$P/modprobe.d/blkfront-rs.conf" "$S/usr/lib/modprobe.d/blkfront-rs.conf"
install -m 755 "$P/initramfs-tools/hooks/blkfront-rs" "$S/usr/share/initramfs-tools/hooks/blkfront-rs"
install -m 644 "$P/debian/copyright" "$S/usr/share/doc/$PKG/copyright"
subst() { sed -e "s/@KREL@/$KREL/g" -e "s/@VERSION@/$VERSION/g" -e "s/@SIZE@/${size:-0}/g" -e "s/@COMMIT@/$COMMIT/g" \
    -e "s/@MAINTAINER@/$MAINTAINER/g" -e "s/@DATE@/$(LC_ALL=C date -u -R -d "@$epoch")/g" "$1"; }
subst "$P/debian/changelog.in" | gzip -9n > "$S/usr/share/doc/$PKG/changelog.gz"
for s in postinst postrm; do
    subst "$P/debian/$s.in" > "$S/DEBIAN/$s"; chmod 755 "$S/DEBIAN/$s"
done
size=$(du -sk --exclude=DEBIAN "$S" | cut -f1)
subst "$P/debian/control.in" > "$S/DEBIAN/control"
(cd "$S" && find usr -type f -print0 | sort -z | xargs -0 md5sum) > "$S/DEBIAN/md5sums"
find "$S" -exec touch -h -d "@$epoch" {} +

# dpkg-deb in the chroot, then lintian as Debian runs it; overrides would
# live in the package (usr/share/lintian/overrides/<package>), with the
# reason beside each. Lintian's exit status is 0 unless it found an error
# (or could not run).
build() { # STAGE_IN_CHROOT PACKAGE ARCH: prints the .deb's path in DEST
    local deb=${2}_${VERSION}_$3.deb
    inch env SOURCE_DATE_EPOCH="$epoch" dpkg-deb --root-owner-group -Zxz --build "$1" "/tmp/blkfront-deb/$deb" >&2
    mkdir -p "$DEST"
    cp "$CH/tmp/blkfront-deb/$deb" "$DEST/$deb"
    echo "make-deb: built $deb ($(du -h "$DEST/$deb" | cut -f1))" >&2
    if ! inch lintian --info --display-info --pedantic "/tmp/blkfront-deb/$deb" > "$DEST/$2.lintian" 2>&1; then
        sed 's/^/lintian: /' "$DEST/$2.lintian" >&2
        echo "error: make deb: lintian failed or reports errors (see $DEST/$2.lintian)" >&2
        exit 1
    fi
    sed 's/^/lintian: /' "$DEST/$2.lintian" >&2
    echo "$DEST/$deb"
}
deb=$(build "$stage" "$PKG" amd64)

# ---- blkfront-rs-xen-hotplug: the dom0 side ------------------------------
HPKG=blkfront-rs-xen-hotplug
hstage=/tmp/blkfront-deb/$HPKG
H=$CH$hstage
mkdir -p "$H/DEBIAN" "$H/etc/xen/scripts" "$H/usr/share/doc/$HPKG"
install -m 755 "$REPO/tools/hotplug/block-topology" "$H/etc/xen/scripts/block-topology"
install -m 644 "$P/xen-hotplug/README.Debian" "$H/usr/share/doc/$HPKG/README.Debian"
install -m 644 "$P/debian/copyright" "$H/usr/share/doc/$HPKG/copyright"
subst "$P/debian/xen-hotplug.changelog.in" | gzip -9n > "$H/usr/share/doc/$HPKG/changelog.gz"
# An admin's edit of a script in /etc survives upgrades (Debian ships Xen's
# own scripts there as conffiles too); md5sums leaves conffiles out, as
# dh_md5sums does (dpkg records their sums itself).
echo /etc/xen/scripts/block-topology > "$H/DEBIAN/conffiles"
size=$(du -sk --exclude=DEBIAN "$H" | cut -f1)
subst "$P/debian/xen-hotplug.control.in" > "$H/DEBIAN/control"
(cd "$H" && find usr -type f -print0 | sort -z | xargs -0 md5sum) > "$H/DEBIAN/md5sums"
find "$H" -exec touch -h -d "@$epoch" {} +
hdeb=$(build "$hstage" "$HPKG" all)

printf 'HOTPLUG_DEB=%q\n' "$hdeb"
printf 'DEB=%q\n' "$deb"
