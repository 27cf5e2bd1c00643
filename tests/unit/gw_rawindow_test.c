/* gw_rawindow_test: the readahead window (gateway/read/readahead_window.c) on its own:
 * no readahead for a first read, a window that starts at one cache block
 * and doubles with every sequential read up to readahead=, reads a little
 * out of order (the kernel sends several at once) that keep it, a seek
 * that resets it, and a second pass from the start that grows it again. */
#include <stdint.h>

#include "check.h"
#include "read_i.h"

#define BS (64u << 10)
#define MiB (1u << 20)

int main(void)
{
	struct gw_opts o = { .readahead = 8 * MiB };
	struct gw gw = { .o = &o };
	struct gw_inode ino;
	uint64_t off = 0;
	size_t want = BS, w;

	memset(&ino, 0, sizeof(ino));
	pthread_mutex_init(&ino.lock, NULL);

	/* A first read: nothing known of the reader yet. */
	CHECK_EQ(gw_readahead_for(&gw, &ino, 0, MiB, BS), 0);
	/* Sequential: one block, then doubling, then readahead= at most. */
	for (int i = 1; i <= 12; i++) {
		off += MiB;
		w = gw_readahead_for(&gw, &ino, off, MiB, BS);
		CHECK_EQ(w, want);
		want = want * 2 > o.readahead ? o.readahead : want * 2;
	}
	CHECK_EQ(w, o.readahead);
	/* Two requests sent together may come swapped: still sequential. */
	CHECK_EQ(gw_readahead_for(&gw, &ino, off + 2 * MiB, MiB, BS),
		 o.readahead);
	CHECK_EQ(gw_readahead_for(&gw, &ino, off + MiB, MiB, BS), o.readahead);
	/* A seek far away: no readahead until it reads on from there. */
	CHECK_EQ(gw_readahead_for(&gw, &ino, 5000 * (uint64_t)MiB, MiB, BS), 0);
	CHECK_EQ(gw_readahead_for(&gw, &ino, 5001 * (uint64_t)MiB, MiB, BS),
		 BS);
	/* Back to the start of the file (a second pass, a new reader): no
	 * readahead at first, then it grows again from there (it did not
	 * before, until the reader passed the first pass's furthest point). */
	CHECK_EQ(gw_readahead_for(&gw, &ino, 0, MiB, BS), 0);
	CHECK_EQ(gw_readahead_for(&gw, &ino, MiB, MiB, BS), BS);
	CHECK_EQ(gw_readahead_for(&gw, &ino, 2 * MiB, MiB, BS), 2 * BS);
	/* readahead= below a block: the window never passes it. */
	o.readahead = 16u << 10;
	CHECK_EQ(gw_readahead_for(&gw, &ino, 3 * MiB, MiB, BS), 16u << 10);
	pthread_mutex_destroy(&ino.lock);
	printf("gw_rawindow_test: ok\n");
	return 0;
}
