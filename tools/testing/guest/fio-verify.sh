# SPDX-License-Identifier: GPL-2.0
# Data integrity under fio, as the driver issues ask: 256 MiB of random
# writes (4 KiB..256 KiB) verified with crc32c, at queue depth 1 and 32.
# GUEST_ENV: VERIFY_MOD (our module), VERIFY_DISK (the disk it binds),
# VERIFY_SIZE (fio's --size, default 256M; the debug kernel's boots use
# less: under KASAN and TCG 256 MiB at two depths takes five minutes),
# VERIFY_LOADS (the module loads to verify in turn, comma-separated, each
# its parameters joined by '+', '-' for none; default one load, '-': e.g.
# "-,feature_persistent=0" runs both Xen grant modes on a backend with
# persistent grants).
. /guest/common.sh
MOD=${VERIFY_MOD:?} D=${VERIFY_DISK:?} SIZE=${VERIFY_SIZE:-256M}
for load in $(echo "${VERIFY_LOADS:--}" | tr , ' '); do
    params=
    [ "$load" = - ] || params=$(echo "$load" | tr + ' ')
    check "insmod $MOD $params" insmod "/lib/modules/$MOD.ko" $params
    for i in $(seq 1 40); do [ -b "/dev/$D" ] && break; sleep 0.25; done
    [ -b "/dev/$D" ] || { not_ok "/dev/$D appears ($load)"; finish; exit; }
    for qd in 1 32; do fio_verify "$params" "$D" "$SIZE" $qd; done
    unbind_vbds "$MOD"
    check "rmmod $MOD" unload "$MOD"
done
finish
