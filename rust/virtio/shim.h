/* SPDX-License-Identifier: GPL-2.0 */
/*
 * C shims for rust/virtio: what Rust cannot call directly (macros that need
 * THIS_MODULE, static inlines, struct initialisers) and the few exported
 * functions whose header (<linux/virtio.h>) is not in kernel::bindings.
 *
 * Only forward declarations here: bindgen then emits the structs as opaque
 * types and pulls in nothing else. The Rust side converts pointers to and
 * from kernel::bindings types at the boundary.
 */
#ifndef BLKFRONT_RS_VIRTIO_SHIM_H
#define BLKFRONT_RS_VIRTIO_SHIM_H
#include <linux/types.h>

struct virtio_device;
struct virtio_driver;
struct virtqueue;
struct scatterlist;
struct device;
struct blkfront_rs_work;

typedef void (*blkfront_rs_vq_callback_t)(struct virtqueue *vq);
typedef int (*blkfront_rs_virtio_probe_t)(struct virtio_device *vdev);
typedef void (*blkfront_rs_virtio_fn_t)(struct virtio_device *vdev);
typedef void (*blkfront_rs_work_fn_t)(void *ctx);

/*
 * Driver registration (register_virtio_driver needs THIS_MODULE). @freeze
 * and @restore serve both a system sleep (.freeze/.restore, with
 * CONFIG_PM_SLEEP) and a transport reset such as a PCI function level reset
 * (.reset_prepare/.reset_done), as virtio_blk's do.
 */
struct virtio_driver *blkfront_rs_virtio_register(const char *name, u32 device_id,
						  const unsigned int *features,
						  unsigned int nfeatures,
						  blkfront_rs_virtio_probe_t probe,
						  blkfront_rs_virtio_fn_t remove,
						  blkfront_rs_virtio_fn_t config_changed,
						  blkfront_rs_virtio_probe_t freeze,
						  blkfront_rs_virtio_probe_t restore,
						  int *err);
void blkfront_rs_virtio_unregister(struct virtio_driver *drv);

/* Device. */
struct device *blkfront_rs_virtio_dev(struct virtio_device *vdev);
void *blkfront_rs_virtio_get_priv(struct virtio_device *vdev);
void blkfront_rs_virtio_set_priv(struct virtio_device *vdev, void *priv);
bool blkfront_rs_virtio_has_config_get(struct virtio_device *vdev);
bool blkfront_rs_virtio_has_feature(struct virtio_device *vdev, unsigned int fbit);
bool blkfront_rs_virtio_is_little_endian(struct virtio_device *vdev);
u8 blkfront_rs_virtio_cread8(struct virtio_device *vdev, unsigned int offset);
u16 blkfront_rs_virtio_cread16(struct virtio_device *vdev, unsigned int offset);
u32 blkfront_rs_virtio_cread32(struct virtio_device *vdev, unsigned int offset);
u64 blkfront_rs_virtio_cread64(struct virtio_device *vdev, unsigned int offset);
size_t blkfront_rs_virtio_max_dma_size(struct virtio_device *vdev);
int blkfront_rs_virtio_find_vqs(struct virtio_device *vdev, unsigned int nvqs,
				unsigned int npoll, struct virtqueue **vqs,
				blkfront_rs_vq_callback_t callback, const char *prefix);
void blkfront_rs_virtio_del_vqs(struct virtio_device *vdev);
/*
 * How many of the device's virtqueues blkfront_rs_virtio_find_vqs made (they
 * carry its names): not the transport's own, such as virtio-pci's admin
 * virtqueue, which are on the same list.
 */
unsigned int blkfront_rs_virtio_nr_own_vqs(struct virtio_device *vdev);
void blkfront_rs_virtio_device_ready(struct virtio_device *vdev);
void blkfront_rs_virtio_reset_device(struct virtio_device *vdev);
void blkfront_rs_virtio_fence_and_reset(struct virtio_device *vdev);

/* Virtqueue. */
struct virtio_device *blkfront_rs_vq_vdev(struct virtqueue *vq);
unsigned int blkfront_rs_vq_index(struct virtqueue *vq);
unsigned int blkfront_rs_vq_num_free(struct virtqueue *vq);
int blkfront_rs_vq_add_sgs(struct virtqueue *vq, struct scatterlist **sgs,
			   unsigned int out_sgs, unsigned int in_sgs, void *data);
bool blkfront_rs_vq_kick_prepare(struct virtqueue *vq);
bool blkfront_rs_vq_notify(struct virtqueue *vq);
void *blkfront_rs_vq_get_buf(struct virtqueue *vq, unsigned int *len);
void blkfront_rs_vq_disable_cb(struct virtqueue *vq);
void *blkfront_rs_vq_detach_unused_buf(struct virtqueue *vq);
bool blkfront_rs_vq_enable_cb(struct virtqueue *vq);

/* A work item that can be cancelled synchronously (INIT_WORK is a macro). */
struct blkfront_rs_work *blkfront_rs_work_alloc(blkfront_rs_work_fn_t fn, void *ctx);
void blkfront_rs_work_schedule(struct blkfront_rs_work *w);
void blkfront_rs_work_free_sync(struct blkfront_rs_work *w);
/* Wait for a run in progress (flush_work); the item stays usable. */
void blkfront_rs_work_flush(struct blkfront_rs_work *w);

/* The device's geometry, for HDIO_GETGEO (@ctx: the virtio_device). */
void blkfront_rs_virtio_blk_geometry(void *ctx, u16 *cylinders, u8 *heads, u8 *sectors);

/* The block layer's largest logical block size (BLK_MAX_BLOCK_SIZE, a macro). */
u32 blkfront_rs_blk_max_block_size(void);

/* The virtio-blk disk attributes (cache_type), a static attribute_group. */
const void *blkfront_rs_virtio_blk_attr_group(void);

#endif
