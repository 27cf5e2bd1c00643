/* readahead_window.c - the readahead window of a reader: how it grows with
 * sequential reads and what resets it (readahead.c fetches it). Kept
 * apart, free of FUSE and the origin, so that tests/unit/gw_rawindow_test
 * can run it alone.
 */
#include <stdint.h>

#include "read_i.h"

/* Sequential access grows the readahead window; a seek resets it. The
 * kernel sends a sequential reader's requests several at a time, so they
 * may arrive a little out of order: near the expected offset counts. */
size_t gw_readahead_for(struct gw *gw, struct gw_inode *ino,
			uint64_t off, size_t size, uint64_t bs)
{
	uint64_t slack;
	size_t win;

	pthread_mutex_lock(&ino->lock);
	slack = ino->ra_win > 2 * size ? ino->ra_win : 2 * size;
	if (off != 0 && off + slack >= ino->ra_next &&
	    off <= ino->ra_next + slack) {
		ino->ra_win = ino->ra_win ? ino->ra_win * 2 : bs;
		if (ino->ra_win > gw->o->readahead)
			ino->ra_win = gw->o->readahead;
	} else if (off != ino->ra_next) {
		/* A seek: the reader is here now, before or after where it
		 * was (a second pass from the start of the file must be seen
		 * as sequential again, not only once past the first's end). */
		ino->ra_win = 0;
		ino->ra_front = 0;
		ino->ra_next = off;
	}
	if (off + size > ino->ra_next)
		ino->ra_next = off + size;
	win = ino->ra_win;
	pthread_mutex_unlock(&ino->lock);
	return win;
}
