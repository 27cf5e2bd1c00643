/* write_commit.c - COMMIT: uncommitted extents in rounds, resending
 * FILE_SYNC what a restart of the origin may have lost (a verifier that
 * changed), what the writers' records say of them for a successor after a
 * crash, and the flush that waits for all of it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cache.h"
#include "gw_state.h"
#include "inode_i.h"
#include "keep_i.h"
#include "worker.h"
#include "write_i.h"

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
struct gw_extent *wr_extent_new(char *data)
{
	struct gw_extent *e = malloc(sizeof(*e));

	if (!e)
		return NULL;
	e->next = NULL;
	e->data = data;
	return e;
}

void wr_free_extents(struct gw_extent *e)
{
	while (e) {
		struct gw_extent *next = e->next;

		gw_buf_put(e->data);
		free(e);
		e = next;
	}
}

/* ---- what the writers' records say (gw_state.h) ----
 *
 * A successor after a crash holds no copy of what the dead process had
 * written and not committed: it can only COMMIT it and compare verifiers,
 * as the Linux NFS client does per request. So every writer's record
 * holds what its file's uncommitted list holds (GW_UNSTABLE, a verifier
 * it came under, GW_UNSTABLE_MIXED for more than one), rewritten when that
 * changes: an extent listed into an empty list or under another verifier,
 * a round unlisting what it committed. One verifier for the mount would
 * not do: file A written under V1, the origin restarted (A lost), file B
 * written under V2 - A's COMMIT answers V2 too.
 */

static void rec_store(struct gw_hrec *r, uint32_t fl, uint64_t verf)
{
	/* In the order that leaves a record killed between the two stores
	 * claiming more than the list holds, never less: at worst a
	 * successor COMMITs once more, or reports a loss that was not. */
	if (fl) {
		__atomic_store_n(&r->verf, verf, __ATOMIC_RELAXED);
		__atomic_store_n(&r->unstable, fl, __ATOMIC_RELAXED);
	} else {
		__atomic_store_n(&r->unstable, fl, __ATOMIC_RELAXED);
		__atomic_store_n(&r->verf, verf, __ATOMIC_RELAXED);
	}
}

static void unstable_set_locked(struct gw_inode *ino, uint32_t fl,
				uint64_t verf)
{
	struct gw_file *f;

	GW_ASSERT_HELD(&ino->lock);
	if (fl == ino->unstable && (!fl || verf == ino->unstable_verf))
		return;
	ino->unstable = fl;
	ino->unstable_verf = verf;
	for (f = ino->wfiles; f; f = f->wnext)
		if (f->rec)
			rec_store(f->rec, fl, verf);
}

void wr_list_locked(struct gw_inode *ino, struct gw_extent *e)
{
	uint32_t fl = ino->unstable;
	uint64_t verf = ino->unstable_verf;

	GW_ASSERT_HELD(&ino->lock);
	e->next = ino->uncommitted;
	ino->uncommitted = e;
	ino->uncommitted_bytes += e->len;
	wr_unstable_add_extent(&fl, &verf, e);
	unstable_set_locked(ino, fl, verf);
}

/* Unlist first and everything older. */
static void cut_locked(struct gw_inode *ino, struct gw_extent *first)
{
	struct gw_extent *e;
	uint32_t fl = 0;
	uint64_t verf = 0;

	GW_ASSERT_HELD(&ino->lock);
	wr_extents_cut(&ino->uncommitted, &ino->uncommitted_bytes, first);
	/* What is left: written while the round ran. */
	for (e = ino->uncommitted; e; e = e->next)
		wr_unstable_add_extent(&fl, &verf, e);
	unstable_set_locked(ino, fl, verf);
}

void gw_write_file_published(struct gw_inode *ino, struct gw_file *f)
{
	if (!f->writer)
		return;
	pthread_mutex_lock(&ino->lock);
	f->rec = gw_handle_rec(&f->h);
	if (f->rec)
		rec_store(f->rec, ino->unstable, ino->unstable_verf);
	pthread_mutex_unlock(&ino->lock);
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
	bool lost = false;
	int ret = 0;

	for (e = first; e; e = e->next)
		if (wr_extent_lost(e, verf))
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
	/* v[0] newest; v[n - 1] oldest. */
	for (i = 0, e = ino->uncommitted; e; e = e->next, i++)
		v[i] = e;
	oldest = wr_extents_resend_from(v, n, first, verf);
	for (i = oldest == SIZE_MAX ? 0 : oldest + 1; i-- > 0 && !ret;) {
		struct wresult r;

		__atomic_fetch_add(&gw->resends, 1, __ATOMIC_RELAXED);
		gw_log("origin lost unstable writes (verifier changed): "
		       "resending %zu bytes at %llu", v[i]->len,
		       (unsigned long long)v[i]->off);
		ret = wr_send_range_as(gw, ino, &v[i]->cred, v[i]->data,
				    v[i]->len, v[i]->off, true, NULL, &r);
		/* Stable now, under this verifier: one newer than the round
		 * stays listed, and is neither sent again by the next round
		 * nor taken for lost by a successor (its records). */
		if (!ret && r.have_verf) {
			memcpy(v[i]->verf, r.verf, 8);
			v[i]->mixed = r.mixed;
		}
	}
	free(v);
out:
	pthread_mutex_lock(&ino->lock);
	ino->resending = false;
	pthread_cond_broadcast(&ino->fetch_cond);
	pthread_mutex_unlock(&ino->lock);
	return ret;
}

/* ---- COMMITs a successor owes (gw_state.h) ----
 *
 * After a crash the successor COMMITs, as one of its writers, every file
 * the dead process had open for writing, and compares the verifier with
 * the ones its writers' records hold (gw_write_adopt_commit): what it had
 * acknowledged unstable is then stable, or its writers are told (EIO).
 * Each COMMIT is one round of its inode (committing): made by whichever
 * comes first, a thread of their own started at adoption or a flush,
 * fsync, release or WRITE of the file; the successor serves meanwhile,
 * and with the origin away they wait for it (hard and offline= alike)
 * without holding anything else up.
 *
 * The records are what the COMMIT is checked against, and they say what
 * the dead process left until it has been made: this process's own WRITEs
 * rewrite them (wr_list_locked), so its first WRITE to a file that owes
 * one makes it first (gw_write_owed_first). Should this process die too
 * meanwhile, its successor finds the same records and owes the same.
 *
 * Lifetime: an owed entry names its inode until its COMMIT is done; until
 * then its file is open (it was adopted as a writer), and the release
 * that closes it flushes first, so it waits for a round the thread owns.
 * The thread claims the round under owed_lock, while the entry still
 * names the inode. */

static void owed_done_locked(struct gw *gw, struct gw_owed *o, int ret)
{
	GW_ASSERT_HELD(&gw->owed_lock);
	o->ino->owed = NULL;
	o->ino = NULL;
	if (ret)
		gw->owed_lost++;
	if (--gw->owed_left == 0)
		gw_log("takeover: the %zu COMMITs owed for what the last "
		       "process wrote are done%s", gw->nowed,
		       gw->owed_lost ? "; some data may be lost (logged "
		       "above)" : ": it is stable at the origin");
}

static int owed_run(struct gw *gw, struct gw_owed *o, struct gw_inode *ino)
{
	int ret = gw_write_adopt_commit(gw, ino, &o->cred);

	if (ret)
		gw_log("takeover: written data of node-id %llu may be lost "
		       "(its COMMIT failed or the origin restarted since the "
		       "dead process wrote it): its writers' next fsync or "
		       "close reports EIO", (unsigned long long)ino->nodeid);
	pthread_mutex_lock(&gw->owed_lock);
	owed_done_locked(gw, o, ret);
	pthread_mutex_unlock(&gw->owed_lock);
	return ret;
}

/* The round's owner: the COMMIT ino owes, if any. */
static void owed_commit(struct gw *gw, struct gw_inode *ino)
{
	struct gw_owed *o;

	if (!gw->owed)
		return;
	pthread_mutex_lock(&gw->owed_lock);
	o = ino->owed;
	pthread_mutex_unlock(&gw->owed_lock);
	if (o)
		owed_run(gw, o, ino);
}

void gw_write_owed_first(struct gw *gw, struct gw_inode *ino)
{
	bool owes;

	if (!gw->owed)
		return;
	pthread_mutex_lock(&gw->owed_lock);
	owes = ino->owed != NULL;
	pthread_mutex_unlock(&gw->owed_lock);
	if (!owes)
		return;
	round_begin(ino);
	owed_commit(gw, ino);
	round_end(ino);
}

static void owed_one(void *arg, size_t i)
{
	struct gw *gw = arg;
	struct gw_owed *o = &gw->owed[i];
	struct gw_inode *ino;
	bool mine = false;

	pthread_mutex_lock(&gw->owed_lock);
	ino = o->ino;
	if (ino) {
		pthread_mutex_lock(&ino->lock);
		/* A round running now does it (it looks first thing). */
		if (!ino->committing) {
			ino->committing = true;
			mine = true;
		}
		pthread_mutex_unlock(&ino->lock);
	}
	pthread_mutex_unlock(&gw->owed_lock);
	if (!mine)
		return;
	owed_run(gw, o, ino);
	round_end(ino);
}

static void *owed_thread(void *arg)
{
	struct gw *gw = arg;

	/* 16 at a time, as the old process commits at a handover: with a
	 * far origin one after the other would cost a round trip each. */
	worker_parallel(gw->nowed, 16, owed_one, gw);
	return NULL;
}

void gw_write_owed_start(struct gw *gw, struct gw_owed *v, size_t n)
{
	if (!n) {
		free(v);
		return;
	}
	pthread_mutex_lock(&gw->owed_lock);
	gw->owed = v;
	gw->nowed = gw->owed_left = n;
	for (size_t i = 0; i < n; i++)
		v[i].ino->owed = &v[i];
	pthread_mutex_unlock(&gw->owed_lock);
	if (pthread_create(&gw->owed_thread, NULL, owed_thread, gw)) {
		owed_thread(gw);	/* here, then, before serving */
		return;
	}
	gw->owed_started = true;
}

void gw_write_owed_stop(struct gw *gw)
{
	if (gw->owed_started)
		pthread_join(gw->owed_thread, NULL);
	gw->owed_started = false;
	free(gw->owed);
	gw->owed = NULL;
}

/* COMMIT what the inode has uncommitted; resend what the origin lost.
 * Returns only once every extent listed at the call is stable, or with the
 * error that kept one from being so. */
int wr_commit_inode(struct gw *gw, struct gw_inode *ino)
{
	struct gw_extent *first, *drop = NULL;
	struct nfsc_post post;
	uint8_t verf[8];
	uint64_t gen;
	int ret;

	/* 1. Wait for the round in flight; own the next. A COMMIT this
	 *    process owes for what a dead one wrote goes first (its error
	 *    is recorded for the writers, as a WRITE's would be). */
	round_begin(ino);
	owed_commit(gw, ino);
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
	ret = wr_commit_as(gw, ino, &first->cred, verf, &post);
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
		wr_werr_record_locked(ino, ret);
	pthread_mutex_unlock(&ino->lock);
	if (ret && drop)
		gw_log("COMMIT failed (%s) with more than %u MiB uncommitted: "
		       "giving up resending it", strerror(-ret),
		       GW_KEEP_FAILED >> 20);
	wr_free_extents(drop);
	if (!ret && post.has_attr)
		gw_inode_set_attr_since(ino, &post.attr, gen);
	round_end(ino);
	return ret;
}

int gw_write_flush(struct gw *gw, struct gw_inode *ino, struct gw_file *f,
		   bool fsync)
{
	int ret;

	/* Writes are answered before the FUSE reply, so none that this
	 * flush must cover is in flight; what remains is uncommitted. */
	ret = wr_commit_inode(gw, ino);
	if (!f)
		return ret;
	/* errseq, as the kernel's: a failure is reported to each file that
	 * was open for writing when it happened (a COMMIT failure of this
	 * very flush too: it was recorded) until an fsync of that file has
	 * reported it, never to a reader, which would take it from the
	 * writer. */
	ret = 0;
	pthread_mutex_lock(&ino->lock);
	if (f->writer && f->werr_seen != ino->werr_seq) {
		ret = ino->write_err;
		if (fsync) {
			f->werr_seen = ino->werr_seq;
			if (f->rec)
				__atomic_store_n(&f->rec->werr, 0,
						 __ATOMIC_RELAXED);
		}
	}
	pthread_mutex_unlock(&ino->lock);
	return ret;
}

/* ---- a successor's (gw_state.h) ---- */

void gw_write_adopt_locked(struct gw_inode *ino, struct gw_file *f)
{
	struct gw_hrec *r = gw_handle_rec(&f->h);
	struct gw_file *g;
	uint64_t was;

	GW_ASSERT_HELD(&ino->lock);
	f->rec = r;
	f->werr_seen = ino->werr_seq;
	if (!r || !r->werr)
		return;
	/* f's error to tell, and not the writers' adopted before it, which
	 * had none or their own. */
	was = ino->werr_seq;
	ino->write_err = -r->werr;
	ino->werr_seq++;
	for (g = ino->wfiles; g; g = g->wnext)
		if (g != f && g->werr_seen == was)
			g->werr_seen = ino->werr_seq;
	f->werr_seen = was;
}

int gw_write_adopt_commit(struct gw *gw, struct gw_inode *ino,
			  const struct nfsc_cred *cr)
{
	struct nfsc_post post;
	struct gw_file *f;
	uint8_t verf[8];
	uint32_t fl = 0;
	uint64_t want = 0;
	int ret;

	/* 1. What the dead process had not committed, as its writers'
	 *    records say. */
	pthread_mutex_lock(&ino->lock);
	for (f = ino->wfiles; f; f = f->wnext)
		if (f->rec)
			wr_unstable_add(&fl, &want, f->rec->unstable,
					f->rec->verf);
	pthread_mutex_unlock(&ino->lock);
	if (!(fl & GW_UNSTABLE))
		return 0;
	/* 2. COMMIT it: under another verifier, or under two, some of it is
	 *    gone, and this process has no copy to write again. */
	ret = wr_commit_as(gw, ino, cr, verf, &post);
	if (ret == 0 && wr_unstable_lost(fl, want, verf))
		ret = -EIO;
	/* 3. The writers' to tell (their records too: a successor of this
	 *    process tells them still); the records say from now on what
	 *    this process holds, nothing yet. */
	pthread_mutex_lock(&ino->lock);
	if (ret < 0)
		wr_werr_record_locked(ino, ret);
	for (f = ino->wfiles; f; f = f->wnext)
		if (f->rec)
			rec_store(f->rec, ino->unstable, ino->unstable_verf);
	pthread_mutex_unlock(&ino->lock);
	return ret;
}
