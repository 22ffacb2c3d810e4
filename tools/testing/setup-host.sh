#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Installs everything the build and the guests need on a Debian 12 host.
# Idempotent: each step checks before it acts. Nothing is ever installed or
# upgraded from trixie: trixie-backports is added pinned at priority 1 and only
# used through `apt-get download` + `dpkg-deb -x`.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

host_pkgs=(clang-19 lld-19 llvm-19 libclang-19-dev flex bison bc libelf-dev
    libssl-dev cpio busybox-static qemu-system-x86 debootstrap e2fsprogs kmod
    python3 make gcc libc6-dev git xz-utils zstd fio gnuplot-nox fdisk linux-perf
    libxen-dev valgrind)
missing=()
for p in "${host_pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
    log "installing host packages: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! command -v rustup >/dev/null; then
    die "rustup not found: install rustup's stable toolchain (rustc >= 1.85) first"
fi
for c in rust-src rustfmt clippy; do
    rustup component list --installed 2>/dev/null | grep -q "^$c" || rustup component add "$c"
done
command -v bindgen >/dev/null || cargo install --locked bindgen-cli

# trixie-backports, download-only.
if [ ! -f /etc/apt/sources.list.d/blkfront-rs-trixie-backports.sources ]; then
    # The mirror the host's bookworm comes from (or DISTRO_MIRROR).
    . "$REPO/tools/distro/apt-mirror.sh"
    mirror=${DISTRO_MIRROR:-$(apt_mirror)} || exit 1
    log "adding trixie-backports (pinned at 1, download only)"
    cat > /etc/apt/preferences.d/blkfront-rs-trixie-backports <<'PIN'
Package: *
Pin: release n=trixie-backports
Pin-Priority: 1
PIN
    cat > /etc/apt/sources.list.d/blkfront-rs-trixie-backports.sources <<SRC
Types: deb
URIs: $mirror
Suites: trixie-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
    apt-get update -qq
fi

mkdir -p "$DL"
fetch_deb() { # package [suite]
    local pkg=$1 suite=${2:-} f
    f=$(ls "$DL"/"${pkg}"_*.deb 2>/dev/null | head -1 || true)
    if [ -z "$f" ]; then
        log "downloading $pkg"
        (cd "$DL" && apt-get download -qq "${pkg}${suite:+/$suite}")
    fi
}
fetch_deb linux-source-7.3 trixie-backports
fetch_deb xen-hypervisor-4.17-amd64
# Xen's own hotplug scripts (/etc/xen/scripts), which the dom0 script
# tools/hotplug/block-topology runs: block-topology-check.sh runs them.
fetch_deb xen-utils-common

if [ ! -d "$SRC_DIR" ]; then
    log "unpacking linux-source-7.3 into $SRC_DIR"
    tmp=$(mktemp -d "$CACHE/src.XXXX")
    dpkg-deb -x "$DL"/linux-source-7.3_*.deb "$tmp"
    tar -C "$tmp" -xf "$tmp"/usr/src/linux-source-7.3.tar.xz
    mv "$tmp"/linux-source-7.3 "$SRC_DIR"
    rm -rf "$tmp"
fi
if [ ! -f "$XEN_ELF" ]; then
    tmp=$(mktemp -d "$CACHE/xen.XXXX")
    dpkg-deb -x "$DL"/xen-hypervisor-4.17-amd64_*.deb "$tmp"
    zcat "$tmp"/boot/xen-4.17-amd64.gz > "$XEN_ELF"
    rm -rf "$tmp"
fi
log "host ready"
