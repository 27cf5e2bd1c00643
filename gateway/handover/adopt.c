/* adopt.c - a successor's start: the open files and directories of the
 * state (gw_state.h) listed again under the ids the kernel holds, and,
 * after a crash, the COMMITs of what the dead process wrote owed.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gw_state.h"
#include "handover_i.h"
#include "inode_i.h"
#include "keep_i.h"
#include "ops_i.h"
#include "write_i.h"

struct adopted {
	size_t files, dirs, writers, failed, owed;
};

/* After a crash (or a handover whose commits did not finish): a COMMIT
 * owed for each file the last process had open for writing, as one of its
 * writers, checked against the verifiers its writers' records hold. Made
 * while this one serves (write_commit.c); with the origin away, once it
 * is back. Without memory for the list, made here and now, before
 * serving. */
static void owe_adopted(struct gw *gw, struct adopted *ad)
{
	struct gw_state *st = gw_state;
	struct gw_owed *v = NULL;
	size_t n = 0, cap = 0;

	for (uint32_t i = 0; i < st->slots_hwm; i++) {
		struct gw_hrec *r = &st->recs[i];
		struct gw_inode *ino;
		size_t k;

		if (!r->id || r->kind != GW_HREC_FILE || !r->writer ||
		    !gw_handle_get(r->id) ||
		    !(ino = gw_inode_find(gw, r->nodeid)))
			continue;
		for (k = 0; k < n && v[k].ino != ino; k++)
			;
		if (k < n)
			continue;
		if (n == cap) {
			size_t c = cap ? cap * 2 : 16;
			void *nv = realloc(v, c * sizeof(*v));

			if (!nv) {	/* this one now, alone (a later record
					 * of the same file commits it again:
					 * a COMMIT too many, nothing lost) */
				if (gw_write_adopt_commit(gw, ino, &r->cred))
					gw_log("takeover: written data of "
					       "node-id %llu may be lost: its "
					       "writers' next fsync or close "
					       "reports EIO",
					       (unsigned long long)r->nodeid);
				continue;
			}
			v = nv;
			cap = c;
		}
		v[n++] = (struct gw_owed){ .ino = ino, .cred = r->cred };
	}
	ad->owed = n;
	gw_write_owed_start(gw, v, n);
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
		owe_adopted(gw, &ad);
	gw_log("takeover: %zu open files (%zu writing) and %zu directories "
	       "adopted%s%s", ad.files, ad.writers, ad.dirs,
	       ad.failed ? ", some could not be" : "",
	       crashed && ad.owed ? "; what the last process wrote is "
	       "COMMITted while this one serves (with the origin away, once "
	       "it is back)" : "");
	return 0;
}
