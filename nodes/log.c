/* log.c - the node-id table's file, nodes.log: a record log (rlog.c;
 * records: nodes_i.h) replayed at open into the tables in memory
 * (table.c); ids reserved, compaction, room ahead, recovery; open, sync,
 * close.
 *
 * Why ids are never reused: every record is written with pwrite(2) before
 * the call returns (survives SIGKILL), and before the first id of a batch
 * is handed out a RESERVE record for the whole batch is written and
 * fdatasync'd (survives power loss). Open restarts the counter at the
 * largest of the header's reserved_id, every RESERVE and every ADD id + 1.
 *
 * Room: the file keeps NODES_ROOM_CHUNK bytes allocated beyond its end
 * (fallocate, KEEP_SIZE), topped up by nodes_room() before a caller
 * makes something at the origin, so a full disk refuses the CREATE before
 * the origin makes the file, not after. Removals leave dead records: the
 * file is rewritten (compacted) when it is more than twice what its live
 * entries need, at open and at run time.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "injectenv.h"
#include "logline.h"
#include "nodes_i.h"
#include "seterr.h"

void nodes_warn(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_linev("node-id table", fmt, ap);
	va_end(ap);
}

/* VAR=ERRNO[:COUNT]: 1 and *err, *count if set, else 0. Built with
 * -Dfault_injection=false: always 0, VAR not even kept. */
#if CACHEGW_FAULT_INJECTION
static int nodes_inject_getenv(const char *var, int *err, int *count)
{
	const char *v = inject_getenv(var, count);

	if (!v)
		return 0;
	*err = inject_parse_errno(v);
	return 1;
}
#else
#define nodes_inject_getenv(var, err, count) \
	((void)(var), (void)(err), (void)(count), 0)
#endif

void nodes_inject_error(struct nodes *t, int err, int count)
{
	__atomic_store_n(&t->log.inject_err, err < 0 ? -err : err,
			 __ATOMIC_RELAXED);
	__atomic_store_n(&t->log.inject_count, count, __ATOMIC_RELEASE);
}

void nodes_inject_sync_error(struct nodes *t, int err, int count)
{
	__atomic_store_n(&t->log.sync_err, err < 0 ? -err : err,
			 __ATOMIC_RELAXED);
	__atomic_store_n(&t->log.sync_count, count, __ATOMIC_RELEASE);
}

/* ---- records ------------------------------------------------------------ */

static bool rec_valid(const uint8_t *p)
{
	switch (p[0]) {
	case REC_ADD:
		return p[1] >= 1;
	case REC_PARENT:
	case REC_REMOVE:
	case REC_RESERVE:
		return !p[1];
	}
	return false;
}

static const struct rlog_fmt nodes_fmt = {
	.file = NODES_FILE,
	.tmp = NODES_TMP,
	.magic = NODES_MAGIC,
	.version = NODES_VERSION,
	.head = REC_HEAD,
	.payload_max = NODES_HANDLE_MAX,
	.resync = true,
	.valid = rec_valid,
};

/* Encode a record into p (REC_MAX bytes); returns its length. */
size_t nlog_rec_encode(uint8_t *p, uint32_t gen, uint8_t type, uint64_t a,
		       uint64_t b, const void *h, size_t hlen)
{
	p[0] = type;
	p[1] = (uint8_t)hlen;
	put64(p + 2, a);
	put64(p + 10, b);
	if (hlen)
		memcpy(p + REC_HEAD, h, hlen);
	return nodes_seal(p, REC_HEAD + hlen, gen);
}

/* Bytes a compacted file of the live entries takes. Lock held. */
uint64_t nlog_live_bytes(const struct nodes *t)
{
	NODES_ASSERT_HELD(t);
	return NODES_HDR_SIZE + t->live * REC_FIXED + t->live_hbytes;
}

/* ---- compaction and recovery -------------------------------------------- */

/* rlog_emit_fn: an ADD record per live entry, from slot *ctx on. */
struct emit_ctx {
	struct nodes *t;
	uint32_t idx;
};

static size_t emit_live(void *ctx, uint8_t *buf, size_t cap, bool *done)
{
	struct emit_ctx *c = ctx;
	struct nodes *t = c->t;
	size_t used = 0;

	for (; c->idx < t->nents && used + REC_MAX <= cap; c->idx++) {
		const struct tab_ent *e = &t->ents[c->idx];

		if (e->id)
			used += nlog_rec_encode(buf + used, t->log.gen, REC_ADD,
						e->id, e->parent,
						tab_handle(t, e), e->hlen);
	}
	*done = c->idx == t->nents;
	return used;
}

/* Replace nodes.log with a file of the live entries only (rlog_rewrite:
 * a new file, fsync, rename, fsync the directory). Lock held (wr). */
static int compact(struct nodes *t)
{
	NODES_ASSERT_WR(t);
	struct emit_ctx c = { .t = t };
	int ret = rlog_rewrite(&t->log, t->next_id, emit_live, &c);

	if (ret)
		return ret;
	t->room_end = t->log.end;	/* a new file: nothing allocated ahead */
	t->hwm = t->next_id;
	t->compacted = true;
	return 0;
}

/* A write to the log failed in a way that leaves the file untrustworthy.
 * After a failed fsync the kernel may have dropped the dirty pages:
 * nothing written since the last good one can be trusted to be there.
 * The table in memory is still right, so the next change rewrites the
 * file from it (recover) instead of appending to this one. */
void nlog_set_broken(struct nodes *t, const char *what, int err)
{
	if (!t->log.broken)
		nodes_warn("%s failed (%s); the table will be rewritten",
			   what, strerror(-err));
	t->log.broken = true;
}

/* A broken table: write a new file of the live entries (compact), which
 * needs nothing of the old one. 0 if the table is whole again; else
 * -errno of the rewrite, and the next change tries again. Lock held
 * (wr). */
static int recover(struct nodes *t)
{
	bool compacted = t->compacted;	/* "open rewrote the file" */
	int ret;

	if (!t->log.broken)
		return 0;
	ret = compact(t);
	if (ret) {
		nodes_warn("rewrite failed (%s)", strerror(-ret));
		return ret;
	}
	t->compacted = compacted;
	nodes_warn("rewritten, writable again");
	return 0;
}

/* Append one record. On failure the log is cut back to where it was; if
 * even that fails the table is marked broken (the next change rewrites
 * it), since a torn record must not sit in front of later ones. Lock held
 * (wr). */
int nlog_append(struct nodes *t, const uint8_t *rec, size_t len)
{
	NODES_ASSERT_WR(t);
	int ret = recover(t);

	if (ret)
		return ret;
	ret = rlog_append(&t->log, rec, len);
	if (ret) {
		nodes_warn("write failed (%s)", strerror(-ret));
		if (t->log.broken)	/* rlog_append could not cut it off */
			nodes_warn("truncate after a failed write failed; the "
				   "table will be rewritten");
	}
	return ret;
}

/* Make sure next_id < hwm: reserve a batch durably (never past the last
 * id). Lock held (wr). */
int nlog_reserve_ids(struct nodes *t)
{
	NODES_ASSERT_WR(t);
	uint8_t rec[REC_MAX];
	uint64_t hwm = t->next_id < NODES_ID_LIMIT - NODES_BATCH ?
		       t->next_id + NODES_BATCH : NODES_ID_LIMIT;
	size_t len;
	int ret;

	if (t->next_id < t->hwm)
		return 0;
	len = nlog_rec_encode(rec, t->log.gen, REC_RESERVE, hwm, 0, NULL, 0);
	ret = nlog_append(t, rec, len);
	if (ret)
		return ret;
	ret = rlog_fsync(&t->log, t->log.fd);
	if (ret) {
		nlog_set_broken(t, "fdatasync", ret);
		return ret;
	}
	t->hwm = hwm;
	return 0;
}

/* Removals leave dead records behind: rewrite the file when it is more
 * than twice what the live entries need (and the waste is worth a
 * rewrite), so that a table whose files come and go does not grow for
 * ever. A rewrite that fails (a full disk) is not tried again before the
 * file has grown by half the live size more: the appends go on meanwhile.
 * Lock held (wr). */
void nlog_maybe_compact(struct nodes *t)
{
	NODES_ASSERT_WR(t);
	uint64_t live = nlog_live_bytes(t), end = t->log.end;
	int ret;

	if (end <= 2 * live || end - live <= NODES_COMPACT_SLACK ||
	    end <= t->compact_retry)
		return;
	ret = compact(t);
	if (ret) {
		t->compact_retry = end + live / 2 + NODES_COMPACT_SLACK;
		nodes_warn("compaction failed (%s); the log "
			   "keeps growing until it can be rewritten",
			   strerror(-ret));
		return;
	}
	t->compactions++;
	t->compact_retry = 0;
}

/* Top up the bytes allocated beyond the file's end. 0, -ENOSPC, -errno.
 * Lock held (wr). */
int nlog_room(struct nodes *t)
{
	NODES_ASSERT_WR(t);
	uint64_t want = NODES_ROOM_CHUNK, end = t->log.end;
	int ret;

	if (t->room_unsupported || t->room_end >= end + NODES_ROOM_LOW)
		return 0;
	for (;;) {
		ret = rlog_inject(&t->log);
		if (!ret && fallocate(t->log.fd, FALLOC_FL_KEEP_SIZE,
				      (off_t)end, (off_t)want) < 0)
			ret = -errno;
		if (!ret) {
			t->room_end = end + want;
			return 0;
		}
		if (ret == -EOPNOTSUPP) {
			/* A file system without it: appends may then fail
			 * with ENOSPC after the origin acted (cachegw(8)). */
			t->room_unsupported = true;
			return 0;
		}
		if (ret != -ENOSPC || want == NODES_ROOM_LOW)
			return ret;
		want = NODES_ROOM_LOW;	/* what is left may still do */
	}
}

/* ---- open: replay ------------------------------------------------------- */

struct replay {
	struct nodes *t;
	uint64_t max_id;		/* largest ADD id seen */
	uint64_t reserved;		/* largest RESERVE seen */
	bool bad;			/* a checksummed but impossible record */
};

/* Apply one valid record. -errno only for out-of-memory. */
static int replay_rec(void *ctx, const uint8_t *p, size_t len)
{
	struct replay *rp = ctx;
	struct nodes *t = rp->t;
	uint64_t a = get64(p + 2), b = get64(p + 10);
	size_t hlen = p[1];
	const uint8_t *h = p + REC_HEAD;
	uint32_t idx, h32;

	if (p[0] == REC_RESERVE) {
		/* NODES_ID_LIMIT itself: every id may have been handed out. */
		if (a <= NODES_ID_LIMIT && a > rp->reserved)
			rp->reserved = a;
		return 0;
	}
	if (a < NODES_FIRST_ID || a >= NODES_ID_LIMIT) {
		/* Checksummed but impossible: count as damage, use nothing. */
		t->skipped_bytes += len;
		rp->bad = true;
		return 0;
	}
	idx = tab_id_lookup(t, a);
	switch (p[0]) {
	case REC_PARENT:
		if (idx != UINT32_MAX)
			t->ents[idx].parent = b;
		return 0;
	case REC_REMOVE:
		if (idx != UINT32_MAX)
			tab_remove(t, idx);
		return 0;
	}
	/* REC_ADD */
	if (a > rp->max_id)
		rp->max_id = a;
	h32 = tab_h32(h, hlen);
	if (idx != UINT32_MAX) {
		/* The same id added twice cannot happen; if the handles differ
		 * we cannot tell which is right, so trust neither. */
		const struct tab_ent *e = &t->ents[idx];

		if (e->hlen != hlen || memcmp(tab_handle(t, e), h, hlen)) {
			tab_remove(t, idx);
			t->skipped_bytes += len;
			rp->bad = true;
		}
		return 0;
	}
	/* add() only adds absent handles: an older id of this handle was
	 * removed, even if its REMOVE record was lost. */
	idx = tab_h_lookup(t, h, hlen, h32);
	if (idx != UINT32_MAX)
		tab_remove(t, idx);
	return tab_add(t, a, b, h, hlen, h32);
}

/* ---- open, sync, close -------------------------------------------------- */

static int new_generation(uint32_t *gen)
{
	do {
		if (getrandom(gen, sizeof(*gen), 0) != sizeof(*gen))
			return errno ? -errno : -EIO;
	} while (!*gen);
	return 0;
}

/* Open nodes.log and read its header, creating an empty table when
 * writable and missing. */
static int open_file(struct nodes *t, const char *dir, char *err,
		     size_t errlen)
{
	uint32_t version;
	int ret = rlog_open(&t->log, dir, t->readonly, NULL, err, errlen);

	if (ret == -ENOENT && !t->readonly) {
		/* New table: complete file under the temporary name, then
		 * rename, so nodes.log always has a whole header. */
		ret = new_generation(&t->log.gen);
		if (!ret) {
			t->next_id = NODES_FIRST_ID;
			ret = compact(t);
		}
		if (ret) {
			seterr(err, errlen, "%s: create: %s", NODES_FILE,
			       strerror(-ret));
			return ret;
		}
		t->compacted = false;
	} else if (ret) {
		return ret;
	}
	ret = rlog_hdr_read(&t->log, &version, &t->next_id);
	if (ret == -EBADMSG)
		seterr(err, errlen, "%s: not a node-id table or header "
		       "damaged", NODES_FILE);
	else if (ret == -EPROTO)
		seterr(err, errlen, "%s: format version %u, expected %u",
		       NODES_FILE, version, NODES_VERSION);
	else if (ret)
		seterr(err, errlen, "%s: read: %s", NODES_FILE,
		       strerror(-ret));
	/* reserved_id NODES_ID_LIMIT: every id handed out (the table then
	 * refuses adds), not damage. */
	else if (!t->log.gen || t->next_id > NODES_ID_LIMIT) {
		seterr(err, errlen, "%s: header damaged", NODES_FILE);
		ret = -EBADMSG;
	}
	return ret;
}

int nodes_open(const char *cache_dir, bool readonly,
		     struct nodes **out, char *err, size_t errlen)
{
	struct nodes *t;
	struct replay rp = { 0 };
	struct rlog_replay rr;
	pthread_rwlockattr_t attr;
	uint64_t live_bytes;
	int dirfd, ret;

	*out = NULL;
	t = calloc(1, sizeof(*t));
	if (!t) {
		seterr(err, errlen, "out of memory");
		return -ENOMEM;
	}
	t->readonly = readonly;
	rlog_init(&t->log, &nodes_fmt, -1);
	/* 1. The lock: writers first, so lookups cannot starve adds. */
	pthread_rwlockattr_init(&attr);
	pthread_rwlockattr_setkind_np(&attr,
		PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	ret = -pthread_rwlock_init(&t->lock, &attr);
	pthread_rwlockattr_destroy(&attr);
	if (ret) {
		seterr(err, errlen, "rwlock: %s", strerror(-ret));
		goto out_free;
	}
	/* Not shared yet: the lock is taken so that what runs under it
	 * elsewhere asserts the same. */
	pthread_rwlock_wrlock(&t->lock);
	/* 2. The directory, the file and its header. */
	dirfd = open(cache_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0) {
		ret = -errno;
		seterr(err, errlen, "%s: %s", cache_dir, strerror(errno));
		goto out_lock;
	}
	rlog_init(&t->log, &nodes_fmt, dirfd);
	ret = open_file(t, cache_dir, err, errlen);
	if (ret)
		goto out_close;
	/* 3. Replay; the counter restarts beyond everything reserved. */
	rp.t = t;
	ret = rlog_replay(&t->log, replay_rec, &rp, &rr);
	if (ret) {
		seterr(err, errlen, "%s: load: %s", NODES_FILE,
		       strerror(-ret));
		goto out_close;
	}
	t->skipped_bytes += rr.skipped;
	if (rp.reserved > t->next_id)
		t->next_id = rp.reserved;
	if (rp.max_id >= t->next_id)
		t->next_id = rp.max_id + 1;
	if (t->next_id < NODES_FIRST_ID)
		t->next_id = NODES_FIRST_ID;
	if (t->next_id >= NODES_ID_LIMIT)
		nodes_warn("%s: every node-id is used (damage?): files not "
			   "in the table cannot be named (ENOSPC)", NODES_FILE);
	t->hwm = t->next_id;
	/* 4. Writable: cut a torn tail; compact when damaged or mostly
	 * garbage. */
	live_bytes = nlog_live_bytes(t);
	if (!readonly && (rr.mid_damage || rp.bad ||
			  (rr.good_end > 2 * live_bytes &&
			   rr.good_end - live_bytes > NODES_COMPACT_SLACK))) {
		ret = compact(t);
		if (ret) {
			seterr(err, errlen, "%s: compact: %s",
			       NODES_FILE, strerror(-ret));
			goto out_close;
		}
	} else if (!readonly && rr.bad_run) {
		ret = rlog_cut(&t->log);
		if (ret) {
			seterr(err, errlen, "%s: truncate torn tail: %s",
			       NODES_FILE, strerror(-ret));
			goto out_close;
		}
	}
	if (!readonly) {
		int e, n;

		/* Room for the first records (best effort: a full disk
		 * refuses creates later, at nodes_room). */
		(void)nlog_room(t);

		if (nodes_inject_getenv("CACHEGW_INJECT_NODES_ERROR", &e, &n))
			nodes_inject_error(t, e, n);
		if (nodes_inject_getenv("CACHEGW_INJECT_NODES_SYNC_ERROR", &e, &n))
			nodes_inject_sync_error(t, e, n);
	}
	pthread_rwlock_unlock(&t->lock);
	*out = t;
	return 0;

out_close:
	rlog_close(&t->log);
	close(dirfd);
out_lock:
	pthread_rwlock_unlock(&t->lock);
	pthread_rwlock_destroy(&t->lock);
out_free:
	tab_free(t);
	free(t);
	return ret;
}

int nodes_sync(struct nodes *t)
{
	int ret;

	if (t->readonly)
		return 0;
	pthread_rwlock_wrlock(&t->lock);
	if (t->log.broken) {
		ret = recover(t);	/* a rewrite is fsync'd */
	} else {
		ret = rlog_fsync(&t->log, t->log.fd);
		if (ret)
			nlog_set_broken(t, "fdatasync", ret);
	}
	pthread_rwlock_unlock(&t->lock);
	return ret;
}

void nodes_close(struct nodes *t)
{
	if (!t)
		return;
	/* A clean shutdown loses nothing; a broken table gets one last
	 * chance to be rewritten. */
	pthread_rwlock_wrlock(&t->lock);
	if (!t->readonly && t->log.broken)
		(void)recover(t);
	else if (!t->readonly)
		(void)fdatasync(t->log.fd);
	pthread_rwlock_unlock(&t->lock);
	rlog_close(&t->log);
	close(t->log.dirfd);
	pthread_rwlock_destroy(&t->lock);
	tab_free(t);
	free(t);
}
