/* write.c - the write path: each FUSE WRITE to the origin.
 *
 * Write-through (default): every write(2) is a FUSE WRITE. Writeback
 * (-o writeback, FUSE_CAP_WRITEBACK_CACHE): write(2) lands in the kernel's
 * page cache, and the kernel sends the dirty pages as WRITEs of up to
 * max_write from its flusher, at fsync and at close (flush waits for
 * them); these arrive with uid/gid/pid 0, so the credentials used are
 * those of the file they come through (the opener's, f->cred), or another
 * writer's if the origin refuses those ("whose credentials"). The steps
 * are the same for both:
 *
 * 1. A FUSE write waits for room in the mount's write window (bytes of
 *    WRITE in flight, write_window=); it is never failed for lack of room.
 * 2. It is split into wsize UNSTABLE WRITEs issued in parallel; the reply
 *    to the kernel goes out when all have been answered.
 * 3. Each extent stays in the inode's uncommitted list, with the write
 *    verifier the origin gave it, until a COMMIT (flush, fsync, release, or
 *    too much uncommitted data) has been answered. A COMMIT whose verifier
 *    differs, or an extent whose pieces got different verifiers, means the
 *    origin restarted and may have lost them: those extents are written
 *    again, now FILE_SYNC, before the flush is answered.
 * 4. The post-op attributes of the WRITEs become the inode's attributes
 *    and the cache object's coherency data, so the gateway's own writes do
 *    not look like a change at the origin; the cache takes the new bytes
 *    (cache_writes=through) or drops the blocks (around) - unless their
 *    pre-op attributes show that someone else changed the file first
 *    (wcc_foreign below).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cache.h"
#include "gw_i.h"
#include "lockcheck.h"

/* Uncommitted bytes of one file that trigger a COMMIT. A write that
 * crosses the mark while a COMMIT round of the file is running leaves it
 * to that round and the next write; only past GW_COMMIT_WAIT does it wait
 * for the round and COMMIT itself, which bounds what is kept for resending.
 * (Each write past the mark used to wait for the round in flight and then
 * run its own: in a 1 GiB dd through a write-back mount, the 16 FUSE
 * threads spent 92 of their 205 s in COMMITs, 20 s in WRITEs.) */
#define GW_COMMIT_AFTER (32u << 20)
#define GW_COMMIT_WAIT (4 * GW_COMMIT_AFTER)

struct gw_extent {
	struct gw_extent *next;
	uint64_t off;
	size_t len;
	uint8_t verf[8];		/* verifier of the WRITEs that sent it */
	bool mixed;			/* they gave different ones: the origin
					 * restarted in between, resend */
	struct nfsc_cred cred;
	char *data;			/* a gw_buf: recycled, not malloc'd (see
					 * extent_new) */
};

/* ---- the window ---- */

/* Congestion blocks, as the Linux NFS client's does since it stopped
 * abandoning writeback rounds: the writer (a FUSE thread serving the
 * kernel's flusher, in writeback mode) sleeps until enough of what is in
 * flight has been answered. Nothing is failed or dropped for lack of room. */
static void window_get(struct gw *gw, size_t n)
{
	uint64_t t0 = 0;

	pthread_mutex_lock(&gw->win_lock);
	/* A request bigger than the window runs alone rather than never. */
	if (gw->win_used > 0 && gw->win_used + n > gw->o->write_window) {
		gw->win_waits++;
		t0 = gw_now_ns();
	}
	while (gw->win_used > 0 && gw->win_used + n > gw->o->write_window)
		pthread_cond_wait(&gw->win_cond, &gw->win_lock);
	if (t0)
		gw->win_wait_ns += gw_now_ns() - t0;
	gw->win_used += n;
	if (gw->win_used > gw->win_used_max)
		gw->win_used_max = gw->win_used;
	if (++gw->win_writes > gw->win_writes_max)
		gw->win_writes_max = gw->win_writes;
	pthread_mutex_unlock(&gw->win_lock);
}

static void window_put(struct gw *gw, size_t n)
{
	pthread_mutex_lock(&gw->win_lock);
	gw->win_used -= n;
	gw->win_writes--;
	pthread_cond_broadcast(&gw->win_cond);
	pthread_mutex_unlock(&gw->win_lock);
}

/* ---- sending ---- */

/* Replies of 0 bytes in a row after which a WRITE is given up: an origin
 * that takes nothing would otherwise be asked again forever. */
#define GW_WRITE_ZERO_TRIES 3

struct wchunk {
	uint32_t written;
	uint8_t verf[8];
	struct nfsc_post post;
};

/* Queue one WRITE on b; its answer lands in *ch. */
static void wbatch_write(struct nfsc_waiter *b, struct gw *gw,
			 const struct nfsc_cred *cr, const struct nfsc_fh *fh,
			 const char *buf, uint32_t len, uint64_t off,
			 bool stable, struct wchunk *ch)
{
	int ret;

	nfsc_waiter_add(b);
	ret = nfsc_write_async(gw->nfs, -1, cr, fh, off, len, buf, stable,
			       &ch->written, ch->verf, &ch->post,
			       nfsc_waiter_done, b);
	if (ret)
		nfsc_waiter_done(ret, b);
}

/* What the WRITEs of one range said: the newest post-op attributes, and
 * the verifier - every piece's, which may differ if the origin restarted
 * between them. */
struct wresult {
	struct nfsc_post post;
	uint8_t verf[8];
	bool have_verf;
	bool mixed;			/* pieces gave different verifiers */
	bool foreign;			/* wcc_foreign */
};

/* Is w (pre-op attributes) the version a? */
static bool wcc_is(const struct nfsc_wcc *w, const struct nfsc_attr *a)
{
	return gw_version_eq(w->size, &w->mtime, &w->ctime, a->size,
			     &a->mtime, &a->ctime);
}

/* wcc: an origin that sends pre-op attributes with its WRITE replies
 * (FreeBSD's nfsd; not knfsd, not nfs-ganesha 4.3) says which version each
 * WRITE found. The pieces of one range run in parallel, so a piece may
 * find another piece's "after" rather than the version the gateway knew
 * when it sent the range (known). A "before" that is neither is someone
 * else's change, made between the gateway's last view and this write: then
 * the post-op attributes are not just our write's. True if piece i of n
 * shows such a change (known NULL: nothing to judge against). */
static bool wcc_foreign(const struct nfsc_attr *known, const struct wchunk *ch,
			size_t n, size_t i)
{
	size_t j;

	if (!known || !ch[i].post.has_pre || wcc_is(&ch[i].post.pre, known))
		return false;
	for (j = 0; j < n; j++)
		if (j != i && ch[j].post.has_attr &&
		    wcc_is(&ch[i].post.pre, &ch[j].post.attr))
			return false;
	return true;
}

static void wresult_add(struct wresult *r, const struct wchunk *ch)
{
	if (ch->post.has_attr &&
	    (!r->post.has_attr || gw_attr_newer(&ch->post.attr, &r->post.attr)))
		r->post = ch->post;
	/* A piece that took nothing vouches for nothing. */
	if (!ch->written)
		return;
	if (!r->have_verf) {
		memcpy(r->verf, ch->verf, 8);
		r->have_verf = true;
	} else if (memcmp(r->verf, ch->verf, 8)) {
		r->mixed = true;
	}
}

/* A piece the origin took short: ask again for the rest, one at a time. */
static int send_rest(struct gw *gw, const struct nfsc_cred *cr,
		     const struct nfsc_fh *fh, const char *buf, uint32_t len,
		     uint64_t off, bool stable, const struct wchunk *first,
		     const struct nfsc_attr *known, struct wresult *res)
{
	uint32_t done = first->written;
	unsigned zero = done ? 0 : 1;

	while (done < len) {
		struct wchunk ch = { 0 };
		struct nfsc_waiter b;
		int ret;

		if (zero >= GW_WRITE_ZERO_TRIES) {
			gw_log("origin took 0 bytes of a WRITE at %llu %u "
			       "times: failing it", (unsigned long long)off +
			       done, zero);
			return -EIO;
		}
		nfsc_waiter_init(&b);
		wbatch_write(&b, gw, cr, fh, buf + done, len - done,
			     off + done, stable, &ch);
		ret = nfsc_waiter_wait(&b);
		if (ret)
			return ret;
		/* Every earlier piece has been answered: this one finds the
		 * newest of their versions. */
		if (wcc_foreign(known, &ch, 1, 0) && (!res->post.has_attr ||
		    !wcc_is(&ch.post.pre, &res->post.attr)))
			res->foreign = true;
		wresult_add(res, &ch);
		zero = ch.written ? 0 : zero + 1;
		done += ch.written;
	}
	return 0;
}

/* WRITE [off, off+len) in wsize pieces in parallel; known: the version the
 * gateway knows the file to be, for wcc_foreign (or NULL). */
static int send_range(struct gw *gw, const struct nfsc_cred *cr,
		      const struct nfsc_fh *fh, const char *buf, size_t len,
		      uint64_t off, bool stable, const struct nfsc_attr *known,
		      struct wresult *res)
{
	uint32_t ws = nfsc_wsize(gw->nfs);
	size_t n = (len + ws - 1) / ws, i;
	struct wchunk *ch = calloc(n ? n : 1, sizeof(*ch));
	struct nfsc_waiter b;
	int ret;

	memset(res, 0, sizeof(*res));
	if (!ch)
		return -ENOMEM;
	nfsc_waiter_init(&b);
	for (i = 0; i < n; i++) {
		size_t o = i * ws, l = len - o < ws ? len - o : ws;

		wbatch_write(&b, gw, cr, fh, buf + o, (uint32_t)l, off + o,
			     stable, &ch[i]);
	}
	ret = nfsc_waiter_wait(&b);
	for (i = 0; !ret && i < n; i++) {
		size_t o = i * ws, l = len - o < ws ? len - o : ws;

		if (wcc_foreign(known, ch, n, i))
			res->foreign = true;
		wresult_add(res, &ch[i]);
		if (ch[i].written < l)
			ret = send_rest(gw, cr, fh, buf + o, (uint32_t)l,
					off + o, stable, &ch[i], known, res);
	}
	free(ch);
	return ret;
}

/* ---- whose credentials ----
 *
 * The kernel sends write-back pages (and mmap's) through any file open for
 * writing, and cannot say whose bytes they are: they are merged in its page
 * cache. A WRITE or COMMIT that the origin refuses (EACCES, EPERM) to the
 * file the kernel picked is sent again as each other file open for writing
 * (other credentials only, oldest open first), and the extent kept with the
 * first the origin takes: a writer who may still write vouches for the
 * pages of one who lost the right while they were dirty, as the Linux NFS
 * client writes them with whichever open context it picks. When none may,
 * the error goes to every writer (errseq, gw_write_flush). */

static bool refused(int ret)
{
	return ret == -EACCES || ret == -EPERM;
}

static bool same_cred(const struct nfsc_cred *a, const struct nfsc_cred *b)
{
	return a->uid == b->uid && a->gid == b->gid &&
	       a->ngroups == b->ngroups &&
	       !memcmp(a->groups, b->groups,
		       sizeof(a->groups[0]) * (a->ngroups < NFSC_NGROUPS_MAX ?
					       a->ngroups : NFSC_NGROUPS_MAX));
}

size_t gw_write_other_creds(struct gw_inode *ino, const struct nfsc_cred *cr,
			    struct nfsc_cred *out)
{
	struct gw_file *f;
	size_t n = 0, j;

	pthread_mutex_lock(&ino->lock);
	for (f = ino->wfiles; f && n < GW_CRED_TRIES; f = f->wnext) {
		if (same_cred(&f->cred, cr))
			continue;
		for (j = 0; j < n && !same_cred(&out[j], &f->cred); j++)
			;
		if (j == n)
			out[n++] = f->cred;
	}
	pthread_mutex_unlock(&ino->lock);
	return n;
}

/* ---- errors of write-back WRITEs and COMMITs (errseq) ---- */

static void werr_record_locked(struct gw_inode *ino, int err)
{
	GW_ASSERT_HELD(&ino->lock);
	ino->write_err = err;
	ino->werr_seq++;
}

/* A writer open now has an error to report. */
static bool werr_pending_locked(struct gw_inode *ino)
{
	struct gw_file *f;

	GW_ASSERT_HELD(&ino->lock);
	for (f = ino->wfiles; f; f = f->wnext)
		if (f->werr_seen != ino->werr_seq)
			return true;
	return false;
}

/* send_range as *cr; refused, as each other writer in turn (see "whose
 * credentials"): *cr is then the one the origin took. */
static int send_range_as(struct gw *gw, struct gw_inode *ino,
			 struct nfsc_cred *cr, const char *buf, size_t len,
			 uint64_t off, bool stable,
			 const struct nfsc_attr *known, struct wresult *res)
{
	struct nfsc_cred alt[GW_CRED_TRIES];
	size_t n, i;
	int ret;

	ret = send_range(gw, cr, &ino->fh, buf, len, off, stable, known, res);
	if (!refused(ret))
		return ret;
	n = gw_write_other_creds(ino, cr, alt);
	for (i = 0; i < n && refused(ret); i++) {
		ret = send_range(gw, &alt[i], &ino->fh, buf, len, off, stable,
				 known, res);
		if (!ret) {
			gw_log("WRITE of %zu bytes at %llu refused to uid %u: "
			       "sent as uid %u, who has the file open for "
			       "writing", len, (unsigned long long)off,
			       cr->uid, alt[i].uid);
			*cr = alt[i];
		}
	}
	return ret;
}

/* COMMIT as *cr; refused, as each other writer in turn. */
static int commit_as(struct gw *gw, struct gw_inode *ino,
		     const struct nfsc_cred *cr, uint8_t verf[8],
		     struct nfsc_post *post)
{
	struct nfsc_cred alt[GW_CRED_TRIES];
	size_t n, i;
	int ret;

	ret = nfsc_commit(gw->nfs, cr, &ino->fh, verf, post);
	if (!refused(ret))
		return ret;
	n = gw_write_other_creds(ino, cr, alt);
	for (i = 0; i < n && refused(ret); i++)
		ret = nfsc_commit(gw->nfs, &alt[i], &ino->fh, verf, post);
	return ret;
}

/* ---- committing ----
 *
 * Extents stay listed until a COMMIT that covers them has been answered
 * (and what it showed lost has been written again), so that a flush never
 * finds an empty list while their COMMIT is still out. Rounds of one inode
 * run one at a time (ino->committing): a flush that comes during a round
 * waits for it, then COMMITs what is still listed - including what that
 * round failed on, so it sees the error too.
 */

/* Data the gateway keeps for resending after COMMITs failed; past this it
 * is let go and the error reported instead of memory growing without
 * bound. */
#define GW_KEEP_FAILED (4 * GW_COMMIT_AFTER)

/* The copy of a write kept until its COMMIT. Its bytes live in a recycled
 * gw_buf (data, which it takes over): malloc'd, the extents of a 1 GiB
 * write-back dd (up to GW_COMMIT_WAIT of them alive, freed in bulk at each
 * COMMIT) grew and released whole malloc heaps, and the gateway spent a
 * fifth of its cycles in page faults zeroing them again (perf). */
static struct gw_extent *extent_new(char *data)
{
	struct gw_extent *e = malloc(sizeof(*e));

	if (!e)
		return NULL;
	e->next = NULL;
	e->data = data;
	return e;
}

static void free_extents(struct gw_extent *e)
{
	while (e) {
		struct gw_extent *next = e->next;

		gw_buf_put(e->data);
		free(e);
		e = next;
	}
}

/* Unlist first and everything older (the list is newest first). */
static void cut_locked(struct gw_inode *ino, struct gw_extent *first)
{
	struct gw_extent **pp = &ino->uncommitted, *e;

	GW_ASSERT_HELD(&ino->lock);
	while (*pp && *pp != first)
		pp = &(*pp)->next;
	*pp = NULL;
	for (e = first; e; e = e->next)
		ino->uncommitted_bytes -= e->len;
}

static void round_begin(struct gw_inode *ino)
{
	pthread_mutex_lock(&ino->lock);
	while (ino->committing)
		pthread_cond_wait(&ino->fetch_cond, &ino->lock);
	ino->committing = true;
	pthread_mutex_unlock(&ino->lock);
}

static void round_end(struct gw_inode *ino)
{
	pthread_mutex_lock(&ino->lock);
	ino->committing = false;
	pthread_cond_broadcast(&ino->fetch_cond);
	pthread_mutex_unlock(&ino->lock);
}

static bool extent_lost(const struct gw_extent *e, const uint8_t verf[8])
{
	return e->mixed || memcmp(e->verf, verf, 8);
}

/* The COMMIT of first and what is older answered verf: write again, FILE_SYNC,
 * what the origin lost. Oldest first, and every extent newer than the
 * oldest lost one too, so that where they overlap the newest bytes land
 * last; with no WRITE of this inode in flight meanwhile (a WRITE the origin
 * answered before a resend of older bytes would be undone by it). */
static int resend_lost(struct gw *gw, struct gw_inode *ino,
		       struct gw_extent *first, const uint8_t verf[8])
{
	struct gw_extent *e, **v = NULL;
	size_t n = 0, i, oldest = 0;
	bool lost = false, ours = false;
	int ret = 0;

	for (e = first; e; e = e->next)
		if (extent_lost(e, verf))
			lost = true;
	if (!lost)
		return 0;
	pthread_mutex_lock(&ino->lock);
	ino->resending = true;
	while (gw_inode_writing(ino))
		pthread_cond_wait(&ino->fetch_cond, &ino->lock);
	/* From here the list holds still: writers wait for resending. */
	for (e = ino->uncommitted; e; e = e->next)
		n++;
	pthread_mutex_unlock(&ino->lock);
	v = calloc(n, sizeof(*v));
	if (!v) {
		ret = -ENOMEM;
		goto out;
	}
	/* v[0] newest; v[n - 1] oldest. Extents newer than first are not
	 * ours to judge; they are written again only to keep the order. */
	for (i = 0, e = ino->uncommitted; e; e = e->next, i++) {
		v[i] = e;
		if (e == first)
			ours = true;
		if (ours && extent_lost(e, verf))
			oldest = i;
	}
	for (i = oldest + 1; i-- > 0 && !ret;) {
		struct wresult r;

		__atomic_fetch_add(&gw->resends, 1, __ATOMIC_RELAXED);
		gw_log("origin lost unstable writes (verifier changed): "
		       "resending %zu bytes at %llu", v[i]->len,
		       (unsigned long long)v[i]->off);
		ret = send_range_as(gw, ino, &v[i]->cred, v[i]->data,
				    v[i]->len, v[i]->off, true, NULL, &r);
	}
	free(v);
out:
	pthread_mutex_lock(&ino->lock);
	ino->resending = false;
	pthread_cond_broadcast(&ino->fetch_cond);
	pthread_mutex_unlock(&ino->lock);
	return ret;
}

/* COMMIT what the inode has uncommitted; resend what the origin lost.
 * Returns only once every extent listed at the call is stable, or with the
 * error that kept one from being so. */
static int commit_inode(struct gw *gw, struct gw_inode *ino)
{
	struct gw_extent *first, *drop = NULL;
	struct nfsc_post post;
	uint8_t verf[8];
	uint64_t gen;
	int ret;

	/* 1. Wait for the round in flight; own the next. */
	round_begin(ino);
	/* 2. This round covers the newest extent listed now and all older;
	 *    writes answered from here on are pushed in front of it. */
	pthread_mutex_lock(&ino->lock);
	first = ino->uncommitted;
	pthread_mutex_unlock(&ino->lock);
	if (!first) {
		round_end(ino);
		return 0;
	}
	/* 3. COMMIT; write again what the origin lost. */
	gen = gw_inode_attr_gen(ino);
	ret = commit_as(gw, ino, &first->cred, verf, &post);
	if (!ret)
		ret = resend_lost(gw, ino, first, verf);
	/* 4. Stable: unlist. Failed: keep them for the next round, up to a
	 *    bound. */
	pthread_mutex_lock(&ino->lock);
	if (!ret || ino->uncommitted_bytes > GW_KEEP_FAILED) {
		cut_locked(ino, first);
		drop = first;
	}
	/* Every writer open now hears of it (gw_write_flush), kept or not:
	 * kept, the next round may fail again and is news again. */
	if (ret)
		werr_record_locked(ino, ret);
	pthread_mutex_unlock(&ino->lock);
	if (ret && drop)
		gw_log("COMMIT failed (%s) with more than %u MiB uncommitted: "
		       "giving up resending it", strerror(-ret),
		       GW_KEEP_FAILED >> 20);
	free_extents(drop);
	if (!ret && post.has_attr)
		gw_inode_set_attr_since(ino, &post.attr, gen);
	round_end(ino);
	return ret;
}

int gw_write_flush(struct gw *gw, struct gw_inode *ino, struct gw_file *f,
		   bool commit)
{
	int ret = 0;

	/* Writes are answered before the FUSE reply, so none that this
	 * flush must cover is in flight; what remains is uncommitted. */
	if (commit)
		ret = commit_inode(gw, ino);
	if (!f)
		return ret;
	/* errseq, as the kernel's: a failure is reported once to each file
	 * that was open for writing when it happened (a COMMIT failure of
	 * this very flush too: it was recorded), never to a reader, which
	 * would take it from the writer. */
	ret = 0;
	pthread_mutex_lock(&ino->lock);
	if (f->writer && f->werr_seen != ino->werr_seq) {
		ret = ino->write_err;
		f->werr_seen = ino->werr_seq;
	}
	pthread_mutex_unlock(&ino->lock);
	return ret;
}

void gw_write(struct gw *gw, fuse_req_t req, struct gw_inode *ino,
	      struct gw_file *f, char *buf, size_t size, off_t off,
	      bool writepage)
{
	struct gw_extent *e;
	struct nfsc_attr known;
	struct wresult res;
	bool commit_now, judge, foreign, first;
	uint64_t seq;
	int ret;

	if (writepage)
		__atomic_fetch_add(&gw->writepage_writes, 1, __ATOMIC_RELAXED);
	e = extent_new(buf);
	if (!e) {
		gw_buf_put(buf);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	e->off = (uint64_t)off;
	e->len = size;
	e->cred = f->cred;
	/* Until this write is answered, a change seen at the origin may be
	 * this very write (opens and GETATTRs must not take it for someone
	 * else's and drop the kernel's pages: see gw_file_open). */
	pthread_mutex_lock(&ino->lock);
	/* A resend of older bytes must not land after this write. */
	while (ino->resending)
		pthread_cond_wait(&ino->fetch_cond, &ino->lock);
	/* wcc: judged only for a write that is the inode's only one from
	 * start to answer. Another of ours in flight (mmap writeback, a second
	 * writer) may reach the origin first, and then this one's "before" is
	 * that one's "after", which we do not know yet: it would pass for a
	 * change by someone else every time. Such writes are taken for our
	 * own, as without wcc. */
	judge = ino->attr_valid && !gw_inode_writing(ino);
	known = ino->attr;
	seq = ++ino->writes_started;
	pthread_mutex_unlock(&ino->lock);
	/* Reads must not be served from a fetch older than this write. */
	gw_inode_drop_fetch(ino);

	window_get(gw, size);
	/* The kernel's own pages: as another writer if the origin refuses
	 * this one. A write(2) is its caller's alone. */
	if (writepage)
		ret = send_range_as(gw, ino, &e->cred, buf, size,
				    (uint64_t)off, false, judge ? &known : NULL,
				    &res);
	else
		ret = send_range(gw, &f->cred, &ino->fh, buf, size,
				 (uint64_t)off, false, judge ? &known : NULL,
				 &res);
	memcpy(e->verf, res.verf, 8);
	e->mixed = res.mixed;
	window_put(gw, size);
	/* Fetches started before now may hold what this write replaced. */
	pthread_mutex_lock(&ino->lock);
	ino->wgen++;
	pthread_mutex_unlock(&ino->lock);
	/* A read that fetched from the origin while the WRITE was out may
	 * hold the old bytes, or an EOF short of this write: a later read
	 * served from it would show the old data, and a short read makes
	 * the kernel shrink i_size (where the next O_APPEND write goes).
	 * Drop such fetches before the write is answered, and before the
	 * cache takes this write (their fills land first). */
	gw_inode_drop_fetch(ino);
	if (ret) {
		free_extents(e);
		/* The origin refused: what the cache holds may be ahead of or
		 * behind it now. Drop it. */
		gw_cache_drop(gw, ino);
		pthread_mutex_lock(&ino->lock);
		ino->writes_done++;
		pthread_cond_broadcast(&ino->fetch_cond);
		if (!writepage) {
			pthread_mutex_unlock(&ino->lock);
			fuse_reply_err(req, -ret);
			return;
		}
		/* A write-back WRITE's error reaches no write(2). Failed, it
		 * would mark the kernel's mapping, which keeps only ENOSPC:
		 * close would say EIO for EDQUOT, EROFS, ESTALE. So the
		 * kernel is told the pages went out, and the next flush or
		 * fsync of the file gives the origin's own error, as the NFS
		 * client's close and fsync do. Those pages hold bytes the
		 * origin never took: the next open drops them. */
		/* Logged once per error a writer has not reported yet. */
		first = !werr_pending_locked(ino);
		werr_record_locked(ino, ret);
		ino->pages_stale = true;
		ino->write_refused = true;
		pthread_mutex_unlock(&ino->lock);
		__atomic_fetch_add(&gw->writepage_errors, 1, __ATOMIC_RELAXED);
		if (first)
			gw_log("write-back WRITE of %zu bytes at %llu refused "
			       "(%s): given at the next flush or fsync", size,
			       (unsigned long long)off, strerror(-ret));
		fuse_reply_write(req, size);
		return;
	}
	pthread_mutex_lock(&ino->lock);
	foreign = res.foreign && ino->writes_started == seq;
	pthread_mutex_unlock(&ino->lock);
	if (foreign) {
		/* Someone else changed the file before this write: the cache
		 * and the kernel's pages hold a version never seen here. The
		 * object takes the new version with none of its blocks; the
		 * next open drops the pages (below), as after a change seen
		 * by a GETATTR. */
		__atomic_fetch_add(&gw->wcc_foreign, 1, __ATOMIC_RELAXED);
		gw_log("file %llu changed at the origin before our WRITE at "
		       "%llu (wcc): dropping its cached data",
		       (unsigned long long)known.fileid,
		       (unsigned long long)off);
	}
	if (res.post.has_attr && foreign) {
		gw_inode_set_attr(ino, &res.post.attr);
		gw_cache_own_change(gw, ino, &res.post.attr, true);
		gw_cache_drop(gw, ino);
	} else if (res.post.has_attr) {
		/* Our own write changed the ctime, not who may write: cached
		 * ACCESS answers hold on. */
		pthread_mutex_lock(&ino->lock);
		if (ino->attr_valid)
			gw_access_restamp(ino, &ino->attr, &res.post.attr);
		pthread_mutex_unlock(&ino->lock);
		gw_inode_set_attr(ino, &res.post.attr);
		gw_cache_own_write(gw, ino, &res.post.attr, buf, size,
				   (uint64_t)off);
	} else {
		gw_cache_drop(gw, ino);
		gw_inode_invalidate_attr(ino);
	}
	/* Listed before the reply: a flush that follows it must see it. */
	pthread_mutex_lock(&ino->lock);
	/* The kernel wrote these bytes into its page cache itself: its pages
	 * are of this version now, and the next open need not drop them. */
	if (foreign)
		ino->pages_stale = true;
	else if (res.post.has_attr && ino->opened_before &&
		 gw_attr_newer(&res.post.attr, &ino->open_attr))
		ino->open_attr = res.post.attr;
	ino->writes_done++;
	pthread_cond_broadcast(&ino->fetch_cond);
	e->next = ino->uncommitted;
	ino->uncommitted = e;
	ino->uncommitted_bytes += size;
	commit_now = ino->uncommitted_bytes >= GW_COMMIT_WAIT ||
		     (ino->uncommitted_bytes >= GW_COMMIT_AFTER &&
		      !ino->committing);
	pthread_mutex_unlock(&ino->lock);
	/* Bound what the gateway holds for resending. Before the reply: after
	 * it, the file may be released and the inode forgotten. On failure
	 * the extents stay listed, and the next flush meets the error again
	 * unless its own COMMIT gets through. */
	if (commit_now && commit_inode(gw, ino))
		gw_log("COMMIT after %u MiB uncommitted failed; kept for the "
		       "next flush", GW_COMMIT_AFTER >> 20);
	fuse_reply_write(req, size);
}

/* The kernel let the inode go: no flush or write of it can be running. */
void gw_write_forget(struct gw_inode *ino)
{
	struct gw_extent *l;

	pthread_mutex_lock(&ino->lock);
	l = ino->uncommitted;
	ino->uncommitted = NULL;
	ino->uncommitted_bytes = 0;
	pthread_mutex_unlock(&ino->lock);
	free_extents(l);
}
