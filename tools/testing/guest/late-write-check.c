// SPDX-License-Identifier: GPL-2.0
/*
 * late-write-check DEVICE BLOCKS WAIT_SECONDS
 * late-write-check --cached DEVICE BLOCKS WAIT_SECONDS
 * late-write-check --readers P DEVICE BLOCKS WAIT_SECONDS
 *
 * Whether a buffer a read handed back still changes afterwards: a frontend
 * that completes a read while its backend keeps the data grant mapped
 * gives the page back to its owner while the backend can still write it
 * (blkif-backend --misbehave late-write-after-response writes 0x5A over
 * it 3 s after the response).
 *
 * Direct mode (default): opens DEVICE O_RDWR|O_DIRECT, writes BLOCKS
 * blocks of 4096 bytes at 0..BLOCKS*4096, each its own pattern (every
 * 8-byte word 0xB10C000000000000 | block << 16 | word: never 0x5A bytes,
 * different in every block), fsyncs, then reads every block back into a
 * buffer of its own (all kept), sleeps WAIT_SECONDS and compares each
 * buffer whose read succeeded with the pattern again.
 *
 * --readers P (direct mode): the writes as above, one at a time; then P
 * processes read at once, process c the blocks b with b % P == c, one
 * after the other, each sleeps WAIT_SECONDS and compares its own buffers:
 * P reads in flight together, enough to fill a ring (blkif-backend
 * --misbehave map-predicted-grants strikes on a ring full of reads).
 *
 * --cached: the same writes, then the device's page cache dropped
 * (POSIX_FADV_DONTNEED) and DEVICE opened again without O_DIRECT; every
 * block is read through the page cache, and after WAIT_SECONDS read again
 * (from the cache) and compared with what the first read returned.
 *
 * Prints one line, these words always, in this order:
 *   late-write-check: reads N ok K eio E other O wrong-at-completion W
 *   changed-after-completion C writes-failed F
 * N reads issued; K succeeded, E failed with EIO, O failed otherwise
 * (short reads included); W reads that succeeded with data other than
 * what was written; C buffers of successful reads that changed while
 * nothing wrote them (direct: those right at completion that no longer
 * are, the W ones left out; --cached: a second read differs from the
 * first or fails); F writes (and the fsync) that failed (EIO is expected once the
 * backend's fault broke the ring; those blocks are still read and compared).
 * Exit status: 0 when W and C are 0, 1 otherwise, 2 on a usage error or an
 * open or allocation failure (with a message on stderr). Each call ends;
 * nothing loops on a failure.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define BLOCK 4096
#define WORDS (BLOCK / 8)
/* Enough for any test disk; bounds the buffers kept. */
#define MAX_BLOCKS 65536

static void fill(uint64_t *w, unsigned long block)
{
	unsigned long i;

	for (i = 0; i < WORDS; i++)
		w[i] = 0xB10C000000000000ULL | (uint64_t)block << 16 | i;
}

static int matches(const uint64_t *w, unsigned long block)
{
	unsigned long i;

	for (i = 0; i < WORDS; i++)
		if (w[i] != (0xB10C000000000000ULL | (uint64_t)block << 16 | i))
			return 0;
	return 1;
}

static int number(const char *s, unsigned long max, unsigned long *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || *s == '-' || v > max)
		return -1;
	*out = v;
	return 0;
}

/* One whole block: 0, -errno, or -ENODATA for a short read (counted as
 * "other": only the driver's failure is EIO). */
static int read_block(int fd, void *buf, unsigned long block)
{
	ssize_t n = pread(fd, buf, BLOCK, (off_t)block * BLOCK);

	if (n == BLOCK)
		return 0;
	return n < 0 ? -errno : -ENODATA;
}

/* The counts of one reading process, as the pipe carries them. */
struct counts {
	unsigned long ok, eio, other, wrong, changed;
};

int main(int argc, char **argv)
{
	unsigned long blocks, wait_s, b, readers = 1, c;
	unsigned long ok = 0, eio = 0, other = 0, wrong = 0, changed = 0, wfail = 0;
	int cached = 0, fd, *st, *ok_at_completion, pipefd[2] = { -1, -1 };
	const char *dev;
	uint64_t *wbuf, **rbuf, *again = NULL;
	struct counts mine, theirs;

	if (argc == 5 && !strcmp(argv[1], "--cached")) {
		cached = 1;
		argv++;
		argc--;
	} else if (argc == 6 && !strcmp(argv[1], "--readers")) {
		if (number(argv[2], 256, &readers) || readers == 0)
			argc = 0;
		argv += 2;
		argc -= 2;
	}
	if (argc != 4 || number(argv[2], MAX_BLOCKS, &blocks) || blocks == 0 ||
	    number(argv[3], 3600, &wait_s)) {
		fprintf(stderr,
			"usage: late-write-check [--cached | --readers P] DEVICE BLOCKS WAIT_SECONDS\n"
			"  (BLOCKS 1..%d, WAIT_SECONDS 0..3600, P 1..256)\n",
			MAX_BLOCKS);
		return 2;
	}
	dev = argv[1];
	st = calloc(blocks, sizeof(*st));
	ok_at_completion = calloc(blocks, sizeof(*ok_at_completion));
	rbuf = calloc(blocks, sizeof(*rbuf));
	if (!st || !ok_at_completion || !rbuf || posix_memalign((void **)&wbuf, BLOCK, BLOCK) ||
	    (cached && posix_memalign((void **)&again, BLOCK, BLOCK))) {
		fprintf(stderr, "late-write-check: out of memory\n");
		return 2;
	}
	for (b = 0; b < blocks; b++) {
		if (posix_memalign((void **)&rbuf[b], BLOCK, BLOCK)) {
			fprintf(stderr, "late-write-check: out of memory\n");
			return 2;
		}
		/* Not the pattern: a read that returns success without
		 * filling the buffer shows as wrong. */
		memset(rbuf[b], 0, BLOCK);
	}
	fd = open(dev, O_RDWR | O_DIRECT);
	if (fd < 0) {
		fprintf(stderr, "late-write-check: %s: %s\n", dev, strerror(errno));
		return 2;
	}
	for (b = 0; b < blocks; b++) {
		fill(wbuf, b);
		if (pwrite(fd, wbuf, BLOCK, (off_t)b * BLOCK) != BLOCK)
			wfail++;
	}
	if (fsync(fd))
		wfail++;
	if (cached) {
		/* Through the page cache from here: what is cached now was
		 * never read from the backend, so drop it first. */
		close(fd);
		fd = open(dev, O_RDONLY);
		if (fd < 0) {
			fprintf(stderr, "late-write-check: %s: %s\n", dev, strerror(errno));
			return 2;
		}
		posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	}
	/* Process c reads and checks the blocks b % readers == c; the
	 * parent is reader 0, the others send their counts up the pipe. */
	c = 0;
	if (readers > 1) {
		if (pipe(pipefd)) {
			fprintf(stderr, "late-write-check: pipe: %s\n", strerror(errno));
			return 2;
		}
		for (c = readers - 1; c > 0; c--) {
			pid_t pid = fork();

			if (pid < 0) {
				fprintf(stderr, "late-write-check: fork: %s\n", strerror(errno));
				return 2;
			}
			if (pid == 0)
				break;
		}
	}
	for (b = c; b < blocks; b += readers) {
		st[b] = read_block(fd, rbuf[b], b);
		if (st[b] == 0) {
			ok++;
			ok_at_completion[b] = matches(rbuf[b], b);
			if (!ok_at_completion[b])
				wrong++;
		} else if (st[b] == -EIO) {
			eio++;
		} else {
			other++;
		}
	}
	sleep(wait_s);
	for (b = c; b < blocks; b += readers) {
		if (st[b])
			continue;
		if (cached) {
			/* The page cache's copy now against what the first read
			 * returned: a change came from under the cache. */
			if (read_block(fd, again, b) || memcmp(again, rbuf[b], BLOCK))
				changed++;
		} else if (ok_at_completion[b] && !matches(rbuf[b], b)) {
			/* Nothing of ours wrote the buffer since the read
			 * returned it right. */
			changed++;
		}
	}
	close(fd);
	if (readers > 1) {
		mine = (struct counts){ ok, eio, other, wrong, changed };
		if (c > 0) {
			/* One write of a few words: atomic on a pipe. */
			return write(pipefd[1], &mine, sizeof(mine)) == sizeof(mine) ? 0 : 2;
		}
		close(pipefd[1]);
		for (c = 1; c < readers; c++) {
			if (read(pipefd[0], &theirs, sizeof(theirs)) != sizeof(theirs)) {
				/* A reader that never reported: counted as failed reads
				 * of unknown kind (its share of the blocks). */
				other += (blocks + readers - 1 - c) / readers;
				continue;
			}
			ok += theirs.ok;
			eio += theirs.eio;
			other += theirs.other;
			wrong += theirs.wrong;
			changed += theirs.changed;
		}
		while (wait(NULL) > 0)
			;
	}
	printf("late-write-check: reads %lu ok %lu eio %lu other %lu wrong-at-completion %lu "
	       "changed-after-completion %lu writes-failed %lu\n",
	       blocks, ok, eio, other, wrong, changed, wfail);
	return wrong || changed ? 1 : 0;
}
