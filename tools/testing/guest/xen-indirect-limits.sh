# SPDX-License-Identifier: GPL-2.0
# Xen domU: the queue limits that max_indirect_segments implies, against a
# blkback offering 256: 11 or less means no indirect descriptors (11 direct
# segments, 44 KiB requests), otherwise min(backend, parameter) segments of
# 4 KiB each. Data checked at each setting.
# suites/20-xen.sh runs it right after xen-mq.sh (4-page rings, 2 queues):
# the reconnect with single-page rings must remove the earlier
# ring-page-order key, or blkback maps stale ring references and the writes
# hang.
. /guest/common.sh
D=xvda
for segs in 11 256; do
    check "insmod max_indirect_segments=$segs" insmod /lib/modules/xen_blkfront_rs.ko max_indirect_segments=$segs
    for i in $(seq 1 40); do [ -e /sys/block/$D ] && break; sleep 0.25; done
    expect_eq "max_indirect_segments=$segs: max_segments" "$(q $D max_segments)" $segs
    expect_eq "max_indirect_segments=$segs: max_hw_sectors_kb" "$(q $D max_hw_sectors_kb)" $((segs * 4))
    dmesg | grep "blkfront: $D:" | tail -1
    roundtrip "max_indirect_segments=$segs: 4 MiB of 1 MiB writes read back" $D 1M 4 8
    # Largest requests from user buffers that are 512-aligned, not page
    # aligned: every 4 KiB of data straddles two pages, so each request
    # uses more frames than whole pages. (A segment that crosses a page
    # needs physically adjacent pages, which user buffers rarely have;
    # seg_boundary_mask rules it out and is checked on the host.)
    if fio --name=unal --filename=/dev/$D --direct=1 --ioengine=psync --rw=write \
        --bs=$((segs * 4))k --size=4M --offset=32M --iomem_align=512 \
        --verify=md5 --do_verify=1 --verify_fatal=1 > /tmp/fio.out 2>&1; then
        ok "max_indirect_segments=$segs: $((segs * 4)) KiB writes from unaligned buffers verified"
    else
        not_ok "max_indirect_segments=$segs: $((segs * 4)) KiB writes from unaligned buffers verified"
        grep -iE "error|verify" /tmp/fio.out | head -5
        dmesg | tail -5
    fi
    # Sub-page writes the block layer merges into one request: their bios
    # share pages, and the runs contiguous in one page must take one
    # segment, as blk_rq_map_sg merges them for xen-blkfront. Without
    # persistent grants each segment is a new grant, so the merge shows as
    # fewer grants than bios (2048 writes and 2048 verify reads); with
    # persistent grants they are reused and the count says nothing more.
    merged() { awk '{print $2 + $6}' /sys/block/$D/stat; }
    granted() { sed -n 's/^grants_granted: //p' /sys/kernel/debug/xen_blkfront_rs-$D/stats; }
    m0=$(merged) g0=$(granted)
    fio --name=merge --filename=/dev/$D --direct=1 --ioengine=libaio --rw=write \
        --bs=512 --size=1M --offset=48M --iodepth=32 --iodepth_batch_submit=32 \
        --iodepth_batch_complete_min=32 \
        --verify=crc32c --do_verify=1 --verify_fatal=1 > /tmp/fio.out 2>&1
    rc=$? merges=$(($(merged) - m0)) grants=$(($(granted) - g0))
    check "max_indirect_segments=$segs: 512-byte writes at QD32 verified (fio exit $rc), $merges merged into other requests, $grants grants for 4096 bios" \
        [ "$rc" = 0 -a "$merges" -gt 0 -a "$grants" -lt 4096 ]
    [ "$rc" = 0 ] || grep -iE "error|verify" /tmp/fio.out | head -5
    unbind_vbds
    check "rmmod (max_indirect_segments=$segs)" unload xen_blkfront_rs
done
finish
