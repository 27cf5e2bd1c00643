/* gw_ops_test: the operations room's decisions (gateway/ops/), with the
 * gateway's own objects. setattr: the SETATTR sent for each FUSE
 * setattr (only the fields asked for; permission bits only; "now" as the
 * origin's time, an explicit time as given); a mode change that only
 * clears setuid/setgid for a non-owner's write is not sent, anything
 * more is (the owner's, root's, a real chmod, one with other fields).
 * listing: a READDIRPLUS counts as leave to search the directory only if
 * it gave a name's handle and attributes ("." and ".." do not count).
 * interrupts: a process's interrupted request answers EINTR, a kernel
 * thread's (knfsd's nfsd threads being stopped) ETIMEDOUT, which knfsd
 * passes to its client as "try again" where EINTR would be its EIO. */
#include "ops_i.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"

static void test_sattr(void)
{
	struct stat st = { 0 };
	struct nfsc_sattr sa;

	st.st_mode = S_IFREG | 04755;
	st.st_uid = 1000;
	st.st_gid = 50;
	st.st_size = 12345;
	st.st_atim = (struct timespec){ 11, 12 };
	st.st_mtim = (struct timespec){ 21, 22 };

	/* chmod: the mode alone, permission bits only. */
	ops_sattr_of(&st, FUSE_SET_ATTR_MODE, &sa);
	CHECK(sa.set_mode && !sa.set_uid && !sa.set_gid && !sa.set_size);
	CHECK_EQ(sa.mode, 04755);
	CHECK_EQ(sa.atime_how, NFSC_TIME_KEEP);
	CHECK_EQ(sa.mtime_how, NFSC_TIME_KEEP);

	/* chown and chgrp; truncate. */
	ops_sattr_of(&st, FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID, &sa);
	CHECK(!sa.set_mode && sa.set_uid && sa.set_gid && !sa.set_size);
	CHECK_EQ(sa.uid, 1000);
	CHECK_EQ(sa.gid, 50);
	ops_sattr_of(&st, FUSE_SET_ATTR_SIZE, &sa);
	CHECK(sa.set_size && !sa.set_mode && !sa.set_uid && !sa.set_gid);
	CHECK_EQ(sa.size, 12345);

	/* touch: both times now, the origin's clock. */
	ops_sattr_of(&st, FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_ATIME_NOW |
		     FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_MTIME_NOW, &sa);
	CHECK_EQ(sa.atime_how, NFSC_TIME_SERVER);
	CHECK_EQ(sa.mtime_how, NFSC_TIME_SERVER);
	CHECK(!sa.set_mode && !sa.set_size);

	/* touch -d: the times given, to the nanosecond; one without the
	 * other leaves the other. */
	ops_sattr_of(&st, FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME, &sa);
	CHECK_EQ(sa.atime_how, NFSC_TIME_CLIENT);
	CHECK(sa.atime.tv_sec == 11 && sa.atime.tv_nsec == 12);
	CHECK_EQ(sa.mtime_how, NFSC_TIME_CLIENT);
	CHECK(sa.mtime.tv_sec == 21 && sa.mtime.tv_nsec == 22);
	ops_sattr_of(&st, FUSE_SET_ATTR_MTIME, &sa);
	CHECK_EQ(sa.atime_how, NFSC_TIME_KEEP);
	CHECK_EQ(sa.mtime_how, NFSC_TIME_CLIENT);

	/* Nothing asked: nothing set. */
	ops_sattr_of(&st, 0, &sa);
	CHECK(!sa.set_mode && !sa.set_uid && !sa.set_gid && !sa.set_size);
	CHECK_EQ(sa.atime_how, NFSC_TIME_KEEP);
	CHECK_EQ(sa.mtime_how, NFSC_TIME_KEEP);
}

static bool killpriv(struct gw_inode *ino, uint32_t uid, uint32_t mode)
{
	struct nfsc_cred cr = { .uid = uid, .gid = 50 };
	struct nfsc_sattr sa = { .set_mode = true, .mode = mode };

	return ops_kill_priv_only(ino, &sa, &cr);
}

static void test_killpriv(void)
{
	struct gw_inode ino = { 0 };
	struct nfsc_cred cr = { .uid = 1001, .gid = 50 };
	struct nfsc_sattr sa;

	pthread_mutex_init(&ino.lock, NULL);
	ino.attr = (struct nfsc_attr){ .type = NFSC_REG, .mode = 06775,
				       .uid = 1000, .gid = 50 };
	ino.attr_valid = true;

	/* Another user writing a setuid/setgid file: the kernel's clearing
	 * of either bit or both is not sent. */
	CHECK(killpriv(&ino, 1001, 0775));
	CHECK(killpriv(&ino, 1001, 02775));
	CHECK(killpriv(&ino, 1001, 04775));
	/* The owner's and root's are theirs to make; the same mode is no
	 * change; a change of other bits is a real chmod. */
	CHECK(!killpriv(&ino, 1000, 0775));
	CHECK(!killpriv(&ino, 0, 0775));
	CHECK(!killpriv(&ino, 1001, 06775));
	CHECK(!killpriv(&ino, 1001, 0770));
	CHECK(!killpriv(&ino, 1001, 04777));
	/* With anything else in the same SETATTR, it is sent whole. */
	sa = (struct nfsc_sattr){ .set_mode = true, .mode = 0775,
				  .set_uid = true, .uid = 1001 };
	CHECK(!ops_kill_priv_only(&ino, &sa, &cr));
	sa = (struct nfsc_sattr){ .set_mode = true, .mode = 0775,
				  .mtime_how = NFSC_TIME_SERVER };
	CHECK(!ops_kill_priv_only(&ino, &sa, &cr));
	sa = (struct nfsc_sattr){ .set_mode = false, .set_size = true };
	CHECK(!ops_kill_priv_only(&ino, &sa, &cr));
	/* A truncate with it is still a clearing (the size goes out). */
	sa = (struct nfsc_sattr){ .set_mode = true, .mode = 0775,
				  .set_size = true };
	CHECK(ops_kill_priv_only(&ino, &sa, &cr));
	/* A file without the bits: a chmod; attributes unknown: sent. */
	ino.attr.mode = 0775;
	CHECK(!killpriv(&ino, 1001, 0775));
	CHECK(!killpriv(&ino, 1001, 0755));
	ino.attr.mode = 06775;
	ino.attr_valid = false;
	CHECK(!killpriv(&ino, 1001, 0775));
	pthread_mutex_destroy(&ino.lock);
}

static void test_searched(void)
{
	struct nfsc_dirent e[3] = {
		{ .name = (char *)".", .has_fh = true, .has_attr = true },
		{ .name = (char *)"..", .has_fh = true, .has_attr = true },
		{ .name = (char *)"a", .has_fh = true, .has_attr = false },
	};
	struct nfsc_dirlist l = { .ents = e, .n = 3, .cap = 3 };

	/* Dots and a name without its attributes: not searched. */
	CHECK(!ops_names_searched(&l));
	e[2].has_attr = true;
	e[2].has_fh = false;
	CHECK(!ops_names_searched(&l));
	/* A name with both: searched. */
	e[2].has_fh = true;
	CHECK(ops_names_searched(&l));
	l.n = 0;
	CHECK(!ops_names_searched(&l));
}

static void test_intr_errno(void)
{
	char comm[32] = "";
	FILE *f;

	CHECK_EQ(gw_intr_errno(getpid()), EINTR);
	/* Outside the gateway's pid namespace: maybe knfsd's. */
	CHECK_EQ(gw_intr_errno(0), ETIMEDOUT);
	/* kthreadd is pid 2 where this test sees the kernel's threads. */
	f = fopen("/proc/2/comm", "r");
	if (f && fgets(comm, sizeof(comm), f) &&
	    !strcmp(comm, "kthreadd\n"))
		CHECK_EQ(gw_intr_errno(2), ETIMEDOUT);
	else
		fprintf(stderr, "no kthreadd at pid 2: the kernel thread's "
			"case not checked\n");
	if (f)
		fclose(f);
}

int main(void)
{
	test_sattr();
	test_killpriv();
	test_searched();
	test_intr_errno();
	return 0;
}
