# SPDX-License-Identifier: GPL-2.0
# virtio guest, booted with module.sig_enforce=1 (what
# CONFIG_MODULE_SIG_FORCE sets at build time): a module signed with the
# key the kernel trusts loads and serves its disk; an unsigned one and one
# signed with a key the kernel does not know are refused, each with the
# kernel's own reason. The host signs /lib/modules/virtio_blk_rs.ko with
# `make SIGN_KEY=... SIGN_CERT=...` (the test kernel's build key) and puts
# the two others beside it.
#   GUEST_FILES="unsigned.ko:/lib/modules/virtio_blk_rs-unsigned.ko
#     otherkey.ko:/lib/modules/virtio_blk_rs-otherkey.ko"
#   KO_DIR=<signed> KERNEL_APPEND=module.sig_enforce=1 virtio-guest.sh -d 64M virtio-signing.sh
. /guest/common.sh
expect_eq "the kernel enforces module signatures" "$(cat /sys/module/module/parameters/sig_enforce 2>&1)" Y
# refused NAME FILE REASON: insmod FILE fails, the kernel says REASON.
refused() {
    dmesg_mark "$1"
    if insmod "$2" 2>/dev/null; then
        not_ok "$1: loaded"; rmmod virtio_blk_rs
        return
    fi
    check "$1: refused with 'Loading of $3 is rejected'" sh -c "dmesg | tail -n 5 | grep -q 'Loading of $3 is rejected'"
    check "$1: nothing of it stayed" [ ! -e /sys/module/virtio_blk_rs ]
}
refused "an unsigned module" /lib/modules/virtio_blk_rs-unsigned.ko "unsigned module"
refused "a module signed with a key the kernel does not trust" /lib/modules/virtio_blk_rs-otherkey.ko "module with unavailable key"
check "the signed module loads" insmod /lib/modules/virtio_blk_rs.ko
sleep 1
check "its disk is up" [ -b /dev/vda ]
roundtrip "its disk serves I/O" vda 64k 16 8
expect_eq "its taint flags: out-of-tree, not unsigned" "$(cat /sys/module/virtio_blk_rs/taint 2>&1)" O
check "rmmod virtio_blk_rs" unload virtio_blk_rs
finish
