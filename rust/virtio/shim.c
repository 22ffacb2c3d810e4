// SPDX-License-Identifier: GPL-2.0
/*
 * C half of rust/virtio: thin wrappers, no policy. Every function here is
 * either a macro or static inline that Rust cannot call, or an exported
 * function whose header kernel::bindings does not include.
 */
#include <linux/blkdev.h>
#include <linux/interrupt.h>
#include <linux/module.h>
#include <linux/slab.h>
#include <linux/virtio.h>
#include <linux/virtio_config.h>
#include <linux/virtio_blk.h>
#include <linux/workqueue.h>
#include "shim.h"

/* A virtio_driver plus the id table it points to, allocated per registration. */
struct blkfront_rs_virtio_drv {
	struct virtio_driver drv;
	struct virtio_device_id ids[2];
};

struct virtio_driver *blkfront_rs_virtio_register(const char *name, u32 device_id,
						  const unsigned int *features,
						  unsigned int nfeatures,
						  blkfront_rs_virtio_probe_t probe,
						  blkfront_rs_virtio_fn_t remove,
						  blkfront_rs_virtio_fn_t config_changed,
						  blkfront_rs_virtio_probe_t freeze,
						  blkfront_rs_virtio_probe_t restore,
						  int *err)
{
	struct blkfront_rs_virtio_drv *d = kzalloc(sizeof(*d), GFP_KERNEL);

	if (!d) {
		*err = -ENOMEM;
		return NULL;
	}
	d->ids[0].device = device_id;
	d->ids[0].vendor = VIRTIO_DEV_ANY_ID;
	d->drv.driver.name = name;
	d->drv.id_table = d->ids;
	d->drv.feature_table = features;
	d->drv.feature_table_size = nfeatures;
	d->drv.feature_table_legacy = features;
	d->drv.feature_table_size_legacy = nfeatures;
	d->drv.probe = probe;
	d->drv.remove = remove;
	d->drv.config_changed = config_changed;
#ifdef CONFIG_PM_SLEEP
	d->drv.freeze = freeze;
	d->drv.restore = restore;
#endif
	d->drv.reset_prepare = freeze;
	d->drv.reset_done = restore;
	*err = register_virtio_driver(&d->drv);
	if (*err) {
		kfree(d);
		return NULL;
	}
	return &d->drv;
}

void blkfront_rs_virtio_unregister(struct virtio_driver *drv)
{
	unregister_virtio_driver(drv);
	kfree(container_of(drv, struct blkfront_rs_virtio_drv, drv));
}

struct device *blkfront_rs_virtio_dev(struct virtio_device *vdev)
{
	return &vdev->dev;
}

void *blkfront_rs_virtio_get_priv(struct virtio_device *vdev)
{
	return vdev->priv;
}

void blkfront_rs_virtio_set_priv(struct virtio_device *vdev, void *priv)
{
	vdev->priv = priv;
}

bool blkfront_rs_virtio_has_config_get(struct virtio_device *vdev)
{
	return vdev->config->get != NULL;
}

bool blkfront_rs_virtio_has_feature(struct virtio_device *vdev, unsigned int fbit)
{
	return virtio_has_feature(vdev, fbit);
}

bool blkfront_rs_virtio_is_little_endian(struct virtio_device *vdev)
{
	return virtio_is_little_endian(vdev);
}

u8 blkfront_rs_virtio_cread8(struct virtio_device *vdev, unsigned int offset)
{
	return virtio_cread8(vdev, offset);
}

u16 blkfront_rs_virtio_cread16(struct virtio_device *vdev, unsigned int offset)
{
	return virtio_cread16(vdev, offset);
}

u32 blkfront_rs_virtio_cread32(struct virtio_device *vdev, unsigned int offset)
{
	return virtio_cread32(vdev, offset);
}

u64 blkfront_rs_virtio_cread64(struct virtio_device *vdev, unsigned int offset)
{
	return virtio_cread64(vdev, offset);
}

size_t blkfront_rs_virtio_max_dma_size(struct virtio_device *vdev)
{
	return virtio_max_dma_size(vdev);
}

void blkfront_rs_virtio_blk_geometry(void *ctx, u16 *cylinders, u8 *heads, u8 *sectors)
{
	struct virtio_device *vdev = ctx;

	virtio_cread(vdev, struct virtio_blk_config, geometry.cylinders, cylinders);
	virtio_cread(vdev, struct virtio_blk_config, geometry.heads, heads);
	virtio_cread(vdev, struct virtio_blk_config, geometry.sectors, sectors);
}

u32 blkfront_rs_blk_max_block_size(void)
{
	return BLK_MAX_BLOCK_SIZE;
}

/*
 * The names of a device's virtqueues, "<prefix><index>" (virtio_blk:
 * "req.0", ...). A virtqueue keeps the pointer to its name, so the names are
 * device-managed: freed when the driver unbinds, after remove() (or a failed
 * probe) deleted the virtqueues. Made once per binding: a restore after a
 * reset or a sleep finds the same names again instead of allocating more.
 */
struct blkfront_rs_vq_names {
	unsigned int n;
	const char *prefix;
	char *names[];
};

static void blkfront_rs_vq_names_release(struct device *dev, void *res)
{
	struct blkfront_rs_vq_names *v = res;
	unsigned int i;

	for (i = 0; i < v->n; i++)
		kfree(v->names[i]);
}

static int blkfront_rs_vq_names_match(struct device *dev, void *res, void *data)
{
	struct blkfront_rs_vq_names *v = res, *want = data;

	return v->n == want->n && v->prefix == want->prefix;
}

static struct blkfront_rs_vq_names *blkfront_rs_vq_names(struct virtio_device *vdev,
							  unsigned int n, const char *prefix)
{
	struct blkfront_rs_vq_names want = { .n = n, .prefix = prefix };
	struct blkfront_rs_vq_names *v;
	unsigned int i;

	v = devres_find(&vdev->dev, blkfront_rs_vq_names_release,
			blkfront_rs_vq_names_match, &want);
	if (v)
		return v;
	v = devres_alloc(blkfront_rs_vq_names_release, struct_size(v, names, n),
			 GFP_KERNEL);
	if (!v)
		return NULL;
	v->prefix = prefix;
	for (i = 0; i < n; i++) {
		v->names[i] = kasprintf(GFP_KERNEL, "%s%u", prefix, i);
		if (!v->names[i]) {
			/* devres_free() does not run the release function. */
			v->n = i;
			blkfront_rs_vq_names_release(&vdev->dev, v);
			devres_free(v);
			return NULL;
		}
	}
	v->n = n;
	devres_add(&vdev->dev, v);
	return v;
}

/* The last @npoll virtqueues get no callback (no interrupt): polled. */
int blkfront_rs_virtio_find_vqs(struct virtio_device *vdev, unsigned int nvqs,
				unsigned int npoll, struct virtqueue **vqs,
				blkfront_rs_vq_callback_t callback, const char *prefix)
{
	struct irq_affinity desc = { 0, };
	struct virtqueue_info *info;
	unsigned int i;
	int err;

	struct blkfront_rs_vq_names *names = blkfront_rs_vq_names(vdev, nvqs, prefix);

	if (!names)
		return -ENOMEM;
	info = kcalloc(nvqs, sizeof(*info), GFP_KERNEL);
	if (!info)
		return -ENOMEM;
	for (i = 0; i < nvqs; i++) {
		info[i].name = names->names[i];
		info[i].callback = i < nvqs - npoll ? callback : NULL;
	}
	err = virtio_find_vqs(vdev, nvqs, vqs, info, &desc);
	kfree(info);
	return err;
}

void blkfront_rs_virtio_del_vqs(struct virtio_device *vdev)
{
	vdev->config->del_vqs(vdev);
}

static int blkfront_rs_vq_names_any(struct device *dev, void *res, void *data)
{
	return 1;
}

unsigned int blkfront_rs_virtio_nr_own_vqs(struct virtio_device *vdev)
{
	struct blkfront_rs_vq_names *v;
	struct virtqueue *vq;
	unsigned int i, n = 0;

	v = devres_find(&vdev->dev, blkfront_rs_vq_names_release,
			blkfront_rs_vq_names_any, NULL);
	if (!v)
		return 0;
	list_for_each_entry(vq, &vdev->vqs, list)
		for (i = 0; i < v->n; i++)
			if (vq->name == v->names[i])
				n++;
	return n;
}

void blkfront_rs_virtio_device_ready(struct virtio_device *vdev)
{
	virtio_device_ready(vdev);
}

void blkfront_rs_virtio_reset_device(struct virtio_device *vdev)
{
	virtio_reset_device(vdev);
}

/*
 * A driver giving up on a live device: its virtqueues are broken first
 * (no used entry is read from then on, by an interrupt or by polling) and
 * the callbacks already running are waited for; then the device is reset.
 * Without the fence a late interrupt read used entries the device wrote
 * before the reset, for buffers already taken back ("id N is not a head!"),
 * and one for a descriptor reused since would end a new request early.
 * virtio_reset_device does the same only with CONFIG_VIRTIO_HARDEN_NOTIFICATION.
 */
void blkfront_rs_virtio_fence_and_reset(struct virtio_device *vdev)
{
	virtio_break_device(vdev);
	virtio_synchronize_cbs(vdev);
	virtio_reset_device(vdev);
}

struct virtio_device *blkfront_rs_vq_vdev(struct virtqueue *vq)
{
	return vq->vdev;
}

unsigned int blkfront_rs_vq_index(struct virtqueue *vq)
{
	return vq->index;
}

unsigned int blkfront_rs_vq_num_free(struct virtqueue *vq)
{
	return vq->num_free;
}

int blkfront_rs_vq_add_sgs(struct virtqueue *vq, struct scatterlist **sgs,
			   unsigned int out_sgs, unsigned int in_sgs, void *data)
{
	return virtqueue_add_sgs(vq, sgs, out_sgs, in_sgs, data, GFP_ATOMIC);
}

bool blkfront_rs_vq_kick_prepare(struct virtqueue *vq)
{
	return virtqueue_kick_prepare(vq);
}

bool blkfront_rs_vq_notify(struct virtqueue *vq)
{
	return virtqueue_notify(vq);
}

void *blkfront_rs_vq_get_buf(struct virtqueue *vq, unsigned int *len)
{
	return virtqueue_get_buf(vq, len);
}

void blkfront_rs_vq_disable_cb(struct virtqueue *vq)
{
	virtqueue_disable_cb(vq);
}

void *blkfront_rs_vq_detach_unused_buf(struct virtqueue *vq)
{
	return virtqueue_detach_unused_buf(vq);
}

bool blkfront_rs_vq_enable_cb(struct virtqueue *vq)
{
	return virtqueue_enable_cb(vq);
}

struct blkfront_rs_work {
	struct work_struct work;
	blkfront_rs_work_fn_t fn;
	void *ctx;
};

static void blkfront_rs_work_run(struct work_struct *work)
{
	struct blkfront_rs_work *w = container_of(work, struct blkfront_rs_work, work);

	w->fn(w->ctx);
}

struct blkfront_rs_work *blkfront_rs_work_alloc(blkfront_rs_work_fn_t fn, void *ctx)
{
	struct blkfront_rs_work *w = kzalloc(sizeof(*w), GFP_KERNEL);

	if (!w)
		return NULL;
	INIT_WORK(&w->work, blkfront_rs_work_run);
	w->fn = fn;
	w->ctx = ctx;
	return w;
}

void blkfront_rs_work_schedule(struct blkfront_rs_work *w)
{
	schedule_work(&w->work);
}

void blkfront_rs_work_free_sync(struct blkfront_rs_work *w)
{
	cancel_work_sync(&w->work);
	kfree(w);
}

void blkfront_rs_work_flush(struct blkfront_rs_work *w)
{
	flush_work(&w->work);
}

/* The config-space offsets the Rust side (blkcore::virtio::offset) uses. */
static_assert(offsetof(struct virtio_blk_config, capacity) == 0);
static_assert(offsetof(struct virtio_blk_config, size_max) == 8);
static_assert(offsetof(struct virtio_blk_config, seg_max) == 12);
static_assert(offsetof(struct virtio_blk_config, geometry.cylinders) == 16);
static_assert(offsetof(struct virtio_blk_config, geometry.heads) == 18);
static_assert(offsetof(struct virtio_blk_config, geometry.sectors) == 19);
static_assert(offsetof(struct virtio_blk_config, blk_size) == 20);
static_assert(offsetof(struct virtio_blk_config, physical_block_exp) == 24);
static_assert(offsetof(struct virtio_blk_config, alignment_offset) == 25);
static_assert(offsetof(struct virtio_blk_config, min_io_size) == 26);
static_assert(offsetof(struct virtio_blk_config, opt_io_size) == 28);
static_assert(offsetof(struct virtio_blk_config, wce) == 32);
static_assert(offsetof(struct virtio_blk_config, num_queues) == 34);
static_assert(offsetof(struct virtio_blk_config, max_discard_sectors) == 36);
static_assert(offsetof(struct virtio_blk_config, max_discard_seg) == 40);
static_assert(offsetof(struct virtio_blk_config, discard_sector_alignment) == 44);
static_assert(offsetof(struct virtio_blk_config, max_write_zeroes_sectors) == 48);
static_assert(offsetof(struct virtio_blk_config, max_write_zeroes_seg) == 52);
static_assert(offsetof(struct virtio_blk_config, write_zeroes_may_unmap) == 56);
static_assert(offsetof(struct virtio_blk_config, max_secure_erase_sectors) == 60);
static_assert(offsetof(struct virtio_blk_config, max_secure_erase_seg) == 64);
static_assert(offsetof(struct virtio_blk_config, secure_erase_sector_alignment) == 68);
static_assert(sizeof(struct virtio_blk_outhdr) == 16);
static_assert(sizeof(struct virtio_blk_discard_write_zeroes) == 16);
static_assert(VIRTIO_BLK_T_IN == 0 && VIRTIO_BLK_T_OUT == 1 && VIRTIO_BLK_T_FLUSH == 4 &&
	      VIRTIO_BLK_T_GET_ID == 8 && VIRTIO_BLK_T_DISCARD == 11 &&
	      VIRTIO_BLK_T_WRITE_ZEROES == 13);
static_assert(VIRTIO_BLK_S_OK == 0 && VIRTIO_BLK_S_IOERR == 1 && VIRTIO_BLK_S_UNSUPP == 2);
static_assert(VIRTIO_BLK_ID_BYTES == 20);

/*
 * /sys/block/<disk>/cache_type, as virtio_blk's: "write back" or "write
 * through" from the device's `wce` (CONFIG_WCE), else from FLUSH; writable
 * with CONFIG_WCE: the new mode goes to the device and the live queue's
 * write cache flag follows. The disk's parent is its virtio device.
 */
static const char *const blkfront_rs_cache_types[] = { "write through", "write back" };

static struct virtio_device *blkfront_rs_disk_vdev(struct device *dev)
{
	return dev_to_virtio(disk_to_dev(dev_to_disk(dev))->parent);
}

static bool blkfront_rs_writeback(struct virtio_device *vdev)
{
	if (virtio_has_feature(vdev, VIRTIO_BLK_F_CONFIG_WCE))
		return virtio_cread8(vdev, offsetof(struct virtio_blk_config, wce));
	return virtio_has_feature(vdev, VIRTIO_BLK_F_FLUSH);
}

static ssize_t cache_type_show(struct device *dev, struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%s\n",
			  blkfront_rs_cache_types[blkfront_rs_writeback(blkfront_rs_disk_vdev(dev))]);
}

static ssize_t cache_type_store(struct device *dev, struct device_attribute *attr,
				const char *buf, size_t count)
{
	struct gendisk *disk = dev_to_disk(dev);
	struct virtio_device *vdev = blkfront_rs_disk_vdev(dev);
	struct queue_limits lim;
	int i, err;

	if (!virtio_has_feature(vdev, VIRTIO_BLK_F_CONFIG_WCE))
		return -EPERM;
	i = sysfs_match_string(blkfront_rs_cache_types, buf);
	if (i < 0)
		return i;
	virtio_cwrite8(vdev, offsetof(struct virtio_blk_config, wce), i);
	lim = queue_limits_start_update(disk->queue);
	if (blkfront_rs_writeback(vdev))
		lim.features |= BLK_FEAT_WRITE_CACHE;
	else
		lim.features &= ~BLK_FEAT_WRITE_CACHE;
	err = queue_limits_commit_update_frozen(disk->queue, &lim);
	return err ? err : count;
}
static DEVICE_ATTR_RW(cache_type);

static struct attribute *blkfront_rs_virtio_blk_attrs[] = {
	&dev_attr_cache_type.attr,
	NULL,
};

static umode_t blkfront_rs_virtio_blk_attr_visible(struct kobject *kobj, struct attribute *a, int n)
{
	struct virtio_device *vdev = blkfront_rs_disk_vdev(kobj_to_dev(kobj));

	return virtio_has_feature(vdev, VIRTIO_BLK_F_CONFIG_WCE) ? a->mode : 0444;
}

static const struct attribute_group blkfront_rs_virtio_blk_attrs_group = {
	.attrs = blkfront_rs_virtio_blk_attrs,
	.is_visible = blkfront_rs_virtio_blk_attr_visible,
};

const void *blkfront_rs_virtio_blk_attr_group(void)
{
	return &blkfront_rs_virtio_blk_attrs_group;
}
