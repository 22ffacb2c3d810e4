# SPDX-License-Identifier: GPL-2.0
# virtio guest: virtio_blk_rs end to end. Expects two disks:
#   vda: 512-byte logical and physical blocks (any queue count / ring size)
#   vdb: physical_block_size=4096,min_io_size=4096,opt_io_size=1048576
#        (logical 512 or 4096)
# Optional GUEST_ENV: EXPECT_VDA_SEGS (vda max_segments), EXPECT_ROTA.
# Checks: KUnit suite, limits in sysfs, data integrity (dd + fio verify),
# flush, discard, write-zeroes, batching counters, clean rmmod, and the
# C driver's limits, geometry and cache type beside ours. No throughput:
# that is the benchmark's (tools/testing/bench/seeds.sh --exp virtio).
# Environment (optional): VBLK_PARAMS (module parameters for insmod).
. /guest/common.sh

FIO=$(command -v fio)
# fio needs SysV shared memory (CONFIG_SYSVIPC); without it, dd fallbacks.
if [ -n "$FIO" ] && ! $FIO --thread --name=probe --filename=/tmp/fio.probe --size=64k --rw=write >/dev/null 2>&1; then
    echo "NOTE: fio unusable here (no SysV IPC in this kernel?): dd fallbacks"
    FIO=
fi

# par N CMD...: runs N copies of CMD (with $i = copy index) in parallel, waits.
par() {
    local n=$1 i; shift
    for i in $(seq 0 $((n - 1))); do eval "$*" & done
    wait
}

# fio_run NAME ARGS...: prints bandwidth lines, fails the check on error.
fio_run() {
    local name=$1; shift
    if [ -z "$FIO" ]; then ok "fio $name # SKIP fio unusable"; return; fi
    if $FIO --thread --name="$name" --output-format=terse --terse-version=3 "$@" > /tmp/fio.out 2>&1; then
        # terse v3: field 7 read BW KiB/s, 48 write BW KiB/s, 8 read IOPS, 49 write IOPS
        awk -F';' -v n="$name" '{ printf "FIO %s: read %s KiB/s (%s IOPS) write %s KiB/s (%s IOPS)\n", n, $7, $8, $48, $49 }' /tmp/fio.out
        ok "fio $name"
    else
        cat /tmp/fio.out
        not_ok "fio $name"
    fi
}

# zeros DEV OFFSET_MB LEN_MB: true if the range reads back as zeroes.
zeros() {
    local n
    n=$(dd if=/dev/$1 bs=1M skip=$2 count=$3 iflag=direct 2>/dev/null | tr -d '\000' | wc -c)
    [ "$n" = 0 ]
}

# pattern DEV OFFSET_MB LEN_MB: writes random data there.
pattern() {
    dd if=/dev/urandom of=/tmp/pat bs=1M count=$3 2>/dev/null
    dd if=/tmp/pat of=/dev/$1 bs=1M seek=$2 oflag=direct conv=fsync 2>/dev/null
}

# The queue limits that both drivers must agree on, one "attr value" a line.
LIMIT_ATTRS="logical_block_size physical_block_size minimum_io_size optimal_io_size
    max_segments max_segment_size max_hw_sectors_kb discard_granularity
    discard_max_hw_bytes write_zeroes_max_bytes rotational write_cache"
save_limits() { # dev
    for a in $LIMIT_ATTRS; do echo "$a $(q $1 $a)"; done
    echo "alignment_offset $(cat /sys/block/$1/alignment_offset)"
    echo "ro $(cat /sys/block/$1/ro)"
}

# cache_type DEV: "<mode> <permissions>" of /sys/block/DEV/cache_type.
cache_type_of() { echo "$(cat /sys/block/$1/cache_type) $(stat -c %a /sys/block/$1/cache_type)"; }
c_baseline() {
    # The C driver on the same disks: what ours must report alike.
    # virtio-guest.sh copies it from the kernel tree when it was built.
    if [ ! -f /lib/modules/virtio_blk.ko ]; then
        ok "C baseline # SKIP no /lib/modules/virtio_blk.ko in this guest"
    elif check "insmod virtio_blk (C baseline)" insmod /lib/modules/virtio_blk.ko; then
        sleep 1
        topology_line vdb | sed 's/^TOPOLOGY/C-TOPOLOGY/'
        for d in vda vdb; do save_limits $d > /tmp/c-limits-$d; done
        fdisk -l /dev/vda 2>/dev/null | grep -E 'heads' > /tmp/c-geo
        echo "C-GEOMETRY vda: $(cat /tmp/c-geo)"
        for m in /sys/block/vda/mq/*; do echo "C-MQ vda hctx $(basename $m): cpus $(cat $m/cpu_list)"; done
        cache_type_of vda > /tmp/c-cache-type
        check "rmmod virtio_blk (C)" rmmod virtio_blk
    fi
}

if [ "${SKIP_C:-0}" = 1 ]; then ok "C baseline # SKIP SKIP_C=1"; else c_baseline; fi

if insmod /lib/modules/virtio_blk_rs.ko ${VBLK_PARAMS:-}; then ok "insmod virtio_blk_rs ${VBLK_PARAMS:-}"; else not_ok "insmod virtio_blk_rs"; fi
sleep 1
ktap virtio_blk_rs
dmesg | grep -E 'virtio_blk_rs|virtio[0-9]+: \[vd' | tail -12

for d in vda vdb; do
    if [ -b /dev/$d ]; then ok "/dev/$d exists"; topology_line $d; else not_ok "/dev/$d exists"; fi
done

# Same disks, same limits as the C driver (when it ran first in this boot).
for d in vda vdb; do
    [ -f /tmp/c-limits-$d ] || continue
    save_limits $d > /tmp/rs-limits-$d
    diffs=$(diff /tmp/c-limits-$d /tmp/rs-limits-$d | sed -n 's/^[-+]//p' | grep -v '^--' | tr '\n' ' ')
    if [ -z "$diffs" ]; then
        ok "$d: queue limits equal the C driver's ($(tr '\n' ' ' < /tmp/rs-limits-$d))"
    else
        not_ok "$d: queue limits differ from the C driver's (C then ours: $diffs)"
    fi
done

# cache_type as upstream's: QEMU offers CONFIG_WCE, so it is writable; the
# device's mode and the live queue's write cache follow what is written.
if [ -f /tmp/c-cache-type ]; then
    expect_eq "vda cache_type and its permissions as the C driver's" "$(cache_type_of vda)" "$(cat /tmp/c-cache-type)"
fi
expect_eq "vda cache_type (QEMU cache=unsafe: write back, CONFIG_WCE: 644)" "$(cache_type_of vda)" "write back 644"
check "vda: write 'write through' to cache_type" sh -c 'echo "write through" > /sys/block/vda/cache_type'
expect_eq "vda cache_type after the write" "$(cat /sys/block/vda/cache_type)" "write through"
expect_eq "vda queue write_cache follows" "$(q vda write_cache)" "write through"
roundtrip "vda: data round trip in write-through mode" vda 64k 16 200
check "vda: cache_type rejects a bad mode" sh -c '! echo "write sideways" > /sys/block/vda/cache_type'
check "vda: write 'write back' to cache_type" sh -c 'echo "write back" > /sys/block/vda/cache_type'
expect_eq "vda queue write_cache back to write back" "$(q vda write_cache)" "write back"

# Limits (vdb has the explicit topology).
expect_eq "vda logical_block_size" "$(q vda logical_block_size)" 512
expect_eq "vda physical_block_size" "$(q vda physical_block_size)" 512
expect_eq "vdb physical_block_size" "$(q vdb physical_block_size)" 4096
expect_eq "vdb minimum_io_size" "$(q vdb minimum_io_size)" 4096
expect_eq "vdb optimal_io_size" "$(q vdb optimal_io_size)" 1048576
expect_eq "vda rotational (upstream default)" "$(q vda rotational)" "${EXPECT_ROTA:-1}"
# QEMU's seg_max is queue-size - 2 (254 for the default 256; 126 for 128);
# a suite can pin it with GUEST_ENV="EXPECT_VDA_SEGS=N".
if [ -n "${EXPECT_VDA_SEGS:-}" ]; then
    expect_eq "vda max_segments" "$(q vda max_segments)" "$EXPECT_VDA_SEGS"
else
    segs=$(q vda max_segments)
    check "vda max_segments in 1..256 ($segs)" [ "$segs" -ge 1 -a "$segs" -le 256 ]
fi
echo "LIMITS vda: write_cache=$(q vda write_cache) discard_granularity=$(q vda discard_granularity) discard_max_hw_bytes=$(q vda discard_max_hw_bytes) write_zeroes_max_bytes=$(q vda write_zeroes_max_bytes) max_discard_segments=$(q vda max_discard_segments) nr_requests=$(q vda nr_requests) max_segment_size=$(q vda max_segment_size)"
check "vda discard supported" [ "$(q vda discard_max_hw_bytes)" != 0 ]
check "vda write-zeroes supported" [ "$(q vda write_zeroes_max_bytes)" != 0 ]
check "vda write cache (QEMU default writeback)" [ "$(q vda write_cache)" = "write back" ]
echo "MQ vda: $(ls /sys/block/vda/mq | wc -l) hardware queues"
for m in /sys/block/vda/mq/*; do echo "MQ vda hctx $(basename $m): cpus $(cat $m/cpu_list)"; done
grep -E "req\.[0-9]" /proc/interrupts | head -4
[ -r /sys/block/vda/serial ] && echo "SERIAL vda: $(cat /sys/block/vda/serial)"
expect_eq "vda serial (QEMU serial=rsdisk0)" "$(cat /sys/block/vda/serial 2>/dev/null)" rsdisk0
geo=$(fdisk -l /dev/vda 2>/dev/null | grep -E 'heads')
echo "GEOMETRY vda (HDIO_GETGEO): $geo"
[ -s /tmp/c-geo ] && expect_eq "vda geometry same as the C driver's" "$geo" "$(cat /tmp/c-geo)"

# Data: dd with O_DIRECT, 4 MiB at 1 MiB offset, both disks.
for d in vda vdb; do
    roundtrip "$d: 4 MiB O_DIRECT write/read back identical" $d 1M 4 1
done
# Buffered path + flush (fsync on the block device sends REQ_OP_FLUSH).
dd if=/dev/urandom of=/tmp/p bs=64k count=16 2>/dev/null
check "vda: buffered write + fsync" dd if=/tmp/p of=/dev/vda bs=64k seek=200 conv=fsync 2>/dev/null
echo 3 > /proc/sys/vm/drop_caches
dd if=/dev/vda of=/tmp/b bs=64k skip=200 count=16 2>/dev/null
check "vda: buffered data back after drop_caches" cmp -s /tmp/p /tmp/b

# fio with verification (crc32c), random 4k..64k, queue depth 16, both disks.
fio_run verify-vda --filename=/dev/vda --direct=1 --rw=randwrite --bsrange=4k-64k \
    --size=48M --ioengine=libaio --iodepth=16 --verify=crc32c --verify_fatal=1 --do_verify=1
fio_run verify-vdb --filename=/dev/vdb --direct=1 --rw=randwrite --bsrange=4k-256k \
    --size=48M --ioengine=libaio --iodepth=16 --verify=crc32c --verify_fatal=1 --do_verify=1

# Larger integrity check without fio: 32 MiB random, 64k O_DIRECT writes, 4
# parallel readers of disjoint quarters compared against the source.
dd if=/dev/urandom of=/tmp/big bs=1M count=32 2>/dev/null
dd if=/tmp/big of=/dev/vdb bs=64k seek=1024 oflag=direct 2>/dev/null
par 4 'dd if=/dev/vdb of=/tmp/q$i bs=64k skip=$((1024 + i * 128)) count=128 iflag=direct 2>/dev/null'
cat /tmp/q0 /tmp/q1 /tmp/q2 /tmp/q3 > /tmp/bigback
check "vdb: 32 MiB written, read back by 4 parallel readers, identical" cmp -s /tmp/big /tmp/bigback
rm -f /tmp/big /tmp/bigback /tmp/q?

# Discard (BLKDISCARD): QEMU's drive has discard=unmap, so the range reads back as zeroes.
pattern vda 100 4
if zeros vda 100 4; then not_ok "vda: pattern written before discard"; else ok "vda: pattern written before discard"; fi
if blkdiscard -o $((100 * 1048576)) -l $((4 * 1048576)) /dev/vda; then ok "blkdiscard 4 MiB"; else not_ok "blkdiscard 4 MiB"; fi
check "vda: discarded range reads back as zeroes" zeros vda 100 4

# Write zeroes: fallocate(PUNCH_HOLE|KEEP_SIZE) on a block device issues
# REQ_OP_WRITE_ZEROES (unmap); fio's falloc engine does that for trims.
pattern vda 116 8
if [ -n "$FIO" ]; then
    fio_run wzeroes --filename=/dev/vda --ioengine=falloc --rw=trim --bs=1M --offset=120M --size=4M
elif [ -x /usr/sbin/blkdiscard ] || [ -x /sbin/blkdiscard.util-linux ]; then
    # util-linux blkdiscard -z: BLKZEROOUT (busybox's has no -z).
    BD=/usr/sbin/blkdiscard; [ -x $BD ] || BD=/sbin/blkdiscard.util-linux
    check "blkdiscard -z (BLKZEROOUT) 4 MiB" $BD -z -o $((120 * 1048576)) -l $((4 * 1048576)) /dev/vda
else
    ok "write-zeroes # SKIP neither usable fio nor util-linux blkdiscard in the guest"
fi
check "vda: write-zeroes range reads back as zeroes" zeros vda 120 4
if zeros vda 116 4; then not_ok "vda: data before the zeroed range intact"; else ok "vda: data before the zeroed range intact"; fi

# Batching: 8 parallel direct readers.
# Each reader's 2000 KiB region is written first; every reader must exit 0
# and return exactly that.
rm -f /tmp/pr? /tmp/pd? /tmp/prc?
for i in 0 1 2 3 4 5 6 7; do
    dd if=/dev/urandom of=/tmp/pr$i bs=4k count=500 2>/dev/null
    dd if=/tmp/pr$i of=/dev/vda bs=4k seek=$((i * 4000)) oflag=direct 2>/dev/null
done
par 8 'dd if=/dev/vda of=/tmp/pd$i bs=4k count=500 skip=$((i * 4000)) iflag=direct 2>/dev/null; echo $? > /tmp/prc$i'
bad=0
for i in 0 1 2 3 4 5 6 7; do
    [ "$(cat /tmp/prc$i 2>/dev/null)" = 0 ] && cmp -s /tmp/pr$i /tmp/pd$i || bad=$((bad + 1))
done
expect_eq "8 parallel direct readers: readers failing or reading wrong data" "$bad" 0
rm -f /tmp/pr? /tmp/pd? /tmp/prc?
# Batching: many small requests submitted at once (io_submit batches).
fio_run rs-batch --filename=/dev/vda --direct=1 --rw=randread --bs=4k --size=32M \
    --ioengine=libaio --iodepth=32 --iodepth_batch_submit=16 --iodepth_batch_complete_min=8 \
    --runtime=5 --time_based

check "rmmod virtio_blk_rs" rmmod virtio_blk_rs
dmesg | grep -E 'removed: [0-9]+ requests' | tail -4
check "no warnings/oopses" sh -c "! dmesg | grep -E 'WARNING:|BUG:|Oops|general protection|refcount_t'"
check "disks gone after rmmod" sh -c '[ ! -e /sys/block/vda ] && [ ! -e /sys/block/vdb ]'
# Reload with parameters (also: no leaked state from the first load).
check "insmod num_request_queues=1 queue_depth=64 rotational=0" \
    insmod /lib/modules/virtio_blk_rs.ko num_request_queues=1 queue_depth=64 rotational=0
sleep 1
check "vda back after reload" [ -b /dev/vda ]
expect_eq "vda hardware queues with num_request_queues=1" "$(ls /sys/block/vda/mq | wc -l)" 1
expect_eq "vda nr_requests with queue_depth=64" "$(q vda nr_requests)" 64
expect_eq "vda rotational with rotational=0" "$(q vda rotational)" 0
roundtrip "vda: data round trip with 1 queue" vda 64k 16 300
# The parameters are in sysfs with upstream's permissions (ours: 0444) and
# show what the module runs with.
P=/sys/module/virtio_blk_rs/parameters
params=$(for f in get_id_timeout_ms num_request_queues poll_queues queue_depth rotational; do
    printf '%s=%s:%s ' $f "$(stat -c %a $P/$f 2>/dev/null)" "$(cat $P/$f 2>/dev/null)"; done)
expect_eq "parameters in sysfs (permissions:value)" "$params" \
    "get_id_timeout_ms=444:5000 num_request_queues=644:1 poll_queues=644:0 queue_depth=444:64 rotational=444:0 "
check "rmmod again" rmmod virtio_blk_rs

# Leaks (coarse; virtio-kmemleak.sh is the precise check): each probe
# allocates ~4.5 MiB per disk (tag set requests with their scatterlists), so
# a leaked tag set costs ~90 MiB over 10 load/unload cycles of 2 disks.
# Two warm-up cycles first (one-time allocations, slab caches growing).
memfree() { sync; echo 3 > /proc/sys/vm/drop_caches; sed -n 's/^MemFree: *\([0-9]*\) kB/\1/p' /proc/meminfo; }
# cycle: one load, read, unload; cycles_failed counts failed loads and unloads.
cycles_failed=0
cycle() {
    if insmod /lib/modules/virtio_blk_rs.ko; then
        sleep 0.3
        dd if=/dev/vda of=/dev/null bs=1M count=4 2>/dev/null
        unload virtio_blk_rs || cycles_failed=$((cycles_failed + 1))
    else
        cycles_failed=$((cycles_failed + 1))
    fi
}
cycle; cycle
m0=$(memfree)
for i in 1 2 3 4 5 6 7 8 9 10; do cycle; done
m1=$(memfree)
echo "LEAK-CHECK MemFree before ${m0} kB, after 10 load/unload cycles ${m1} kB"
expect_eq "load/unload cycles: failed insmods and rmmods (12 cycles)" "$cycles_failed" 0
# MemFree moves by up to ~30 MiB after the fio runs above (seen with no leak:
# kmemleak clean, Slab flat); a leaked tag set would cost ~90 MiB.
check "no tag-set-sized loss over 10 load/unload cycles (< 40 MiB)" [ $((m0 - m1)) -lt 40960 ]
finish
