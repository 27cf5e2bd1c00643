/* adopt.c - a successor's start: the open files and directories of the
 * state (gw_state.h) listed again under the ids the kernel holds, and,
 * after a crash, the COMMITs of what the dead process wrote.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gw_state.h"
#include "handover_i.h"
#include "inode_i.h"
#include "keep_i.h"
#include "ops_i.h"
#include "worker.h"
#include "write_i.h"

struct adopted {
	size_t files, dirs, writers, failed, committed, lost;
};

/* After a crash: COMMIT each written file once, as one of its writers;
 * up to COMMIT_THREADS at a time (the clients wait for them all: with a
 * far origin, one after the other would cost a round trip each). */
#define COMMIT_THREADS 16

struct adopt_commit {
	struct gw_inode *ino;
	const struct nfsc_cred *cr;
	uint64_t nodeid;
	int ret;
};

struct commit_pool {
	struct gw *gw;
	struct adopt_commit *c;
	size_t n;
};

static void log_lost(uint64_t nodeid)
{
	gw_log("takeover: written data of node-id %llu may be lost (its "
	       "COMMIT failed or the origin restarted since the dead process "
	       "wrote it): its writers' next fsync or close reports EIO",
	       (unsigned long long)nodeid);
}

static int commit_one(struct gw *gw, struct gw_inode *ino,
		      const struct nfsc_cred *cr)
{
	int ret = gw_write_adopt_commit(gw, ino, cr);

	if (ret)
		log_lost(ino->nodeid);
	return ret;
}

static void commit_in_pool(void *arg, size_t i)
{
	struct commit_pool *p = arg;

	p->c[i].ret = gw_write_adopt_commit(p->gw, p->c[i].ino, p->c[i].cr);
}

static void commit_adopted(struct gw *gw, struct adopted *ad)
{
	struct gw_state *st = gw_state;
	struct commit_pool pool = { .gw = gw };
	size_t cap = 0;

	for (uint32_t i = 0; i < st->slots_hwm; i++) {
		struct gw_hrec *r = &st->recs[i];
		struct gw_inode *ino;
		size_t k;

		if (!r->id || r->kind != GW_HREC_FILE || !r->writer ||
		    !gw_handle_get(r->id))
			continue;
		for (k = 0; k < pool.n && pool.c[k].nodeid != r->nodeid; k++)
			;
		if (k < pool.n || !(ino = gw_inode_find(gw, r->nodeid)))
			continue;
		if (pool.n == cap) {
			size_t c = cap ? cap * 2 : 16;
			void *nv = realloc(pool.c, c * sizeof(*pool.c));

			if (!nv) {	/* this one now, alone (a later record
					 * of the same file commits it again:
					 * a COMMIT too many, nothing lost) */
				if (commit_one(gw, ino, &r->cred))
					ad->lost++;
				else
					ad->committed++;
				continue;
			}
			pool.c = nv;
			cap = c;
		}
		pool.c[pool.n++] = (struct adopt_commit){
			.ino = ino, .cr = &r->cred, .nodeid = r->nodeid,
		};
	}
	worker_parallel(pool.n, COMMIT_THREADS, commit_in_pool, &pool);
	for (size_t k = 0; k < pool.n; k++) {
		if (pool.c[k].ret == 0) {
			ad->committed++;
			continue;
		}
		ad->lost++;
		log_lost(pool.c[k].nodeid);
	}
	free(pool.c);
}

int gw_takeover_adopt(struct gw *gw)
{
	struct gw_state *st = gw_state;
	struct adopted ad = { 0 };
	bool crashed = !st->handed_over;
	struct gw_adopted_file *files = NULL;
	size_t nfiles = 0, cap = 0;
	int ret;

	for (uint32_t i = 0; i < st->slots_hwm && i < GW_STATE_SLOTS; i++) {
		struct gw_hrec *r = &st->recs[i];

		if (!r->id)
			continue;
		if ((uint32_t)r->id != i + 1 ||
		    (r->kind != GW_HREC_FILE && r->kind != GW_HREC_DIR))
			ret = -EINVAL;
		else if (r->kind == GW_HREC_FILE) {
			if (nfiles == cap) {
				size_t c = cap ? cap * 2 : 64;
				void *nv = realloc(files, c * sizeof(*files));

				if (!nv) {
					free(files);
					return -ENOMEM;
				}
				files = nv;
				cap = c;
			}
			ret = gw_file_adopt(gw, r, &files[nfiles]);
			if (!ret)
				nfiles++;
		} else
			ret = gw_dir_adopt(gw, r);
		if (ret) {
			gw_log("takeover: cannot adopt %s %llu of node-id %llu "
			       "(%s): the kernel's uses of it fail with EBADF",
			       r->kind == GW_HREC_DIR ? "directory" : "file",
			       (unsigned long long)r->id,
			       (unsigned long long)r->nodeid, strerror(-ret));
			r->id = 0;
			ad.failed++;
			continue;
		}
		if (r->kind == GW_HREC_DIR) {
			ad.dirs++;
		} else {
			ad.files++;
			ad.writers += r->writer != 0;
		}
		/* Handed over: the old process committed its writers' data
		 * or left the error in werr; nothing left to check. */
		if (!crashed)
			r->unstable = 0;
	}
	gw_files_adopted_attach(gw, files, nfiles);
	free(files);
	ret = gw_handles_adopted();
	if (ret)
		return ret;
	if (crashed)
		commit_adopted(gw, &ad);
	gw_log("takeover: %zu open files (%zu writing) and %zu directories "
	       "adopted%s%s", ad.files, ad.writers, ad.dirs,
	       ad.failed ? ", some could not be" : "",
	       crashed ? (ad.lost ? "; after a crash, some written data may "
			  "be lost (logged above)" : "; after a crash, what "
			  "the dead process had written is committed") : "");
	return 0;
}
