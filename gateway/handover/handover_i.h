/* handover_i.h - the takeover room (gateway/handover/): the gateway's part
 * of serving one FUSE connection by one process after another
 * (doc/takeover.md; the state they share: ../gw_state.h). It stands above
 * the operations: it hands over and adopts their open files.
 *
 * handover.c: the open files handed over (writers' data committed) and
 *             adopted (listed again, attributes, cache objects).
 * adopt.c:    a successor's start: every record of the state adopted,
 *             and after a crash the dead process's writes committed.
 */
#ifndef CACHEGW_HANDOVER_I_H
#define CACHEGW_HANDOVER_I_H

#include "gw_i.h"

/* ---- adopt.c: gw_takeover_adopt (gateway.h) ---- */

/* ---- handover.c (gw_files_handover: gateway.h) ---- */
struct gw_hrec;
/* Taking over: a file the kernel had from an earlier process, under the
 * same id (a directory: gw_dir_adopt, listing.c). */
struct gw_adopted_file {
	struct gw_inode *ino;
	struct gw_file *f;
	struct nfsc_attr a;		/* gw_files_adopted_attach's */
	int ret;
	struct nfsc_waiter *w;
};
int gw_file_adopt(struct gw *gw, const struct gw_hrec *r,
		  struct gw_adopted_file *out);
/* Then, for all at once: the origin's attributes (GETATTRs in parallel),
 * the hidden name if the file had one, the cache object. A successor that
 * started without the origin asks nothing: the cache object for the
 * version the cache holds (or kept attributes), the inode's attributes
 * left unknown. */
void gw_files_adopted_attach(struct gw *gw, struct gw_adopted_file *v,
			     size_t n);

#endif
