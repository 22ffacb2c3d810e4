// SPDX-License-Identifier: GPL-2.0
/* C half of rust/blkmq: macros and static inlines only. */
#include <linux/blk-mq.h>
#include <linux/blkdev.h>
#include <linux/cdrom.h>
#include <linux/hdreg.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/slab.h>
#include "shim.h"

static_assert(BLKFRONT_RS_BLK_STS_OK == (__force int)BLK_STS_OK);
static_assert(BLKFRONT_RS_BLK_STS_NOTSUPP == (__force int)BLK_STS_NOTSUPP);
static_assert(BLKFRONT_RS_BLK_STS_RESOURCE == (__force int)BLK_STS_RESOURCE);
static_assert(BLKFRONT_RS_BLK_STS_IOERR == (__force int)BLK_STS_IOERR);
static_assert(BLKFRONT_RS_BLK_STS_DEV_RESOURCE == (__force int)BLK_STS_DEV_RESOURCE);
static_assert(BLKFRONT_RS_BLK_FEAT_WRITE_CACHE == (__force unsigned int)BLK_FEAT_WRITE_CACHE);
static_assert(BLKFRONT_RS_BLK_FEAT_FUA == (__force unsigned int)BLK_FEAT_FUA);
static_assert(BLKFRONT_RS_BLK_FEAT_ROTATIONAL == (__force unsigned int)BLK_FEAT_ROTATIONAL);

/* Lives as long as the gendisk: freed by ->free_disk. */
struct blkfront_rs_disk_priv {
	char serial[BLKFRONT_RS_SERIAL_MAX + 1];
	/* The serial attribute exists (set_serial was called, maybe empty). */
	bool has_serial;
	/* What HDIO_GETGEO answers (one of four, so one field). */
	enum { GEO_SD_DEFAULT, GEO_FIXED, GEO_XEN, GEO_SOURCE } geometry;
	u16 cylinders;
	u8 heads;
	u8 sectors;
	/* GEO_SOURCE: asked at each call under geo_lock; NULL once forgotten. */
	struct mutex geo_lock;
	blkfront_rs_geometry_fn geo_read;
	void *geo_ctx;
	/* What ioctl answers: nothing (-ENOTTY), or xen-blkfront's two CD-ROM
	 * ioctls for a disk (`XEN_DISK`) or a CD-ROM (`XEN_CDROM`). */
	enum { IOCTL_NONE, IOCTL_XEN_DISK, IOCTL_XEN_CDROM } ioctls;
	/* The disk's attribute groups (device_add_disk keeps the pointer):
	 * ours (serial), then one from the driver's bus abstraction, if any. */
	const struct attribute_group *groups[3];
	/* blkfront_rs_blkmq_withdraw(): BLKFRONT_RS_WITHDRAW_* not yet applied
	 * by withdraw_work, under withdraw_lock; none once withdraw_dead. */
	struct gendisk *disk;
	spinlock_t withdraw_lock;
	unsigned int withdrawn;
	bool withdraw_dead;
	struct work_struct withdraw_work;
};

static int blkfront_rs_blkmq_getgeo(struct gendisk *disk, struct hd_geometry *geo)
{
	struct blkfront_rs_disk_priv *p = disk->private_data;

	if (p && p->geometry == GEO_SOURCE) {
		int ret = 0;

		mutex_lock(&p->geo_lock);
		if (p->geo_read)
			p->geo_read(p->geo_ctx, &geo->cylinders, &geo->heads, &geo->sectors);
		else
			ret = -ENXIO;
		mutex_unlock(&p->geo_lock);
		return ret;
	} else if (p && p->geometry == GEO_FIXED) {
		geo->cylinders = p->cylinders;
		geo->heads = p->heads;
		geo->sectors = p->sectors;
	} else if (p && p->geometry == GEO_XEN) {
		/* xen-blkfront's blkif_getgeo: 255 heads, 63 sectors, the
		 * cylinders that fit the capacity (0xffff when they do not). */
		sector_t nsect = get_capacity(disk);
		sector_t cylinders = nsect;

		geo->heads = 0xff;
		geo->sectors = 0x3f;
		sector_div(cylinders, geo->heads * geo->sectors);
		geo->cylinders = cylinders;
		if ((sector_t)(geo->cylinders + 1) * geo->heads * geo->sectors < nsect)
			geo->cylinders = 0xffff;
	} else {
		/* Same defaults as virtio_blk and sd. */
		geo->heads = 1 << 6;
		geo->sectors = 1 << 5;
		geo->cylinders = get_capacity(disk) >> 11;
	}
	return 0;
}

/* xen-blkfront's blkif_ioctl, for the disks that asked for it. */
static int blkfront_rs_blkmq_ioctl(struct block_device *bdev, blk_mode_t mode,
				   unsigned int command, unsigned long argument)
{
	struct blkfront_rs_disk_priv *p = bdev->bd_disk->private_data;
	size_t i;

	if (!p || p->ioctls == IOCTL_NONE)
		return -ENOTTY;
	switch (command) {
	case CDROMMULTISESSION:
		for (i = 0; i < sizeof(struct cdrom_multisession); i++)
			if (put_user(0, (char __user *)(argument + i)))
				return -EFAULT;
		return 0;
	case CDROM_GET_CAPABILITY:
		return p->ioctls == IOCTL_XEN_CDROM ? 0 : -EINVAL;
	default:
		return -EINVAL;
	}
}

static void blkfront_rs_blkmq_withdraw_work(struct work_struct *work)
{
	struct blkfront_rs_disk_priv *p =
		container_of(work, struct blkfront_rs_disk_priv, withdraw_work);
	struct request_queue *q = p->disk->queue;
	struct queue_limits lim;
	unsigned int what;

	spin_lock_irq(&p->withdraw_lock);
	what = p->withdrawn;
	p->withdrawn = 0;
	spin_unlock_irq(&p->withdraw_lock);
	if (!what)
		return;
	lim = queue_limits_start_update(q);
	if (what & BLKFRONT_RS_WITHDRAW_DISCARD) {
		lim.max_hw_discard_sectors = 0;
		lim.max_secure_erase_sectors = 0;
	}
	if (what & BLKFRONT_RS_WITHDRAW_WRITE_CACHE)
		lim.features &= ~(BLK_FEAT_WRITE_CACHE | BLK_FEAT_FUA);
	/*
	 * Not frozen: a queue whose device holds requests for ever would hold
	 * the freeze (and this worker) with them. A request built under the
	 * old limits is one the device refuses, as before.
	 */
	if (queue_limits_commit_update(q, &lim))
		pr_warn("%s: withdrawing features from the queue limits failed\n",
			p->disk->disk_name);
}

void blkfront_rs_blkmq_withdraw(struct gendisk *disk, unsigned int what)
{
	struct blkfront_rs_disk_priv *p = disk->private_data;
	unsigned long flags;

	if (what & BLKFRONT_RS_WITHDRAW_DISCARD) {
		blk_queue_disable_discard(disk->queue);
		blk_queue_disable_secure_erase(disk->queue);
	}
	spin_lock_irqsave(&p->withdraw_lock, flags);
	if (!p->withdraw_dead) {
		p->withdrawn |= what;
		kblockd_schedule_work(&p->withdraw_work);
	}
	spin_unlock_irqrestore(&p->withdraw_lock, flags);
}

static void blkfront_rs_blkmq_free_disk(struct gendisk *disk)
{
	kfree(disk->private_data);
}

static const struct block_device_operations blkfront_rs_blkmq_fops = {
	.owner = THIS_MODULE,
	.getgeo = blkfront_rs_blkmq_getgeo,
	.ioctl = blkfront_rs_blkmq_ioctl,
	.free_disk = blkfront_rs_blkmq_free_disk,
};

struct gendisk *blkfront_rs_blkmq_alloc_disk(struct blk_mq_tag_set *set,
					     struct queue_limits *lim,
					     void *queuedata)
{
	struct blkfront_rs_disk_priv *p = kzalloc(sizeof(*p), GFP_KERNEL);
	struct gendisk *disk;

	if (!p)
		return ERR_PTR(-ENOMEM);
	mutex_init(&p->geo_lock);
	spin_lock_init(&p->withdraw_lock);
	INIT_WORK(&p->withdraw_work, blkfront_rs_blkmq_withdraw_work);
	disk = blk_mq_alloc_disk(set, lim, queuedata);
	if (IS_ERR(disk)) {
		kfree(p);
		return disk;
	}
	disk->private_data = p;
	p->disk = disk;
	disk->fops = &blkfront_rs_blkmq_fops;
	return disk;
}

void blkfront_rs_blkmq_put_disk(struct gendisk *disk, bool added)
{
	struct blkfront_rs_disk_priv *p = disk->private_data;

	/* After del_gendisk(): no request is left to withdraw anything. */
	spin_lock_irq(&p->withdraw_lock);
	p->withdraw_dead = true;
	spin_unlock_irq(&p->withdraw_lock);
	cancel_work_sync(&p->withdraw_work);
	put_disk(disk);
	/* ->free_disk only runs for disks that were added (GD_ADDED). */
	if (!added)
		kfree(p);
}

bool blkfront_rs_blkmq_get_disk_ro(struct gendisk *disk)
{
	return get_disk_ro(disk);
}

void blkfront_rs_blkmq_set_xen_geometry(struct gendisk *disk)
{
	struct blkfront_rs_disk_priv *p = disk->private_data;

	p->geometry = GEO_XEN;
}

void blkfront_rs_blkmq_set_geometry_source(struct gendisk *disk, blkfront_rs_geometry_fn read,
					   void *ctx)
{
	struct blkfront_rs_disk_priv *p = disk->private_data;

	mutex_lock(&p->geo_lock);
	p->geo_read = read;
	p->geo_ctx = ctx;
	p->geometry = GEO_SOURCE;
	mutex_unlock(&p->geo_lock);
}

void blkfront_rs_blkmq_forget_geometry(struct gendisk *disk)
{
	struct blkfront_rs_disk_priv *p = disk->private_data;

	mutex_lock(&p->geo_lock);
	p->geo_read = NULL;
	p->geo_ctx = NULL;
	mutex_unlock(&p->geo_lock);
}

void blkfront_rs_blkmq_set_xen_ioctls(struct gendisk *disk, bool cdrom)
{
	struct blkfront_rs_disk_priv *p = disk->private_data;

	p->ioctls = cdrom ? IOCTL_XEN_CDROM : IOCTL_XEN_DISK;
}

void blkfront_rs_blkmq_set_removable(struct gendisk *disk)
{
	disk->flags |= GENHD_FL_REMOVABLE;
}

void blkfront_rs_blkmq_set_geometry(struct gendisk *disk, u16 cylinders,
				    u8 heads, u8 sectors)
{
	struct blkfront_rs_disk_priv *p = disk->private_data;

	p->cylinders = cylinders;
	p->heads = heads;
	p->sectors = sectors;
	p->geometry = GEO_FIXED;
}

/* /sys/block/<disk>/serial, like virtio_blk's (no newline), from a cached value. */
static ssize_t serial_show(struct device *dev, struct device_attribute *attr, char *buf)
{
	struct blkfront_rs_disk_priv *p = dev_to_disk(dev)->private_data;

	return sysfs_emit(buf, "%s", p->serial);
}
static DEVICE_ATTR_RO(serial);

static struct attribute *blkfront_rs_disk_attrs[] = {
	&dev_attr_serial.attr,
	NULL,
};

static umode_t blkfront_rs_disk_attr_visible(struct kobject *kobj, struct attribute *a, int n)
{
	struct blkfront_rs_disk_priv *p = dev_to_disk(kobj_to_dev(kobj))->private_data;

	return p && p->has_serial ? a->mode : 0;
}

static const struct attribute_group blkfront_rs_disk_attr_group = {
	.attrs = blkfront_rs_disk_attrs,
	.is_visible = blkfront_rs_disk_attr_visible,
};

void blkfront_rs_blkmq_set_serial(struct gendisk *disk, const char *serial, size_t len)
{
	struct blkfront_rs_disk_priv *p = disk->private_data;

	len = min_t(size_t, len, BLKFRONT_RS_SERIAL_MAX);
	memcpy(p->serial, serial, len);
	p->serial[len] = '\0';
	p->has_serial = true;
}

void blkfront_rs_blkmq_set_attr_group(struct gendisk *disk, const void *group)
{
	struct blkfront_rs_disk_priv *p = disk->private_data;

	p->groups[1] = group;
}

int blkfront_rs_blkmq_add_disk(struct device *parent, struct gendisk *disk)
{
	struct blkfront_rs_disk_priv *p = disk->private_data;

	p->groups[0] = &blkfront_rs_disk_attr_group;
	return device_add_disk(parent, disk, p->groups);
}

void blkfront_rs_blkmq_limits_start_update(struct gendisk *disk,
					   struct queue_limits *lim)
{
	*lim = queue_limits_start_update(disk->queue);
}

struct blkfront_rs_bio_requeue {
	spinlock_t lock;
	struct bio_list bios;
	struct work_struct work;
};

static void blkfront_rs_bio_requeue_work(struct work_struct *work)
{
	struct blkfront_rs_bio_requeue *r =
		container_of(work, struct blkfront_rs_bio_requeue, work);
	struct bio *bio, *next;

	spin_lock_irq(&r->lock);
	next = bio_list_get(&r->bios);
	spin_unlock_irq(&r->lock);
	while ((bio = next) != NULL) {
		next = bio->bi_next;
		bio->bi_next = NULL;
		submit_bio_noacct(bio);
	}
}

struct blkfront_rs_bio_requeue *blkfront_rs_bio_requeue_alloc(void)
{
	struct blkfront_rs_bio_requeue *r = kzalloc(sizeof(*r), GFP_KERNEL);

	if (!r)
		return NULL;
	spin_lock_init(&r->lock);
	bio_list_init(&r->bios);
	INIT_WORK(&r->work, blkfront_rs_bio_requeue_work);
	return r;
}

void blkfront_rs_bio_requeue_rq(struct blkfront_rs_bio_requeue *r, struct request *rq)
{
	unsigned long flags;
	struct bio *bio;

	spin_lock_irqsave(&r->lock, flags);
	/* As nvme_failover_req: the sectors are the whole disk's by now. */
	for (bio = rq->bio; bio; bio = bio->bi_next)
		bio_set_dev(bio, rq->q->disk->part0);
	blk_steal_bios(&r->bios, rq);
	spin_unlock_irqrestore(&r->lock, flags);
	blk_mq_end_request(rq, BLK_STS_OK);
	kblockd_schedule_work(&r->work);
}

void blkfront_rs_bio_requeue_flush(struct blkfront_rs_bio_requeue *r)
{
	flush_work(&r->work);
}

void blkfront_rs_bio_requeue_free(struct blkfront_rs_bio_requeue *r)
{
	flush_work(&r->work);
	kfree(r);
}

static_assert(sizeof(struct bvec_iter) <= sizeof(((struct blkfront_rs_rq_pages *)0)->iter));

int blkfront_rs_rq_pages_start(struct request *rq, struct blkfront_rs_rq_pages *c,
			       struct blkfront_rs_page_run *out, unsigned int max)
{
	if (rq->rq_flags & RQF_SPECIAL_PAYLOAD)
		return -EIO;
	c->bio = rq->bio;
	if (c->bio)
		memcpy(c->iter, &c->bio->bi_iter, sizeof(struct bvec_iter));
	return blkfront_rs_rq_pages_read(c, out, max);
}

unsigned int blkfront_rs_rq_pages_read(struct blkfront_rs_rq_pages *c,
				       struct blkfront_rs_page_run *out, unsigned int max)
{
	struct bvec_iter *iter = (struct bvec_iter *)c->iter;
	unsigned int n = 0;

	while (c->bio && n < max) {
		struct bio_vec bv;

		if (!iter->bi_size) {
			c->bio = c->bio->bi_next;
			if (c->bio)
				*iter = c->bio->bi_iter;
			continue;
		}
		bv = bio_iter_iovec(c->bio, *iter);
		out[n].page = bv.bv_page;
		out[n].offset = bv.bv_offset;
		out[n].length = bv.bv_len;
		n++;
		bio_advance_iter_single(c->bio, iter, bv.bv_len);
	}
	return n;
}
