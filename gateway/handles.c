/* handles.c - open files and directories the kernel may never release.
 *
 * A RELEASE (or RELEASEDIR) is sent in the background after the last
 * close; an unmount ends the connection, and the kernel drops every
 * request still queued, so a file closed just before it may never be
 * released here (seen under load; test 43 stops the gateway to make it
 * certain). Every fi->fh is on this list, so the gateway frees at exit
 * what it gave such opens.
 */
#include <pthread.h>

#include "gw_i.h"

static pthread_mutex_t handle_lock = PTHREAD_MUTEX_INITIALIZER;
static struct gw_handle *handles;	/* handle_lock */

void gw_handle_add(struct gw_handle *h, void (*free_fn)(struct gw_handle *))
{
	h->free_fn = free_fn;
	h->prev = NULL;
	pthread_mutex_lock(&handle_lock);
	h->next = handles;
	if (handles)
		handles->prev = h;
	handles = h;
	pthread_mutex_unlock(&handle_lock);
}

void gw_handle_del(struct gw_handle *h)
{
	if (!h)
		return;
	pthread_mutex_lock(&handle_lock);
	if (h->prev)
		h->prev->next = h->next;
	else
		handles = h->next;
	if (h->next)
		h->next->prev = h->prev;
	pthread_mutex_unlock(&handle_lock);
}

size_t gw_handles_free(void)
{
	struct gw_handle *h;
	size_t n = 0;

	pthread_mutex_lock(&handle_lock);
	while ((h = handles)) {
		handles = h->next;
		h->free_fn(h);
		n++;
	}
	pthread_mutex_unlock(&handle_lock);
	return n;
}
