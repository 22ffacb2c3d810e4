/* SPDX-License-Identifier: GPL-2.0 */
/*
 * C shims for rust/xen: what Rust cannot call directly.
 *
 * Every function rust/xen calls is declared here (bindgen only emits items
 * declared in this file): macros that need THIS_MODULE/KBUILD_MODNAME,
 * static inlines, ERR_PTR returns and accessors of struct xenbus_device
 * (kept opaque to Rust so its layout never leaks into the abstraction).
 * All names start with rxen_.
 */
#ifndef BLKFRONT_RS_XEN_SHIM_H
#define BLKFRONT_RS_XEN_SHIM_H

// bindgen: --opaque-type xenbus_device --opaque-type device --opaque-type device_driver
// bindgen: --opaque-type page --opaque-type xenbus_watch --opaque-type kobj_uevent_env
// bindgen: --opaque-type gnttab_free_callback --opaque-type scatterlist

#include <linux/types.h>
#include <linux/interrupt.h>
#include <xen/xenbus.h>
#include <xen/grant_table.h>

int blkfront_rs_xen_shim_version(void);

/* ---- environment ---- */
/* xen_domain() && xen_has_pv_disk_devices(). */
bool rxen_pv_disks_available(void);
/* xen_hvm_domain(): HVM or PVH (a static inline). */
bool rxen_hvm_domain(void);
/* xen_has_pv_and_legacy_disk_devices(): an HVM guest whose emulated disks
 * were not unplugged. */
bool rxen_pv_and_legacy_disks(void);
/* PAGE_SIZE == XEN_PAGE_SIZE (the only configuration rust/xen supports). */
unsigned long rxen_xen_page_size(void);
unsigned int rxen_num_online_cpus(void);

/* ---- xenbus driver ---- */
int rxen_xenbus_register_frontend(struct xenbus_driver *drv);
void rxen_xenbus_unregister_driver(struct xenbus_driver *drv);

/* ---- struct xenbus_device accessors ---- */
const char *rxen_dev_nodename(struct xenbus_device *dev);
const char *rxen_dev_otherend(struct xenbus_device *dev);
int rxen_dev_otherend_id(struct xenbus_device *dev);
int rxen_dev_state(struct xenbus_device *dev);
void rxen_dev_set_drvdata(struct xenbus_device *dev, void *data);
void *rxen_dev_get_drvdata(struct xenbus_device *dev);
/* &dev->dev, for the block layer's parent device. */
struct device *rxen_dev_device(struct xenbus_device *dev);

/* ---- xenstore ---- */
/*
 * Reads dir/node. On success *out is a kmalloc'ed NUL-terminated buffer
 * (free with rxen_kfree) of *len bytes without the NUL, and 0 is returned;
 * otherwise a negative errno (-ENOENT for a missing node).
 */
int rxen_xenbus_read(u32 xbt, const char *dir, const char *node, char **out,
		     unsigned int *len);
int rxen_xenbus_write(u32 xbt, const char *dir, const char *node,
		      const char *value);
/* Removes dir/node and everything below it; -ENOENT if it does not exist. */
int rxen_xenbus_rm(u32 xbt, const char *dir, const char *node);
int rxen_xenbus_transaction_start(u32 *xbt);
int rxen_xenbus_transaction_end(u32 xbt, bool abort);
void rxen_kfree(void *p);

int rxen_xenbus_switch_state(struct xenbus_device *dev, int state);
void rxen_xenbus_dev_fatal(struct xenbus_device *dev, int err, const char *msg);
void rxen_xenbus_dev_error(struct xenbus_device *dev, int err, const char *msg);
int rxen_xenbus_frontend_closed(struct xenbus_device *dev);

/* ---- shared rings ---- */
int rxen_xenbus_setup_ring(struct xenbus_device *dev, void **vaddr,
			   unsigned int nr_pages, u32 *grefs);
void rxen_xenbus_teardown_ring(void **vaddr, unsigned int nr_pages, u32 *grefs);
/* Full memory barriers of the ring protocol (virt_mb/virt_wmb/virt_rmb). */
void rxen_virt_mb(void);
void rxen_virt_wmb(void);
void rxen_virt_rmb(void);

/* ---- event channels ---- */
int rxen_xenbus_alloc_evtchn(struct xenbus_device *dev, u32 *port);
int rxen_xenbus_free_evtchn(struct xenbus_device *dev, u32 port);
/* Returns the irq (> 0) or a negative errno. */
int rxen_bind_evtchn_to_irqhandler_lateeoi(u32 evtchn, irq_handler_t handler,
					   const char *name, void *dev_id);
void rxen_unbind_from_irqhandler(unsigned int irq, void *dev_id);
void rxen_notify_remote_via_evtchn(u32 port);
void rxen_irq_lateeoi(unsigned int irq, bool spurious);

/* ---- grant table ---- */
int rxen_gnttab_alloc_grant_references(u16 count, u32 *head);
/*
 * Claims a reference from head and grants domid access to page through it:
 * the reference (>= 0), or -ENOSPC with nothing claimed.
 */
int rxen_gnttab_grant_page(u32 *head, u16 domid, struct page *page, bool readonly);
void rxen_gnttab_free_grant_references(u32 head);
void rxen_gnttab_free_grant_reference(u32 ref);
/* 1 if the backend no longer maps ref (ref then freed), 0 if still mapped. */
int rxen_gnttab_try_end_foreign_access(u32 ref);
/* End access eventually; page (may be NULL) is put when the backend lets go. */
void rxen_gnttab_end_foreign_access(u32 ref, struct page *page);

/* ---- pages ---- */
void *rxen_kmap_local_page(struct page *page);
void rxen_kunmap_local(void *addr);
void rxen_free_page(struct page *page);
/* 2^order contiguous zeroed pages, split into order-0 pages; or NULL. */
struct page *rxen_alloc_pages_split(unsigned int order);
/* Page n of a block from rxen_alloc_pages_split. */
struct page *rxen_page_of_block(struct page *first, unsigned long n);

/* Periodic work (see shim.c): @fn(@ctx) every @period_ms until stopped. */
struct rxen_periodic;
struct rxen_periodic *rxen_periodic_start(void (*fn)(void *ctx), void *ctx,
					  unsigned int period_ms);
void rxen_periodic_stop(struct rxen_periodic *p);

#endif
