/* write_send.c - WRITEs to the origin: a range split into wsize pieces
 * sent in parallel, their verifiers and post-op attributes gathered, the
 * pre-op attributes checked for someone else's change (wcc), the
 * credentials that may send them (the opener's, or another writer's when
 * the origin refuses those), and the errors of write-back WRITEs kept for
 * the next flush or fsync (errseq).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cache.h"
#include "gw_state.h"
#include "keep_i.h"
#include "write_i.h"

/* ---- sending ---- */

/* Replies of 0 bytes in a row after which a WRITE is given up: an origin
 * that takes nothing would otherwise be asked again forever. */
#define GW_WRITE_ZERO_TRIES 3


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
		if (wr_wcc_foreign(known, &ch, 1, 0) && (!res->post.has_attr ||
		    !wr_wcc_is(&ch.post.pre, &res->post.attr)))
			res->foreign = true;
		wr_result_add(res, &ch);
		zero = ch.written ? 0 : zero + 1;
		done += ch.written;
	}
	return 0;
}

/* WRITE [off, off+len) in wsize pieces in parallel; known: the version the
 * gateway knows the file to be, for wr_wcc_foreign (or NULL). */
int wr_send_range(struct gw *gw, const struct nfsc_cred *cr,
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

		if (wr_wcc_foreign(known, ch, n, i))
			res->foreign = true;
		wr_result_add(res, &ch[i]);
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

bool wr_refused(int ret)
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

void wr_werr_record_locked(struct gw_inode *ino, int err)
{
	struct gw_file *f;

	GW_ASSERT_HELD(&ino->lock);
	ino->write_err = err;
	ino->werr_seq++;
	/* In every writer's record too: a successor after a crash tells
	 * those this process did not. */
	for (f = ino->wfiles; f; f = f->wnext)
		if (f->rec)
			__atomic_store_n(&f->rec->werr, -err,
					 __ATOMIC_RELAXED);
}

/* A writer open now has an error to report. */
bool wr_werr_pending_locked(struct gw_inode *ino)
{
	struct gw_file *f;

	GW_ASSERT_HELD(&ino->lock);
	for (f = ino->wfiles; f; f = f->wnext)
		if (f->werr_seen != ino->werr_seq)
			return true;
	return false;
}

/* wr_send_range as *cr; refused, as each other writer in turn (see "whose
 * credentials"): *cr is then the one the origin took. */
int wr_send_range_as(struct gw *gw, struct gw_inode *ino,
			 struct nfsc_cred *cr, const char *buf, size_t len,
			 uint64_t off, bool stable,
			 const struct nfsc_attr *known, struct wresult *res)
{
	struct nfsc_cred alt[GW_CRED_TRIES];
	size_t n, i;
	int ret;

	ret = wr_send_range(gw, cr, &ino->fh, buf, len, off, stable, known, res);
	if (!wr_refused(ret))
		return ret;
	n = gw_write_other_creds(ino, cr, alt);
	for (i = 0; i < n && wr_refused(ret); i++) {
		ret = wr_send_range(gw, &alt[i], &ino->fh, buf, len, off, stable,
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
int wr_commit_as(struct gw *gw, struct gw_inode *ino,
		     const struct nfsc_cred *cr, uint8_t verf[8],
		     struct nfsc_post *post)
{
	struct nfsc_cred alt[GW_CRED_TRIES];
	size_t n, i;
	int ret;

	ret = nfsc_commit(gw->nfs, cr, &ino->fh, verf, post);
	if (!wr_refused(ret))
		return ret;
	n = gw_write_other_creds(ino, cr, alt);
	for (i = 0; i < n && wr_refused(ret); i++)
		ret = nfsc_commit(gw->nfs, &alt[i], &ino->fh, verf, post);
	return ret;
}
