/* handover.c - the open files of a connection handed to another process
 * (gw_state.h, doc/takeover.md): the old process commits its writers'
 * data and leaves their errors in the records; a successor lists the
 * files under the ids the kernel holds, and asks the origin for each one's
 * attributes and cache object.
 */
#include <errno.h>
#include <stdlib.h>

#include "gw_state.h"
#include "handover_i.h"
#include "inode_i.h"
#include "keep_i.h"
#include "ops_i.h"
#include "read_i.h"
#include "worker.h"
#include "write_i.h"

/* The writers' data committed, 16 files at a time (one round trip each:
 * the clients wait for them all); an error a writer has not been told
 * stays in its record for the successor (gw_write_flush, not an fsync,
 * leaves it untold). */
struct handover_item {
	struct gw_file *f;
	struct gw_inode *ino;
	int ret;
};

struct handover {
	struct gw *gw;
	struct handover_item *it;
	size_t n, cap, errs;
};

static void handover_result(struct handover *ho, int ret)
{
	if (ret < 0)
		ho->errs++;
}

static void handover_note(struct gw *gw, struct gw_handle *h, void *arg)
{
	struct gw_file *f = (struct gw_file *)h;
	struct handover *ho = arg;
	struct gw_inode *ino;

	if (h->release != gw_file_handle_release || !f->writer ||
	    !(ino = gw_inode_find(gw, f->nodeid)))
		return;
	if (ho->n == ho->cap) {
		size_t c = ho->cap ? ho->cap * 2 : 16;
		void *nv = realloc(ho->it, c * sizeof(*ho->it));

		if (!nv) {	/* this one now, alone */
			handover_result(ho, gw_write_flush(gw, ino, f, false));
			return;
		}
		ho->it = nv;
		ho->cap = c;
	}
	ho->it[ho->n++] = (struct handover_item){ .f = f, .ino = ino };
}

static void handover_commit(void *arg, size_t i)
{
	struct handover *ho = arg;

	ho->it[i].ret = gw_write_flush(ho->gw, ho->it[i].ino, ho->it[i].f,
				       false);
}

size_t gw_files_handover(struct gw *gw)
{
	struct handover ho = { .gw = gw };

	gw_handles_each(gw, handover_note, &ho);
	worker_parallel(ho.n, 16, handover_commit, &ho);
	for (size_t i = 0; i < ho.n; i++)
		handover_result(&ho, ho.it[i].ret);
	free(ho.it);
	return ho.errs;
}

int gw_file_adopt(struct gw *gw, const struct gw_hrec *r,
		  struct gw_adopted_file *out)
{
	struct gw_inode *ino = gw_inode_get(gw, r->nodeid);
	struct gw_file *f, **pp;
	int ret;

	if (!ino)
		return -ESTALE;
	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->nodeid = r->nodeid;
	f->cred = r->cred;
	f->writer = r->writer;
	ret = gw_handle_adopt(&f->h, gw_file_handle_release, r->id);
	if (ret) {
		free(f);
		return ret;
	}
	pthread_mutex_lock(&ino->lock);
	ino->opens++;
	ino->opened_before = false;	/* the next open drops the pages */
	if (f->writer) {
		ino->writers++;
		for (pp = &ino->wfiles; *pp; pp = &(*pp)->wnext)
			;
		*pp = f;
		gw_write_adopt_locked(ino, f);
	}
	pthread_mutex_unlock(&ino->lock);
	out->ino = ino;
	out->f = f;
	return 0;
}

/* One GETATTR's answer into its entry. */
static void adopted_answer(int status, void *priv)
{
	struct gw_adopted_file *a = priv;

	a->ret = status;
	nfsc_waiter_done(0, a->w);
}

#define ADOPT_IN_FLIGHT 64

void gw_files_adopted_attach(struct gw *gw, struct gw_adopted_file *v,
			     size_t n)
{
	for (size_t i = 0; i < n; i += ADOPT_IN_FLIGHT) {
		size_t end = i + ADOPT_IN_FLIGHT < n ? i + ADOPT_IN_FLIGHT : n;
		struct nfsc_waiter w;

		/* Asked in parallel: the pause grows by a round trip per 64
		 * open files, not one per file. */
		nfsc_waiter_init(&w);
		for (size_t k = i; k < end; k++) {
			v[k].w = &w;
			nfsc_waiter_add(&w);
			if (nfsc_getattr_async(gw->nfs, -1, &v[k].f->cred,
					       &v[k].ino->fh, &v[k].a,
					       adopted_answer, &v[k]))
				adopted_answer(-EIO, &v[k]);
		}
		nfsc_waiter_wait(&w);
		/* Its cache object, for the version the origin has now. */
		for (size_t k = i; k < end; k++) {
			struct gw_inode *ino = v[k].ino;

			if (v[k].ret)
				continue;
			gw_inode_set_attr_if_newer(ino, &v[k].a);
			gw_silly_adopt(gw, ino, v[k].a.fileid);
			if (gw->cache && gw_cache_attach(gw, ino, &v[k].a) < 0)
				gw_log("cache: cannot hold file %llu, reading "
				       "from the origin",
				       (unsigned long long)v[k].a.fileid);
		}
	}
}
