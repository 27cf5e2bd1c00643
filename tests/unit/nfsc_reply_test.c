/* nfsc_reply_test: what nfsclient/ makes of the origin's replies and what
 * it sends, procedure by procedure, against an origin inside the test
 * (nfsc_fake.h) that answers in XDR written here, through the real
 * libnfs: attributes as sent (mode without type bits, 64-bit ids, times
 * past 2038), a size past 2^63 refused (EOVERFLOW), NFS errors as a
 * local filesystem's errno, post-op attributes also of failed calls,
 * handles empty or absent, READs short or too long, READDIRPLUS in
 * rounds (cookie and verifier sent back, names the kernel would refuse
 * skipped and counted, a cap), WRITE's count and verifier, COMMIT's
 * verifier, SETATTR's times clamped to NFSv3's, CREATE's guard and the
 * directory's attributes after it, the
 * longest SYMLINK target that still fits one call. */
#include "nfsc_fake.h"

#define P_GETATTR 1
#define P_SETATTR 2
#define P_LOOKUP 3
#define P_READLINK 5
#define P_READ 6
#define P_WRITE 7
#define P_CREATE 8
#define P_SYMLINK 10
#define P_REMOVE 12
#define P_RMDIR 13
#define P_RENAME 14
#define P_READDIRPLUS 17
#define P_FSSTAT 18
#define P_COMMIT 21

#define FILE_SIZE 10000		/* the file "data" */

static const struct fake_fattr file_attr = {
	.type = NFSC_REG, .mode = 0104755, .nlink = 3,
	.uid = 4000000001u, .gid = 1002, .size = 0x123456789ull,
	.used = 3 * 4096, .fsid = 0xabcdef0123ull,
	.fileid = 0x1122334455667788ull,
	.atime = { 1700000000, 1 }, .mtime = { 1700000001, 999999999 },
	.ctime = { 4000000000u, 5 },
};

/* What the origin saw of the calls that change it; f.lock. */
static struct seen {
	uint64_t off;
	uint32_t count, stable, datalen;
	uint8_t data[8192];
	struct {
		uint32_t set_mode, mode, set_uid, uid, set_gid, set_size;
		uint64_t size;
		uint32_t atime_how, atime[2], mtime_how, mtime[2], guard;
	} sa;
	uint32_t create_how;
	char name[300], name2[300];
	uint32_t target_len;
	uint64_t rdp_cookie;
	uint8_t rdp_verf[8];
} seen;

static struct fake f;

static bool fh_is(const struct nfsc_fh *fh, const char *s)
{
	return fh->len == strlen(s) && !memcmp(fh->data, s, fh->len);
}

static struct nfsc_fh fh_of(const char *s)
{
	struct nfsc_fh fh = { .len = (uint32_t)strlen(s) };

	memcpy(fh.data, s, fh.len);
	return fh;
}

static void attr_for(struct fake_fattr *a, uint64_t size, uint64_t fileid)
{
	*a = file_attr;
	a->mode = 0644;
	a->size = size;
	a->fileid = fileid;
}

/* One READDIRPLUS entry, with attributes (fileid) and a handle. */
static void xw_entry(struct xw *w, uint64_t fileid, const char *name,
		     uint64_t cookie, bool attrs, const char *fh)
{
	struct fake_fattr a;
	struct nfsc_fh h;

	xw_u32(w, 1);			/* an entry follows */
	xw_u64(w, fileid);
	xw_string(w, name);
	xw_u64(w, cookie);
	attr_for(&a, 0, fileid);
	xw_post_op(w, attrs ? &a : NULL);
	xw_u32(w, fh != NULL);
	if (fh) {
		h = fh_of(fh);
		xw_fh(w, &h);
	}
}

static void xr_sattr3(struct xr *a)
{
	seen.sa.set_mode = xr_u32(a);
	if (seen.sa.set_mode)
		seen.sa.mode = xr_u32(a);
	seen.sa.set_uid = xr_u32(a);
	if (seen.sa.set_uid)
		seen.sa.uid = xr_u32(a);
	seen.sa.set_gid = xr_u32(a);
	if (seen.sa.set_gid)
		xr_u32(a);
	seen.sa.set_size = xr_u32(a);
	if (seen.sa.set_size)
		seen.sa.size = xr_u64(a);
	seen.sa.atime_how = xr_u32(a);
	if (seen.sa.atime_how == 2) {
		seen.sa.atime[0] = xr_u32(a);
		seen.sa.atime[1] = xr_u32(a);
	}
	seen.sa.mtime_how = xr_u32(a);
	if (seen.sa.mtime_how == 2) {
		seen.sa.mtime[0] = xr_u32(a);
		seen.sa.mtime[1] = xr_u32(a);
	}
}

static enum fake_act origin(struct fake *o, const struct fake_call *c,
			    struct xr *a, struct xw *w)
{
	struct fake_fattr attr, pre;
	struct nfsc_fh fh, fh2;
	char name[300];

	(void)o;
	xr_fh(a, &fh);
	switch (c->proc) {
	case P_GETATTR:
		attr = file_attr;
		if (fh_is(&fh, "huge"))
			attr.size = 1ull << 63;
		else if (fh_is(&fh, "chr")) {
			attr.type = NFSC_CHR;
			attr.rdev1 = 4;
			attr.rdev2 = 64;
		} else if (fh_is(&fh, "jukebox")) {
			xw_u32(w, 10008);
			return FAKE_REPLY;
		} else if (!fh_is(&fh, "attr")) {
			return FAKE_DEFAULT;
		}
		xw_u32(w, 0);
		xw_fattr3(w, &attr);
		return FAKE_REPLY;
	case P_LOOKUP:
		xr_string(a, name, sizeof(name));
		attr_for(&pre, 4096, 1);
		attr_for(&attr, 5, 77);
		if (!strcmp(name, "missing")) {
			xw_u32(w, 2);			/* NOENT */
			xw_post_op(w, &pre);
			return FAKE_REPLY;
		}
		xw_u32(w, 0);
		fh2 = fh_of(!strcmp(name, "emptyfh") ? "" : "file-handle");
		xw_fh(w, &fh2);
		xw_post_op(w, strcmp(name, "noattr") ? &attr : NULL);
		xw_post_op(w, &pre);
		return FAKE_REPLY;
	case P_READ: {
		uint64_t off = xr_u64(a);
		uint32_t count = xr_u32(a), k, i;
		uint8_t buf[70000];

		if (fh_is(&fh, "rdfail")) {
			attr_for(&attr, 321, 9);
			xw_u32(w, 5);			/* IO */
			xw_post_op(w, &attr);
			return FAKE_REPLY;
		}
		attr_for(&attr, FILE_SIZE, 8);
		if (fh_is(&fh, "over")) {
			k = count + 16;		/* more than asked */
		} else {
			/* "data": at most 3000 bytes a READ, short. */
			k = off >= FILE_SIZE ? 0 : (uint32_t)(FILE_SIZE - off);
			if (k > count)
				k = count;
			if (k > 3000)
				k = 3000;
		}
		CHECK(k <= sizeof(buf));
		for (i = 0; i < k; i++)
			buf[i] = (uint8_t)((off + i) * 7 + 1);
		xw_u32(w, 0);
		xw_post_op(w, &attr);
		xw_u32(w, k);
		xw_u32(w, off + k >= FILE_SIZE);	/* eof */
		xw_opaque(w, buf, k);
		return FAKE_REPLY;
	}
	case P_WRITE:
		seen.off = xr_u64(a);
		seen.count = xr_u32(a);
		seen.stable = xr_u32(a);
		seen.datalen = xr_opaque(a, seen.data, sizeof(seen.data));
		attr_for(&pre, 10, 8);
		pre.mtime[0] = 1234;
		pre.ctime[0] = 5678;
		attr_for(&attr, seen.off + seen.count, 8);
		if (fh_is(&fh, "wfail")) {
			xw_u32(w, 28);			/* NOSPC */
			xw_wcc(w, NULL, &attr);
			return FAKE_REPLY;
		}
		xw_u32(w, 0);
		xw_wcc(w, &pre, &attr);
		xw_u32(w, seen.count + 100);	/* more than sent */
		xw_u32(w, 2);			/* FILE_SYNC */
		xw_bytes(w, "VERF0001", 8);
		return FAKE_REPLY;
	case P_COMMIT:
		attr_for(&attr, 10, 8);
		xw_u32(w, 0);
		xw_wcc(w, NULL, &attr);
		xw_bytes(w, "VERF0002", 8);
		return FAKE_REPLY;
	case P_READDIRPLUS: {
		uint64_t cookie = xr_u64(a);
		uint8_t verf[8];

		xr_fixed(a, verf, 8);
		if (fh_is(&fh, "stuck")) {	/* no entries, no eof */
			xw_u32(w, 0);
			xw_post_op(w, NULL);
			xw_bytes(w, "CVERF001", 8);
			xw_u32(w, 0);
			xw_u32(w, 0);
			return FAKE_REPLY;
		}
		if (cookie == 0) {
			xw_u32(w, 0);
			xw_post_op(w, NULL);
			xw_bytes(w, "CVERF001", 8);
			xw_entry(w, 1, ".", 1, true, "dir");
			xw_entry(w, 2, "..", 2, false, NULL);
			xw_entry(w, 3, "a", 3, true, "fh-of-a");
			xw_entry(w, 4, "x/\ty", 4, true, "fh-x");
			xw_entry(w, 5, "", 5, false, NULL);
			xw_u32(w, 0);		/* no more entries */
			xw_u32(w, 0);		/* not eof */
			return FAKE_REPLY;
		}
		seen.rdp_cookie = cookie;
		memcpy(seen.rdp_verf, verf, 8);
		if (cookie != 5 || memcmp(verf, "CVERF001", 8)) {
			xw_u32(w, 10003);	/* BAD_COOKIE */
			xw_post_op(w, NULL);
			return FAKE_REPLY;
		}
		memset(name, 'n', 256);
		name[256] = 0;
		xw_u32(w, 0);
		xw_post_op(w, NULL);
		xw_bytes(w, "CVERF001", 8);
		xw_entry(w, 1, ".", 6, true, "dir");
		xw_entry(w, 7, name, 7, true, "fh-n");
		xw_entry(w, 8, "b", 8, true, NULL);
		xw_u32(w, 0);
		xw_u32(w, 1);			/* eof */
		return FAKE_REPLY;
	}
	case P_READLINK:
		xw_u32(w, 0);
		xw_post_op(w, NULL);
		xw_string(w, "target/path");
		return FAKE_REPLY;
	case P_FSSTAT:
		xw_u32(w, 0);
		xw_post_op(w, NULL);
		xw_u64(w, 1ull << 40);
		xw_u64(w, 1ull << 39);
		xw_u64(w, 1ull << 38);
		xw_u64(w, 1000000);
		xw_u64(w, 500000);
		xw_u64(w, 400000);
		xw_u32(w, 0);
		return FAKE_REPLY;
	case P_SETATTR:
		xr_sattr3(a);
		seen.sa.guard = xr_u32(a);
		attr_for(&attr, seen.sa.size, 8);
		xw_u32(w, 0);
		xw_wcc(w, NULL, &attr);
		return FAKE_REPLY;
	case P_CREATE:
		xr_string(a, seen.name, sizeof(seen.name));
		seen.create_how = xr_u32(a);
		xr_sattr3(a);
		attr_for(&attr, 0, 99);
		fh2 = fh_of("new-file");
		xw_u32(w, 0);
		xw_u32(w, 1);			/* a handle follows */
		xw_fh(w, &fh2);
		xw_post_op(w, &attr);
		/* The directory's attributes after it (dir_wcc). */
		attr_for(&pre, 4096, 7);
		xw_wcc(w, NULL, &pre);
		return FAKE_REPLY;
	case P_SYMLINK: {
		char target[4096];

		xr_string(a, seen.name, sizeof(seen.name));
		xr_sattr3(a);
		xr_string(a, target, sizeof(target));
		seen.target_len = a->bad ? 0 : (uint32_t)strlen(target);
		xw_u32(w, 0);
		xw_u32(w, 0);			/* no handle */
		xw_post_op(w, NULL);
		xw_wcc(w, NULL, NULL);
		return FAKE_REPLY;
	}
	case P_REMOVE:
	case P_RMDIR:
		xr_string(a, seen.name, sizeof(seen.name));
		xw_u32(w, c->proc == P_RMDIR ? 66 : 0);	/* NOTEMPTY */
		xw_wcc(w, NULL, NULL);
		return FAKE_REPLY;
	case P_RENAME:
		xr_string(a, seen.name, sizeof(seen.name));
		xr_fh(a, &fh2);
		xr_string(a, seen.name2, sizeof(seen.name2));
		xw_u32(w, fh_is(&fh2, "dir2") ? 0 : 18);	/* XDEV */
		xw_wcc(w, NULL, NULL);
		xw_wcc(w, NULL, NULL);
		return FAKE_REPLY;
	}
	return FAKE_DEFAULT;
}

/* A copy of what the origin saw, taken under its lock. */
static struct seen seen_now(void)
{
	struct seen s;

	pthread_mutex_lock(&f.lock);
	s = seen;
	pthread_mutex_unlock(&f.lock);
	return s;
}

static const struct nfsc_cred cr = { .uid = 1000, .gid = 1000 };

static void getattrs(struct nfsc *n)
{
	struct nfsc_fh fh = fh_of("attr");
	struct nfsc_attr a;

	/* Every field as sent; the mode's type bits dropped. */
	CHECK_EQ(nfsc_getattr(n, &cr, &fh, &a), 0);
	CHECK_EQ(a.type, NFSC_REG);
	CHECK_EQ(a.mode, 04755);
	CHECK_EQ(a.nlink, 3);
	CHECK_EQ(a.uid, 4000000001u);
	CHECK_EQ(a.gid, 1002);
	CHECK_EQ(a.size, 0x123456789ll);
	CHECK_EQ(a.used, 3 * 4096);
	CHECK_EQ(a.fsid, 0xabcdef0123ll);
	CHECK_EQ(a.fileid, 0x1122334455667788ll);
	CHECK_EQ(a.atime.tv_sec, 1700000000);
	CHECK_EQ(a.atime.tv_nsec, 1);
	CHECK_EQ(a.mtime.tv_sec, 1700000001);
	CHECK_EQ(a.mtime.tv_nsec, 999999999);
	CHECK_EQ(a.ctime.tv_sec, 4000000000ll);	/* unsigned seconds */
	CHECK_EQ(a.ctime.tv_nsec, 5);
	fh = fh_of("chr");
	CHECK_EQ(nfsc_getattr(n, &cr, &fh, &a), 0);
	CHECK_EQ(a.type, NFSC_CHR);
	CHECK_EQ(a.rdev_major, 4);
	CHECK_EQ(a.rdev_minor, 64);
	/* Refused at the door, and errors as errno. */
	fh = fh_of("huge");
	CHECK_EQ(nfsc_getattr(n, &cr, &fh, &a), -EOVERFLOW);
	fh = fh_of("gone");
	CHECK_EQ(nfsc_getattr(n, &cr, &fh, &a), -ESTALE);
	fh = fh_of("jukebox");
	CHECK_EQ(nfsc_getattr(n, &cr, &fh, &a), -EAGAIN);
}

static void lookups(struct nfsc *n)
{
	struct nfsc_fh dir = fh_of("dir"), out;
	struct nfsc_attr a;
	bool has_attr = true;
	char longname[NFSC_NAME_MAX + 2];
	unsigned before;

	CHECK_EQ(nfsc_lookup(n, &cr, &dir, "file", &out, &a, &has_attr), 0);
	CHECK(fh_is(&out, "file-handle"));
	CHECK(has_attr);
	CHECK_EQ(a.fileid, 77);
	CHECK_EQ(a.size, 5);
	CHECK_EQ(nfsc_lookup(n, &cr, &dir, "noattr", &out, &a, &has_attr), 0);
	CHECK(!has_attr);
	CHECK_EQ(nfsc_lookup(n, &cr, &dir, "emptyfh", &out, &a, &has_attr),
		 -EPROTO);
	CHECK_EQ(nfsc_lookup(n, &cr, &dir, "missing", &out, &a, &has_attr),
		 -ENOENT);
	CHECK(!has_attr);
	/* A name too long for NFS never goes out. */
	before = fake_count(&f, FAKE_PROG_NFS, P_LOOKUP);
	memset(longname, 'l', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = 0;
	CHECK_EQ(nfsc_lookup(n, &cr, &dir, longname, &out, &a, &has_attr),
		 -ENAMETOOLONG);
	CHECK_EQ(fake_count(&f, FAKE_PROG_NFS, P_LOOKUP), before);
}

static void reads(struct nfsc *n)
{
	struct nfsc_fh fh = fh_of("data");
	static uint8_t buf[FILE_SIZE + 100];
	struct nfsc_attr a;
	struct nfsc_waiter w;
	uint64_t bytes = nfsc_read_bytes(n);
	uint32_t got;
	bool eof, has_attr;
	ssize_t k;
	size_t i;

	/* 10,000 bytes in 8 KiB chunks, each answered at most 3,000 bytes
	 * at a time: asked again until the end of the file, every byte the
	 * origin's. */
	memset(buf, 0xee, sizeof(buf));
	k = nfsc_pread(n, &cr, &fh, buf, sizeof(buf), 0, &a, &has_attr);
	CHECK_EQ(k, FILE_SIZE);
	for (i = 0; i < FILE_SIZE; i++)
		CHECK_EQ(buf[i], (uint8_t)(i * 7 + 1));
	CHECK_EQ(buf[FILE_SIZE], 0xee);
	CHECK(has_attr);
	CHECK_EQ(a.size, FILE_SIZE);
	CHECK_EQ(nfsc_read_bytes(n) - bytes, FILE_SIZE);
	CHECK(fake_count(&f, FAKE_PROG_NFS, P_READ) >= 4);

	/* An origin that sends more than asked: only what was asked. */
	fh = fh_of("over");
	memset(buf, 0xee, sizeof(buf));
	nfsc_waiter_init(&w);
	nfsc_waiter_add(&w);
	CHECK_EQ(nfsc_read_async(n, -1, &cr, &fh, 100, 1000, buf, &got, &eof,
				 &a, &has_attr, nfsc_waiter_done, &w), 0);
	CHECK_EQ(nfsc_waiter_wait(&w), 0);
	CHECK_EQ(got, 1000);
	CHECK_EQ(buf[999], (uint8_t)(1099 * 7 + 1));
	CHECK_EQ(buf[1000], 0xee);

	/* A failed READ: its errno, and the file's attributes with it. */
	fh = fh_of("rdfail");
	nfsc_waiter_init(&w);
	nfsc_waiter_add(&w);
	CHECK_EQ(nfsc_read_async(n, -1, &cr, &fh, 0, 100, buf, &got, &eof,
				 &a, &has_attr, nfsc_waiter_done, &w), 0);
	CHECK_EQ(nfsc_waiter_wait(&w), -EIO);
	CHECK_EQ(got, 0);
	CHECK(has_attr);
	CHECK_EQ(a.size, 321);
}

static void writes(struct nfsc *n)
{
	struct nfsc_fh fh = fh_of("w");
	struct nfsc_waiter w;
	struct nfsc_post post;
	struct seen s;
	uint8_t data[5000], verf[8], cverf[8];
	uint64_t bytes = nfsc_write_bytes(n);
	uint32_t written;
	size_t i;

	for (i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 13);
	nfsc_waiter_init(&w);
	nfsc_waiter_add(&w);
	CHECK_EQ(nfsc_write_async(n, -1, &cr, &fh, 12345, sizeof(data), data,
				  false, &written, verf, &post,
				  nfsc_waiter_done, &w), 0);
	CHECK_EQ(nfsc_waiter_wait(&w), 0);
	s = seen_now();
	CHECK_EQ(s.off, 12345);
	CHECK_EQ(s.count, sizeof(data));
	CHECK_EQ(s.stable, 0);			/* UNSTABLE */
	CHECK_EQ(s.datalen, sizeof(data));
	CHECK(!memcmp(s.data, data, sizeof(data)));
	/* The origin said 100 bytes more than it was sent: no more than
	 * was sent counts. */
	CHECK_EQ(written, sizeof(data));
	CHECK_EQ(nfsc_write_bytes(n) - bytes, sizeof(data));
	CHECK(!memcmp(verf, "VERF0001", 8));
	CHECK(post.has_attr && post.has_pre);
	CHECK_EQ(post.pre.size, 10);
	CHECK_EQ(post.pre.mtime.tv_sec, 1234);
	CHECK_EQ(post.pre.ctime.tv_sec, 5678);
	CHECK_EQ(post.attr.size, 12345 + sizeof(data));

	nfsc_waiter_init(&w);
	nfsc_waiter_add(&w);
	CHECK_EQ(nfsc_write_async(n, -1, &cr, &fh, 0, 10, data, true,
				  &written, verf, &post, nfsc_waiter_done,
				  &w), 0);
	CHECK_EQ(nfsc_waiter_wait(&w), 0);
	CHECK_EQ(seen_now().stable, 2);		/* FILE_SYNC */

	/* COMMIT's verifier, to compare with the WRITEs'. */
	CHECK_EQ(nfsc_commit(n, &cr, &fh, cverf, &post), 0);
	CHECK(!memcmp(cverf, "VERF0002", 8));
	CHECK(!post.has_pre && post.has_attr);

	/* A failed WRITE: errno, nothing written, attributes kept. */
	fh = fh_of("wfail");
	nfsc_waiter_init(&w);
	nfsc_waiter_add(&w);
	CHECK_EQ(nfsc_write_async(n, -1, &cr, &fh, 0, 10, data, false,
				  &written, verf, &post, nfsc_waiter_done,
				  &w), 0);
	CHECK_EQ(nfsc_waiter_wait(&w), -ENOSPC);
	CHECK_EQ(written, 0);
	CHECK(post.has_attr && !post.has_pre);
}

static void listings(struct nfsc *n)
{
	struct nfsc_fh dir = fh_of("dir");
	struct nfsc_dirlist l;
	struct seen s;

	/* (a cap far above the 4 entries: a client that asked for the
	 * first round again and again would stop at it) */
	CHECK_EQ(nfsc_readdir_all(n, &cr, &dir, &l, 100), 0);
	/* The second round carried the last cookie and the verifier. */
	s = seen_now();
	CHECK_EQ(s.rdp_cookie, 5);
	CHECK(!memcmp(s.rdp_verf, "CVERF001", 8));
	CHECK_EQ(l.n, 4);
	CHECK(!strcmp(l.ents[0].name, "."));
	CHECK(!strcmp(l.ents[1].name, ".."));
	CHECK(!strcmp(l.ents[2].name, "a"));
	CHECK(!strcmp(l.ents[3].name, "b"));
	CHECK(l.ents[2].has_fh && fh_is(&l.ents[2].fh, "fh-of-a"));
	CHECK(l.ents[2].has_attr);
	CHECK_EQ(l.ents[2].attr.fileid, 3);
	CHECK_EQ(l.ents[2].fileid, 3);
	CHECK_EQ(l.ents[2].cookie, 3);
	CHECK(!l.ents[1].has_attr && !l.ents[1].has_fh);
	CHECK(l.ents[3].has_attr && !l.ents[3].has_fh);
	/* "x/\ty", "", a second ".", a 256-byte name: skipped, counted,
	 * the first one named (unprintable bytes as '?'). */
	CHECK_EQ(l.skipped, 4);
	CHECK(!strcmp(l.skipped_first, "x/?y"));
	nfsc_dirlist_free(&l);

	CHECK_EQ(nfsc_readdir_all(n, &cr, &dir, &l, 2), -EFBIG);
	CHECK_EQ(l.n, 0);
	CHECK(l.ents == NULL);

	/* A round with no entries that is not the last: an error, not a
	 * loop for ever. */
	dir = fh_of("stuck");
	CHECK_EQ(nfsc_readdir_all(n, &cr, &dir, &l, 0), -EIO);
	CHECK_EQ(fake_count(&f, FAKE_PROG_NFS, P_READDIRPLUS), 4);
}

static void others(struct nfsc *n)
{
	struct nfsc_fh fh = fh_of("link"), dir = fh_of("dir");
	struct nfsc_fsstat st;
	struct nfsc_post post;
	struct nfsc_created made;
	struct seen s;
	char target[64];

	CHECK_EQ(nfsc_readlink(n, &cr, &fh, target, sizeof(target)), 0);
	CHECK(!strcmp(target, "target/path"));
	/* A target that does not fit is not cut short. */
	CHECK_EQ(nfsc_readlink(n, &cr, &fh, target, 11), -ENAMETOOLONG);

	CHECK_EQ(nfsc_fsstat(n, &cr, &dir, &st), 0);
	CHECK_EQ(st.tbytes, 1ll << 40);
	CHECK_EQ(st.fbytes, 1ll << 39);
	CHECK_EQ(st.abytes, 1ll << 38);
	CHECK_EQ(st.tfiles, 1000000);
	CHECK_EQ(st.ffiles, 500000);
	CHECK_EQ(st.afiles, 400000);

	/* SETATTR: mode without type bits, times clamped to NFSv3's
	 * unsigned 32-bit seconds (as the Linux client does). */
	fh = fh_of("w");
	CHECK_EQ(nfsc_setattr(n, &cr, &fh, &(struct nfsc_sattr){
		.set_mode = true, .mode = 0104644, .set_uid = true,
		.uid = 4000000001u, .set_size = true, .size = 1ull << 40,
		.atime_how = NFSC_TIME_CLIENT, .atime = { .tv_sec = -1,
							   .tv_nsec = 7 },
		.mtime_how = NFSC_TIME_CLIENT, .mtime = { .tv_sec = 1ll << 33,
							   .tv_nsec = 7 },
		}, &post), 0);
	s = seen_now();
	CHECK(s.sa.set_mode && s.sa.set_uid && !s.sa.set_gid &&
	      s.sa.set_size);
	CHECK_EQ(s.sa.mode, 04644);
	CHECK_EQ(s.sa.uid, 4000000001u);
	CHECK_EQ(s.sa.size, 1ll << 40);
	CHECK_EQ(s.sa.atime_how, 2);
	CHECK_EQ(s.sa.atime[0], 0);
	CHECK_EQ(s.sa.atime[1], 0);
	CHECK_EQ(s.sa.mtime_how, 2);
	CHECK_EQ(s.sa.mtime[0], UINT32_MAX);
	CHECK_EQ(s.sa.mtime[1], 0);
	CHECK_EQ(s.sa.guard, 0);
	CHECK(post.has_attr);
	CHECK_EQ(post.attr.size, 1ll << 40);
	CHECK_EQ(nfsc_setattr(n, &cr, &fh, &(struct nfsc_sattr){
		.mtime_how = NFSC_TIME_SERVER }, &post), 0);
	s = seen_now();
	CHECK(!s.sa.set_mode && !s.sa.set_size);
	CHECK_EQ(s.sa.atime_how, 0);
	CHECK_EQ(s.sa.mtime_how, 1);

	/* CREATE: exclusive is GUARDED, else UNCHECKED; the new handle. */
	CHECK_EQ(nfsc_create(n, &cr, &dir, "made", &(struct nfsc_sattr){
		.set_mode = true, .mode = 0600 }, true, &made), 0);
	s = seen_now();
	CHECK(!strcmp(s.name, "made"));
	CHECK_EQ(s.create_how, 1);
	CHECK_EQ(s.sa.mode, 0600);
	CHECK(made.has_fh && fh_is(&made.fh, "new-file"));
	CHECK(made.has_attr);
	CHECK_EQ(made.attr.fileid, 99);
	/* ... and the directory's attributes after it, from dir_wcc. */
	CHECK(made.dir.has_attr && !made.dir.has_pre);
	CHECK_EQ(made.dir.attr.fileid, 7);
	CHECK_EQ(made.dir.attr.size, 4096);
	CHECK_EQ(nfsc_create(n, &cr, &dir, "made2", NULL, false, &made), 0);
	CHECK_EQ(seen_now().create_how, 0);

	/* Errors of changes, as errno; names as sent. */
	CHECK_EQ(nfsc_rmdir(n, &cr, &dir, "full"), -ENOTEMPTY);
	CHECK_EQ(nfsc_remove(n, &cr, &dir, "gone"), 0);
	CHECK(!strcmp(seen_now().name, "gone"));
	{
		struct nfsc_fh dir2 = fh_of("dir2");

		CHECK_EQ(nfsc_rename(n, &cr, &dir, "from", &dir2, "to"), 0);
		s = seen_now();
		CHECK(!strcmp(s.name, "from") && !strcmp(s.name2, "to"));
		CHECK_EQ(nfsc_rename(n, &cr, &dir, "from", &dir, "to"),
			 -EXDEV);
	}
}

/* The longest SYMLINK target nfsclient accepts is carried whole by
 * libnfs's encoder (one more word and it refuses before the wire). */
static void symlinks(struct nfsc *n)
{
	struct nfsc_fh dir = fh_of("dir");
	static char target[4200];
	struct nfsc_created made;
	unsigned lo = 1, hi = sizeof(target) - 1, before;

	memset(target, 't', sizeof(target));
	/* The largest length not refused as too long. */
	while (lo < hi) {
		unsigned mid = (lo + hi + 1) / 2;
		int ret;

		target[mid] = 0;
		ret = nfsc_symlink(n, &cr, &dir, "ln", target, &made);
		target[mid] = 't';
		if (ret == -ENAMETOOLONG)
			hi = mid - 1;
		else
			lo = mid;
	}
	CHECK(lo > 3000);
	target[lo] = 0;
	CHECK_EQ(nfsc_symlink(n, &cr, &dir, "ln", target, &made), 0);
	CHECK_EQ(seen_now().target_len, lo);
	CHECK(!made.has_fh);
	target[lo] = 't';
	target[lo + 4] = 0;
	before = fake_count(&f, FAKE_PROG_NFS, P_SYMLINK);
	CHECK_EQ(nfsc_symlink(n, &cr, &dir, "ln", target, &made),
		 -ENAMETOOLONG);
	CHECK_EQ(fake_count(&f, FAKE_PROG_NFS, P_SYMLINK), before);
}

int main(void)
{
	struct nfsc *n;

	f.fn = origin;
	f.rtmax = 8192;			/* READs in 8 KiB chunks */
	fake_start(&f);
	n = fake_open(&f, &(struct nfsc_opts){ .nconnect = 2 });
	CHECK_EQ(nfsc_rsize(n), 8192);

	getattrs(n);
	lookups(n);
	reads(n);
	writes(n);
	listings(n);
	others(n);
	symlinks(n);

	nfsc_close(n);
	fake_stop(&f);
	printf("nfsc_reply_test: ok\n");
	return 0;
}
