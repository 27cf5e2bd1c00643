/* handles.c - open files and directories the kernel may never release.
 *
 * A RELEASE (or RELEASEDIR) is sent in the background after the last
 * close; an unmount ends the connection, and the kernel drops every
 * request still queued, so a file closed just before it may never be
 * released here (a gateway slow under load misses it; test 43 stops the
 * gateway to make it certain). Every fi->fh is on this list, and what is left on it when
 * the session loop has ended is released then, origin and all: its
 * writes committed, its hidden name (silly.c) removed, its memory freed.
 */
#include <pthread.h>

#include "gw_i.h"

static pthread_mutex_t handle_lock = PTHREAD_MUTEX_INITIALIZER;
static struct gw_handle *handles;	/* handle_lock */

void gw_handle_add(struct gw_handle *h,
		   void (*release)(struct gw *, struct gw_handle *))
{
	h->release = release;
	h->prev = NULL;
	pthread_mutex_lock(&handle_lock);
	h->next = handles;
	if (handles)
		handles->prev = h;
	handles = h;
	h->listed = true;
	pthread_mutex_unlock(&handle_lock);
}

static void handle_del_locked(struct gw_handle *h)
{
	GW_ASSERT_HELD(&handle_lock);
	if (!h->listed)
		return;
	if (h->prev)
		h->prev->next = h->next;
	else
		handles = h->next;
	if (h->next)
		h->next->prev = h->prev;
	h->listed = false;
}

void gw_handle_del(struct gw_handle *h)
{
	if (!h)
		return;
	pthread_mutex_lock(&handle_lock);
	handle_del_locked(h);
	pthread_mutex_unlock(&handle_lock);
}

size_t gw_handles_release(struct gw *gw)
{
	struct gw_handle *h;
	size_t n = 0;

	for (;;) {
		pthread_mutex_lock(&handle_lock);
		h = handles;
		if (h)
			handle_del_locked(h);
		pthread_mutex_unlock(&handle_lock);
		if (!h)
			return n;
		/* Unlocked: a release calls the origin (and gw_handle_del,
		 * a no-op now). */
		h->release(gw, h);
		n++;
	}
}

size_t gw_handles_count(void)
{
	struct gw_handle *h;
	size_t n = 0;

	pthread_mutex_lock(&handle_lock);
	for (h = handles; h; h = h->next)
		n++;
	pthread_mutex_unlock(&handle_lock);
	return n;
}
