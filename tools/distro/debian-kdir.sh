#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Prepares a kbuild tree for Debian's own (stock) kernel, from Debian packages
# only, and builds our modules against it. Nothing is installed on the host:
# the toolchain is Debian's, inside a debootstrap'd chroot of the suite the
# kernel was built in.
#
#   tools/distro/debian-kdir.sh [--check | --prepare-only] [--dkms] [--deb]
#
# --check stops after step 3 (toolchain comparison); with DISTRO_CONFIG=FILE
# it compares that config instead of the headers package's (used by the
# test suite to exercise the refusals).
#
# Environment:
#   DISTRO_KREL    kernel release (default 7.3.4+deb13-amd64)
#   DISTRO_SUITE   suite whose toolchain built it (default trixie)
#   DISTRO_SRCPKG  source package (default linux-source-7.3), from
#                  trixie-backports via `apt-get download`
#   DISTRO_MIRROR  (default: the Debian mirror of the host's apt sources,
#                  tools/distro/apt-mirror.sh)
#   BLKFRONT_CACHE (default /var/cache/blkfront-rs)
#
# Steps (each cached and skipped when its output exists):
#  1. apt-get download linux-source-7.3 and linux-headers-$DISTRO_KREL into
#     $CACHE/debs; the headers give the kernel's .config and Module.symvers.
#  2. debootstrap $DISTRO_SUITE with rustc, rust-src, bindgen, gcc-14, dkms...
#     into $CACHE/distro/chroot-<suite>-<key> (key: suite, mirror, packages).
#  3. Refuses (one line, exit 2) unless the chroot's gcc, rustc and bindgen
#     are the ones named in the headers' CONFIG_CC_VERSION_TEXT,
#     CONFIG_RUSTC_VERSION_TEXT and CONFIG_BINDGEN_VERSION_TEXT.
#  4. In the chroot: unpack the source, copy .config and Module.symvers,
#     `make olddefconfig` (refuses if it changes anything but the compiler's
#     program name), `make KERNELRELEASE=$DISTRO_KREL modules_prepare`, and
#     checks the release the tree now produces is $DISTRO_KREL.
#     Tree: <chroot>/usr/src/blkfront-kdir/<krel>-<key>.
#  5. Unless --prepare-only: copies this repo's sources into the chroot and
#     runs the top-level `make KDIR=...` there; the .ko files go to
#     $CACHE/distro/out-<krel>/ and their vermagic must equal that of
#     Debian's own modules for this release (linux-modules-$DISTRO_KREL).
#  6. --dkms: also `dkms add/build/install` of the repo (dkms.conf) inside
#     the chroot against the prepared tree.
#  7. --deb: also the binary package blkfront-rs-modules-<krel> of those
#     modules and the dom0 package blkfront-rs-xen-hotplug
#     (tools/distro/make-deb.sh: dpkg-deb and lintian in the chroot) into
#     $CACHE/distro/deb/; prints "HOTPLUG_DEB=<path>" and "DEB=<path>" too.
#
# Prints "KDIR=<host path>" and "OUT=<dir>" on stdout at the end. Progress on
# stderr. Everything is shell-quoted for `eval`.
set -euo pipefail
{ # read whole before running: the file may be edited while a run is going
REPO=$(cd "$(dirname "$0")/../.." && pwd)
CACHE=${BLKFRONT_CACHE:-/var/cache/blkfront-rs}
DL=$CACHE/debs
KREL=${DISTRO_KREL:-7.3.4+deb13-amd64}
SUITE=${DISTRO_SUITE:-trixie}
SRCPKG=${DISTRO_SRCPKG:-linux-source-7.3}
. "$REPO/tools/distro/apt-mirror.sh"
MIRROR=${DISTRO_MIRROR:-$(apt_mirror)} || exit 1
BASE=$CACHE/distro
mkdir -p "$DL" "$BASE"

log() { echo "[$(date +%H:%M:%S)] distro: $*" >&2; }
die() { echo "error: $*" >&2; exit 1; }
refuse() { echo "refused: $*" >&2; exit 2; }

prepare_only=0 dkms=0 check_only=0 deb=0
for a in "$@"; do
    case $a in
        --check) check_only=1 ;;
        --prepare-only) prepare_only=1 ;;
        --dkms) dkms=1 ;;
        --deb) deb=1 ;;
        *) die "usage: $0 [--check | --prepare-only] [--dkms] [--deb]" ;;
    esac
done
[ "$(id -u)" = 0 ] || die "needs root (debootstrap, chroot)"
# One run at a time (runs share the chroot's source copy and the tree).
exec 8> "$BASE/.lock"; flock 8
# Never rm -rf a directory with something mounted below it (a leaked /dev
# bind mount would take the host's /dev with it).
safe_rm() { local d; for d in "$@"; do
    ! grep -q " $(realpath -m "$d")[/ ]" /proc/mounts || die "$d has mounts below it; unmount them first"
    rm -rf "$d"; done; }

# ---- 1. packages (download only) ----------------------------------------
fetch() { # package -> path of the .deb in $DL
    local pkg=$1 f
    f=$(ls "$DL/${pkg}"_*.deb 2>/dev/null | head -1 || true)
    if [ -z "$f" ]; then
        log "apt-get download $pkg"
        (cd "$DL" && { apt-get download -qq "$pkg/$SUITE-backports" || apt-get download -qq "$pkg"; } 2>/dev/null) >&2 ||
            refuse "no package $pkg in apt's sources (is $SUITE-backports configured? tools/testing/setup-host.sh adds it): no Debian kernel '$KREL' to prepare a tree for"
        f=$(ls "$DL/${pkg}"_*.deb | head -1)
    fi
    echo "$f"
}
src_deb=$(fetch "$SRCPKG")
hdr_deb=$(fetch "linux-headers-$KREL")

hdr=$BASE/headers-$KREL
if [ ! -f "$hdr/.config" ]; then
    log "unpacking $(basename "$hdr_deb")"
    tmp=$(mktemp -d "$BASE/hdr.XXXX")
    dpkg-deb -x "$hdr_deb" "$tmp"
    mkdir -p "$hdr"
    cp "$tmp/usr/src/linux-headers-$KREL"/{.config,Module.symvers} "$hdr/"
    cp "$tmp/usr/src/linux-headers-$KREL/include/config/kernel.release" "$hdr/" 2>/dev/null || true
    rm -rf "$tmp"
fi
[ -f "$hdr/kernel.release" ] && [ "$(cat "$hdr/kernel.release")" != "$KREL" ] &&
    refuse "linux-headers-$KREL says its release is '$(cat "$hdr/kernel.release")', not '$KREL'"
CFG=$hdr/.config
if [ -n "${DISTRO_CONFIG:-}" ]; then
    ((check_only)) || die "DISTRO_CONFIG is only for --check"
    CFG=$DISTRO_CONFIG
fi
conf() { sed -n "s/^$1=\"\{0,1\}\([^\"]*\)\"\{0,1\}\$/\1/p" "${2:-$CFG}"; }
want_cc=$(conf CONFIG_CC_VERSION_TEXT)
want_rustc=$(conf CONFIG_RUSTC_VERSION_TEXT)
want_bindgen=$(conf CONFIG_BINDGEN_VERSION_TEXT)
[ "$(conf CONFIG_RUST)" = y ] || refuse "Debian's $KREL was built without CONFIG_RUST=y: no Rust modules can load into it"
[ -n "$want_cc" ] && [ "$(conf CONFIG_CC_IS_GCC)" = y ] || refuse "Debian's $KREL was not built with gcc ('$want_cc'); only gcc-built Debian kernels are supported"
gcc_major=$(( $(conf CONFIG_GCC_VERSION) / 10000 ))
CCBIN=gcc-$gcc_major

# ---- 2. the chroot --------------------------------------------------------
# openssl: Kconfig asks `openssl list` (CONFIG_OPENSSL_SUPPORTS_ML_DSA).
pkgs="rustc,rust-src,bindgen,libclang-dev,$CCBIN,make,flex,bison,bc,libelf-dev,libssl-dev,openssl,cpio,kmod,xz-utils,python3,dwarves,dkms,rsync"
# Installed with apt after the bootstrap: debootstrap's --include does not
# resolve virtual packages (lintian needs perl-openssl-abi-3 through
# libnet-ssleay-perl, and debootstrap leaves it unconfigured).
# lintian: checks the package of --deb.
apt_pkgs="lintian"
# Keyed by suite and mirror; packages added to the list later are installed
# into an existing chroot (below) rather than bootstrapping a new one.
ckey=$(printf '%s\n' "$SUITE" "$MIRROR" | sha256sum | cut -c1-12)
CH=$BASE/chroot-$SUITE-$ckey
if [ ! -f "$CH/.blkfront-ready" ]; then
    log "debootstrap $SUITE into $CH (log $BASE/debootstrap-$ckey.log)"
    safe_rm "$CH.tmp"
    t0=$(date +%s)
    debootstrap --variant=minbase --include="$pkgs" "$SUITE" "$CH.tmp" "$MIRROR" \
        > "$BASE/debootstrap-$ckey.log" 2>&1 || die "debootstrap failed: see $BASE/debootstrap-$ckey.log"
    safe_rm "$CH"; mv "$CH.tmp" "$CH"
    echo "$(( $(date +%s) - t0 ))" > "$CH/.debootstrap-seconds"
    date -u > "$CH/.blkfront-ready"
    log "chroot ready in $(cat "$CH/.debootstrap-seconds")s"
fi
# /proc (objtool, make) and /dev/null are needed inside; unmounted on exit.
mounted=()
cleanup() { local m; for m in "${mounted[@]}"; do umount -l "$m" 2>/dev/null || true; done; }
trap cleanup EXIT
trap 'exit 130' INT TERM
mountpoint -q "$CH/proc" || { mount -t proc proc "$CH/proc"; mounted+=("$CH/proc"); }
mountpoint -q "$CH/dev" || { mount --bind /dev "$CH/dev"; mounted+=("$CH/dev"); }
inch() { chroot "$CH" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 "$@"; }

missing=$(for p in ${pkgs//,/ } $apt_pkgs; do
    chroot "$CH" dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q 'ok installed' || echo "$p"; done)
if [ -n "$missing" ]; then
    log "installing into the chroot: $(echo $missing)"
    inch sh -c "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(echo $missing)" \
        > "$BASE/apt-$ckey.log" 2>&1 || die "apt-get install in the chroot failed: see $BASE/apt-$ckey.log"
fi

# ---- 3. toolchain == the one that built Debian's kernel? ------------------
have_cc=$(inch "$CCBIN" --version | head -1)
have_rustc=$(inch rustc --version)
have_bindgen=$(inch bindgen --version)
# CONFIG_CC_VERSION_TEXT starts with the program name Debian called
# (x86_64-linux-gnu-gcc-14): compare what follows it.
[ "${have_cc#* }" = "${want_cc#* }" ] ||
    refuse "Debian's $KREL was built with '$want_cc' but $SUITE's $CCBIN is '$have_cc'"
[ "$have_rustc" = "$want_rustc" ] ||
    refuse "Debian's $KREL was built with '$want_rustc' but $SUITE's rustc is '$have_rustc'"
[ "$have_bindgen" = "$want_bindgen" ] ||
    refuse "Debian's $KREL was built with '$want_bindgen' but $SUITE's bindgen is '$have_bindgen'"
log "toolchain matches $KREL: $have_cc / $have_rustc / $have_bindgen"
if ((check_only)); then
    echo "ok: $SUITE's $have_cc, $have_rustc, $have_bindgen match Debian's $KREL"
    exit 0
fi

# ---- 4. the tree ----------------------------------------------------------
tkey=$(printf '%s\n' "$(basename "$src_deb")" "$(basename "$hdr_deb")" "$ckey" \
    "$(sha256sum < "$hdr/.config")" "$(sha256sum < "$hdr/Module.symvers")" | sha256sum | cut -c1-12)
KD=/usr/src/blkfront-kdir/$KREL-$tkey     # path inside the chroot
HKD=$CH$KD                                # same tree seen from the host
KM=(CC="$CCBIN" KERNELRELEASE="$KREL")
if [ ! -f "$HKD/.blkfront-prepared" ]; then
    t0=$(date +%s)
    rm -rf "$HKD"; mkdir -p "$HKD"
    log "unpacking $(basename "$src_deb") into $HKD"
    dpkg-deb --fsys-tarfile "$src_deb" | tar -xO --wildcards '*/usr/src/linux-source-*.tar.xz' |
        xz -dc -T2 | tar -x -C "$HKD" --strip-components=1
    cp "$hdr/.config" "$hdr/Module.symvers" "$HKD/"
    log "olddefconfig + modules_prepare (log $HKD/prepare.log)"
    inch make -C "$KD" "${KM[@]}" olddefconfig > "$HKD/prepare.log" 2>&1 ||
        die "olddefconfig failed: see $HKD/prepare.log"
    # Only the compiler's program name may differ (gcc-14 vs Debian's
    # x86_64-linux-gnu-gcc-14); anything else means the tree would not
    # match the kernel.
    d=$(diff <(grep -v '^CONFIG_CC_VERSION_TEXT=' "$hdr/.config" | grep '^CONFIG_') \
             <(grep -v '^CONFIG_CC_VERSION_TEXT=' "$HKD/.config" | grep '^CONFIG_') | grep '^[<>]' || true)
    [ -z "$d" ] || refuse "the chroot's toolchain changes the kernel config: $(echo "$d" | head -4 | tr '\n' ' ')"
    # modules_prepare overwrites nothing of Module.symvers (only a full
    # build does); keep Debian's, it is what modpost checks against.
    inch make -C "$KD" "${KM[@]}" -j"${JOBS:-2}" modules_prepare >> "$HKD/prepare.log" 2>&1 ||
        die "modules_prepare failed: see $HKD/prepare.log (last lines: $(tail -3 "$HKD/prepare.log" | tr '\n' ' '))"
    cmp -s "$hdr/Module.symvers" "$HKD/Module.symvers" || cp "$hdr/Module.symvers" "$HKD/"
    echo "$(( $(date +%s) - t0 ))" > "$HKD/.prepare-seconds"
    touch "$HKD/.blkfront-prepared"
    log "tree prepared in $(cat "$HKD/.prepare-seconds")s"
fi
rel=$(inch make -s -C "$KD" "${KM[@]}" kernelrelease 2>/dev/null | tail -1)
[ "$rel" = "$KREL" ] || refuse "the prepared tree builds release '$rel', not '$KREL'"
for f in rust/libkernel.rmeta scripts/module.lds include/generated/rustc_cfg; do
    [ -e "$HKD/$f" ] || die "prepared tree lacks $f: see $HKD/prepare.log"
done

OUT=$BASE/out-$KREL
if ((prepare_only == 0)); then
    # ---- 5. our modules, built in the chroot from a copy of the repo ------
    # A copy so that the repo's own .ko files (built for the test kernel)
    # stay as they are.
    SRCIN=/usr/src/blkfront-rs-src
    rm -rf "$CH$SRCIN"; mkdir -p "$CH$SRCIN"
    (cd "$REPO" && git ls-files -co --exclude-standard -z | grep -zv '^target/' |
        xargs -0 tar -c --ignore-failed-read 2>/dev/null) | tar -x -C "$CH$SRCIN"
    find "$CH$SRCIN" -maxdepth 1 \( -name '*.ko' -o -name '*.o' -o -name '*.mod*' -o -name Module.symvers -o -name modules.order \) -delete
    log "building the modules against $KD in the chroot (log $BASE/build-$KREL.log)"
    if ! inch make -C "$SRCIN" KDIR="$KD" > "$BASE/build-$KREL.log" 2>&1; then
        grep -E '^(error|warning: unused)|^ *--> |^error\[' "$BASE/build-$KREL.log" | head -20 >&2 || true
        die "module build against $KREL failed: see $BASE/build-$KREL.log"
    fi
    rm -rf "$OUT"; mkdir -p "$OUT"
    cp "$CH$SRCIN"/*.ko "$OUT/"
    # vermagic must be the stock kernel's (taken from Debian's own virtio_blk).
    mod_deb=$(fetch "linux-modules-$KREL")
    ref=$(dpkg-deb --fsys-tarfile "$mod_deb" | tar -xO --wildcards '*/drivers/block/virtio_blk.ko*' | {
        t=$(mktemp); cat > "$t"; case $(head -c4 "$t" | od -An -tx1 | tr -d ' ') in
            28b52ffd) zstd -dcq "$t" ;; fd377a58) xz -dc "$t" ;; *) cat "$t" ;; esac > "$t.ko"
        modinfo -F vermagic "$t.ko"; rm -f "$t" "$t.ko"; })
    for ko in "$OUT"/*.ko; do
        v=$(modinfo -F vermagic "$ko")
        [ "$v" = "$ref" ] || refuse "$(basename "$ko") has vermagic '$v' but Debian's $KREL modules have '$ref'"
        log "$(basename "$ko"): vermagic '$v' (= Debian's)"
    done
fi

if ((dkms)); then
    # ---- 6. DKMS inside the chroot, against the prepared tree -------------
    bash "$REPO/tools/distro/dkms-check.sh" "$CH" "$KD" "$KREL" >&2
fi

printf 'KDIR=%q\nCHROOT=%q\nOUT=%q\n' "$HKD" "$CH" "$OUT"
if ((deb)); then
    # ---- 7. the binary package --------------------------------------------
    ((prepare_only == 0)) || die "--deb needs the modules (not with --prepare-only)"
    SIGN_TREE=$KD bash "$REPO/tools/distro/make-deb.sh" "$CH" "$OUT" "$KREL" "$BASE/deb" | tail -2
fi
exit 0
}
