// SPDX-License-Identifier: GPL-2.0
/*
 * cdrom-ioctl DEV: asks DEV the two CD-ROM ioctls xen-blkfront answers and
 * prints "get_capability=R multisession=R zeroed=Z", R being the ioctl's
 * return value or -errno, Z whether CDROMMULTISESSION cleared the struct.
 * Built static for the domU initramfs (busybox has no such tool).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/cdrom.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>

int main(int argc, char **argv)
{
	struct cdrom_multisession ms;
	unsigned char *b = (unsigned char *)&ms;
	int fd, cap, multi, zeroed = 1;
	size_t i;

	if (argc != 2) {
		fprintf(stderr, "usage: %s DEV\n", argv[0]);
		return 2;
	}
	fd = open(argv[1], O_RDONLY | O_NONBLOCK);
	if (fd < 0) {
		perror(argv[1]);
		return 2;
	}
	cap = ioctl(fd, CDROM_GET_CAPABILITY, 0) < 0 ? -errno : 0;
	memset(&ms, 0xa5, sizeof(ms));
	multi = ioctl(fd, CDROMMULTISESSION, &ms) < 0 ? -errno : 0;
	for (i = 0; i < sizeof(ms); i++)
		zeroed &= b[i] == 0;
	printf("get_capability=%d multisession=%d zeroed=%d\n", cap, multi, zeroed);
	return 0;
}
