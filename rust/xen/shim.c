// SPDX-License-Identifier: GPL-2.0
/*
 * C half of rust/xen: thin wrappers, no policy. See shim.h.
 */
#include <linux/device.h>
#include <linux/err.h>
#include <linux/gfp.h>
#include <linux/highmem.h>
#include <linux/slab.h>
#include <linux/scatterlist.h>
#include <linux/cpumask.h>
#include <linux/workqueue.h>
#include <xen/xen.h>
#include <xen/events.h>
#include <xen/page.h>
#include <xen/platform_pci.h>
#include <asm/barrier.h>
#include "shim.h"

int blkfront_rs_xen_shim_version(void) { return 2; }

bool rxen_pv_disks_available(void)
{
	return xen_domain() && xen_has_pv_disk_devices();
}

bool rxen_hvm_domain(void)
{
	return xen_hvm_domain();
}

bool rxen_pv_and_legacy_disks(void)
{
	return xen_has_pv_and_legacy_disk_devices();
}

unsigned long rxen_xen_page_size(void)
{
	BUILD_BUG_ON(PAGE_SIZE != XEN_PAGE_SIZE);
	return XEN_PAGE_SIZE;
}

unsigned int rxen_num_online_cpus(void)
{
	return num_online_cpus();
}

int rxen_xenbus_register_frontend(struct xenbus_driver *drv)
{
	return xenbus_register_frontend(drv);
}

void rxen_xenbus_unregister_driver(struct xenbus_driver *drv)
{
	xenbus_unregister_driver(drv);
}

const char *rxen_dev_nodename(struct xenbus_device *dev)
{
	return dev->nodename;
}

const char *rxen_dev_otherend(struct xenbus_device *dev)
{
	return dev->otherend;
}

int rxen_dev_otherend_id(struct xenbus_device *dev)
{
	return dev->otherend_id;
}

int rxen_dev_state(struct xenbus_device *dev)
{
	return dev->state;
}

void rxen_dev_set_drvdata(struct xenbus_device *dev, void *data)
{
	dev_set_drvdata(&dev->dev, data);
}

void *rxen_dev_get_drvdata(struct xenbus_device *dev)
{
	return dev_get_drvdata(&dev->dev);
}

struct device *rxen_dev_device(struct xenbus_device *dev)
{
	return &dev->dev;
}

int rxen_xenbus_read(u32 xbt, const char *dir, const char *node, char **out,
		     unsigned int *len)
{
	struct xenbus_transaction t = { .id = xbt };
	char *p;

	p = xenbus_read(t, dir, node, len);
	if (IS_ERR(p)) {
		*out = NULL;
		*len = 0;
		return PTR_ERR(p);
	}
	*out = p;
	return 0;
}

int rxen_xenbus_write(u32 xbt, const char *dir, const char *node,
		      const char *value)
{
	struct xenbus_transaction t = { .id = xbt };

	return xenbus_write(t, dir, node, value);
}

int rxen_xenbus_rm(u32 xbt, const char *dir, const char *node)
{
	struct xenbus_transaction t = { .id = xbt };

	return xenbus_rm(t, dir, node);
}

int rxen_xenbus_transaction_start(u32 *xbt)
{
	struct xenbus_transaction t;
	int err;

	err = xenbus_transaction_start(&t);
	*xbt = err ? 0 : t.id;
	return err;
}

int rxen_xenbus_transaction_end(u32 xbt, bool abort)
{
	struct xenbus_transaction t = { .id = xbt };

	return xenbus_transaction_end(t, abort);
}

void rxen_kfree(void *p)
{
	kfree(p);
}

int rxen_xenbus_switch_state(struct xenbus_device *dev, int state)
{
	return xenbus_switch_state(dev, (enum xenbus_state)state);
}

void rxen_xenbus_dev_fatal(struct xenbus_device *dev, int err, const char *msg)
{
	xenbus_dev_fatal(dev, err, "%s", msg);
}

void rxen_xenbus_dev_error(struct xenbus_device *dev, int err, const char *msg)
{
	xenbus_dev_error(dev, err, "%s", msg);
}

int rxen_xenbus_frontend_closed(struct xenbus_device *dev)
{
	return xenbus_frontend_closed(dev);
}

int rxen_xenbus_setup_ring(struct xenbus_device *dev, void **vaddr,
			   unsigned int nr_pages, u32 *grefs)
{
	return xenbus_setup_ring(dev, GFP_NOIO, vaddr, nr_pages, grefs);
}

void rxen_xenbus_teardown_ring(void **vaddr, unsigned int nr_pages, u32 *grefs)
{
	xenbus_teardown_ring(vaddr, nr_pages, grefs);
}

void rxen_virt_mb(void)
{
	virt_mb();
}

void rxen_virt_wmb(void)
{
	virt_wmb();
}

void rxen_virt_rmb(void)
{
	virt_rmb();
}

int rxen_xenbus_alloc_evtchn(struct xenbus_device *dev, u32 *port)
{
	evtchn_port_t p = 0;
	int err;

	err = xenbus_alloc_evtchn(dev, &p);
	*port = p;
	return err;
}

int rxen_xenbus_free_evtchn(struct xenbus_device *dev, u32 port)
{
	return xenbus_free_evtchn(dev, port);
}

int rxen_bind_evtchn_to_irqhandler_lateeoi(u32 evtchn, irq_handler_t handler,
					   const char *name, void *dev_id)
{
	return bind_evtchn_to_irqhandler_lateeoi(evtchn, handler, 0, name,
						 dev_id);
}

void rxen_unbind_from_irqhandler(unsigned int irq, void *dev_id)
{
	unbind_from_irqhandler(irq, dev_id);
}

void rxen_notify_remote_via_evtchn(u32 port)
{
	notify_remote_via_evtchn(port);
}

void rxen_irq_lateeoi(unsigned int irq, bool spurious)
{
	xen_irq_lateeoi(irq, spurious ? XEN_EOI_FLAG_SPURIOUS : 0);
}

int rxen_gnttab_alloc_grant_references(u16 count, u32 *head)
{
	grant_ref_t h = 0;
	int err;

	err = gnttab_alloc_grant_references(count, &h);
	*head = h;
	return err;
}

/*
 * The two calls blkfront makes for every segment it grants
 * (gnttab_claim_grant_reference, gnttab_page_grant_foreign_access_ref_one),
 * in one call from Rust: one crossing per segment, not two.
 */
int rxen_gnttab_grant_page(u32 *head, u16 domid, struct page *page, bool readonly)
{
	grant_ref_t h = *head;
	int ref;

	ref = gnttab_claim_grant_reference(&h);
	if (ref < 0)
		return ref;
	*head = h;
	gnttab_page_grant_foreign_access_ref_one(ref, domid, page, readonly);
	return ref;
}

void rxen_gnttab_free_grant_references(u32 head)
{
	gnttab_free_grant_references(head);
}

void rxen_gnttab_free_grant_reference(u32 ref)
{
	gnttab_free_grant_reference(ref);
}

int rxen_gnttab_try_end_foreign_access(u32 ref)
{
	return gnttab_try_end_foreign_access(ref);
}

void rxen_gnttab_end_foreign_access(u32 ref, struct page *page)
{
	gnttab_end_foreign_access(ref, page);
}

void *rxen_kmap_local_page(struct page *page)
{
	return kmap_local_page(page);
}

void rxen_kunmap_local(void *addr)
{
	kunmap_local(addr);
}

void rxen_free_page(struct page *page)
{
	__free_page(page);
}

/*
 * 2^order zeroed pages, contiguous, split into order-0 pages (each then
 * freed on its own, and each can take a reference of its own, as a
 * grant's deferred release does), or NULL. Above order 0 neither retry
 * nor warn: the caller falls back to smaller blocks.
 */
struct page *rxen_alloc_pages_split(unsigned int order)
{
	gfp_t gfp = GFP_NOIO | __GFP_ZERO;
	struct page *page;

	if (order)
		gfp |= __GFP_NORETRY | __GFP_NOWARN;
	page = alloc_pages(gfp, order);
	if (page && order)
		split_page(page, order);
	return page;
}

/* Page n of a block from rxen_alloc_pages_split (one memmap run). */
struct page *rxen_page_of_block(struct page *first, unsigned long n)
{
	return first + n;
}

/*
 * Periodic work: @fn(@ctx) every @period_ms on the system workqueue, until
 * rxen_periodic_stop(), which waits for a running call and frees it
 * (cancel_delayed_work_sync handles the work re-queueing itself).
 */
struct rxen_periodic {
	struct delayed_work work;
	void (*fn)(void *ctx);
	void *ctx;
	unsigned long period;
};

static void rxen_periodic_run(struct work_struct *w)
{
	struct rxen_periodic *p = container_of(to_delayed_work(w), struct rxen_periodic, work);

	p->fn(p->ctx);
	schedule_delayed_work(&p->work, p->period);
}

struct rxen_periodic *rxen_periodic_start(void (*fn)(void *ctx), void *ctx,
					  unsigned int period_ms)
{
	struct rxen_periodic *p = kzalloc(sizeof(*p), GFP_KERNEL);

	if (!p)
		return NULL;
	p->fn = fn;
	p->ctx = ctx;
	p->period = msecs_to_jiffies(period_ms);
	INIT_DELAYED_WORK(&p->work, rxen_periodic_run);
	schedule_delayed_work(&p->work, p->period);
	return p;
}

void rxen_periodic_stop(struct rxen_periodic *p)
{
	cancel_delayed_work_sync(&p->work);
	kfree(p);
}
