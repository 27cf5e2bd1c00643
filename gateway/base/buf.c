/* buf.c - reference-counted, page-aligned data buffers, recycled.
 *
 * A cold read moves every byte through a buffer of the gateway: the READ
 * replies land in a fetch's buffer, the FUSE reply is written from it and
 * the cache fill writes it to disk with O_DIRECT. Two things made that
 * slow (perf, 1 GiB cold read): malloc'd buffers of a MiB or more came back
 * from the kernel fresh each time (a fifth of the gateway's cycles were
 * page faults zeroing them), and each consumer took its own copy because
 * it could not know when the fetch would be freed. So buffers here are
 * shared by reference (the reply and the fill hold one each) and kept
 * mapped on per-size free lists: a freed buffer is unmapped only while
 * more than GW_BUF_MAPPED_MAX bytes are mapped, or after 5 idle seconds
 * (gw_buf_trim). So the gateway's buffer memory is the peak it needed,
 * never more than that cap plus what is in use. A keep limit below the
 * working set (64 MiB was tried) unmapped and re-faulted ~500 buffers per
 * GiB read.
 *
 * Layout: one mmap of GW_BUF_HDR + capacity; the header page holds the
 * reference count and class, the data starts at the next page (aligned
 * for O_DIRECT). Capacities are powers of two from GW_BUF_MIN.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/mman.h>

#include "gw_i.h"

#define GW_BUF_HDR 4096u
#define GW_BUF_MIN_SHIFT 12		/* 4 KiB */
#define GW_BUF_CLASSES 20		/* up to 2 GiB */
#define GW_BUF_MAPPED_MAX (256u << 20)	/* above: free buffers are unmapped */
#define GW_BUF_BIGGER 2			/* a free buffer up to 4x will do */

struct gw_buf_hdr {
	unsigned refs;			/* atomic */
	unsigned cls;
	struct gw_buf_hdr *next;	/* free list */
};

static struct {
	pthread_mutex_t lock;
	struct gw_buf_hdr *free[GW_BUF_CLASSES];
	size_t kept;			/* bytes on the free lists */
	uint64_t mapped;		/* bytes mapped in all (atomic) */
	uint64_t gets;			/* gw_buf_get calls (atomic) */
} pool = { .lock = PTHREAD_MUTEX_INITIALIZER };

static struct gw_buf_hdr *hdr_of(const char *data)
{
	return (struct gw_buf_hdr *)(void *)(data - GW_BUF_HDR);
}

static size_t cls_size(unsigned cls)
{
	return (size_t)1 << (cls + GW_BUF_MIN_SHIFT);
}

char *gw_buf_get(size_t len)
{
	struct gw_buf_hdr *h = NULL;
	unsigned cls = 0;
	void *p;

	__atomic_fetch_add(&pool.gets, 1, __ATOMIC_RELAXED);
	while (cls < GW_BUF_CLASSES && cls_size(cls) < len)
		cls++;
	if (cls == GW_BUF_CLASSES) {
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_lock(&pool.lock);
	for (unsigned c = cls; c <= cls + GW_BUF_BIGGER && c < GW_BUF_CLASSES;
	     c++) {
		h = pool.free[c];
		if (h) {
			pool.free[c] = h->next;
			pool.kept -= cls_size(c);
			break;
		}
	}
	pthread_mutex_unlock(&pool.lock);
	if (!h) {
		p = mmap(NULL, GW_BUF_HDR + cls_size(cls),
			 PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			 -1, 0);
		if (p == MAP_FAILED)
			return NULL;
		h = p;
		h->cls = cls;
		__atomic_fetch_add(&pool.mapped, GW_BUF_HDR + cls_size(cls),
				   __ATOMIC_RELAXED);
	}
	h->next = NULL;
	__atomic_store_n(&h->refs, 1, __ATOMIC_RELAXED);
	return (char *)h + GW_BUF_HDR;
}

size_t gw_buf_capacity(const char *data)
{
	return cls_size(hdr_of(data)->cls);
}

void gw_buf_ref(char *data)
{
	__atomic_fetch_add(&hdr_of(data)->refs, 1, __ATOMIC_RELAXED);
}

void gw_buf_put(char *data)
{
	struct gw_buf_hdr *h;
	size_t sz;

	if (!data)
		return;
	h = hdr_of(data);
	if (__atomic_sub_fetch(&h->refs, 1, __ATOMIC_ACQ_REL) != 0)
		return;
	sz = cls_size(h->cls);
	pthread_mutex_lock(&pool.lock);
	if (__atomic_load_n(&pool.mapped, __ATOMIC_RELAXED) <=
	    GW_BUF_MAPPED_MAX) {
		h->next = pool.free[h->cls];
		pool.free[h->cls] = h;
		pool.kept += sz;
		h = NULL;
	}
	pthread_mutex_unlock(&pool.lock);
	if (h) {
		__atomic_fetch_sub(&pool.mapped, GW_BUF_HDR + sz,
				   __ATOMIC_RELAXED);
		munmap(h, GW_BUF_HDR + sz);
	}
}

void gw_buf_release_cb(void *data)
{
	gw_buf_put(data);
}

uint64_t gw_buf_mapped(void)
{
	return __atomic_load_n(&pool.mapped, __ATOMIC_RELAXED);
}

/* Unmap every kept buffer if none was taken since the last call (the
 * housekeeping tick: idle), or always when forced (shutdown). */
void gw_buf_trim(bool force)
{
	static uint64_t last_gets;
	struct gw_buf_hdr *list[GW_BUF_CLASSES];
	uint64_t gets = __atomic_load_n(&pool.gets, __ATOMIC_RELAXED);
	unsigned i;

	if (!force && gets != last_gets) {
		last_gets = gets;
		return;
	}
	pthread_mutex_lock(&pool.lock);
	for (i = 0; i < GW_BUF_CLASSES; i++) {
		list[i] = pool.free[i];
		pool.free[i] = NULL;
	}
	pool.kept = 0;
	pthread_mutex_unlock(&pool.lock);
	for (i = 0; i < GW_BUF_CLASSES; i++) {
		while (list[i]) {
			struct gw_buf_hdr *h = list[i];
			size_t sz = GW_BUF_HDR + cls_size(i);

			list[i] = h->next;
			__atomic_fetch_sub(&pool.mapped, sz, __ATOMIC_RELAXED);
			munmap(h, sz);
		}
	}
}
