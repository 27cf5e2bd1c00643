/* fuzz.h - what the fuzz targets share (tests/fuzz, one per file of
 * cache_dir that cachegw reads): a scratch cache directory of their own,
 * made once per process and removed at exit, and a file of it written
 * whole with the input. Each target hands that file to the real parser
 * through its layer's API, as the gateway does at start, then checks what
 * a user would rely on (what was written reads back); a check that fails
 * aborts, which libFuzzer reports as a crash with the input kept.
 */
#ifndef CACHEGW_FUZZ_H
#define CACHEGW_FUZZ_H

#include <fcntl.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sanitizer/common_interface_defs.h>

/* Abort with a message (libFuzzer keeps the input as a crash). The
 * message goes where the sanitizers report: run.sh closes the targets'
 * own stderr (-close_fd_mask=2), which the layers' log lines would flood. */
#define FZ_CHECK(cond) do {						\
	if (!(cond)) {							\
		char fz_msg_[512];					\
									\
		snprintf(fz_msg_, sizeof(fz_msg_),			\
			 "%s:%d: check failed: %s", __FILE__, __LINE__,	\
			 #cond);					\
		__sanitizer_report_error_summary(fz_msg_);		\
		abort();						\
	}								\
} while (0)

/* libFuzzer's own mutator, for the targets' custom ones: those call it,
 * then seal again what the writer seals (a checksum over the bytes before
 * it), 3 times in 4. Without that, almost every mutation of a checksummed
 * file stops at its first checksum, and the parser's handling of what a
 * checksum does not guard (a record that checks but means nothing right:
 * a bug, or a hand that used the writer) is never reached. The fourth
 * keeps the raw mutation: damage as a disk makes it. */
size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size);
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size,
			       unsigned int seed);

static char fz_dir_buf[256];

static int fz_rm_one(const char *p, const struct stat *st, int flag,
		     struct FTW *f)
{
	(void)st; (void)flag; (void)f;
	return remove(p);
}

static void fz_cleanup(void)
{
	if (fz_dir_buf[0])
		nftw(fz_dir_buf, fz_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* The scratch directory (0700, under $TMPDIR or /tmp), made at the first
 * call. */
static inline const char *fz_dir(void)
{
	if (!fz_dir_buf[0]) {
		const char *tmp = getenv("TMPDIR");

		snprintf(fz_dir_buf, sizeof(fz_dir_buf), "%s/cachegw-fuzz-XXXXXX",
			 tmp && *tmp ? tmp : "/tmp");
		if (!mkdtemp(fz_dir_buf)) {
			perror("mkdtemp");
			abort();
		}
		atexit(fz_cleanup);
	}
	return fz_dir_buf;
}

/* dir/name, in a static buffer (one of four, rotating). */
static inline const char *fz_path(const char *name)
{
	static char buf[4][512];
	static unsigned i;
	char *p = buf[i++ % 4];

	snprintf(p, sizeof(buf[0]), "%s/%s", fz_dir(), name);
	return p;
}

/* Make dir/name hold exactly data (0600). */
static inline void fz_write(const char *name, const void *data, size_t size)
{
	const char *p = fz_path(name);
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	const uint8_t *b = data;

	if (fd < 0) {
		perror(p);
		abort();
	}
	while (size) {
		ssize_t n = write(fd, b, size);

		if (n <= 0) {
			perror(p);
			abort();
		}
		b += n;
		size -= (size_t)n;
	}
	close(fd);
}

/* The bytes of dir/name into buf (at most len); how many, or -1 if it
 * cannot be read. */
static inline ssize_t fz_read(const char *name, void *buf, size_t len)
{
	int fd = open(fz_path(name), O_RDONLY | O_CLOEXEC);
	ssize_t n, got = 0;

	if (fd < 0)
		return -1;
	while ((size_t)got < len &&
	       (n = read(fd, (char *)buf + got, len - (size_t)got)) > 0)
		got += n;
	close(fd);
	return got;
}

/* md.log's table generation in the md.log target and its seeds
 * (fuzz_seeds.c), and the origin handles of the node-id table beside it:
 * FZ_NODES handles, added in order, so that ids 2.. name the same files
 * in both. */
#define FZ_MD_GEN 0x5eed0001u
#define FZ_NODES 32

static inline size_t fz_handle(unsigned i, uint8_t *h)
{
	return (size_t)snprintf((char *)h, 32, "fuzz-handle-%u", i);
}

/* The object of the cache metadata target and its seeds: its key, block
 * size, and data (FZ_OBJ_SIZE bytes of a pattern, in its data file). */
#define FZ_OBJ_KEY "fuzz-object-key"
#define FZ_OBJ_BS (64u << 10)
#define FZ_OBJ_SIZE (3 * FZ_OBJ_BS + 1000)

static inline uint8_t fz_obj_byte(uint64_t off)
{
	return off < FZ_OBJ_SIZE ? (uint8_t)(off * 131 + 7) : 0;
}

#endif
