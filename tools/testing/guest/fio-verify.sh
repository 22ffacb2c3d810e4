# Data integrity under fio, as the driver issues ask: 256 MiB of random
# writes (4 KiB..256 KiB) verified with crc32c, at queue depth 1 and 32.
# GUEST_ENV: VERIFY_MOD (our module), VERIFY_DISK (the disk it binds),
# VERIFY_SIZE (fio's --size, default 256M; the debug kernel's boots use
# less: under KASAN and TCG 256 MiB at two depths takes five minutes).
. /guest/common.sh
MOD=${VERIFY_MOD:?} D=${VERIFY_DISK:?} SIZE=${VERIFY_SIZE:-256M}
check "insmod $MOD" insmod "/lib/modules/$MOD.ko"
for i in $(seq 1 40); do [ -b "/dev/$D" ] && break; sleep 0.25; done
[ -b "/dev/$D" ] || { not_ok "/dev/$D appears"; finish; exit; }
for qd in 1 32; do fio_verify "" "$D" "$SIZE" $qd; done
unbind_vbds "$MOD"
check "rmmod $MOD" unload "$MOD"
finish
