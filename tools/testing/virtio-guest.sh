#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Boots the test kernel under QEMU (TCG) with virtio-blk-pci disks and runs a
# guest check script as the initramfs's /test.sh.
#
#   virtio-guest.sh [-d 'SIZE[,QEMU_DEVICE_OPTS]']... [-t TIMEOUT] [-l LABEL] SCRIPT
#
# -d adds one disk (a sparse raw file of SIZE, e.g. 256M) with extra
#    virtio-blk-pci options, e.g. -d '256M,physical_block_size=4096,min_io_size=4096'.
#    The drive has discard=unmap so discarded ranges read back as zeroes.
# The guest gets /lib/modules/{virtio_blk_rs,virtio_blk,xen_blkfront_rs}.ko
# (ours from the repo build, the C one from KDIR), fio, and the scripts under
# tools/testing/guest/ in /guest/. Results (check lines and KTAP) are appended
# to $RESULTS by collect_results; the console log is kept in $LOGDIR.
# A guest line "HOST-CMD: <command>" is sent to the QEMU monitor (human
# monitor protocol), e.g. "HOST-CMD: block_resize d0 512M" or
# "HOST-CMD: device_del vd0": disks are drive d<N>, device vd<N>.
# Environment: KDIR (default: the cached test kernel), KO_DIR (default: repo),
# GUEST_FILES (more files for the guest: "SRC:DEST ..."),
# QEMU_EXTRA (more QEMU arguments, after the disks), QEMU_BUSES (QEMU
# arguments before the disks: the buses their -d options name, e.g.
# "-device pci-bridge,id=pb0,chassis_nr=1" for "-d 64M,bus=pb0,addr=1"),
# KERNEL_APPEND (more kernel command line),
# SMP (guest CPUs, default 2), PCIE=1 (a q35 machine with each disk behind a
# PCIe root port of its own: the device then has PCIe function level reset),
# S3=1 (the machine offers ACPI S3 suspend to RAM; one vCPU), KERNEL_IMAGE and C_KO
# (another kernel than KDIR's, e.g. Debian's, and its C virtio_blk.ko),
# VHOST_USER=1 (the guest's RAM is shared memory, and the guest lines
# "HOST-CMD: vub-attach SCENARIO N [DEVICE OPTIONS]" / "HOST-CMD: vub-detach N"
# hot-plug and unplug a device of tools/testing/virtio-backend ("-" for
# SCENARIO: a well-behaved one), lib.sh vhost_user_cmd;
# after the boot the log gets one "HOST-VUB: fired SCENARIO" line per
# scenario that struck, and the devices' own lines go to LABEL-device.log).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

timeout=300 label= disks=()
while getopts "d:t:l:" o; do
    case $o in
        d) disks+=("$OPTARG") ;;
        t) timeout=$OPTARG ;;
        l) label=$OPTARG ;;
        *) die "usage: $0 [-d SIZE,OPTS]... [-t SECS] [-l LABEL] SCRIPT" ;;
    esac
done
shift $((OPTIND - 1))
script=${1:?guest script}
label=${label:-$(basename "$script" .sh)}
KDIR=${KDIR:-$(bash "$REPO/tools/testing/build-kernel.sh")}
KO_DIR=${KO_DIR:-$REPO}
LOGDIR=${LOGDIR:-$CACHE/logs}
mkdir -p "$LOGDIR"
work=$(mktemp -d "$CACHE/virtio-run.XXXX")
trap 'runner_exit "$work" "$label"' EXIT

files=("$script:/test.sh")
for g in "$REPO"/tools/testing/guest/*.sh; do files+=("$g:/guest/$(basename "$g")"); done
for ko in "$KO_DIR"/virtio_blk_rs.ko "$KO_DIR"/xen_blkfront_rs.ko; do
    [ -f "$ko" ] && files+=("$ko:/lib/modules/$(basename "$ko")")
done
c_ko=${C_KO:-$(find "$KDIR/drivers/block" -name virtio_blk.ko | head -1)}
[ -n "$c_ko" ] && files+=("$c_ko:/lib/modules/virtio_blk.ko")
# shellcheck disable=SC2206
files+=(${GUEST_FILES:-})
while IFS= read -r p; do files+=("$p"); done < <(binary_with_libs "$(command -v fio)"; binary_with_libs "$(command -v lsblk)")
make_initramfs "$work/initramfs.cpio.gz" "${files[@]}"

qemu_disks=() i=0 machine=pc
[ "${PCIE:-0}" = 1 ] && machine=q35
s3=()
if [ "${S3:-0}" = 1 ]; then
    [ $machine = q35 ] && s3=(-global ICH9-LPC.disable_s3=0) || s3=(-global PIIX4_PM.disable_s3=0)
    # One vCPU: with two under single-threaded TCG (lib.sh's QEMU_LINUX)
    # the guest never reached S3 (QEMU still "running" minutes after
    # "echo mem").
    SMP=1
fi
for spec in "${disks[@]}"; do
    size=${spec%%,*}; opts=${spec#"$size"}
    truncate -s "$size" "$work/disk$i.img"
    if [ "$machine" = q35 ]; then
        qemu_disks+=(-device "pcie-root-port,id=rp$i,chassis=$((i + 1))")
        opts+=",bus=rp$i"
    fi
    qemu_disks+=(-drive "file=$work/disk$i.img,if=none,id=d$i,format=raw,discard=unmap,cache=unsafe"
        -device "virtio-blk-pci,drive=d$i,id=vd$i,serial=rsdisk$i$opts")
    i=$((i + 1))
done

mem=(-m 1024)
if [ "${VHOST_USER:-0}" = 1 ]; then
    (cd "$REPO" && cargo build --release -q -p virtio-backend) || die "cargo build -p virtio-backend failed"
    export VUB_BIN=$REPO/target/release/virtio-blk-backend VUB_DIR=$work
    : > "$work/fired"; : > "$work/device.log"; : > "$work/pids"
    mem=(-m 1024 -object memory-backend-memfd,id=mem,size=1024M,share=on -machine "$machine,memory-backend=mem")
fi

log="$LOGDIR/$label.log"
log "virtio guest '$label': ${#disks[@]} disk(s), timeout ${timeout}s, log $log"
: > "$log"
relay=$(start_monitor_relay "$log" "$work/monitor.sock")
boot() { # [MORE KERNEL COMMAND LINE]
    set +e
    # shellcheck disable=SC2086
    timeout --foreground -k 5 "$timeout" "${QEMU_LINUX[@]}" -machine "$machine" -smp "${SMP:-2}" "${mem[@]}" \
        -nographic -monitor "unix:$work/monitor.sock,server,nowait" -serial stdio -no-reboot \
        -kernel "${KERNEL_IMAGE:-$KDIR/arch/x86/boot/bzImage}" -initrd "$work/initramfs.cpio.gz" \
        -append "console=ttyS0 panic=-1 quiet loglevel=6 ${KERNEL_APPEND:-} $*" \
        ${QEMU_BUSES:-} "${qemu_disks[@]}" "${s3[@]}" ${QEMU_EXTRA:-} < /dev/null >> "$log" 2>&1
    rc=$?
    set -e
    if ((rc == 124)); then echo "GUEST-TIMEOUT after ${timeout}s" >> "$log"; fi
}
boot
# HIBERNATE=1: the script hibernated the guest (the image on one of the
# disks, and the guest powered off); boot again on the same disks with
# "blkfront_resume" on the command line, which tells the script to resume
# the image. Only the resumed image prints GUEST-EXIT.
if [ "${HIBERNATE:-0}" = 1 ] && ((rc == 0)) && grep -q 'HIBERNATING: ' "$log"; then
    echo "=== virtio-guest.sh: boot 2, resuming the image" >> "$log"
    boot blkfront_resume
fi
stop_monitor_relay "$relay"
if [ "${VHOST_USER:-0}" = 1 ]; then
    # The devices outlive a guest that hung in a removal.
    xargs -r kill -9 < "$work/pids" 2> /dev/null || true
    sed 's/^/HOST-VUB: /' "$work/fired" >> "$log"
    cp "$work/device.log" "$LOGDIR/$label-device.log"
fi
collect_results "$log" "$label"
guest_exited_cleanly "$log"
