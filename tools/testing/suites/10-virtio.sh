#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# virtio_blk_rs on QEMU's virtio-blk-pci. Between them the two virtio-io runs
# cover 512/512, 512/4096 (+ io_min 4K, io_opt 1M) and 4096/4096 disks,
# 1 and 2 queues, ring sizes 128 and 256 (QEMU's seg_max = queue-size - 2);
# each compares with the C driver.
set -uo pipefail
T=$(dirname "$0")/..
. "$T/lib.sh"
RESULTS=${RESULTS:-$CACHE/results.txt}
topo='physical_block_size=4096,min_io_size=4096,opt_io_size=1048576'
GUEST_ENV="SCRIPTS=virtio-io,fio-verify VERIFY_MOD=virtio_blk_rs VERIFY_DISK=vdb EXPECT_VDA_SEGS=126" \
    bash "$T/virtio-guest.sh" -l virtio-io-512-4k -t 900 \
    -d '256M,num-queues=1,queue-size=128' \
    -d "256M,logical_block_size=512,$topo,num-queues=2,queue-size=256" \
    "$T/guest/multi.sh"
GUEST_ENV="EXPECT_VDA_SEGS=254" bash "$T/virtio-guest.sh" -l virtio-io-4k-4k -t 600 \
    -d '256M,num-queues=2,queue-size=256' \
    -d "256M,logical_block_size=4096,$topo,num-queues=1,queue-size=128" \
    "$T/guest/virtio-io.sh"
GUEST_ENV="SCRIPTS=virtio-ringfull,virtio-chained-sg,virtio-batch CHAIN_DISK=vdb BATCH_DISK=vdb" bash "$T/virtio-guest.sh" -l virtio-ringfull \
    -d '128M,queue-size=16,indirect_desc=off,seg-max-adjust=off,num-queues=1' -d '64M,queue-size=1024' "$T/guest/multi.sh"
bash "$T/virtio-guest.sh" -l virtio-resize -d 256M "$T/guest/virtio-resize.sh"
# Signature enforcement (module.sig_enforce=1, as CONFIG_MODULE_SIG_FORCE)
# and the freeze's failure path (suspend to idle, pm_test), in one boot:
# the module signed by `make sign` with the key the test kernel trusts (its
# build key), an unsigned copy and one signed with a key of nobody's.
kdir=${KDIR:-$(bash "$T/build-kernel.sh")}
sig=$(mktemp -d "$CACHE/signing.XXXX")
mkdir "$sig/signed"
cp "$REPO/virtio_blk_rs.ko" "$sig/unsigned.ko"
cp "$REPO/virtio_blk_rs.ko" "$sig/signed/virtio_blk_rs.ko"
cp "$REPO/virtio_blk_rs.ko" "$sig/otherkey.ko"
if openssl req -new -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=blkfront-rs untrusted test key/" \
        -keyout "$sig/other.pem" -out "$sig/other.x509" -outform PEM > "$sig/make.log" 2>&1 &&
    make -s -C "$REPO" sign KDIR="$kdir" SIGN_KEY="$kdir/certs/signing_key.pem" SIGN_CERT="$kdir/certs/signing_key.x509" \
        SIGN_MODULES="$sig/signed/virtio_blk_rs.ko" >> "$sig/make.log" 2>&1 &&
    make -s -C "$REPO" sign KDIR="$kdir" SIGN_KEY="$sig/other.pem" SIGN_CERT="$sig/other.x509" \
        SIGN_MODULES="$sig/otherkey.ko" >> "$sig/make.log" 2>&1; then
    echo "pass virtio-signing: make sign: $(modinfo -F signer "$sig/signed/virtio_blk_rs.ko") / $(modinfo -F signer "$sig/otherkey.ko")" >> "$RESULTS"
    GUEST_FILES="$sig/unsigned.ko:/lib/modules/virtio_blk_rs-unsigned.ko $sig/otherkey.ko:/lib/modules/virtio_blk_rs-otherkey.ko" \
        GUEST_ENV="SCRIPTS=virtio-signing,virtio-freeze" KO_DIR=$sig/signed KERNEL_APPEND=module.sig_enforce=1 \
        bash "$T/virtio-guest.sh" -l virtio-signing -d 64M "$T/guest/multi.sh"
else
    echo "fail virtio-signing: make sign with the test kernel's key and with another (log: $(tail -2 "$sig/make.log" | paste -sd' '))" >> "$RESULTS"
fi
rm -rf "$sig"
# Function level resets under fio verify (reset_prepare/reset_done, the
# freeze/restore code): a q35 guest, the disk behind a PCIe root port.
PCIE=1 bash "$T/virtio-guest.sh" -l virtio-reset -t 600 -d 128M "$T/guest/virtio-reset.sh"
KERNEL_APPEND=kmemleak=on bash "$T/virtio-guest.sh" -l virtio-serial -t 600 -d '64M,num-queues=1' -d '64M,num-queues=2' "$T/guest/virtio-serial.sh"
bash "$T/virtio-guest.sh" -l virtio-unplug -d 128M -d 128M "$T/guest/virtio-unplug.sh"
bash "$T/virtio-guest.sh" -l virtio-badconfig -d 64M -d '64M,physical_block_size=4096,min_io_size=6144' "$T/guest/virtio-badconfig.sh"
# 4 CPUs (the test kernel's NR_CPUS): the second disk, of 8 queues, gets
# one per CPU; then 2 of them polled (io_uring hipri).
SMP=4 GUEST_ENV="SCRIPTS=virtio-4k,virtio-scale,virtio-poll SCALE_DISK=vdb POLL_DISK=vdb POLL_QUEUES=2" bash "$T/virtio-guest.sh" -l virtio-4k-scale \
    -d '128M,logical_block_size=4096,physical_block_size=4096' -d '64M,num-queues=8' "$T/guest/multi.sh"
KERNEL_APPEND=kmemleak=on bash "$T/virtio-guest.sh" -l virtio-kmemleak -t 600 -d 64M -d 64M "$T/guest/virtio-kmemleak.sh"
ro=$(mktemp /tmp/blkfront-ro.XXXX); truncate -s 64M "$ro"
QEMU_EXTRA="-drive file=$ro,if=none,id=dro,format=raw,readonly=on -device virtio-blk-pci,drive=dro" \
    bash "$T/virtio-guest.sh" -l virtio-ro -d 64M "$T/guest/virtio-ro.sh"
rm -f "$ro"
# Honest devices that are merely slow (a throttled disk; a poll queue
# whose task is stopped): no I/O error, ours and C (guest/virtio-benign.sh;
# Documentation/benign.md is made from its lines by benign-table.sh).
bash "$T/virtio-guest.sh" -l virtio-benign -t 600 -d 64M -d '64M,num-queues=2' "$T/guest/virtio-benign.sh"
