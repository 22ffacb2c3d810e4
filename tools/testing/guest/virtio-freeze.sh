# SPDX-License-Identifier: GPL-2.0
# virtio guest: a system sleep whose freeze fails must leave the disk
# serving requests. Suspend to idle with /sys/power/pm_test=devices runs
# every driver's freeze and restore without firmware. The module's
# fault-injection file (debugfs virtio_blk_rs/inject, kernels with
# CONFIG_FAULT_INJECTION) makes the next freeze fail where it allocates;
# the suspend is then refused, and I/O must go on (a freeze that stopped
# the disk before it failed would leave every request waiting for a
# restore that never comes). Then a sleep that succeeds, and I/O after it.
#   virtio-guest.sh -d 64M virtio-freeze.sh
. /guest/common.sh
INJECT=/sys/kernel/debug/virtio_blk_rs/inject
# io_works NAME: 1 MiB written to vda and read back, within 30 s.
io_works() {
    dd if=/dev/urandom of=/tmp/freeze-p bs=64k count=16 2>/dev/null
    bounded 30 sh -c 'dd if=/tmp/freeze-p of=/dev/vda bs=64k oflag=direct 2>/dev/null &&
        dd if=/dev/vda of=/tmp/freeze-b bs=64k count=16 iflag=direct 2>/dev/null && cmp -s /tmp/freeze-p /tmp/freeze-b'
    case $? in
        0) ok "$1" ;;
        2) not_ok "$1: I/O still waiting after 30 s"; return 1 ;;
        *) not_ok "$1: I/O failed"; return 1 ;;
    esac
}
# logged MARK NAME TEXT: the kernel said TEXT since MARK.
logged() {
    dmesg_since "$1" > /tmp/freeze-dmesg
    check "$2: '$3'" grep -qF "$3" /tmp/freeze-dmesg
}
check "insmod virtio_blk_rs" insmod /lib/modules/virtio_blk_rs.ko
sleep 1
check "vda present" [ -b /dev/vda ] || exit 1
check "the module's inject file" [ -w $INJECT ] || exit 1
check "pm_test=devices" sh -c "echo devices > /sys/power/pm_test"
io_works "before any sleep, the disk serves I/O"

dmesg_mark freeze-nomem
check "the next freeze's allocation set to fail" sh -c "echo freeze-nomem > $INJECT"
if echo freeze > /sys/power/state 2> /tmp/freeze-err; then
    not_ok "a suspend whose freeze cannot allocate: succeeded"
else
    ok "a suspend whose freeze cannot allocate is refused ($(cat /tmp/freeze-err))"
fi
logged freeze-nomem "the failure named" "freeze: no memory to take the virtqueues back"
io_works "after the refused suspend, the disk serves I/O within 30 s" || exit 1

dmesg_mark freeze-ok
check "a suspend to idle (pm_test devices) with nothing injected" sh -c "echo freeze > /sys/power/state"
logged freeze-ok "the freeze held the disk's requests" "freeze: requests held until the restore"
io_works "after the restore, the disk serves I/O within 30 s" || exit 1
check "rmmod virtio_blk_rs" unload virtio_blk_rs
finish
