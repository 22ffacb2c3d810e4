# Data integrity under fio, as the driver issues ask: 256 MiB of random
# writes (4 KiB..256 KiB) verified with crc32c, at queue depth 1 and 32.
# GUEST_ENV: VERIFY_MOD (our module), VERIFY_DISK (the disk it binds),
# VERIFY_SIZE (fio's --size, default 256M; the debug kernel's boots use
# less: under KASAN and TCG 256 MiB at two depths takes five minutes).
. /guest/common.sh
MOD=${VERIFY_MOD:?} D=${VERIFY_DISK:?} SIZE=${VERIFY_SIZE:-256M}
# fio_clean RC ERRS: fio exited 0 and every job reported err=0 (ERRS is the
# sorted set of err= values, "0 " when all are 0; empty when fio printed none).
fio_clean() { [ "$1" = 0 ] && [ "$2" = "0 " ]; }
check "insmod $MOD" insmod "/lib/modules/$MOD.ko"
for i in $(seq 1 40); do [ -b "/dev/$D" ] && break; sleep 0.25; done
[ -b "/dev/$D" ] || { not_ok "/dev/$D appears"; finish; exit; }
for qd in 1 32; do
    engine=libaio; [ $qd = 1 ] && engine=psync
    out=$(fio --name=verify-qd$qd --filename=/dev/$D --direct=1 --rw=randwrite \
        --bsrange=4k-256k --size=$SIZE --ioengine=$engine --iodepth=$qd \
        --verify=crc32c --do_verify=1 --verify_fatal=1 --randrepeat=0 2>&1)
    rc=$?
    echo "$out" | grep -E "^ *(READ|WRITE):|err=|verify:" | sed "s/^ */FIO qd$qd: /"
    errs=$(echo "$out" | sed -n 's/.*err= *\([0-9]*\).*/\1/p' | sort -u | tr '\n' ' ')
    check "fio crc32c verify, $SIZE random writes, QD$qd: exit $rc, err=${errs:-none}" \
        fio_clean "$rc" "$errs"
done
unbind_vbds "$MOD"
check "rmmod $MOD" unload "$MOD"
finish
