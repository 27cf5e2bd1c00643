/* md.c - what the gateway last knew of each node, kept across restarts:
 * small opaque records (attributes, access answers: the gateway defines
 * them) per node-id, each with the wall-clock time it was fetched from the
 * origin, so that a restarted gateway can tell how old it is.
 *
 * On disk (little-endian), "md.log" in the cache directory:
 *   header, 64 bytes: "CGWMDLOG", u32 version, u32 generation of the
 *     node-id table the records belong to, 40 bytes zero, u64 XXH3-64 of
 *     bytes 0..55.
 *   records, MD_REC_FIXED + len bytes each:
 *     u8 kind, u8 len, 6 bytes zero, u64 node-id, u64 key,
 *     u64 fetched (CLOCK_REALTIME ns), len bytes, u64 XXH3-64 (seed =
 *     generation) of everything before it.
 *     kind 1..127: a record, replacing the earlier one of the same
 *     (node-id, kind, key); MD_DROP: forget every record of the node-id;
 *     MD_CLEAN: written (and fdatasync'd) by a clean close: a file that
 *     does not end with it was not closed cleanly, and may miss the last
 *     records of its run (nodes_md_stats: clean).
 *
 * It is a cache of the origin's answers, so it is never fsync'd except at
 * compaction: a crash loses the last records (the gateway asks the origin
 * again). Replay stops at the first record that does not check (a torn
 * tail, damage): what follows is dropped, and the file cut there. A file
 * of another node-id table (another generation) is started afresh: its
 * node-ids may name other files. The file is rewritten when it is more
 * than twice what its live records need: by a thread of its own (the
 * worker, compact()), which writes and fsyncs the new file with the lock
 * free, then renames it over md.log and fsyncs the directory; the put or
 * drop that crossed the line only asks for it.
 *
 * Memory: live records in one array (a free list threads the empty
 * slots), found by (node-id, kind, key) through one hash table; the
 * records of a node-id chained from its entry in another (its own
 * records and its directory entries apart, so that a new inode's records
 * are found without walking a large directory's names). At most
 * NODES_MD_MAX records (puts beyond it are refused and counted).
 * Lock: m->lock (a mutex) around everything; a leaf. The worker holds it
 * to encode records and to put the new file in place, never while it
 * writes or fsyncs the bulk of it.
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>

#include "fileio.h"
#include "lockcheck.h"
#include "nodes_i.h"
#include "worker.h"

#define MD_FILE "md.log"
#define MD_TMP "md.log.tmp"
#define MD_MAGIC "CGWMDLOG"
#define MD_VERSION 1u
#define MD_HDR 64
#define MD_REC_FIXED 40
#define MD_REC_MAX (MD_REC_FIXED + NODES_MD_BLOB_MAX)
#define MD_DROP 0xDD
#define MD_CLEAN 0xCC		/* last record of a clean close */
#define MD_SLACK (1u << 20)		/* waste never worth a rewrite */
#define MD_LOAD_BUF (1u << 20)

struct md_rec {
	uint64_t id;			/* 0: free slot */
	uint64_t key;
	uint64_t fetched;
	uint32_t next1;			/* next in its node's chain (or the
					 * free list) + 1 */
	uint8_t kind, len;
	uint8_t blob[NODES_MD_BLOB_MAX];
};

/* A node-id with records: two chains, its own records (attributes,
 * access answers) and its directory entries (NODES_MD_DENT), so that the
 * first are found without walking a large directory's names. */
struct md_node {
	uint64_t id;			/* 0: free slot */
	uint32_t own1, dent1;		/* chain heads + 1; own1: free list */
};

/* An open-addressing table of uint32 values (index + 1), linear probing,
 * backward-shift deletion; the hash of a value comes from what it
 * indexes. */
struct oatab {
	uint32_t *v;
	uint64_t cap, n;		/* cap: power of 2 */
};

struct nodes_md {
	int dirfd;			/* immutable */
	uint32_t gen;			/* immutable */

	pthread_t worker;		/* rewrites md.log (compact()) */
	pthread_mutex_t lock;		/* guards everything below */
	pthread_cond_t cond;		/* wakes the worker; and who waits for
					 * it (retain, settle, close, tests) */
	bool want, compacting, stop;	/* the worker: a rewrite asked for,
					 * one under way, stop */
	uint64_t retry_end;		/* a failed rewrite: not asked for
					 * again before end passes this */
	bool hold, held;		/* tests: a rewrite waits before its
					 * new file takes md.log's place (and
					 * is waiting there) */
	int fd;				/* md.log; replaced by a rewrite */
	uint64_t end;			/* bytes of valid log */
	bool broken;			/* a write failed: no more appends */
	uint64_t lost;			/* records kept in memory that could
					 * not be appended (bumped by each) */
	struct md_rec *recs;
	uint32_t nrecs, cap, free1;	/* slots used, allocated, free list */
	struct md_node *nodev;
	uint32_t nnodes, nodes_cap, nfree1;
	struct oatab by_node;		/* id -> nodev index + 1 */
	struct oatab by_key;		/* (id, kind, key) -> recs index + 1 */
	uint64_t live, live_bytes;	/* records, their bytes on disk */
	struct nodes_md_stats st;
};

static void hdr_encode(uint8_t *p, uint32_t gen)
{
	uint32_t v = htole32(MD_VERSION), g = htole32(gen);

	memset(p, 0, MD_HDR);
	memcpy(p, MD_MAGIC, 8);
	memcpy(p + 8, &v, 4);
	memcpy(p + 12, &g, 4);
	put64(p + 56, XXH3_64bits(p, 56));
}

static size_t rec_encode(uint8_t *p, uint32_t gen, uint8_t kind,
			 uint64_t id, uint64_t key, uint64_t fetched,
			 const void *blob, uint8_t len)
{
	memset(p, 0, 8);
	p[0] = kind;
	p[1] = len;
	put64(p + 8, id);
	put64(p + 16, key);
	put64(p + 24, fetched);
	if (len)
		memcpy(p + 32, blob, len);
	return nodes_seal(p, 32 + len, gen);
}

/* Length of the valid record at p, or 0. */
static size_t rec_check(const uint8_t *p, size_t avail, uint32_t gen)
{
	size_t len;

	if (avail < MD_REC_FIXED)
		return 0;
	len = p[1];
	if (!p[0] || (p[0] > 127 && p[0] != MD_DROP && p[0] != MD_CLEAN) ||
	    len > NODES_MD_BLOB_MAX || (p[0] > 127 && len) ||
	    avail < MD_REC_FIXED + len || !get64(p + 8))
		return 0;
	for (int i = 2; i < 8; i++)
		if (p[i])
			return 0;
	if (!nodes_sealed(p, 32 + len, gen))
		return 0;
	return MD_REC_FIXED + len;
}

/* ---- memory ------------------------------------------------------------- */

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	return x ^ (x >> 33);
}

static uint64_t key_hash(uint64_t id, uint8_t kind, uint64_t key)
{
	return mix(id ^ mix(key + kind));
}

/* The hash of the value v in table t (by_node or by_key). */
static uint64_t val_hash(const struct nodes_md *m, const struct oatab *t,
			 uint32_t v)
{
	if (t == &m->by_node)
		return mix(m->nodev[v - 1].id);
	return key_hash(m->recs[v - 1].id, m->recs[v - 1].kind,
			m->recs[v - 1].key);
}

static int oa_insert(struct nodes_md *m, struct oatab *t, uint64_t h,
		     uint32_t v);

static int oa_grow(struct nodes_md *m, struct oatab *t)
{
	struct oatab old = *t;

	t->cap = old.cap ? old.cap * 2 : 1024;
	t->v = calloc(t->cap, sizeof(*t->v));
	if (!t->v) {
		*t = old;
		return -ENOMEM;
	}
	t->n = 0;
	for (uint64_t i = 0; i < old.cap; i++)
		if (old.v[i])
			oa_insert(m, t, val_hash(m, t, old.v[i]), old.v[i]);
	free(old.v);
	return 0;
}

static int oa_insert(struct nodes_md *m, struct oatab *t, uint64_t h,
		     uint32_t v)
{
	uint64_t i;

	if ((t->n + 1) * 10 > t->cap * 7 && oa_grow(m, t))
		return -ENOMEM;
	for (i = h & (t->cap - 1); t->v[i]; i = (i + 1) & (t->cap - 1))
		;
	t->v[i] = v;
	t->n++;
	return 0;
}

static void oa_delete(struct nodes_md *m, struct oatab *t, uint64_t i)
{
	uint64_t mask = t->cap - 1, j = i;

	t->n--;
	for (;;) {
		uint64_t k;

		t->v[i] = 0;
		for (;;) {
			j = (j + 1) & mask;
			if (!t->v[j])
				return;
			k = val_hash(m, t, t->v[j]) & mask;
			/* The value at j stays if its home is in (i, j]. */
			if (i <= j ? (i < k && k <= j) : (i < k || k <= j))
				continue;
			break;
		}
		t->v[i] = t->v[j];
		i = j;
	}
}

/* Slot of node id in by_node, or UINT64_MAX. */
static uint64_t node_slot(const struct nodes_md *m, uint64_t id)
{
	const struct oatab *t = &m->by_node;
	uint64_t i;

	if (!t->cap)
		return UINT64_MAX;
	for (i = mix(id) & (t->cap - 1); t->v[i]; i = (i + 1) & (t->cap - 1))
		if (m->nodev[t->v[i] - 1].id == id)
			return i;
	return UINT64_MAX;
}

/* Slot of the record (id, kind, key) in by_key, or UINT64_MAX. */
static uint64_t rec_slot(const struct nodes_md *m, uint64_t id, uint8_t kind,
			 uint64_t key)
{
	const struct oatab *t = &m->by_key;
	uint64_t i;

	if (!t->cap)
		return UINT64_MAX;
	for (i = key_hash(id, kind, key) & (t->cap - 1); t->v[i];
	     i = (i + 1) & (t->cap - 1)) {
		const struct md_rec *r = &m->recs[t->v[i] - 1];

		if (r->id == id && r->kind == kind && r->key == key)
			return i;
	}
	return UINT64_MAX;
}

/* v (an array of *cap elements of size bytes) doubled (1024 at first):
 * the new array, *cap updated; NULL if out of memory (v unchanged). */
static void *grow(void *v, uint32_t *cap, size_t size)
{
	uint32_t n = *cap ? *cap * 2 : 1024;
	void *p = realloc(v, (size_t)n * size);

	if (p)
		*cap = n;
	return p;
}

/* The node entry of id, made if missing (NULL: out of memory). */
static struct md_node *node_get(struct nodes_md *m, uint64_t id)
{
	uint64_t s = node_slot(m, id);
	uint32_t idx;

	if (s != UINT64_MAX)
		return &m->nodev[m->by_node.v[s] - 1];
	if (m->nfree1) {
		idx = m->nfree1 - 1;
		m->nfree1 = m->nodev[idx].own1;
	} else {
		if (m->nnodes == m->nodes_cap) {
			struct md_node *n = grow(m->nodev, &m->nodes_cap,
						 sizeof(*n));

			if (!n)
				return NULL;
			m->nodev = n;
		}
		idx = m->nnodes++;
	}
	m->nodev[idx] = (struct md_node){ .id = id };
	if (oa_insert(m, &m->by_node, mix(id), idx + 1)) {
		m->nodev[idx].id = 0;
		m->nodev[idx].own1 = m->nfree1;
		m->nfree1 = idx + 1;
		return NULL;
	}
	return &m->nodev[idx];
}

/* Set (id, kind, key) in memory. 0, -ENOSPC (NODES_MD_MAX), -ENOMEM.
 * Lock held. */
static int mem_put(struct nodes_md *m, uint64_t id, uint8_t kind,
		   uint64_t key, uint64_t fetched, const void *blob,
		   uint8_t len)
{
	uint64_t s = rec_slot(m, id, kind, key);
	struct md_node *nd;
	struct md_rec *r;
	uint32_t idx, *head;

	GW_ASSERT_HELD(&m->lock);
	if (s == UINT64_MAX) {
		if (m->live >= NODES_MD_MAX)
			return -ENOSPC;
		nd = node_get(m, id);
		if (!nd)
			return -ENOMEM;
		if (m->free1) {
			idx = m->free1 - 1;
		} else {
			if (m->nrecs == m->cap) {
				struct md_rec *n = grow(m->recs, &m->cap,
							sizeof(*n));

				if (!n)
					return -ENOMEM;
				m->recs = n;
			}
			idx = m->nrecs;
		}
		r = &m->recs[idx];
		r->id = id;
		r->kind = kind;
		r->key = key;
		if (oa_insert(m, &m->by_key, key_hash(id, kind, key), idx + 1)) {
			r->id = 0;
			return -ENOMEM;
		}
		if (idx == m->nrecs)
			m->nrecs++;
		else
			m->free1 = m->recs[idx].next1;
		head = kind == NODES_MD_DENT ? &nd->dent1 : &nd->own1;
		r->next1 = *head;
		*head = idx + 1;
		r->len = 0;
		m->live++;
	} else {
		r = &m->recs[m->by_key.v[s] - 1];
		m->live_bytes -= MD_REC_FIXED + r->len;
	}
	r->fetched = fetched;
	r->len = len;
	if (len)
		memcpy(r->blob, blob, len);
	m->live_bytes += MD_REC_FIXED + len;
	return 0;
}

/* Free a chain of records. Lock held. */
static void chain_free(struct nodes_md *m, uint32_t r1)
{
	while (r1) {
		struct md_rec *r = &m->recs[r1 - 1];
		uint32_t next = r->next1;

		oa_delete(m, &m->by_key, rec_slot(m, r->id, r->kind, r->key));
		m->live--;
		m->live_bytes -= MD_REC_FIXED + r->len;
		r->id = 0;
		r->next1 = m->free1;
		m->free1 = r1;
		r1 = next;
	}
}

/* Forget every record of id in memory. Lock held. */
static bool mem_drop(struct nodes_md *m, uint64_t id)
{
	uint64_t s = node_slot(m, id);
	uint32_t idx;

	GW_ASSERT_HELD(&m->lock);
	if (s == UINT64_MAX)
		return false;
	idx = m->by_node.v[s] - 1;
	oa_delete(m, &m->by_node, s);
	chain_free(m, m->nodev[idx].own1);
	chain_free(m, m->nodev[idx].dent1);
	m->nodev[idx].id = 0;
	m->nodev[idx].own1 = m->nfree1;
	m->nfree1 = idx + 1;
	return true;
}

/* ---- the file ----------------------------------------------------------- */

/* A new, empty MD_TMP: its fd, or -errno. */
static int tmp_open(struct nodes_md *m)
{
	int fd = openat(m->dirfd, MD_TMP, O_RDWR | O_CREAT | O_TRUNC |
			O_NOFOLLOW | O_CLOEXEC, 0600);

	return fd < 0 ? -errno : fd;
}

static void tmp_drop(struct nodes_md *m, int fd)
{
	unlinkat(m->dirfd, MD_TMP, 0);
	close(fd);
}

/* Encode the live records of slots *i.. (below n) into buf from used, as
 * many as fit in cap bytes; *i advances past them. The new used. Lock
 * held. */
static size_t encode_live(struct nodes_md *m, uint8_t *buf, size_t used,
			  size_t cap, uint32_t *i, uint32_t n)
{
	GW_ASSERT_HELD(&m->lock);
	for (; *i < n && used + MD_REC_MAX <= cap; (*i)++) {
		const struct md_rec *r = &m->recs[*i];

		if (r->id)
			used += rec_encode(buf + used, m->gen, r->kind, r->id,
					   r->key, r->fetched, r->blob, r->len);
	}
	return used;
}

/* The new file fd (size bytes, fsync'd) in MD_FILE's place: it becomes
 * m->fd; *old gets the old file's fd, for the caller to close (the last
 * reference to a replaced file: its close frees its blocks, which may
 * take long) and then fsync the directory. 0, or -errno (fd closed,
 * MD_TMP removed, md.log as it was). Lock held. */
static int install(struct nodes_md *m, int fd, uint64_t size, int *old)
{
	int ret = 0;

	GW_ASSERT_HELD(&m->lock);
	if (flock(fd, LOCK_EX | LOCK_NB) < 0 ||
	    renameat(m->dirfd, MD_TMP, m->dirfd, MD_FILE) < 0)
		ret = -errno;
	if (ret) {
		tmp_drop(m, fd);
		return ret;
	}
	*old = m->fd;
	m->fd = fd;
	m->end = size;
	m->broken = false;
	m->st.rewrites++;
	return 0;
}

/* Write the live records to MD_TMP, fsync, rename over MD_FILE, fsync the
 * directory; the new file becomes m->fd. All of it under the lock: at
 * open (not yet shared) and at nodes_md_retain (at start); the rewrites
 * of a running gateway are compact()'s, on the worker. Lock held. */
static int rewrite(struct nodes_md *m)
{
	size_t cap = 1u << 20, used = MD_HDR;
	uint8_t *buf = malloc(cap);
	uint64_t off = 0;
	uint32_t i = 0;
	int fd, old, ret = 0;

	GW_ASSERT_HELD(&m->lock);
	if (!buf)
		return -ENOMEM;
	fd = tmp_open(m);
	if (fd < 0) {
		free(buf);
		return fd;
	}
	hdr_encode(buf, m->gen);
	do {
		used = encode_live(m, buf, used, cap, &i, m->nrecs);
		ret = pwrite_all(fd, buf, used, off);
		off += used;
		used = 0;
	} while (!ret && i < m->nrecs);
	free(buf);
	if (!ret && fdatasync(fd) < 0)
		ret = -errno;
	if (ret) {
		tmp_drop(m, fd);
		return ret;
	}
	ret = install(m, fd, off, &old);
	if (!ret) {
		if (old >= 0)
			close(old);
		(void)fsync_dir(m->dirfd);	/* else a power cut may bring
						 * back the old file: as good */
	}
	return ret;
}

/* Copy the bytes [from, to) of file in to file out at out_off, through
 * buf (cap bytes). 0 or -errno. */
static int copy_range(int in, int out, uint64_t from, uint64_t to,
		      uint64_t out_off, uint8_t *buf, size_t cap)
{
	while (from < to) {
		size_t len = to - from < cap ? (size_t)(to - from) : cap;
		ssize_t n = pread_all(in, buf, len, from);
		int ret;

		if (n < 0)
			return (int)n;
		if ((size_t)n != len)
			return -EIO;	/* appended, so there */
		ret = pwrite_all(out, buf, len, out_off);
		if (ret)
			return ret;
		from += len;
		out_off += len;
	}
	return 0;
}

/* The worker's rewrite: the same file as rewrite()'s, but written and
 * fsync'd with the lock dropped, so that puts and gets go on meanwhile.
 * Each put or drop meanwhile is appended to the old file as always; those
 * records (after snap_end) are copied after the live ones before the new
 * file takes the old one's place (under the lock, so none is missed).
 * Replayed, the new file gives what memory holds: a record encoded from
 * memory before or after its change is followed by the change, a drop by
 * the puts that came after it. A record kept in memory but not appended
 * meanwhile (a failed write: m->lost moved) is not in that tail: then
 * everything is written from memory under the lock, as rewrite() does.
 *  1. the live records, a buffer at a time: encoded under the lock,
 *     written without it;
 *  2. fdatasync, without the lock;
 *  3. what was appended meanwhile: most of it without the lock, the rest
 *     under it, then the rename; the directory fsync'd without it.
 * 0 or -errno (md.log as it was). Lock held; dropped and taken again. */
static int compact(struct nodes_md *m)
{
	size_t cap = 1u << 20, used = MD_HDR;
	uint8_t *buf = malloc(cap);
	uint64_t snap_end = m->end, lost = m->lost, off = 0, seen;
	uint32_t i = 0, n = m->nrecs;
	int fd, old_fd = m->fd, ret = 0;

	GW_ASSERT_HELD(&m->lock);
	if (!buf)
		return -ENOMEM;
	fd = tmp_open(m);
	if (fd < 0) {
		free(buf);
		return fd;
	}
	hdr_encode(buf, m->gen);
	/* 1. */
	for (;;) {
		used = encode_live(m, buf, used, cap, &i, n);
		pthread_mutex_unlock(&m->lock);
		ret = pwrite_all(fd, buf, used, off);
		pthread_mutex_lock(&m->lock);
		off += used;
		used = 0;
		if (ret || i >= n)
			break;
	}
	/* 2. */
	if (!ret) {
		pthread_mutex_unlock(&m->lock);
		if (fdatasync(fd) < 0)
			ret = -errno;
		pthread_mutex_lock(&m->lock);
	}
	while (!ret && m->hold) {	/* tests: nodes_md_hold_rewrites */
		m->held = true;
		pthread_cond_broadcast(&m->cond);
		pthread_cond_wait(&m->cond, &m->lock);
	}
	m->held = false;
	/* 3. */
	if (!ret) {
		seen = m->end;
		pthread_mutex_unlock(&m->lock);
		ret = copy_range(old_fd, fd, snap_end, seen, off, buf, cap);
		pthread_mutex_lock(&m->lock);
		off += seen - snap_end;
	}
	if (!ret) {
		ret = copy_range(old_fd, fd, seen, m->end, off, buf, cap);
		off += m->end - seen;
	}
	free(buf);
	if (!ret && m->lost != lost) {
		tmp_drop(m, fd);
		return rewrite(m);
	}
	if (ret) {
		tmp_drop(m, fd);
		return ret;
	}
	ret = install(m, fd, off, &old_fd);
	if (!ret) {
		pthread_mutex_unlock(&m->lock);
		close(old_fd);
		(void)fsync_dir(m->dirfd);
		pthread_mutex_lock(&m->lock);
	}
	return ret;
}

/* Is the file more than twice what its live records need, and the waste
 * worth a rewrite (not too soon after one that failed)? Lock held. */
static bool rewrite_due(struct nodes_md *m)
{
	uint64_t live = MD_HDR + m->live_bytes;

	GW_ASSERT_HELD(&m->lock);
	return m->end > 2 * live && m->end - live > MD_SLACK &&
	       m->end > m->retry_end;
}

/* The worker: rewrites md.log when asked (maybe_rewrite), until stopped;
 * and again at once if what was appended meanwhile makes it due again
 * (the file stays bounded without waiting for the next put). A rewrite
 * that fails (a full disk) is not asked for again before the file has
 * grown by half the live size more. */
static void *md_worker(void *arg)
{
	struct nodes_md *m = arg;

	pthread_mutex_lock(&m->lock);
	for (;;) {
		while (!m->want && !m->stop)
			pthread_cond_wait(&m->cond, &m->lock);
		if (m->stop)
			break;
		m->want = false;
		m->compacting = true;
		if (compact(m)) {
			m->retry_end = m->end + (MD_HDR + m->live_bytes) / 2 +
				       MD_SLACK;
		} else {
			m->retry_end = 0;
			m->want = rewrite_due(m);
		}
		m->compacting = false;
		pthread_cond_broadcast(&m->cond);
	}
	pthread_mutex_unlock(&m->lock);
	return NULL;
}

/* Ask the worker for a rewrite when one is due. Never waits for it. Lock
 * held. */
static void maybe_rewrite(struct nodes_md *m)
{
	GW_ASSERT_HELD(&m->lock);
	if (m->want || m->compacting || !rewrite_due(m))
		return;
	m->want = true;
	pthread_cond_broadcast(&m->cond);
}

static int append(struct nodes_md *m, const uint8_t *rec, size_t len)
{
	int ret;

	if (m->broken) {
		m->lost++;
		return -EIO;
	}
	ret = pwrite_all(m->fd, rec, len, m->end);
	if (ret) {
		/* Cut what may be half written; if that fails too, nothing
		 * more is appended (the records in memory stay right). */
		if (ftruncate(m->fd, (off_t)m->end) < 0)
			m->broken = true;
		m->st.write_errors++;
		m->lost++;
		return ret;
	}
	m->end += len;
	return 0;
}

/* The memory of m (its files are closed). */
static void md_free(struct nodes_md *m)
{
	pthread_cond_destroy(&m->cond);
	pthread_mutex_destroy(&m->lock);
	free(m->recs);
	free(m->nodev);
	free(m->by_node.v);
	free(m->by_key.v);
	free(m);
}

/* Replay the log into memory. Stops at the first record that does not
 * check. */
static int replay(struct nodes_md *m)
{
	uint8_t *buf = malloc(MD_LOAD_BUF);
	uint64_t off = MD_HDR;
	size_t have = 0, pos = 0;

	if (!buf)
		return -ENOMEM;
	for (;;) {
		size_t n;

		if (have - pos < MD_REC_MAX) {
			ssize_t got;

			memmove(buf, buf + pos, have - pos);
			have -= pos;
			pos = 0;
			got = pread_all(m->fd, buf + have, MD_LOAD_BUF - have,
					off + have);
			if (got < 0) {
				free(buf);
				return (int)got;
			}
			have += (size_t)got;
			if (have == 0)
				break;
		}
		n = rec_check(buf + pos, have - pos, m->gen);
		if (!n)
			break;
		m->st.clean = buf[pos] == MD_CLEAN;
		if (buf[pos] == MD_CLEAN) {
			;	/* the run before closed cleanly, if last */
		} else if (buf[pos] == MD_DROP) {
			mem_drop(m, get64(buf + pos + 8));
		} else if (mem_put(m, get64(buf + pos + 8), buf[pos],
				   get64(buf + pos + 16),
				   get64(buf + pos + 24), buf + pos + 32,
				   buf[pos + 1]) == -ENOMEM) {
			free(buf);
			return -ENOMEM;
		}
		pos += n;
		off += n;
	}
	free(buf);
	m->end = off;
	return 0;
}

int nodes_md_open(const char *dir, uint32_t gen, struct nodes_md **out,
		  char *err, size_t errlen)
{
	struct nodes_md *m = calloc(1, sizeof(*m));
	uint8_t hdr[MD_HDR], want[MD_HDR];
	struct stat st;
	ssize_t n;
	int ret;

	*out = NULL;
	if (!m)
		return -ENOMEM;
	m->fd = -1;
	m->gen = gen;
	pthread_mutex_init(&m->lock, NULL);
	pthread_cond_init(&m->cond, NULL);
	/* Not shared yet: held so that what asserts it elsewhere may run. */
	pthread_mutex_lock(&m->lock);
	m->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (m->dirfd < 0) {
		ret = -errno;
		snprintf(err, errlen, "%s: %s", dir, strerror(errno));
		goto out_free;
	}
	unlinkat(m->dirfd, MD_TMP, 0);
	m->fd = openat(m->dirfd, MD_FILE, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	if (m->fd < 0 && errno != ENOENT) {
		ret = -errno;
		snprintf(err, errlen, "%s: %s%s", MD_FILE, strerror(errno),
			 errno == ELOOP ? " (a symbolic link: cachegw follows "
			 "no links inside its cache_dir: remove it)" : "");
		goto out_close;
	}
	if (m->fd >= 0) {
		if (fstat(m->fd, &st) < 0 || !S_ISREG(st.st_mode)) {
			ret = -EBADMSG;
			snprintf(err, errlen, "%s: not a regular file", MD_FILE);
			goto out_close;
		}
		if (flock(m->fd, LOCK_EX | LOCK_NB) < 0) {
			ret = errno == EWOULDBLOCK ? -EBUSY : -errno;
			snprintf(err, errlen, "%s: held by another gateway",
				 MD_FILE);
			goto out_close;
		}
		hdr_encode(want, gen);
		n = pread_all(m->fd, hdr, sizeof(hdr), 0);
		if (n == MD_HDR && !memcmp(hdr, want, MD_HDR)) {
			ret = replay(m);
			if (ret) {
				snprintf(err, errlen, "%s: load: %s", MD_FILE,
					 strerror(-ret));
				goto out_close;
			}
			m->st.dropped_bytes = (uint64_t)st.st_size > m->end ?
					      (uint64_t)st.st_size - m->end : 0;
			if (m->st.dropped_bytes)	/* torn or damaged */
				m->st.clean = false;
			if (m->st.dropped_bytes &&
			    ftruncate(m->fd, (off_t)m->end) < 0)
				m->broken = true;
		} else {
			/* Another table's, another format, or damaged:
			 * nothing in it can be trusted to name our files. */
			m->st.dropped_bytes = (uint64_t)st.st_size;
			m->st.started_afresh = true;
		}
	}
	if (m->fd < 0 || m->st.started_afresh)
		m->st.clean = true;	/* nothing kept: nothing to doubt */
	if (m->fd < 0 || m->st.started_afresh ||
	    m->end > 2 * (MD_HDR + m->live_bytes) + MD_SLACK) {
		ret = rewrite(m);
		if (ret) {
			snprintf(err, errlen, "%s: write: %s", MD_FILE,
				 strerror(-ret));
			goto out_close;
		}
	}
	pthread_mutex_unlock(&m->lock);
	/* The rewrites from now on: on a thread of their own. */
	ret = -pthread_create(&m->worker, NULL, md_worker, m);
	if (ret) {
		snprintf(err, errlen, "%s: cannot start its thread: %s",
			 MD_FILE, strerror(-ret));
		pthread_mutex_lock(&m->lock);
		goto out_close;
	}
	*out = m;
	return 0;

out_close:
	if (m->fd >= 0)
		close(m->fd);
	if (m->dirfd >= 0)
		close(m->dirfd);
out_free:
	pthread_mutex_unlock(&m->lock);
	md_free(m);
	return ret;
}

void nodes_md_close(struct nodes_md *m)
{
	uint8_t rec[MD_REC_MAX];

	if (!m)
		return;
	/* A rewrite under way ends first (a held one is let go). */
	pthread_mutex_lock(&m->lock);
	m->hold = false;
	pthread_mutex_unlock(&m->lock);
	worker_stop(m->worker, &m->lock, &m->cond, &m->stop);
	pthread_mutex_lock(&m->lock);
	if (!append(m, rec, rec_encode(rec, m->gen, MD_CLEAN, 1, 0, 0, NULL,
				       0)))
		(void)fdatasync(m->fd);
	pthread_mutex_unlock(&m->lock);
	close(m->fd);
	close(m->dirfd);
	md_free(m);
}

int nodes_md_put(struct nodes_md *m, uint64_t nodeid, uint8_t kind,
		 uint64_t key, uint64_t fetched_ns, const void *blob,
		 size_t len)
{
	uint8_t rec[MD_REC_MAX];
	size_t n;
	int ret;

	if (!nodeid || !kind || kind > 127 || len > NODES_MD_BLOB_MAX)
		return -EINVAL;
	pthread_mutex_lock(&m->lock);
	ret = mem_put(m, nodeid, kind, key, fetched_ns, blob, (uint8_t)len);
	if (ret == -ENOSPC)
		m->st.full++;
	if (!ret) {
		n = rec_encode(rec, m->gen, kind, nodeid, key, fetched_ns,
			       blob, (uint8_t)len);
		ret = append(m, rec, n);
		m->st.puts++;
		maybe_rewrite(m);
	}
	pthread_mutex_unlock(&m->lock);
	return ret;
}

static void rec_out(const struct md_rec *r, struct nodes_md_rec *o)
{
	o->kind = r->kind;
	o->key = r->key;
	o->fetched_ns = r->fetched;
	o->len = r->len;
	memcpy(o->blob, r->blob, r->len);
}

/* Copy out nodeid's records of one chain (its own, or its directory
 * entries): at most max, or max + 1 if there are more. */
static size_t chain_get(struct nodes_md *m, uint64_t nodeid, bool dents,
			struct nodes_md_rec *out, size_t max)
{
	size_t n = 0;
	uint64_t s;
	uint32_t r1 = 0;

	pthread_mutex_lock(&m->lock);
	s = node_slot(m, nodeid);
	if (s != UINT64_MAX)
		r1 = dents ? m->nodev[m->by_node.v[s] - 1].dent1 :
			     m->nodev[m->by_node.v[s] - 1].own1;
	for (; r1; r1 = m->recs[r1 - 1].next1) {
		if (n == max) {
			n = max + 1;	/* more than asked for */
			break;
		}
		rec_out(&m->recs[r1 - 1], &out[n++]);
	}
	pthread_mutex_unlock(&m->lock);
	return n;
}

size_t nodes_md_get(struct nodes_md *m, uint64_t nodeid,
		    struct nodes_md_rec *out, size_t max)
{
	size_t n = chain_get(m, nodeid, false, out, max);

	return n > max ? max : n;
}

size_t nodes_md_get_dents(struct nodes_md *m, uint64_t nodeid,
			  struct nodes_md_rec *out, size_t max)
{
	return chain_get(m, nodeid, true, out, max);
}

int nodes_md_get_one(struct nodes_md *m, uint64_t nodeid, uint8_t kind,
		     uint64_t key, struct nodes_md_rec *out)
{
	uint64_t s;

	pthread_mutex_lock(&m->lock);
	s = rec_slot(m, nodeid, kind, key);
	if (s != UINT64_MAX)
		rec_out(&m->recs[m->by_key.v[s] - 1], out);
	pthread_mutex_unlock(&m->lock);
	return s == UINT64_MAX ? -ENOENT : 0;
}

int nodes_md_drop(struct nodes_md *m, uint64_t nodeid)
{
	uint8_t rec[MD_REC_MAX];
	int ret = 0;

	pthread_mutex_lock(&m->lock);
	if (mem_drop(m, nodeid)) {
		ret = append(m, rec, rec_encode(rec, m->gen, MD_DROP, nodeid,
						0, 0, NULL, 0));
		maybe_rewrite(m);
	}
	pthread_mutex_unlock(&m->lock);
	return ret;
}

int nodes_md_retain(struct nodes_md *m, uint8_t kind)
{
	struct md_rec *old;
	uint32_t n;
	int ret = 0;

	pthread_mutex_lock(&m->lock);
	/* Not while the worker writes a file of the records it is about to
	 * lose; one asked for is not needed after this one. */
	while (m->compacting)
		pthread_cond_wait(&m->cond, &m->lock);
	m->want = false;
	old = m->recs;
	n = m->nrecs;
	m->recs = NULL;
	m->nrecs = m->cap = m->free1 = 0;
	m->nnodes = m->nfree1 = 0;
	free(m->by_node.v);
	free(m->by_key.v);
	memset(&m->by_node, 0, sizeof(m->by_node));
	memset(&m->by_key, 0, sizeof(m->by_key));
	m->live = m->live_bytes = 0;
	for (uint32_t i = 0; i < n && !ret; i++)
		if (old[i].id && old[i].kind == kind)
			ret = mem_put(m, old[i].id, kind, old[i].key,
				      old[i].fetched, old[i].blob, old[i].len);
	free(old);
	if (!ret)
		ret = rewrite(m);
	pthread_mutex_unlock(&m->lock);
	return ret;
}

void nodes_md_stats(struct nodes_md *m, struct nodes_md_stats *st)
{
	pthread_mutex_lock(&m->lock);
	*st = m->st;
	st->records = m->live;
	st->nodes = m->by_node.n;
	st->file_bytes = m->end;
	st->rewriting = m->want || m->compacting;
	st->held = m->held;
	pthread_mutex_unlock(&m->lock);
}

void nodes_md_settle(struct nodes_md *m)
{
	pthread_mutex_lock(&m->lock);
	while (m->want || m->compacting)
		pthread_cond_wait(&m->cond, &m->lock);
	pthread_mutex_unlock(&m->lock);
}

void nodes_md_hold_rewrites(struct nodes_md *m, bool hold)
{
	pthread_mutex_lock(&m->lock);
	m->hold = hold;
	pthread_cond_broadcast(&m->cond);
	pthread_mutex_unlock(&m->lock);
}
