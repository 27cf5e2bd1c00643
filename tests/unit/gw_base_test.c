/* gw_base_test: what every room of the gateway stands on (gateway/base/).
 * attr.c: attributes trusted for a tenth of the file's age within
 * acregmin..acregmax (acdir* for a directory), what is left of that never
 * below 0; the struct stat the kernel is given (the file type from the
 * NFS type, permission bits only from the mode, the origin's fileid as
 * st_ino, 512-byte blocks rounded up, the device numbers, the times);
 * which of two versions is newer, and when two are the same version.
 * buf.c: shared buffers page-aligned with at least the room asked for,
 * alive until their last reference goes, recycled rather than mapped
 * afresh, trimmed only when idle, and never more than 256 MiB kept
 * mapped beyond what is in use. */
#include "gw_i.h"

#include <errno.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>

#include "check.h"

static struct nfsc_attr aged(enum nfsc_type type, time_t age)
{
	struct nfsc_attr a = { .type = type };

	clock_gettime(CLOCK_REALTIME, &a.mtime);
	a.mtime.tv_sec -= age;
	a.ctime = a.mtime;
	return a;
}

static void test_ttl(void)
{
	struct gw_opts o = { .acregmin = 3, .acregmax = 60,
			     .acdirmin = 30, .acdirmax = 120 };
	struct gw gw = { .o = &o };
	struct nfsc_attr a;
	struct timespec at;
	double left;

	/* A tenth of its age, within [min, max]. */
	a = aged(NFSC_REG, 0);
	CHECK(gw_attr_ttl(&gw, &a) == 3);
	a = aged(NFSC_REG, 200);
	CHECK(gw_attr_ttl(&gw, &a) >= 19.9 && gw_attr_ttl(&gw, &a) <= 20.1);
	a = aged(NFSC_REG, 100000);
	CHECK(gw_attr_ttl(&gw, &a) == 60);
	/* A directory's from acdirmin..acdirmax. */
	a = aged(NFSC_DIR, 0);
	CHECK(gw_attr_ttl(&gw, &a) == 30);
	a = aged(NFSC_DIR, 100000);
	CHECK(gw_attr_ttl(&gw, &a) == 120);
	/* An mtime in the future (another clock): the minimum. */
	a = aged(NFSC_REG, -1000);
	CHECK(gw_attr_ttl(&gw, &a) == 3);

	/* What is left: the whole of it for attributes got now, none (not
	 * less than none) for attributes got long ago. */
	a = aged(NFSC_REG, 100000);
	clock_gettime(CLOCK_MONOTONIC, &at);
	left = gw_attr_ttl_left(&gw, &a, &at);
	CHECK(left > 59 && left <= 60);
	at.tv_sec -= 1000;
	CHECK(gw_attr_ttl_left(&gw, &a, &at) == 0);
	CHECK(gw_elapsed_since(&at) >= 1000);
}

static void test_stat(void)
{
	static const struct { enum nfsc_type t; mode_t fmt; } types[] = {
		{ NFSC_REG, S_IFREG }, { NFSC_DIR, S_IFDIR },
		{ NFSC_BLK, S_IFBLK }, { NFSC_CHR, S_IFCHR },
		{ NFSC_LNK, S_IFLNK }, { NFSC_SOCK, S_IFSOCK },
		{ NFSC_FIFO, S_IFIFO },
	};
	struct nfsc_attr a = {
		.mode = 0177777, .nlink = 3, .uid = 1000, .gid = 50,
		.size = 5000, .used = 513, .rdev_major = 8, .rdev_minor = 17,
		.fileid = 123456789, .atime = { 1, 2 }, .mtime = { 3, 4 },
		.ctime = { 5, 6 },
	};
	struct stat st;

	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		a.type = types[i].t;
		gw_attr_to_stat(&a, 42, &st);
		CHECK_EQ(st.st_mode & S_IFMT, types[i].fmt);
		/* Permission bits, setuid, setgid and sticky: no more. */
		CHECK_EQ(st.st_mode & ~S_IFMT, 07777);
	}
	a.type = (enum nfsc_type)99;	/* a type no origin should send */
	gw_attr_to_stat(&a, 42, &st);
	CHECK_EQ(st.st_mode & S_IFMT, S_IFREG);
	a.type = NFSC_REG;
	a.mode = 04755;
	gw_attr_to_stat(&a, 42, &st);
	CHECK_EQ(st.st_mode, S_IFREG | 04755);
	CHECK_EQ(st.st_ino, 123456789);	/* the origin's, not the node-id */
	CHECK_EQ(st.st_nlink, 3);
	CHECK_EQ(st.st_uid, 1000);
	CHECK_EQ(st.st_gid, 50);
	CHECK_EQ(st.st_size, 5000);
	CHECK_EQ(st.st_blocks, 2);	/* 513 bytes used: two sectors */
	CHECK_EQ(major(st.st_rdev), 8);
	CHECK_EQ(minor(st.st_rdev), 17);
	CHECK(st.st_atim.tv_sec == 1 && st.st_atim.tv_nsec == 2);
	CHECK(st.st_mtim.tv_sec == 3 && st.st_mtim.tv_nsec == 4);
	CHECK(st.st_ctim.tv_sec == 5 && st.st_ctim.tv_nsec == 6);
	a.used = 0;
	gw_attr_to_stat(&a, 42, &st);
	CHECK_EQ(st.st_blocks, 0);
}

static void test_versions(void)
{
	struct nfsc_attr a = { .size = 10, .mtime = { 100, 5 },
			       .ctime = { 100, 5 } };
	struct nfsc_attr b = a;

	CHECK(gw_attr_same_version(&a, &b));
	CHECK(!gw_attr_newer(&a, &b) && !gw_attr_newer(&b, &a));
	/* The ctime decides, seconds then nanoseconds, before the size. */
	b.ctime.tv_nsec = 6;
	b.size = 1;
	CHECK(gw_attr_newer(&b, &a) && !gw_attr_newer(&a, &b));
	CHECK(!gw_attr_same_version(&a, &b));
	b = a;
	b.ctime.tv_sec = 99;
	b.ctime.tv_nsec = 999999999;
	CHECK(gw_attr_newer(&a, &b));
	/* The same ctime: the larger size is the later. */
	b = a;
	b.size = 11;
	CHECK(gw_attr_newer(&b, &a) && !gw_attr_newer(&a, &b));
	CHECK(!gw_attr_same_version(&a, &b));
	/* Another mtime alone is another version too. */
	b = a;
	b.mtime.tv_nsec = 7;
	CHECK(!gw_attr_same_version(&a, &b));
	CHECK(!gw_attr_newer(&a, &b) && !gw_attr_newer(&b, &a));
}

static void test_bufs(void)
{
	uint64_t mapped;
	char *p, *q, *big[3];

	/* At least the room asked for, page-aligned (O_DIRECT). */
	p = gw_buf_get(5000);
	CHECK(p);
	CHECK_EQ((uintptr_t)p % 4096, 0);
	CHECK(gw_buf_capacity(p) >= 5000);
	memset(p, 0xab, gw_buf_capacity(p));
	q = gw_buf_get(0);
	CHECK(q && gw_buf_capacity(q) >= 1);
	gw_buf_put(q);
	gw_buf_put(NULL);	/* nothing */

	/* Alive until its last reference goes; then recycled: the next
	 * buffer of that size is it, nothing mapped afresh. */
	gw_buf_ref(p);
	gw_buf_put(p);
	CHECK_EQ((unsigned char)p[4999], 0xab);
	mapped = gw_buf_mapped();
	gw_buf_put(p);
	CHECK_EQ(gw_buf_mapped(), mapped);
	q = gw_buf_get(6000);
	CHECK(q == p);
	CHECK_EQ(gw_buf_mapped(), mapped);

	/* More than 2 GiB cannot be had. */
	errno = 0;
	CHECK(!gw_buf_get(((size_t)2 << 30) + 1));
	CHECK_EQ(errno, ENOMEM);

	/* Trimmed only when idle: the first tick after a get keeps what is
	 * free, the next unmaps it; a buffer in use stays. */
	p = gw_buf_get(1 << 20);
	gw_buf_put(p);
	gw_buf_trim(false);
	CHECK(gw_buf_mapped() > mapped);
	gw_buf_trim(false);
	CHECK(gw_buf_mapped() <= mapped);
	CHECK(gw_buf_mapped() >= gw_buf_capacity(q));
	q[0] = 1;

	/* Never more than 256 MiB kept beyond what is in use: three free
	 * buffers of 128 MiB are not all kept. */
	for (int i = 0; i < 3; i++) {
		big[i] = gw_buf_get((size_t)128 << 20);
		CHECK(big[i]);
	}
	for (int i = 0; i < 3; i++)
		gw_buf_put(big[i]);
	CHECK(gw_buf_mapped() <= (256u << 20) + (2u << 20));
	gw_buf_put(q);
	gw_buf_trim(true);
	CHECK_EQ(gw_buf_mapped(), 0);
}

int main(void)
{
	test_ttl();
	test_stat();
	test_versions();
	test_bufs();
	return 0;
}
