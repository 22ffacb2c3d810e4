#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Runs real Xen under QEMU (TCG): Xen 4.17, a Linux dom0 running xen-blkback
# whose backing disk is dom0's /dev/vdb, and a PV domU (same test kernel)
# running a guest check script as its /test.sh.
#
#   xen-guest.sh [-p FEATURE_PERSISTENT] [-b PHYS_BLOCK] [-m MIN_IO -o OPT_IO]
#                [-s DISK_SIZE] [-n NDOMU] [-c VCPUS] [-g FRAMES] [-2 | -V NVBD] [-P]
#                [-t TIMEOUT]
#                [-l LABEL] SCRIPT
#
# -p 0|1   blkback's feature_persistent (default 1)
# -b N     physical_block_size of dom0's backing disk (default 512)
# -m/-o    min/opt I/O size of the backing disk; the hotplug script publishes
#          them as minimum-io-size / optimal-io-size (our blkif extension)
# -c N     vCPUs of each domU, and blkback's max_queues (default 1): N > 1
#          lets a frontend negotiate N rings
# -g N     the domUs' grant table: at most N frames of 512 grants (xl's
#          max_grant_frames; default 64), also passed as BLKGRANTFRAMES=N in
#          their environment (running out of grants on purpose)
# -2       give (the first) domU a second vbd, xvdb, on the same dom0 disk:
#          two frontends side by side on one backing device (benchmarks)
# -V N     give (the first) domU N vbds in all (at most 32: xvda to xvdz,
#          then xvdaa to xvdaf), every one on that disk (-2 is -V 2); from
#          the 17th (xvdq) on, libxl names a vbd by its extended id
#          (1 << 28 | disk << 8)
# -P       pin dom0's vCPU to physical CPU 0 and every domU vCPU to CPU 1
#          (benchmarks: otherwise the Xen scheduler sometimes runs dom0 and
#          the domU on one CPU, halving throughput for a while)
# -n N     run N PV domUs at once (1..4, default 1), each with its own backing
#          disk of the same kind and the same SCRIPT (384 MiB each: the
#          initramfs with fio needs it). With N > 1 every domU gets, in its
#          environment (kernel command line),
#          BLKDOMU=<1..N>, BLKNDOMU=N and BLKT0=<epoch second by which all
#          domUs have been created: a common start for time-slotted work>;
#          the consoles of domUs 2..N are appended after domU 1's, their check
#          lines renamed "domU<i>: ..." and their exit status a check line.
# The first domU's script can act on the machine at the right moment: a line
# "HOST-CMD: <cmd>" goes to the QEMU monitor (the backing disk is drive
# "vbd", e.g. "HOST-CMD: block_resize vbd 384M": dom0's disk grows and
# blkback announces the new size), a line "DOM0-CMD: <cmd>" is run by dom0
# (e.g. "DOM0-CMD: xl block-detach blktest xvda"). Answers come back through
# xenstore: tools/testing/xen/vbd-stats publishes xen-blkback's counters of
# a vbd where the domU can read them (vbd_counters in guest/common.sh).
# The domU gets /lib/modules/{xen_blkfront_rs,xen-blkfront}.ko, fio, sfdisk,
# mkfs.ext4/dumpe2fs (when the host has them) and
# tools/testing/guest/*.sh as /guest/*. Results go to $RESULTS.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

persistent=1 phys=512 min_io= opt_io= size=512M timeout=600 label= ndomu=1 vcpus=1 nvbd=1 pin=0 frames=
while getopts "p:b:m:o:s:n:c:g:2V:Pt:l:" o; do
    case $o in
        p) persistent=$OPTARG ;; b) phys=$OPTARG ;; m) min_io=$OPTARG ;;
        o) opt_io=$OPTARG ;; s) size=$OPTARG ;; t) timeout=$OPTARG ;; l) label=$OPTARG ;;
        n) ndomu=$OPTARG ;; c) vcpus=$OPTARG ;; g) frames=$OPTARG ;; 2) nvbd=2 ;; V) nvbd=$OPTARG ;; P) pin=1 ;;
        *) die "usage: $0 [-p 0|1] [-b PHYS] [-m MIN -o OPT] [-s SIZE] [-n NDOMU] [-c VCPUS] [-g FRAMES] [-2 | -V NVBD] [-P] [-t SECS] [-l LABEL] SCRIPT" ;;
    esac
done
shift $((OPTIND - 1))
[[ $ndomu =~ ^[1-4]$ ]] || die "-n: 1 to 4 domUs"
[[ -z $frames || $frames =~ ^[1-9][0-9]*$ ]] || die "-g: a number of grant frames"
[[ $nvbd =~ ^[1-9][0-9]?$ ]] && ((nvbd <= 32)) || die "-V: 1 to 32 vbds"
script=${1:?guest script}
# xvd_name INDEX: the vdev of disk INDEX (0: xvda, 25: xvdz, 26: xvdaa),
# as Linux and libxl name disks.
xvd_name() {
    local i=$1 s=
    ((i >= 26)) && s=$(printf "\\$(printf %o $((96 + i / 26)))") i=$((i % 26))
    echo "xvd$s$(printf "\\$(printf %o $((97 + i)))")"
}
label=${label:-$(basename "$script" .sh)-p$persistent-b$phys}
KDIR=${KDIR:-$(bash "$REPO/tools/testing/build-kernel.sh")}
KO_DIR=${KO_DIR:-$REPO}
DOMU_TYPE=${DOMU_TYPE:-pv}
# Another domU kernel (e.g. a distribution's vmlinuz or the debug kernel) and
# the directory with its C xen-blkfront.ko (DOMU_KERNEL, DOMU_MODULES;
# defaults: KDIR's bzImage and drivers/block); DOMU_APPEND: more domU kernel
# command line (e.g. kmemleak=on). DOMU_TYPE=pvh: the domUs are PVH guests
# (the kernel needs CONFIG_XEN_PVH; Xen then gets a CPU with SVM and nested
# paging from QEMU, which a PV-only run does not need); DOMU_TYPE=hvm: HVM
# domUs with PV drivers (the same CPU; hvmloader, SeaBIOS and QEMU's device
# model from dom0's qemu-system-xen; direct kernel boot; the console is the
# PV one, hvc0, as for the others). BACKEND=qdisk: domU
# 1's vbds are served by QEMU's xen-block (xl's backendtype=qdisk, the
# process libxl starts in dom0) instead of xen-blkback: xvda raw on dom0's
# /dev/vdb, xvdb a qcow2 file (-s big) on dom0's root file system, made by
# dom0-run.sh. DOMU_MEM: MiB per
# domU (384; a KASAN kernel needs more to unpack the initramfs).
# A domU that boots a real root file system instead of the check initramfs
# (the deployment test): VBD0_IMAGE, a disk image used as domU 1's backing
# disk (its xvda) in place of an empty one; DOMU_RAMDISK, that system's
# initramfs; DOMU_CMDLINE, its whole kernel command line.
# VBD_SCRIPT: the blkback vbds' hotplug script: block-simple (default,
# tools/testing/xen/block-simple from the payload) or block-topology
# (tools/hotplug/block-topology, which runs Xen's own block script:
# dom0-run.sh installs it into dom0's /etc/xen/scripts beside Xen's, and
# the disks name it as a user does, script=block-topology).
LOGDIR=${LOGDIR:-$CACHE/logs}
mkdir -p "$LOGDIR"
work=$(mktemp -d "$CACHE/xen-run.XXXX")
trap 'runner_exit "$work" "$label"' EXIT
dom0_img=$(bash "$REPO/tools/testing/xen/build-dom0-image.sh" "$KDIR")

# domU initramfs: our module, the C frontend for the baseline, fio, scripts.
files=("$script:/test.sh")
for g in "$REPO"/tools/testing/guest/*.sh; do files+=("$g:/guest/$(basename "$g")"); done
[ -f "$KO_DIR/xen_blkfront_rs.ko" ] && files+=("$KO_DIR/xen_blkfront_rs.ko:/lib/modules/xen_blkfront_rs.ko")
c_ko=$(find "${DOMU_MODULES:-$KDIR/drivers/block}" -name xen-blkfront.ko | head -1)
[ -n "$c_ko" ] && files+=("$c_ko:/lib/modules/xen-blkfront.ko")
while IFS= read -r p; do files+=("$p"); done < <(binary_with_libs "$(command -v fio)"; binary_with_libs "$(command -v lsblk)")
# Partitioning and mkfs for the alignment benchmark, when the host has them.
for b in sfdisk mkfs.ext4 dumpe2fs; do
    bp=$(command -v $b) || continue
    while IFS= read -r p; do files+=("$p"); done < <(binary_with_libs "$bp")
done
[ -f /etc/mke2fs.conf ] && files+=("/etc/mke2fs.conf:/etc/mke2fs.conf")
# The CD-ROM ioctl probe (guest/cdrom-ioctl.c) and the check that no read
# buffer changes after its completion (guest/late-write-check.c), static:
# no libraries to copy.
cc -static -O2 -o "$work/cdrom-ioctl" "$REPO/tools/testing/guest/cdrom-ioctl.c"
files+=("$work/cdrom-ioctl:/bin/cdrom-ioctl")
cc -static -O2 -o "$work/late-write-check" "$REPO/tools/testing/guest/late-write-check.c"
files+=("$work/late-write-check:/bin/late-write-check")
# DOMU_EXTRA_BINS: more host binaries (with their libraries), e.g. perf.
for b in ${DOMU_EXTRA_BINS:-}; do
    while IFS= read -r p; do files+=("$p"); done < <(binary_with_libs "$b")
done
mkdir -p "$work/payload"
if [ -n "${DOMU_RAMDISK:-}" ]; then
    cp "$DOMU_RAMDISK" "$work/payload/domU.cpio.gz"
else
    make_initramfs "$work/payload/domU.cpio.gz" "${files[@]}"
fi
cp "${DOMU_KERNEL:-$KDIR/arch/x86/boot/bzImage}" "$work/payload/domU-bzImage"
cp "$REPO/tools/testing/xen/dom0-run.sh" "$REPO/tools/testing/xen/block-simple" "$REPO/tools/testing/xen/blkif-irqs" \
    "$REPO/tools/testing/xen/save-restore" "$REPO/tools/testing/xen/vbd-stats" \
    "$REPO/tools/testing/xen/cdrom-attach" "$work/payload/"
# The userspace blkif backend (tools/testing/xen-backend) and its dom0
# wrapper, for guest/xen-userspace.sh (USERSPACE_BACKEND=1).
if [ "${USERSPACE_BACKEND:-0}" = 1 ]; then
    (cd "$REPO" && cargo build --release -q -p xen-backend) || die "cargo build -p xen-backend failed"
    cp "$REPO/target/release/blkif-backend" "$REPO/tools/testing/xen/us-backend" "$work/payload/"
fi
[ -f "$REPO/tools/testing/xen/dom0-after.sh" ] && cp "$REPO/tools/testing/xen/dom0-after.sh" "$work/payload/"
[ -n "$min_io" ] && touch "$work/payload/publish-io-sizes"
case ${VBD_SCRIPT:-block-simple} in
    block-simple) vbd_script=/run/payload/block-simple ;;
    block-topology) vbd_script=block-topology; cp "$REPO/tools/hotplug/block-topology" "$work/payload/" ;;
    *) die "VBD_SCRIPT=$VBD_SCRIPT: block-simple or block-topology" ;;
esac
cat > "$work/payload/run.env" <<ENV
PERSISTENT=$persistent
MAX_QUEUES=$vcpus
DOMU_TIMEOUT=$((timeout - 60))
NDOMU=$ndomu
DOMU_TYPE=$DOMU_TYPE
ENV
# domU 1 is "blktest" on dom0's /dev/vdb; domUs 2..4 are "blktest<i>" on
# /dev/vdd.. (dom0's /dev/vdc is the payload).
targets=(vdb vdd vde vdf)
for ((i = 1; i <= ndomu; i++)); do
    name=blktest mem=${DOMU_MEM:-384} extra=
    ((i > 1)) && name=blktest$i
    ((ndomu > 1)) && extra=" BLKDOMU=$i BLKNDOMU=$ndomu BLKT0=@T0@"
    [ -n "$frames" ] && extra+=" BLKGRANTFRAMES=$frames"
    cfg=domU.cfg; ((i > 1)) && cfg=domU$i.cfg
    disks="'format=raw, vdev=xvda, access=rw, script=$vbd_script, target=/dev/${targets[i - 1]}'"
    if ((i == 1)); then
        case ${BACKEND:-blkback} in
            blkback) ;;
            qdisk) disks="'format=raw, vdev=xvda, access=rw, backendtype=qdisk, target=/dev/vdb'"
                disks+=", 'format=qcow2, vdev=xvdb, access=rw, backendtype=qdisk, target=/var/tmp/vbd1.qcow2'"
                echo "QCOW2_SIZE=$size" >> "$work/payload/run.env" ;;
            *) die "BACKEND=$BACKEND: blkback or qdisk" ;;
        esac
    fi
    # More vbds on the same disk: xen-blkback opens the device without
    # claiming it, and block-simple does no sharing check.
    for ((v = 1; i == 1 && v < nvbd; v++)); do
        disks+=", 'format=raw, vdev=$(xvd_name $v), access=rw, script=$vbd_script, target=/dev/${targets[0]}'"
    done
    cat > "$work/payload/$cfg" <<CFG
type="$DOMU_TYPE"
$([ "$DOMU_TYPE" = hvm ] && printf '%s\n' 'device_model_version="qemu-xen"' 'serial="pty"' 'vga="none"' 'vnc=0')
name="$name"
memory=$mem
vcpus=$vcpus
$( ((pin)) && echo 'cpus="1"')
$([ -n "$frames" ] && echo "max_grant_frames=$frames")
kernel="/run/payload/domU-bzImage"
ramdisk="/run/payload/domU.cpio.gz"
extra="${DOMU_CMDLINE:-console=hvc0 rdinit=/init quiet loglevel=6$extra${DOMU_APPEND:+ $DOMU_APPEND}}"
disk=[$disks]
on_poweroff="destroy"
on_crash="destroy"
CFG
done
chmod +x "$work/payload/block-simple"
tar -C "$work/payload" -cf "$work/payload.tar" .

extra_vbds=()
for ((i = 0; i < ndomu; i++)); do
    truncate -s "$size" "$work/vbd$i.img"
    ((i > 0)) && extra_vbds+=(-drive "file=$work/vbd$i.img,if=none,id=vbd$i,format=raw,cache=unsafe" -device "virtio-blk-pci,drive=vbd$i,VBDOPTS")
done
vbd_opts="physical_block_size=$phys"
[ -n "$min_io" ] && vbd_opts+=",min_io_size=$min_io"
[ -n "$opt_io" ] && vbd_opts+=",opt_io_size=$opt_io"

log="$LOGDIR/$label.log"
extra_vbds=("${extra_vbds[@]//VBDOPTS/$vbd_opts}")
backend="blkback feature_persistent=$persistent"
[ "${BACKEND:-blkback}" = qdisk ] && backend="QEMU's qdisk (raw xvda, qcow2 xvdb)"
log "xen guest '$label': $ndomu $DOMU_TYPE domU(s), $backend, backing disk $vbd_opts, timeout ${timeout}s, log $log"
: > "$log"
relay=$(start_monitor_relay "$log" "$work/monitor.sock")
set +e
cpu=qemu64
case $DOMU_TYPE in pvh | hvm) cpu=qemu64,+svm,+npt ;; esac
timeout --foreground -k 5 "$timeout" qemu-system-x86_64 -accel tcg -cpu $cpu -smp 2 -m 3072 \
    -nographic -monitor "unix:$work/monitor.sock,server,nowait" -serial stdio -no-reboot \
    -kernel "$XEN_ELF" \
    -append "console=com1 com1=115200,8n1 loglvl=all guest_loglvl=all dom0_mem=1024M,max:1024M dom0_max_vcpus=1$( ((pin)) && echo ' dom0_vcpus_pin')" \
    -initrd "$KDIR/arch/x86/boot/bzImage console=hvc0 earlyprintk=xen rdinit=/init quiet loglevel=5,$(dirname "$dom0_img")/dom0-initramfs.cpio.gz" \
    -drive "file=$dom0_img,if=none,id=root,format=raw,snapshot=on" -device virtio-blk-pci,drive=root \
    -drive "file=${VBD0_IMAGE:-$work/vbd0.img},if=none,id=vbd,format=raw,cache=unsafe" -device "virtio-blk-pci,drive=vbd,$vbd_opts" \
    -drive "file=$work/payload.tar,if=none,id=payload,format=raw,readonly=on" -device virtio-blk-pci,drive=payload \
    "${extra_vbds[@]}" \
    < /dev/null >> "$log" 2>&1
rc=$?
set -e
stop_monitor_relay "$relay"
((rc == 124)) && echo "GUEST-TIMEOUT after ${timeout}s" >> "$log"
collect_results "$log" "$label"
guest_exited_cleanly "$log"
