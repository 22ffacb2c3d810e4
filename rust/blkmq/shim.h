/* SPDX-License-Identifier: GPL-2.0 */
/*
 * C shims for rust/blkmq: what Rust cannot call directly.
 *
 * blk_mq_alloc_disk() is a macro (it defines a static lock class per call
 * site) and block_device_operations needs .owner = THIS_MODULE. The
 * blk_status_t / blk_features_t values are macros with sparse casts that
 * bindgen cannot evaluate: they are restated here and checked against the
 * kernel's with static_assert in shim.c.
 *
 * Only forward declarations: bindgen emits opaque types, the Rust side
 * converts to and from kernel::bindings pointers at the boundary.
 */
#ifndef BLKFRONT_RS_BLKMQ_SHIM_H
#define BLKFRONT_RS_BLKMQ_SHIM_H
#include <linux/types.h>

struct blk_mq_tag_set;
struct queue_limits;
struct gendisk;
struct device;
struct request;
struct bio;
struct page;
struct blkfront_rs_bio_requeue;

/* Longest serial kept for /sys/block/<disk>/serial. */
#define BLKFRONT_RS_SERIAL_MAX 31

#define BLKFRONT_RS_BLK_STS_OK 0
#define BLKFRONT_RS_BLK_STS_NOTSUPP 1
#define BLKFRONT_RS_BLK_STS_RESOURCE 9
#define BLKFRONT_RS_BLK_STS_IOERR 10
#define BLKFRONT_RS_BLK_STS_DEV_RESOURCE 13

#define BLKFRONT_RS_BLK_FEAT_WRITE_CACHE 1u
#define BLKFRONT_RS_BLK_FEAT_FUA 2u
#define BLKFRONT_RS_BLK_FEAT_ROTATIONAL 4u

/*
 * Allocates a disk for @set with @lim, @queuedata as queue->queuedata, the
 * module's block_device_operations (owner, getgeo, free_disk) and a small
 * private area for the geometry. Returns an ERR_PTR on failure.
 */
struct gendisk *blkfront_rs_blkmq_alloc_disk(struct blk_mq_tag_set *set,
					     struct queue_limits *lim,
					     void *queuedata);
/*
 * Drop the allocation reference of a disk from blkfront_rs_blkmq_alloc_disk
 * (after del_gendisk if it was added); frees the private area of a disk
 * that was never added (the block layer calls ->free_disk only for added ones).
 */
void blkfront_rs_blkmq_put_disk(struct gendisk *disk, bool added);
/* CHS geometry reported by HDIO_GETGEO; without it, sd-like defaults. */
/* get_disk_ro() is a static inline. */
bool blkfront_rs_blkmq_get_disk_ro(struct gendisk *disk);
void blkfront_rs_blkmq_set_geometry(struct gendisk *disk, u16 cylinders,
				    u8 heads, u8 sectors);
/* HDIO_GETGEO as xen-blkfront: 255 heads, 63 sectors, cylinders from the capacity. */
void blkfront_rs_blkmq_set_xen_geometry(struct gendisk *disk);
/*
 * HDIO_GETGEO asks @read(@ctx, ...) at each call, as virtio_blk reads the
 * device's config. blkfront_rs_blkmq_forget_geometry() (before @ctx goes)
 * makes later calls fail with -ENXIO, waiting for one in progress.
 */
typedef void (*blkfront_rs_geometry_fn)(void *ctx, u16 *cylinders, u8 *heads, u8 *sectors);
void blkfront_rs_blkmq_set_geometry_source(struct gendisk *disk, blkfront_rs_geometry_fn read,
					   void *ctx);
void blkfront_rs_blkmq_forget_geometry(struct gendisk *disk);
/*
 * ioctl as xen-blkfront's blkif_ioctl: CDROMMULTISESSION (zeros) and
 * CDROM_GET_CAPABILITY (0 for a CD-ROM, else -EINVAL); others -EINVAL.
 * Disks without it answer -ENOTTY to every ioctl the block layer passes on.
 */
void blkfront_rs_blkmq_set_xen_ioctls(struct gendisk *disk, bool cdrom);
/* GENHD_FL_REMOVABLE (/sys/block/<disk>/removable = 1); set before add. */
void blkfront_rs_blkmq_set_removable(struct gendisk *disk);
/* Serial shown in /sys/block/<disk>/serial (hidden while empty); set before add. */
void blkfront_rs_blkmq_set_serial(struct gendisk *disk, const char *serial, size_t len);
/* One more attribute group for the disk (a `const struct attribute_group *`
 * from a bus abstraction's shim, static); before add. */
void blkfront_rs_blkmq_set_attr_group(struct gendisk *disk, const void *group);
/* device_add_disk() with our attribute groups (serial, and the one above). */
int blkfront_rs_blkmq_add_disk(struct device *parent, struct gendisk *disk);
/*
 * A feature the device withdrew at run time (it refused a request):
 * withdraw() takes it off the live queue limits of @disk, from any context.
 * Discard and secure erase stop at once (blk_queue_disable_discard() and
 * blk_queue_disable_secure_erase(), as xen-blkfront does in its interrupt
 * handler); then, as for the write cache (and FUA), a work item updates the
 * limits in process context (the limits lock sleeps), so that no later
 * update brings the feature back. put_disk() waits for that work.
 */
#define BLKFRONT_RS_WITHDRAW_DISCARD 1u
#define BLKFRONT_RS_WITHDRAW_WRITE_CACHE 2u
void blkfront_rs_blkmq_withdraw(struct gendisk *disk, unsigned int what);
/* queue_limits_start_update() is a static inline. */
void blkfront_rs_blkmq_limits_start_update(struct gendisk *disk,
					   struct queue_limits *lim);

/*
 * Requests sent again as their bios (nvme multipath's failover does the
 * same): a request built under limits the device no longer has gives its
 * bios up (blk_steal_bios) and ends without data; a work item submits the
 * bios again, in process context, where the block layer splits them to the
 * queue's current limits. One per disk.
 *
 * alloc: NULL without memory. requeue_rq: takes @rq's bios, ends @rq with
 * BLK_STS_OK (its bios are not completed: they go on), schedules the
 * work; any context. flush: waits until every bio queued so far was
 * submitted; sleeps. free: flush, then free.
 */
struct blkfront_rs_bio_requeue *blkfront_rs_bio_requeue_alloc(void);
void blkfront_rs_bio_requeue_rq(struct blkfront_rs_bio_requeue *r, struct request *rq);

/*
 * A request's data page by page, straight from its bios (what
 * rq_for_each_segment walks), for drivers that need pages, not a
 * scatterlist: no blk_rq_map_sg() into the PDU and read back. The cursor
 * is the current bio and a copy of its struct bvec_iter (opaque here,
 * size checked in shim.c).
 */
struct blkfront_rs_rq_pages {
	struct bio *bio;
	u64 iter[3];
};
/* One single-page bio_vec: a run of bytes inside one page. */
struct blkfront_rs_page_run {
	struct page *page;
	unsigned int offset;
	unsigned int length;
};
/*
 * Starts @c at the first byte of @rq's data and writes its first runs, as
 * blkfront_rs_rq_pages_read(): one call for a request of at most @max
 * runs. -EIO for a request whose data is not its bios
 * (RQF_SPECIAL_PAYLOAD).
 */
int blkfront_rs_rq_pages_start(struct request *rq, struct blkfront_rs_rq_pages *c,
			       struct blkfront_rs_page_run *out, unsigned int max);
/*
 * Writes up to @max runs from @c on to @out, advancing @c; returns how
 * many: fewer than @max only at the end of the data. Runs are single-page
 * bio_vecs in order; two may be contiguous in one page (the caller
 * merges).
 */
unsigned int blkfront_rs_rq_pages_read(struct blkfront_rs_rq_pages *c,
				       struct blkfront_rs_page_run *out, unsigned int max);
void blkfront_rs_bio_requeue_flush(struct blkfront_rs_bio_requeue *r);
void blkfront_rs_bio_requeue_free(struct blkfront_rs_bio_requeue *r);

#endif
