// SPDX-License-Identifier: GPL-2.0
/* The C half of xen_blkfront_rs: the shims of the abstractions it uses. */
#include "../../../rust/blkmq/shim.c"
#include "../../../rust/xen/shim.c"
