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
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "gw_state.h"
#include "keep_i.h"

struct gw_state *gw_state;

/* What the kernel holds (fi->fh) is an identifier, not a pointer: the
 * low 32 bits a slot of the table below plus one, the high 32 a
 * generation, so that a process that takes the connection over
 * (doc/takeover.md) can resolve the handles the kernel has, and an
 * identifier given back is never another handle's. Slots sit in pages
 * made on demand and kept until exit: a lookup (every READ and WRITE)
 * reads two pointers without a lock; the kernel sends nothing for a
 * handle after its RELEASE, so none is freed under a lookup. */
#define H_PAGE 1024u		/* slots per page */
#define H_PAGES 4096u		/* at most 4M handles open at once */

static pthread_mutex_t handle_lock = PTHREAD_MUTEX_INITIALIZER;
static struct gw_handle *handles;	/* handle_lock */
static struct gw_handle **pages[H_PAGES];	/* made under handle_lock,
						 * read with acquire */
static uint32_t next_slot;		/* handle_lock */
static uint32_t *free_slots;		/* a stack; handle_lock */
static uint32_t nfree, free_cap;	/* handle_lock */
static uint32_t generation;		/* handle_lock */
static bool records_frozen;		/* handle_lock: handed over */

/* The page of slot idx exists: 0, or -ENOMEM. */
static int page_ensure_locked(uint32_t idx)
{
	GW_ASSERT_HELD(&handle_lock);
	if (!pages[idx / H_PAGE]) {
		struct gw_handle **p = calloc(H_PAGE, sizeof(*p));

		if (!p)
			return -ENOMEM;
		__atomic_store_n(&pages[idx / H_PAGE], p, __ATOMIC_RELEASE);
	}
	return 0;
}

static void list_add_locked(struct gw_handle *h)
{
	GW_ASSERT_HELD(&handle_lock);
	h->next = handles;
	if (handles)
		handles->prev = h;
	handles = h;
	h->listed = true;
}

/* A slot for h: its id, or 0 (out of memory, or 4M handles open). */
static uint64_t slot_take_locked(struct gw_handle *h)
{
	uint32_t idx;

	GW_ASSERT_HELD(&handle_lock);
	if (nfree) {
		idx = free_slots[--nfree];
	} else {
		if (next_slot == H_PAGE * H_PAGES)
			return 0;
		idx = next_slot;
		if (page_ensure_locked(idx))
			return 0;
		next_slot++;
	}
	if (++generation == 0)
		generation = 1;
	__atomic_store_n(&h->id, (uint64_t)generation << 32 | (idx + 1),
			 __ATOMIC_RELAXED);
	__atomic_store_n(&pages[idx / H_PAGE][idx % H_PAGE], h,
			 __ATOMIC_RELEASE);
	return h->id;
}

/* idx is free for the next handle: 0, or -ENOMEM. */
static int free_push_locked(uint32_t idx)
{
	GW_ASSERT_HELD(&handle_lock);
	if (nfree == free_cap) {
		uint32_t cap = free_cap ? free_cap * 2 : 256;
		uint32_t *v = realloc(free_slots, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		free_slots = v;
		free_cap = cap;
	}
	free_slots[nfree++] = idx;
	return 0;
}

static void slot_give_locked(struct gw_handle *h)
{
	uint32_t idx = (uint32_t)h->id - 1;

	GW_ASSERT_HELD(&handle_lock);
	if (gw_state && !records_frozen)
		__atomic_store_n(&gw_state->recs[idx].id, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&pages[idx / H_PAGE][idx % H_PAGE], NULL,
			 __ATOMIC_RELEASE);
	__atomic_store_n(&h->id, 0, __ATOMIC_RELAXED);
	free_push_locked(idx);	/* out of memory: the slot is not reused */
}

struct gw_handle *gw_handle_get(uint64_t id)
{
	uint32_t idx = (uint32_t)id - 1;
	struct gw_handle **p, *h;

	if (!(uint32_t)id || idx >= H_PAGE * H_PAGES)
		return NULL;
	p = __atomic_load_n(&pages[idx / H_PAGE], __ATOMIC_ACQUIRE);
	if (!p)
		return NULL;
	h = __atomic_load_n(&p[idx % H_PAGE], __ATOMIC_ACQUIRE);
	return h && __atomic_load_n(&h->id, __ATOMIC_RELAXED) == id ? h : NULL;
}

int gw_handle_add(struct gw_handle *h,
		  void (*release)(struct gw *, struct gw_handle *))
{
	h->release = release;
	h->prev = NULL;
	pthread_mutex_lock(&handle_lock);
	if (!slot_take_locked(h)) {
		pthread_mutex_unlock(&handle_lock);
		h->listed = false;
		return -ENOMEM;
	}
	list_add_locked(h);
	pthread_mutex_unlock(&handle_lock);
	return 0;
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
	slot_give_locked(h);
}

void gw_handles_fini(void)
{
	pthread_mutex_lock(&handle_lock);
	for (uint32_t i = 0; i < H_PAGES; i++) {
		free(pages[i]);
		pages[i] = NULL;
	}
	free(free_slots);
	free_slots = NULL;
	nfree = free_cap = next_slot = 0;
	pthread_mutex_unlock(&handle_lock);
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

/* ---- what a successor needs (gw_state.h) ---- */

void gw_handle_publish(struct gw_handle *h, unsigned kind, uint64_t nodeid,
		       const struct nfsc_cred *cred, bool writer)
{
	uint64_t id = __atomic_load_n(&h->id, __ATOMIC_RELAXED);
	struct gw_hrec *r;

	if (!gw_state || !(uint32_t)id)
		return;
	r = &gw_state->recs[(uint32_t)id - 1];
	for (uint32_t hwm = __atomic_load_n(&gw_state->slots_hwm,
					    __ATOMIC_RELAXED);
	     hwm < (uint32_t)id &&
	     !__atomic_compare_exchange_n(&gw_state->slots_hwm, &hwm,
					  (uint32_t)id, false,
					  __ATOMIC_RELAXED, __ATOMIC_RELAXED);)
		;
	__atomic_store_n(&r->id, 0, __ATOMIC_RELAXED);
	r->nodeid = nodeid;
	r->kind = kind;
	r->writer = writer;
	r->werr = 0;
	r->unstable = 0;
	r->verf = 0;
	r->cred = *cred;
	__atomic_store_n(&r->id, id, __ATOMIC_RELEASE);
}

struct gw_hrec *gw_handle_rec(const struct gw_handle *h)
{
	uint64_t id = __atomic_load_n(&h->id, __ATOMIC_RELAXED);

	if (!gw_state || !(uint32_t)id)
		return NULL;
	return &gw_state->recs[(uint32_t)id - 1];
}

int gw_handle_adopt(struct gw_handle *h,
		    void (*release)(struct gw *, struct gw_handle *),
		    uint64_t id)
{
	uint32_t idx = (uint32_t)id - 1;

	if (!(uint32_t)id || idx >= H_PAGE * H_PAGES)
		return -EINVAL;
	h->release = release;
	h->prev = NULL;
	pthread_mutex_lock(&handle_lock);
	if (page_ensure_locked(idx)) {
		pthread_mutex_unlock(&handle_lock);
		return -ENOMEM;
	}
	if (pages[idx / H_PAGE][idx % H_PAGE]) {
		pthread_mutex_unlock(&handle_lock);
		return -EEXIST;
	}
	if (idx >= next_slot)
		next_slot = idx + 1;
	if ((uint32_t)(id >> 32) > generation)
		generation = (uint32_t)(id >> 32);
	__atomic_store_n(&h->id, id, __ATOMIC_RELAXED);
	__atomic_store_n(&pages[idx / H_PAGE][idx % H_PAGE], h,
			 __ATOMIC_RELEASE);
	list_add_locked(h);
	pthread_mutex_unlock(&handle_lock);
	return 0;
}

int gw_handles_adopted(void)
{
	pthread_mutex_lock(&handle_lock);
	/* The slots below the highest adopted one that nothing took. */
	for (uint32_t idx = next_slot; idx-- > 0;) {
		struct gw_handle **p = pages[idx / H_PAGE];

		if (p && p[idx % H_PAGE])
			continue;
		if (free_push_locked(idx)) {
			pthread_mutex_unlock(&handle_lock);
			return -ENOMEM;
		}
		if (gw_state)
			__atomic_store_n(&gw_state->recs[idx].id, 0,
					 __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&handle_lock);
	return 0;
}

void gw_handles_freeze_records(void)
{
	pthread_mutex_lock(&handle_lock);
	records_frozen = true;
	pthread_mutex_unlock(&handle_lock);
}

size_t gw_handles_each(struct gw *gw,
		       void (*fn)(struct gw *, struct gw_handle *, void *),
		       void *arg)
{
	struct gw_handle **v = NULL, *h;
	size_t n = 0, i = 0;

	pthread_mutex_lock(&handle_lock);
	for (h = handles; h; h = h->next)
		n++;
	if (n)
		v = malloc(n * sizeof(*v));
	for (h = handles; v && h; h = h->next)
		v[i++] = h;
	pthread_mutex_unlock(&handle_lock);
	for (size_t j = 0; j < i; j++)
		fn(gw, v[j], arg);
	free(v);
	return i;
}
