/* sync.c - synchronous helpers built from the async calls.
 *
 * A waiter on the caller's stack counts outstanding calls; each callback
 * records the first error and counts down; the caller sleeps until zero.
 * The single calls a caller can give up on are in sync_intr.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "nfsc_i.h"

void nfsc_waiter_init(struct nfsc_waiter *w)
{
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->cond, NULL);
	w->pending = 0;
	w->status = 0;
}

void nfsc_waiter_add(struct nfsc_waiter *w)
{
	pthread_mutex_lock(&w->lock);
	w->pending++;
	pthread_mutex_unlock(&w->lock);
}

void nfsc_waiter_done(int status, void *priv)
{
	struct nfsc_waiter *w = priv;

	pthread_mutex_lock(&w->lock);
	if (status && !w->status)
		w->status = status;
	if (--w->pending == 0)
		pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

int nfsc_waiter_wait(struct nfsc_waiter *w)
{
	int ret;

	pthread_mutex_lock(&w->lock);
	while (w->pending)
		pthread_cond_wait(&w->cond, &w->lock);
	ret = w->status;
	pthread_mutex_unlock(&w->lock);
	pthread_cond_destroy(&w->cond);
	pthread_mutex_destroy(&w->lock);
	return ret;
}

/* Account for one call that submit() returned: queued or not. */
static void waiter_queued(struct nfsc_waiter *w, int submit_ret)
{
	if (submit_ret)
		nfsc_waiter_done(submit_ret, w);
}

/* One async call, waited for: `call` names nfsc_waiter_done and &w; r
 * is its answer. */
#define SYNC_WAIT(call, r) do {						\
	struct nfsc_waiter w;						\
									\
	nfsc_waiter_init(&w);						\
	nfsc_waiter_add(&w);						\
	waiter_queued(&w, call);					\
	(r) = nfsc_waiter_wait(&w);					\
} while (0)

#define SYNC_CALL(call) do {						\
	int r_;								\
									\
	SYNC_WAIT(call, r_);						\
	return r_;							\
} while (0)

/* SYNC_CALL for a change of a name: a test may hold it once the origin
 * has done it (inject.c). */
#define SYNC_CHANGE(op, call) do {					\
	int r_;								\
									\
	SYNC_WAIT(call, r_);						\
	return nfsc_inject_change_hold(n, op, r_);			\
} while (0)

int nfsc_readdir_all(struct nfsc *n, const struct nfsc_cred *cr,
		     const struct nfsc_fh *dir, struct nfsc_dirlist *list,
		     size_t max)
{
	uint64_t cookie = 0;
	uint8_t verf[8] = { 0 };
	bool eof = false;
	int ret = 0;
	int conn = -1;

	memset(list, 0, sizeof(*list));
	list->max = max;
	while (!eof && !ret) {
		struct nfsc_waiter w;
		size_t before = list->n + list->skipped;

		nfsc_waiter_init(&w);
		nfsc_waiter_add(&w);
		waiter_queued(&w, nfsc_readdirplus_async(n, conn, cr, dir,
							 &cookie, verf, list,
							 &eof, nfsc_waiter_done,
							 &w));
		ret = nfsc_waiter_wait(&w);
		/* A round with no entries and no eof would loop forever. */
		if (!ret && !eof && list->n + list->skipped == before)
			ret = -EIO;
	}
	if (ret) {
		struct nfsc_dirlist keep = *list;	/* what was skipped */

		nfsc_dirlist_free(list);
		list->skipped = keep.skipped;
		memcpy(list->skipped_first, keep.skipped_first,
		       sizeof(list->skipped_first));
	}
	return ret;
}

struct read_chunk {
	uint64_t off;
	uint32_t len;
	uint32_t got;
	bool eof;
	bool has_attr;
	struct nfsc_attr attr;
};

#define NFSC_PREAD_MAX_CHUNKS 4096

/* Read [off, off+len) with rsize READs spread over the connections; a chunk
 * that comes back short before EOF is finished with further READs. */
ssize_t nfsc_pread(struct nfsc *n, const struct nfsc_cred *cr,
		   const struct nfsc_fh *fh, void *buf, size_t len,
		   uint64_t off, struct nfsc_attr *attr, bool *has_attr)
{
	struct read_chunk stack[8], *ch = stack;
	size_t nch, i, total = 0;
	struct nfsc_waiter w;
	uint32_t rs = nfsc_rsize(n);
	int ret;

	if (has_attr)
		*has_attr = false;
	if (!len)
		return 0;
	nch = (len + rs - 1) / rs;
	if (nch > NFSC_PREAD_MAX_CHUNKS)
		return -EINVAL;
	if (nch > sizeof(stack) / sizeof(stack[0])) {
		ch = calloc(nch, sizeof(*ch));
		if (!ch)
			return -ENOMEM;
	}
	nfsc_waiter_init(&w);
	for (i = 0; i < nch; i++) {
		ch[i].off = off + i * rs;
		ch[i].len = (uint32_t)(len - i * rs < rs ?
				       len - i * rs : rs);
		nfsc_waiter_add(&w);
		waiter_queued(&w, nfsc_read_async(n, -1, cr, fh, ch[i].off,
				ch[i].len, (char *)buf + i * rs,
				&ch[i].got, &ch[i].eof, &ch[i].attr,
				&ch[i].has_attr, nfsc_waiter_done, &w));
	}
	ret = nfsc_waiter_wait(&w);
	if (ret)
		goto out;
	/* The bytes are good up to the first short chunk. */
	for (i = 0; i < nch; i++) {
		if (ch[i].has_attr && attr) {
			*attr = ch[i].attr;
			if (has_attr)
				*has_attr = true;
		}
		total += ch[i].got;
		if (ch[i].got == ch[i].len)
			continue;
		if (ch[i].eof)
			break;
		/* Short without EOF: ask again for the rest of the chunk. */
		while (total < (size_t)(i * rs + ch[i].len)) {
			uint32_t want = (uint32_t)(i * rs + ch[i].len -
						   total);
			struct read_chunk c = { 0 };

			nfsc_waiter_init(&w);
			nfsc_waiter_add(&w);
			waiter_queued(&w, nfsc_read_async(n, -1, cr, fh,
					off + total, want, (char *)buf + total,
					&c.got, &c.eof, &c.attr, &c.has_attr,
					nfsc_waiter_done, &w));
			ret = nfsc_waiter_wait(&w);
			if (ret)
				goto out;
			total += c.got;
			if (c.eof || c.got == 0)
				goto out;
		}
	}
out:
	if (ch != stack)
		free(ch);
	return ret ? ret : (ssize_t)total;
}

int nfsc_setattr(struct nfsc *n, const struct nfsc_cred *cr,
		 const struct nfsc_fh *fh, const struct nfsc_sattr *sa,
		 struct nfsc_post *post)
{
	SYNC_CALL(nfsc_setattr_async(n, -1, cr, fh, sa, post, nfsc_waiter_done,
				     &w));
}

int nfsc_commit(struct nfsc *n, const struct nfsc_cred *cr,
		const struct nfsc_fh *fh, uint8_t verf[8],
		struct nfsc_post *post)
{
	nfsc_inject_commit_delay(n);
	SYNC_CALL(nfsc_commit_async(n, -1, cr, fh, verf, post, nfsc_waiter_done,
				    &w));
}

int nfsc_create(struct nfsc *n, const struct nfsc_cred *cr,
		const struct nfsc_fh *dir, const char *name,
		const struct nfsc_sattr *sa, bool exclusive,
		struct nfsc_created *out)
{
	nfsc_inject_create_delay(n);
	SYNC_CHANGE("CREATE",
		    nfsc_create_async(n, -1, cr, dir, name, sa, exclusive, out,
				      nfsc_waiter_done, &w));
}

int nfsc_create_verf(struct nfsc *n, const struct nfsc_cred *cr,
		     const struct nfsc_fh *dir, const char *name,
		     const uint8_t verf[8], bool again,
		     struct nfsc_created *out)
{
	if (again)	/* changes nothing: never held */
		SYNC_CALL(nfsc_create_verf_async(n, -1, cr, dir, name, verf,
						 out, nfsc_waiter_done, &w));
	nfsc_inject_create_delay(n);
	SYNC_CHANGE("CREATE",
		    nfsc_create_verf_async(n, -1, cr, dir, name, verf, out,
					   nfsc_waiter_done, &w));
}

int nfsc_mkdir(struct nfsc *n, const struct nfsc_cred *cr,
	       const struct nfsc_fh *dir, const char *name,
	       const struct nfsc_sattr *sa, struct nfsc_created *out)
{
	SYNC_CHANGE("MKDIR", nfsc_mkdir_async(n, -1, cr, dir, name, sa, out,
					      nfsc_waiter_done, &w));
}

int nfsc_symlink(struct nfsc *n, const struct nfsc_cred *cr,
		 const struct nfsc_fh *dir, const char *name,
		 const char *target, struct nfsc_created *out)
{
	SYNC_CHANGE("SYMLINK",
		    nfsc_symlink_async(n, -1, cr, dir, name, target, out,
				       nfsc_waiter_done, &w));
}

int nfsc_mknod(struct nfsc *n, const struct nfsc_cred *cr,
	       const struct nfsc_fh *dir, const char *name,
	       enum nfsc_type type, const struct nfsc_sattr *sa,
	       uint32_t major, uint32_t minor, struct nfsc_created *out)
{
	SYNC_CHANGE("MKNOD",
		    nfsc_mknod_async(n, -1, cr, dir, name, type, sa, major,
				     minor, out, nfsc_waiter_done, &w));
}

int nfsc_link(struct nfsc *n, const struct nfsc_cred *cr,
	      const struct nfsc_fh *fh, const struct nfsc_fh *dir,
	      const char *name, struct nfsc_post *post)
{
	SYNC_CHANGE("LINK", nfsc_link_async(n, -1, cr, fh, dir, name, post,
					    nfsc_waiter_done, &w));
}

int nfsc_remove(struct nfsc *n, const struct nfsc_cred *cr,
		const struct nfsc_fh *dir, const char *name)
{
	SYNC_CHANGE("REMOVE", nfsc_remove_async(n, -1, cr, dir, name,
						nfsc_waiter_done, &w));
}

int nfsc_rmdir(struct nfsc *n, const struct nfsc_cred *cr,
	       const struct nfsc_fh *dir, const char *name)
{
	SYNC_CHANGE("RMDIR", nfsc_rmdir_async(n, -1, cr, dir, name,
					      nfsc_waiter_done, &w));
}

int nfsc_rename(struct nfsc *n, const struct nfsc_cred *cr,
		const struct nfsc_fh *fromdir, const char *from,
		const struct nfsc_fh *todir, const char *to)
{
	SYNC_CHANGE("RENAME",
		    nfsc_rename_async(n, -1, cr, fromdir, from, todir, to,
				      nfsc_waiter_done, &w));
}
