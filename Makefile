# SPDX-License-Identifier: GPL-2.0
#
# Builds xen_blkfront_rs.ko and virtio_blk_rs.ko as kbuild external modules
# against a Rust-enabled kernel *build* tree:
#
#   make [KDIR=/path/to/built/tree]      (default /lib/modules/$(uname -r)/build)
#
# Required in that tree: CONFIG_RUST=y and the generated Rust metadata
# (rust/libkernel.rmeta, made by a full build or `make modules_prepare`);
# for virtio_blk_rs: CONFIG_VIRTIO and CONFIG_VIRTIO_PCI (or another
# transport); for xen_blkfront_rs: CONFIG_XEN and CONFIG_XEN_PV or PVH/HVM.
# KUnit suites are compiled in when the tree has CONFIG_KUNIT=y.

KDIR ?= /lib/modules/$(shell uname -r)/build
PWD := $(shell pwd)

# Read the tree's configuration once (make syntax: CONFIG_X=y / "text").
KCONF := $(KDIR)/include/config/auto.conf
ifneq ($(wildcard $(KCONF)),)
include $(KCONF)
endif

# Build with the same compiler family the tree was built with: clang trees
# want LLVM=-<major> (Debian's versioned clang), gcc trees want CC=gcc-<major>.
ifeq ($(CONFIG_CC_IS_CLANG),y)
LLVM ?= -$(shell echo $$(( $(CONFIG_CLANG_VERSION) / 10000 )))
KMAKE_TOOLCHAIN := LLVM=$(LLVM)
else ifeq ($(CONFIG_CC_IS_GCC),y)
CC := gcc-$(shell echo $$(( $(CONFIG_GCC_VERSION) / 10000 )))
KMAKE_TOOLCHAIN := CC=$(CC)
endif

RUSTC ?= rustc
BINDGEN ?= bindgen

# Signed modules (Secure Boot with an enrolled MOK, or a kernel that
# enforces signatures: CONFIG_MODULE_SIG_FORCE, module.sig_enforce=1):
# with SIGN_KEY (the private key: a PEM file or a PKCS#11 URI) and
# SIGN_CERT (its X.509 certificate, PEM or DER), `make` signs each module
# it builds with the tree's scripts/sign-file, as the kernel's own
# modules_install does; `make sign` signs what is built (SIGN_MODULES: other
# .ko files). A module that carries a signature already is left as it is.
SIGN_HASH ?= $(or $(CONFIG_MODULE_SIG_HASH),sha256)
SIGN_MODULES ?= $(wildcard $(PWD)/*.ko)
SIGN_MAGIC := ~Module signature appended~

.PHONY: all modules clean check-kdir check-sign sign modules_install

all modules: check-kdir
	$(MAKE) -C $(KDIR) M=$(PWD) $(KMAKE_TOOLCHAIN) modules
	$(if $(SIGN_KEY)$(SIGN_CERT),$(MAKE) --no-print-directory sign)

sign: check-sign
	@for ko in $(SIGN_MODULES); do \
		if tail -c 28 "$$ko" | grep -qF '$(SIGN_MAGIC)'; then \
			echo "  SIGN    $$ko: signed already, left as it is"; continue; fi; \
		$(KDIR)/scripts/sign-file $(SIGN_HASH) "$(SIGN_KEY)" "$(SIGN_CERT)" "$$ko" || exit 1; \
		echo "  SIGN    $$ko"; \
	done

modules_install: check-kdir
	$(MAKE) -C $(KDIR) M=$(PWD) $(KMAKE_TOOLCHAIN) modules_install

# Debian's stock kernel (no custom kernel): prepare a Rust-ready build tree
# for DISTRO_KREL (default 7.3.4+deb13-amd64) from Debian packages in a
# trixie chroot under /var/cache/blkfront-rs, and build both modules against
# it there. Refuses if the kernel's compiler/rustc/bindgen/release differ
# from what the tree would produce. See Documentation/debian.md.
.PHONY: distro-kdir deb
distro-kdir:
	bash tools/distro/debian-kdir.sh

# The binary package blkfront-rs-modules-$(DISTRO_KREL) for that kernel (both
# modules, the modprobe.d file, the initramfs-tools hook), built and checked
# with lintian in the same chroot; lands in /var/cache/blkfront-rs/distro/deb/.
# SIGN_KEY and SIGN_CERT (as above): its modules are signed.
# See Documentation/debian.md.
deb:
	SIGN_KEY="$(SIGN_KEY)" SIGN_CERT="$(SIGN_CERT)" bash tools/distro/debian-kdir.sh --deb

clean:
	$(MAKE) -C $(KDIR) M=$(PWD) clean 2>/dev/null || true
	find . -name '*_generated.rs' -delete

# One line per problem, before kbuild gets a chance to print a wall of
# errors: $(error) stops make with exactly that line.
kdir_problem = $(if $(wildcard $(KDIR)/Makefile),,KDIR=$(KDIR) is not a kernel build tree (no Makefile); pass KDIR=/path/to/built/linux)
kconf_problem = $(if $(wildcard $(KCONF)),,KDIR=$(KDIR) is not configured and built (no include/config/auto.conf); run 'make olddefconfig modules_prepare' there)
# Linux 7.3 on x86-64 only: the modules are written against 7.3's kernel
# crate and C interfaces (another release fails to compile, or worse), and
# x86-64 is the only architecture they are built and tested on.
KDIR_RELEASE := $(strip $(shell cat $(KDIR)/include/config/kernel.release 2>/dev/null))
kver_problem = $(if $(filter 7.3 7.3.% 7.3-% 7.3+%,$(KDIR_RELEASE)),,KDIR=$(KDIR) is Linux $(or $(KDIR_RELEASE),of unknown release (no include/config/kernel.release)); blkfront-rs builds for Linux 7.3 on x86-64 only)
karch_problem = $(if $(filter y,$(CONFIG_X86_64)),,KDIR=$(KDIR) is not an x86-64 kernel (no CONFIG_X86_64=y); blkfront-rs builds for Linux 7.3 on x86-64 only)
rust_problem = $(strip \
  $(if $(filter y,$(CONFIG_RUST)),,KDIR=$(KDIR) was built without CONFIG_RUST=y; enable Rust (see .config.fragments/rust-kunit.config) and rebuild it) \
  )
rmeta_problem = $(if $(wildcard $(KDIR)/rust/libkernel.rmeta),,KDIR=$(KDIR) has CONFIG_RUST=y but no rust/libkernel.rmeta (distro headers ship none); run 'make modules_prepare' in a full source tree with the same config, or 'make distro-kdir')
rustc_problem = $(if $(filter $(CONFIG_RUSTC_VERSION_TEXT),$(shell $(RUSTC) --version 2>/dev/null)),,rustc on PATH is '$(shell $(RUSTC) --version 2>/dev/null)' but KDIR was built with '$(CONFIG_RUSTC_VERSION_TEXT)'; put that rustc first on PATH (or pass RUSTC=...))
bindgen_problem = $(if $(filter $(CONFIG_BINDGEN_VERSION_TEXT),$(shell $(BINDGEN) --version 2>/dev/null)),,bindgen on PATH is '$(shell $(BINDGEN) --version 2>/dev/null)' but KDIR was built with '$(CONFIG_BINDGEN_VERSION_TEXT)'; install that bindgen (or pass BINDGEN=...))

signkey_problem = $(if $(SIGN_KEY),$(if $(filter pkcs11:%,$(SIGN_KEY))$(wildcard $(SIGN_KEY)),,SIGN_KEY=$(SIGN_KEY) does not exist),SIGN_KEY is not set: name the private key that signs the modules (a PEM file or a PKCS11 URI))
signcert_problem = $(if $(SIGN_CERT),$(if $(wildcard $(SIGN_CERT)),,SIGN_CERT=$(SIGN_CERT) does not exist),SIGN_CERT is not set: name the X.509 certificate of SIGN_KEY (PEM or DER))
signfile_problem = $(if $(wildcard $(KDIR)/scripts/sign-file),,KDIR=$(KDIR) has no scripts/sign-file (a tree built with CONFIG_MODULE_SIG has it after 'make modules_prepare'))
signko_problem = $(if $(SIGN_MODULES),,no module to sign: run 'make' first)

check-sign:
	$(if $(signkey_problem),$(error $(signkey_problem)))
	$(if $(signcert_problem),$(error $(signcert_problem)))
	$(if $(signfile_problem),$(error $(signfile_problem)))
	$(if $(signko_problem),$(error $(signko_problem)))

check-kdir:
	$(if $(kdir_problem),$(error $(kdir_problem)))
	$(if $(kconf_problem),$(error $(kconf_problem)))
	$(if $(rust_problem),$(error $(rust_problem)))
	$(if $(kver_problem),$(error $(kver_problem)))
	$(if $(karch_problem),$(error $(karch_problem)))
	$(if $(rmeta_problem),$(error $(rmeta_problem)))
	$(if $(rustc_problem),$(error $(rustc_problem)))
	$(if $(bindgen_problem),$(error $(bindgen_problem)))
	@test "$(CONFIG_VIRTIO)" = y || echo "note: KDIR has no CONFIG_VIRTIO=y: virtio_blk_rs.ko is not built"
	@test "$(CONFIG_XEN)" = y || echo "note: KDIR has no CONFIG_XEN=y: xen_blkfront_rs.ko is not built"
	@test "$(CONFIG_VIRTIO)" != y -o "$(CONFIG_SG_POOL)" = y || echo "note: KDIR has no CONFIG_SG_POOL=y: virtio_blk_rs sends at most 256 segments per request"
