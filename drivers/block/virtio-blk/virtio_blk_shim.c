// SPDX-License-Identifier: GPL-2.0
/* The C half of virtio_blk_rs: the shims of the abstractions it uses. */
#include "../../../rust/blkmq/shim.c"
#include "../../../rust/virtio/shim.c"
