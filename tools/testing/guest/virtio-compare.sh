# virtio guest: side-by-side throughput of the C virtio_blk and our
# virtio_blk_rs on the same disk (vda), alternating C/Rust three times so that
# host caching and TCG noise hit both alike. dd only (fio needs SysV IPC).
# Prints "CMP <driver> <job> <MB/s>" lines and a median summary; with a
# usable fio also 4k random reads at queue depth 1 and 32 (MB/s).
. /guest/common.sh
now() { cut -d' ' -f1 /proc/uptime; }
rate() { # driver job bytes cmd...
    local drv=$1 job=$2 bytes=$3 t0 t1; shift 3
    t0=$(now); eval "$@"; t1=$(now)
    awk -v d="$drv" -v j="$job" -v b="$bytes" -v a="$t0" -v z="$t1" \
        'BEGIN { t = z - a; if (t <= 0) t = 0.01; printf "CMP %s %s %.1f\n", d, j, b / t / 1e6 }' | tee -a /tmp/cmp
}
jobs() { # driver
    local d=$1
    # Prime: read the whole test area once (host page cache, guest none).
    dd if=/dev/vda of=/dev/null bs=1M count=96 iflag=direct 2>/dev/null
    rate $d read-4k-qd1 8192000 'dd if=/dev/vda of=/dev/null bs=4k count=2000 iflag=direct 2>/dev/null'
    rate $d read-4k-8jobs 16384000 'for i in 0 1 2 3 4 5 6 7; do dd if=/dev/vda of=/dev/null bs=4k count=500 skip=$((i * 2500)) iflag=direct 2>/dev/null & done; wait'
    rate $d read-1m 67108864 'dd if=/dev/vda of=/dev/null bs=1M count=64 iflag=direct 2>/dev/null'
    rate $d write-1m 67108864 'dd if=/dev/zero of=/dev/vda bs=1M count=64 seek=16 oflag=direct 2>/dev/null'
    rate $d write-64k-4jobs 33554432 'for i in 0 1 2 3; do dd if=/dev/zero of=/dev/vda bs=64k count=128 seek=$((2048 + i * 128)) oflag=direct 2>/dev/null & done; wait'
    if [ -n "$FIO" ]; then
        for qd in 1 32; do
            bw=$($FIO --thread --name=r --filename=/dev/vda --direct=1 --rw=randread --bs=4k --size=96M \
                --ioengine=libaio --iodepth=$qd --runtime=4 --time_based --output-format=terse --terse-version=3 2>/dev/null | cut -d';' -f7)
            echo "CMP $d fio-randread-4k-qd$qd $(awk -v b="$bw" 'BEGIN { printf "%.1f", b * 1024 / 1e6 }')" | tee -a /tmp/cmp
        done
    fi
}
FIO=$(command -v fio)
if [ -n "$FIO" ] && ! $FIO --thread --name=probe --filename=/tmp/fio.probe --size=64k --rw=write >/dev/null 2>&1; then FIO=; fi
dd if=/dev/urandom of=/tmp/seed bs=1M count=8 2>/dev/null
for round in 1 2 3; do
    if insmod /lib/modules/virtio_blk.ko; then
        sleep 0.5; [ $round = 1 ] && for k in 0 1 2 3 4 5 6 7 8 9 10 11; do dd if=/tmp/seed of=/dev/vda bs=1M seek=$((k * 8)) oflag=direct 2>/dev/null; done
        jobs C; rmmod virtio_blk
    else not_ok "insmod virtio_blk (C)"; fi
    if insmod /lib/modules/virtio_blk_rs.ko; then
        sleep 0.5; jobs RS; rmmod virtio_blk_rs
    else not_ok "insmod virtio_blk_rs"; fi
done
echo "SUMMARY (median of 3, MB/s):"
for j in read-4k-qd1 read-4k-8jobs read-1m write-1m write-64k-4jobs fio-randread-4k-qd1 fio-randread-4k-qd32; do
    grep -q "^CMP C $j " /tmp/cmp || continue
    c=$(grep "^CMP C $j " /tmp/cmp | cut -d' ' -f4 | sort -n | sed -n 2p)
    r=$(grep "^CMP RS $j " /tmp/cmp | cut -d' ' -f4 | sort -n | sed -n 2p)
    awk -v j="$j" -v c="$c" -v r="$r" 'BEGIN { printf "SUMMARY %-16s C %8.1f  Rust %8.1f  ratio %.2f\n", j, c, r, (c > 0 ? r / c : 0) }'
done
dmesg | grep -E 'removed: [0-9]+ requests' | tail -3
check "no warnings/oopses" sh -c "! dmesg | grep -E 'WARNING:|BUG:|Oops'"
finish
