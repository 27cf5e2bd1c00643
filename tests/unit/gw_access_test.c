/* gw_access_test: what the origin lets a caller do (gateway/cred/access.c),
 * through the real nfsclient/ and libnfs against an origin inside the test
 * (nfsc_fake.h) whose ACCESS answers depend on the caller: R_OK, W_OK and
 * X_OK decided from the ACCESS3 bits the origin grants (X_OK of a
 * directory is LOOKUP; W_OK of a directory needs DELETE too), every bit
 * asked at once so the next check is answered without the origin; an
 * answer kept per uid, gid and supplementary groups, for the attribute
 * timeout, and only while the file's ctime, mode and owners are those it
 * was given for (an own WRITE carries it over, a mode change does not);
 * a LOOKUP or a READDIRPLUS answered counts as an answer (refused:
 * EACCES). With the origin lost: this run's answer at any age, else the
 * one kept in md.log, if the file is still as it was; none: EHOSTDOWN,
 * never a guess from the mode bits; a listing kept from before is shown
 * to a reader of that very version while the directory's mode and owners
 * are unchanged. */
#include "cred_i.h"
#include "keep_i.h"

#include <errno.h>
#include <stdint.h>
#include <time.h>

#include "check.h"
#include "nfsc_fake.h"
#include "nodes_helpers.h"

#define A_READ		0x01
#define A_LOOKUP	0x02
#define A_MODIFY	0x04
#define A_EXTEND	0x08
#define A_DELETE	0x10
#define A_EXECUTE	0x20

static struct fake f;
static uint32_t last_mask;	/* f.lock: the bits the last ACCESS asked */

static const struct nfsc_fh file_fh = { .len = 8, .data = "file0001" };

/* What the origin grants uid (with gid 100 and its groups) on a file or a
 * directory. */
static uint32_t policy(const struct fake_call *c, bool dir)
{
	switch (c->uid) {
	case 1000:	/* reads, searches */
		return dir ? A_READ | A_LOOKUP : A_READ;
	case 1001:	/* writes files; may not delete in directories */
		return dir ? A_READ | A_LOOKUP | A_MODIFY | A_EXTEND :
			     A_READ | A_MODIFY | A_EXTEND;
	case 1002:	/* through group 50 only */
		for (uint32_t i = 0; i < c->ngroups; i++)
			if (c->groups[i] == 50)
				return 0x3f;
		return 0;
	default:
		return 0x3f;
	}
}

static enum fake_act origin(struct fake *o, const struct fake_call *c,
			    struct xr *args, struct xw *res)
{
	struct nfsc_fh fh;
	uint32_t mask;

	(void)o;
	if (c->prog != FAKE_PROG_NFS || c->proc != 4)
		return FAKE_DEFAULT;
	xr_fh(args, &fh);
	if (fh_eq(&fh, &f.root))
		return FAKE_DEFAULT;
	mask = xr_u32(args);
	last_mask = mask;
	xw_u32(res, 0);
	xw_post_op(res, NULL);	/* the inode's attributes stamp it */
	xw_u32(res, mask & policy(c, !fh_eq(&fh, &file_fh)));
	return FAKE_REPLY;
}

static unsigned asked(void)
{
	return fake_count(&f, FAKE_PROG_NFS, 4);
}

static uint32_t mask_asked(void)
{
	uint32_t m;

	pthread_mutex_lock(&f.lock);
	m = last_mask;
	pthread_mutex_unlock(&f.lock);
	return m;
}

static struct nfsc_cred cred(uint32_t uid, uint32_t ngroups,
			     const uint32_t *groups)
{
	struct nfsc_cred c = { .uid = uid, .gid = 100, .ngroups = ngroups };

	if (ngroups)
		memcpy(c.groups, groups, ngroups * sizeof(*groups));
	return c;
}

static void inode_init(struct gw_inode *ino, uint64_t nodeid,
		       const struct nfsc_fh *fh, const struct nfsc_attr *a)
{
	memset(ino, 0, sizeof(*ino));
	pthread_mutex_init(&ino->lock, NULL);
	ino->nodeid = nodeid;
	ino->fh = *fh;
	ino->attr = *a;
	ino->attr_valid = true;
	clock_gettime(CLOCK_MONOTONIC, &ino->attr_at);
}

/* The inode's attributes as a GETATTR would have refreshed them. */
static void inode_seen(struct gw_inode *ino, const struct nfsc_attr *a)
{
	pthread_mutex_lock(&ino->lock);
	ino->attr = *a;
	pthread_mutex_unlock(&ino->lock);
}

static int check(struct gw *gw, struct gw_inode *ino, uint32_t uid, int mask)
{
	struct nfsc_cred c = cred(uid, 0, NULL);

	return gw_access_check(gw, ino, &c, mask, NULL, NULL);
}

int main(void)
{
	const char *d = t_tmpdir();
	struct nfsc_fh dir_fh = { .len = 8 };
	struct gw_opts opts = { 0 }, lost_opts = { 0 };
	struct gw gw = { 0 }, lost = { 0 };
	struct gw_inode file, dir, ino;
	struct nfsc_attr fa = { .type = NFSC_REG, .mode = 0644, .uid = 7,
				.gid = 7, .size = 10 };
	struct nfsc_attr da = { .type = NFSC_DIR, .mode = 0755, .uid = 7,
				.gid = 7, .size = 4096 };
	struct nfsc_attr a, before, after;
	struct nfsc_cred c, g50, g51, g50x;
	struct nodes_stats ns;
	unsigned n;

	memcpy(dir_fh.data, "dir00001", 8);
	clock_gettime(CLOCK_REALTIME, &fa.mtime);
	fa.ctime = fa.mtime;
	da.mtime = da.ctime = fa.mtime;
	opts.acregmin = opts.acregmax = opts.acdirmin = opts.acdirmax = 60;
	f.fn = origin;
	fake_start(&f);
	gw.o = &opts;
	gw.nfs = fake_open(&f, &(struct nfsc_opts){ .nconnect = 1 });
	gw.nodes = t_nodes_open(d, false);
	nodes_stats(gw.nodes, &ns);
	gw.md = t_nodes_md_open(d, ns.generation);
	gw.md_epoch = gw_md_now_ns();
	inode_init(&file, 10, &file_fh, &fa);
	inode_init(&dir, 11, &dir_fh, &da);

	/* 1. A file, read-only for uid 1000: R_OK yes; the origin was asked
	 * for every bit at once (READ, MODIFY, EXTEND, EXECUTE), so W_OK and
	 * X_OK are refused without asking again. F_OK asks nothing. */
	n = asked();
	CHECK_EQ(check(&gw, &file, 1000, R_OK), 0);
	CHECK_EQ(asked(), n + 1);
	CHECK_EQ(mask_asked(), A_READ | A_MODIFY | A_EXTEND | A_EXECUTE);
	CHECK_EQ(check(&gw, &file, 1000, W_OK), -EACCES);
	CHECK_EQ(check(&gw, &file, 1000, X_OK), -EACCES);
	CHECK_EQ(check(&gw, &file, 1000, R_OK | X_OK), -EACCES);
	CHECK_EQ(check(&gw, &file, 1000, R_OK), 0);
	CHECK_EQ(check(&gw, &file, 1000, 0), 0);
	CHECK_EQ(asked(), n + 1);

	/* 2. A directory: X_OK is LOOKUP (granted to 1000); W_OK needs
	 * MODIFY, EXTEND and DELETE: 1001 may not delete there, so it may
	 * not write the directory, though it may write a file. */
	CHECK_EQ(check(&gw, &dir, 1000, X_OK), 0);
	CHECK_EQ(mask_asked(), A_READ | A_LOOKUP | A_MODIFY | A_EXTEND |
			       A_DELETE);
	CHECK_EQ(check(&gw, &dir, 1000, R_OK | X_OK), 0);
	CHECK_EQ(check(&gw, &dir, 1000, W_OK), -EACCES);
	CHECK_EQ(check(&gw, &dir, 1001, W_OK), -EACCES);
	CHECK_EQ(check(&gw, &dir, 1001, R_OK | X_OK), 0);
	CHECK_EQ(check(&gw, &file, 1001, R_OK | W_OK), 0);
	CHECK_EQ(check(&gw, &file, 1001, X_OK), -EACCES);
	CHECK_EQ(asked(), n + 4);

	/* 3. Answers are per credential: the same uid and gid with other
	 * supplementary groups is asked again (the origin grants 1002
	 * through group 50 only), and each answer is kept. */
	g50 = cred(1002, 2, (const uint32_t[]){ 49, 50 });
	g51 = cred(1002, 1, (const uint32_t[]){ 51 });
	g50x = cred(1002, 1, (const uint32_t[]){ 49 });
	n = asked();
	CHECK_EQ(gw_access_check(&gw, &file, &g50, R_OK, NULL, NULL), 0);
	CHECK_EQ(gw_access_check(&gw, &file, &g51, R_OK, NULL, NULL), -EACCES);
	CHECK_EQ(gw_access_check(&gw, &file, &g50x, R_OK, NULL, NULL),
		 -EACCES);
	CHECK_EQ(asked(), n + 3);
	CHECK_EQ(gw_access_check(&gw, &file, &g50, W_OK, NULL, NULL), 0);
	CHECK_EQ(gw_access_check(&gw, &file, &g51, W_OK, NULL, NULL), -EACCES);
	CHECK_EQ(asked(), n + 3);

	/* 4. The file seen changed (a chmod, or any change of its ctime):
	 * the origin may answer otherwise now, and is asked again. */
	n = asked();
	CHECK_EQ(check(&gw, &file, 1001, R_OK), 0);	/* still held */
	CHECK_EQ(asked(), n);
	a = fa;
	a.mode = 0600;
	inode_seen(&file, &a);
	CHECK_EQ(check(&gw, &file, 1001, R_OK), 0);
	CHECK_EQ(asked(), n + 1);
	a.ctime.tv_nsec = (a.ctime.tv_nsec + 1) % 1000000000;
	inode_seen(&file, &a);
	CHECK_EQ(check(&gw, &file, 1001, R_OK), 0);
	CHECK_EQ(asked(), n + 2);
	CHECK_EQ(check(&gw, &file, 1000, R_OK), 0);

	/* 5. An own WRITE moves the ctime and the size, not the rights: the
	 * answers go over to the new attributes (no ACCESS); when the mode
	 * changed too, they do not. */
	n = asked();
	before = a;
	after = a;
	after.size += 4096;
	after.ctime.tv_sec += 1;
	pthread_mutex_lock(&file.lock);
	gw_access_restamp(&file, &before, &after);
	file.attr = after;
	pthread_mutex_unlock(&file.lock);
	CHECK_EQ(check(&gw, &file, 1000, R_OK), 0);
	CHECK_EQ(check(&gw, &file, 1000, W_OK), -EACCES);
	CHECK_EQ(asked(), n);
	before = after;
	after.ctime.tv_sec += 1;
	after.mode = 0604;
	pthread_mutex_lock(&file.lock);
	gw_access_restamp(&file, &before, &after);
	file.attr = after;
	pthread_mutex_unlock(&file.lock);
	CHECK_EQ(check(&gw, &file, 1000, R_OK), 0);
	CHECK_EQ(asked(), n + 1);

	/* 6. A LOOKUP answered in dir for 1003: it may search dir (X_OK, no
	 * ACCESS); whether it may read dir is not known from that. */
	n = asked();
	c = cred(1003, 0, NULL);
	gw_access_note_search(&gw, &dir, &c);
	CHECK_EQ(check(&gw, &dir, 1003, X_OK), 0);
	CHECK_EQ(asked(), n);
	CHECK_EQ(check(&gw, &dir, 1003, R_OK), 0);
	CHECK_EQ(asked(), n + 1);

	/* 7. A READDIRPLUS of dir refused to 1004: R_OK is EACCES without
	 * asking. A LOOKUP then a listing answered for 1005: both halves
	 * are kept (the listing's READ joins the LOOKUP's answer). */
	n = asked();
	c = cred(1004, 0, NULL);
	gw_access_note_listed(&gw, &dir, &c, &da, false, false);
	CHECK_EQ(check(&gw, &dir, 1004, R_OK), -EACCES);
	c = cred(1005, 0, NULL);
	gw_access_note_search(&gw, &dir, &c);
	gw_access_note_listed(&gw, &dir, &c, &da, true, false);
	CHECK_EQ(check(&gw, &dir, 1005, R_OK), 0);
	CHECK_EQ(check(&gw, &dir, 1005, X_OK), 0);
	CHECK_EQ(asked(), n);

	/* 8. An answer holds for the attribute timeout only: with a timeout
	 * of 0 every check asks. */
	opts.acregmin = opts.acregmax = 0;
	n = asked();
	CHECK_EQ(check(&gw, &file, 1001, R_OK), 0);
	CHECK_EQ(check(&gw, &file, 1001, R_OK), 0);
	CHECK_EQ(asked(), n + 2);
	opts.acregmin = opts.acregmax = 60;

	/* Kept in md.log for what follows: 1000's answer for the file as
	 * it is now, 1006's for another version, and 1008's reading of the
	 * directory's listing. */
	c = cred(1008, 0, NULL);
	gw_access_note_listed(&gw, &dir, &c, &da, true, true);
	CHECK_EQ(check(&gw, &file, 1000, R_OK), 0);
	inode_seen(&file, &fa);
	CHECK_EQ(check(&gw, &file, 1006, R_OK), 0);
	inode_seen(&file, &after);

	/* 9. The origin lost (offline=, its root kept): a new inode of the
	 * same file answers from md.log (1000 read yes, write no); 1006's
	 * answer was for another version; 1007 was never answered:
	 * EHOSTDOWN, however open the mode bits. */
	{
		struct fake gone = { .port = fake_closed_port() };
		struct nfsc_opts lo = { .nconnect = 1, .offline = 30,
					.known_root = &f.root,
					.known_where = "127.0.0.1:/export" };
		char url[128], err[512] = "";

		snprintf(url, sizeof(url), "nfs://127.0.0.1/export?nfsport=%u"
			 "&mountport=%u", (unsigned)gone.port,
			 (unsigned)gone.port);
		CHECK_EQ(nfsc_open(url, &lo, &lost.nfs, err, sizeof(err)), 0);
		CHECK(nfsc_origin_lost(lost.nfs));
	}
	lost_opts = opts;
	lost.o = &lost_opts;
	lost.md = gw.md;
	lost.md_epoch = gw_md_now_ns();
	inode_init(&ino, 10, &file_fh, &after);
	CHECK_EQ(check(&lost, &ino, 1000, R_OK), 0);
	CHECK_EQ(check(&lost, &ino, 1000, W_OK), -EACCES);
	CHECK_EQ(check(&lost, &ino, 1006, R_OK), -EHOSTDOWN);
	a = after;
	a.mode = 0777;
	inode_seen(&ino, &a);
	CHECK_EQ(check(&lost, &ino, 1007, R_OK), -EHOSTDOWN);
	/* The file last seen other than the answer was given for: none. */
	CHECK_EQ(check(&lost, &ino, 1000, R_OK), -EHOSTDOWN);
	pthread_mutex_destroy(&ino.lock);

	/* 10. This run's answer serves offline at any age (here past a
	 * timeout of 0). */
	lost_opts.acdirmin = lost_opts.acdirmax = 0;
	inode_init(&ino, 12, &dir_fh, &da);
	c = cred(1009, 0, NULL);
	gw_access_note_search(&lost, &ino, &c);
	CHECK_EQ(check(&lost, &ino, 1009, X_OK), 0);
	CHECK_EQ(check(&lost, &ino, 1009, R_OK), -EHOSTDOWN);
	pthread_mutex_destroy(&ino.lock);

	/* 11. A listing kept from before: shown offline to 1008, who read
	 * that very version, even though the directory changed since (its
	 * names may have, its rights not); not to 1007, who never read it;
	 * not once the directory's mode changed. */
	inode_init(&ino, 11, &dir_fh, &da);
	a = da;
	a.ctime.tv_sec += 5;
	inode_seen(&ino, &a);
	c = cred(1008, 0, NULL);
	CHECK_EQ(gw_access_kept_listing(&lost, &ino, &c, &da), 0);
	c = cred(1007, 0, NULL);
	CHECK_EQ(gw_access_kept_listing(&lost, &ino, &c, &da), -EHOSTDOWN);
	a.mode = 0700;
	inode_seen(&ino, &a);
	c = cred(1008, 0, NULL);
	CHECK_EQ(gw_access_kept_listing(&lost, &ino, &c, &da), -EHOSTDOWN);
	pthread_mutex_destroy(&ino.lock);

	nfsc_close(lost.nfs);
	nfsc_close(gw.nfs);
	fake_stop(&f);
	nodes_md_close(gw.md);
	nodes_close(gw.nodes);
	pthread_mutex_destroy(&file.lock);
	pthread_mutex_destroy(&dir.lock);
	return 0;
}
