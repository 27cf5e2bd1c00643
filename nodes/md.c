/* md.c - what the gateway last knew of each node, kept across restarts:
 * small opaque records (attributes, access answers: the gateway defines
 * them) per node-id, each with the wall-clock time it was fetched from the
 * origin, so that a restarted gateway can tell how old it is. The file,
 * "md.log" in the cache directory, is a record log (rlog.c; records:
 * nodes_i.h) whose header's generation is the node-id table's; the
 * records in memory are md_mem.c's.
 *
 * It is a cache of the origin's answers, so it is never fsync'd except at
 * compaction and close: a crash loses the last records (the gateway asks
 * the origin again). Replay stops at the first record that does not check
 * (a torn tail, damage): what follows is dropped, and the file cut there.
 * A clean close ends the file with MD_CLEAN (fdatasync'd): a file that
 * does not end with it may miss the last records of its run
 * (nodes_md_stats: clean). A file of another node-id table (another
 * generation) is started afresh: its node-ids may name other files.
 *
 * The file is rewritten when it is more than twice what its live records
 * need: by a thread of its own (the worker, compact()), which writes and
 * fsyncs the new file with the lock free, then renames it over md.log and
 * fsyncs the directory; the put or drop that crossed the line only asks
 * for it.
 *
 * Lock: m->lock (a mutex) around everything; a leaf. The worker holds it
 * to encode records (a buffer at a time) and to put the new file in
 * place, never while it writes or fsyncs the bulk of it.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lockcheck.h"
#include "nodes_i.h"
#include "seterr.h"
#include "worker.h"

/* ---- records ------------------------------------------------------------ */

static bool rec_valid(const uint8_t *p)
{
	if (!p[0] || (p[0] > 127 && p[0] != MD_DROP && p[0] != MD_CLEAN) ||
	    (p[0] > 127 && p[1]) || !get64(p + 8))
		return false;
	for (int i = 2; i < 8; i++)
		if (p[i])
			return false;
	return true;
}

static const struct rlog_fmt md_fmt = {
	.file = MD_FILE,
	.tmp = MD_TMP,
	.magic = MD_MAGIC,
	.version = MD_VERSION,
	.head = MD_HEAD,
	.payload_max = NODES_MD_BLOB_MAX,
	.resync = false,
	.valid = rec_valid,
};

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
		memcpy(p + MD_HEAD, blob, len);
	return nodes_seal(p, MD_HEAD + len, gen);
}

/* Append a record. A failed write is counted; after one that could not
 * be cut off, nothing more is appended until the next rewrite (the
 * records in memory stay right). Lock held. */
static int append(struct nodes_md *m, const uint8_t *rec, size_t len)
{
	int ret;

	GW_ASSERT_HELD(&m->lock);
	if (m->log.broken) {
		m->lost++;
		return -EIO;
	}
	ret = rlog_append(&m->log, rec, len);
	if (ret) {
		m->st.write_errors++;
		m->lost++;
	}
	return ret;
}

/* ---- rewrite ------------------------------------------------------------ */

/* rlog_emit_fn: the live records of slots idx.. (below n, the slots at
 * the start). Lock held. */
struct emit_ctx {
	struct nodes_md *m;
	uint32_t idx, n;
};

static size_t emit_live(void *ctx, uint8_t *buf, size_t cap, bool *done)
{
	struct emit_ctx *c = ctx;
	struct nodes_md *m = c->m;
	size_t used = 0;

	GW_ASSERT_HELD(&m->lock);
	for (; c->idx < c->n && used + MD_REC_MAX <= cap; c->idx++) {
		const struct md_rec *r = &m->mem.recs[c->idx];

		if (r->id)
			used += rec_encode(buf + used, m->log.gen, r->kind,
					   r->id, r->key, r->fetched, r->blob,
					   r->len);
	}
	*done = c->idx >= c->n;
	return used;
}

/* Replace md.log with a file of the live records (rlog.c: a new file,
 * fsync, rename, fsync the directory). At open (not yet shared) and at
 * nodes_md_retain, all of it under the lock (background false); the
 * worker's compactions (background) write and fsync with the lock
 * dropped, so that puts and gets go on meanwhile. Each put or drop
 * meanwhile is appended to the old file as always; those records (after
 * snap_end) are copied after the live ones before the new file takes the
 * old one's place (under the lock, so none is missed). Replayed, the new
 * file gives what memory holds: a record encoded from memory before or
 * after its change is followed by the change, a drop by the puts that
 * came after it. A record kept in memory but not appended meanwhile (a
 * failed write: m->lost moved) is not in that tail: then everything is
 * written again from memory under the lock.
 *  1. the live records, a buffer at a time: encoded under the lock,
 *     written without it; fdatasync without it;
 *  2. what was appended meanwhile: most of it without the lock, the rest
 *     under it;
 *  3. the rename; the old file closed and the directory fsync'd without
 *     the lock.
 * 0 or -errno (md.log as it was). Lock held; dropped and taken again. */
static int rewrite(struct nodes_md *m, bool background)
{
	pthread_mutex_t *lock = background ? &m->lock : NULL;
	struct emit_ctx c = { .m = m, .n = m->mem.nrecs };
	uint64_t snap_end = m->log.end, lost = m->lost, seen;
	int old_fd = m->log.fd, ret;
	struct rlog_tmp w;

	GW_ASSERT_HELD(&m->lock);
	/* 1. */
	ret = rlog_write_tmp(&m->log, 0, emit_live, &c, lock, &w);
	if (ret)
		return ret;
	while (background && m->hold) {	/* nodes_md_hold_rewrites */
		m->held = true;
		pthread_cond_broadcast(&m->cond);
		pthread_cond_wait(&m->cond, &m->lock);
	}
	m->held = false;
	/* 2. */
	seen = m->log.end;
	if (background) {
		pthread_mutex_unlock(&m->lock);
		ret = rlog_tmp_copy(&m->log, &w, old_fd, snap_end, seen);
		pthread_mutex_lock(&m->lock);
	}
	if (!ret)
		ret = rlog_tmp_copy(&m->log, &w, old_fd, seen, m->log.end);
	if (!ret && m->lost != lost) {
		rlog_tmp_drop(&m->log, &w);
		return rewrite(m, false);
	}
	if (ret) {
		rlog_tmp_drop(&m->log, &w);
		return ret;
	}
	/* 3. */
	ret = rlog_install(&m->log, &w, lock);
	if (!ret)
		m->st.rewrites++;
	return ret;
}

/* Is the file more than twice what its live records need, and the waste
 * worth a rewrite (not too soon after one that failed)? Lock held. */
static bool rewrite_due(struct nodes_md *m)
{
	uint64_t live = RLOG_HDR + m->mem.live_bytes, end = m->log.end;

	GW_ASSERT_HELD(&m->lock);
	return end > 2 * live && end - live > MD_SLACK && end > m->retry_end;
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
		if (rewrite(m, true)) {
			m->retry_end = m->log.end + (RLOG_HDR +
				       m->mem.live_bytes) / 2 + MD_SLACK;
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

/* ---- open and close ----------------------------------------------------- */

/* rlog.c's replay, one valid record at a time. */
static int replay_rec(void *ctx, const uint8_t *p, size_t len)
{
	struct nodes_md *m = ctx;
	uint64_t id = get64(p + 8);

	(void)len;
	m->st.clean = p[0] == MD_CLEAN;	/* the run before closed cleanly,
					 * if last */
	if (p[0] == MD_DROP)
		md_mem_drop(m, id);
	else if (p[0] != MD_CLEAN &&
		 md_mem_put(m, id, p[0], get64(p + 16), get64(p + 24),
			    p + MD_HEAD, p[1]) == -ENOMEM)
		return -ENOMEM;
	return 0;
}

/* md.log, when it is this table's: its records into memory, a torn or
 * damaged tail dropped and cut. Else (another table's, another format,
 * damaged) nothing in it can be trusted to name our files: started
 * afresh. 0 or -errno (err says why). */
static int load(struct nodes_md *m, uint32_t gen, uint64_t size, char *err,
		size_t errlen)
{
	struct rlog_replay rr;
	uint32_t version;
	uint64_t extra;
	int ret;

	if (rlog_hdr_read(&m->log, &version, &extra) || m->log.gen != gen ||
	    extra) {
		m->log.gen = gen;
		m->st.dropped_bytes = size;
		m->st.started_afresh = true;
		return 0;
	}
	ret = rlog_replay(&m->log, replay_rec, m, &rr);
	if (ret) {
		seterr(err, errlen, "%s: load: %s", MD_FILE, strerror(-ret));
		return ret;
	}
	m->st.dropped_bytes = size > m->log.end ? size - m->log.end : 0;
	if (m->st.dropped_bytes) {	/* torn or damaged */
		m->st.clean = false;
		if (rlog_cut(&m->log))
			m->log.broken = true;
	}
	return 0;
}

int nodes_md_open(const char *dir, uint32_t gen, struct nodes_md **out,
		  char *err, size_t errlen)
{
	struct nodes_md *m = calloc(1, sizeof(*m));
	uint64_t size = 0;
	int dirfd, ret;

	*out = NULL;
	if (!m)
		return -ENOMEM;
	pthread_mutex_init(&m->lock, NULL);
	pthread_cond_init(&m->cond, NULL);
	/* Not shared yet: held so that what asserts it elsewhere may run. */
	pthread_mutex_lock(&m->lock);
	dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0) {
		ret = -errno;
		seterr(err, errlen, "%s: %s", dir, strerror(errno));
		goto out_free;
	}
	rlog_init(&m->log, &md_fmt, dirfd);
	m->log.gen = gen;
	ret = rlog_open(&m->log, dir, false, &size, err, errlen);
	if (ret && ret != -ENOENT)
		goto out_close;
	if (!ret) {
		ret = load(m, gen, size, err, errlen);
		if (ret)
			goto out_close;
	}
	if (m->log.fd < 0 || m->st.started_afresh)
		m->st.clean = true;	/* nothing kept: nothing to doubt */
	if (m->log.fd < 0 || m->st.started_afresh ||
	    m->log.end > 2 * (RLOG_HDR + m->mem.live_bytes) + MD_SLACK) {
		ret = rewrite(m, false);
		if (ret) {
			seterr(err, errlen, "%s: write: %s", MD_FILE,
			       strerror(-ret));
			goto out_close;
		}
	}
	pthread_mutex_unlock(&m->lock);
	/* The rewrites from now on: on a thread of their own. */
	ret = -pthread_create(&m->worker, NULL, md_worker, m);
	if (ret) {
		seterr(err, errlen, "%s: cannot start its thread: %s",
		       MD_FILE, strerror(-ret));
		pthread_mutex_lock(&m->lock);
		goto out_close;
	}
	*out = m;
	return 0;

out_close:
	rlog_close(&m->log);
	close(dirfd);
out_free:
	pthread_mutex_unlock(&m->lock);
	pthread_cond_destroy(&m->cond);
	pthread_mutex_destroy(&m->lock);
	md_mem_free(&m->mem);
	free(m);
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
	if (!append(m, rec, rec_encode(rec, m->log.gen, MD_CLEAN, 1, 0, 0,
				       NULL, 0)))
		(void)fdatasync(m->log.fd);
	pthread_mutex_unlock(&m->lock);
	rlog_close(&m->log);
	close(m->log.dirfd);
	pthread_cond_destroy(&m->cond);
	pthread_mutex_destroy(&m->lock);
	md_mem_free(&m->mem);
	free(m);
}

/* ---- the API ------------------------------------------------------------ */

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
	ret = md_mem_put(m, nodeid, kind, key, fetched_ns, blob, (uint8_t)len);
	if (ret == -ENOSPC)
		m->st.full++;
	if (!ret) {
		n = rec_encode(rec, m->log.gen, kind, nodeid, key, fetched_ns,
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
	const struct md_node *nd;
	size_t n = 0;
	uint32_t r1 = 0;

	pthread_mutex_lock(&m->lock);
	nd = md_mem_node(m, nodeid);
	if (nd)
		r1 = dents ? nd->dent1 : nd->own1;
	for (; r1; r1 = m->mem.recs[r1 - 1].next1) {
		if (n == max) {
			n = max + 1;	/* more than asked for */
			break;
		}
		rec_out(&m->mem.recs[r1 - 1], &out[n++]);
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
	const struct md_rec *r;

	pthread_mutex_lock(&m->lock);
	r = md_mem_find(m, nodeid, kind, key);
	if (r)
		rec_out(r, out);
	pthread_mutex_unlock(&m->lock);
	return r ? 0 : -ENOENT;
}

int nodes_md_drop(struct nodes_md *m, uint64_t nodeid)
{
	uint8_t rec[MD_REC_MAX];
	int ret = 0;

	pthread_mutex_lock(&m->lock);
	if (md_mem_drop(m, nodeid)) {
		ret = append(m, rec, rec_encode(rec, m->log.gen, MD_DROP,
						nodeid, 0, 0, NULL, 0));
		maybe_rewrite(m);
	}
	pthread_mutex_unlock(&m->lock);
	return ret;
}

int nodes_md_retain(struct nodes_md *m, uint8_t kind)
{
	int ret;

	pthread_mutex_lock(&m->lock);
	/* Not while the worker writes a file of the records it is about to
	 * lose; one asked for is not needed after this one. */
	while (m->compacting)
		pthread_cond_wait(&m->cond, &m->lock);
	m->want = false;
	ret = md_mem_retain(m, kind);
	if (!ret)
		ret = rewrite(m, false);
	pthread_mutex_unlock(&m->lock);
	return ret;
}

void nodes_md_stats(struct nodes_md *m, struct nodes_md_stats *st)
{
	pthread_mutex_lock(&m->lock);
	*st = m->st;
	st->records = m->mem.live;
	st->nodes = m->mem.by_node.n;
	st->file_bytes = m->log.end;
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
