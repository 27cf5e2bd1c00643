/* log.c - the node-id table's file: an append-only log of small
 * checksummed records, replayed at open into the tables in memory
 * (table.c); compaction, room ahead, recovery; open, sync, close.
 *
 * On disk (little-endian), "nodes.log":
 *   header, 64 bytes: "CGWNODES", u32 version, u32 generation,
 *     u64 reserved_id, 32 bytes zero, u64 XXH3-64 of bytes 0..55.
 *   records, 26 + hlen bytes each:
 *     u8 type, u8 hlen, u64 a, u64 b, hlen bytes handle,
 *     u64 XXH3-64 (seed = generation) of everything before it.
 *     ADD     a = id, b = parent, handle (1..64 bytes)
 *     PARENT  a = id, b = parent
 *     REMOVE  a = id
 *     RESERVE a = high-water mark: ids below it may have been handed out
 *
 * Why ids are never reused: every record is written with pwrite(2) before
 * the call returns (survives SIGKILL), and before the first id of a batch
 * is handed out a RESERVE record for the whole batch is written and
 * fdatasync'd (survives power loss). Open restarts the counter at the
 * largest of the header's reserved_id, every RESERVE and every ADD id + 1.
 * Seeding the checksum with the generation keeps records of another table
 * (or copied handle bytes) from passing as ours.
 *
 * Room: the file keeps NODES_ROOM_CHUNK bytes allocated beyond its end
 * (fallocate, KEEP_SIZE), topped up by nodes_room() before a caller
 * makes something at the origin, so a full disk refuses the CREATE before
 * the origin makes the file, not after. Removals leave dead records: the
 * file is rewritten (compacted) when it is more than twice what its live
 * entries need, at open and at run time.
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>

#include "fileio.h"
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

/* ---- fault injection and syscalls -------------------------------------- */

void nodes_inject_error(struct nodes *t, int err, int count)
{
	__atomic_store_n(&t->inject_err, err < 0 ? -err : err,
			 __ATOMIC_RELAXED);
	__atomic_store_n(&t->inject_count, count, __ATOMIC_RELEASE);
}

void nodes_inject_sync_error(struct nodes *t, int err, int count)
{
	__atomic_store_n(&t->sync_err, err < 0 ? -err : err, __ATOMIC_RELAXED);
	__atomic_store_n(&t->sync_count, count, __ATOMIC_RELEASE);
}

int nlog_inject(struct nodes *t)
{
	return inject_take(&t->inject_count, &t->inject_err);
}

int nlog_fsync(struct nodes *t, int fd)
{
	int ret = inject_take(&t->sync_count, &t->sync_err);

	if (!ret)
		ret = nlog_inject(t);

	if (ret)
		return ret;
	return fdatasync(fd) < 0 ? -errno : 0;
}

/* ---- encoding ----------------------------------------------------------- */

static void hdr_encode(uint8_t *p, uint32_t gen, uint64_t reserved)
{
	memset(p, 0, NODES_HDR_SIZE);
	memcpy(p, NODES_MAGIC, 8);
	put32(p + 8, NODES_VERSION);
	put32(p + 12, gen);
	put64(p + 16, reserved);
	put64(p + 56, XXH3_64bits(p, 56));
}

/* Encode a record into p (REC_MAX bytes); returns its length. */
size_t nlog_rec_encode(uint8_t *p, uint32_t gen, uint8_t type, uint64_t a,
			 uint64_t b, const void *h, size_t hlen)
{
	p[0] = type;
	p[1] = (uint8_t)hlen;
	put64(p + 2, a);
	put64(p + 10, b);
	if (hlen)
		memcpy(p + 18, h, hlen);
	return nodes_seal(p, 18 + hlen, gen);
}

/* Length of the valid record at p (avail bytes), or 0 if there is none. */
static size_t rec_check(const uint8_t *p, size_t avail, uint32_t gen)
{
	size_t hlen;

	if (avail < REC_FIXED)
		return 0;
	hlen = p[1];
	switch (p[0]) {
	case REC_ADD:
		if (hlen < 1 || hlen > NODES_HANDLE_MAX)
			return 0;
		break;
	case REC_PARENT:
	case REC_REMOVE:
	case REC_RESERVE:
		if (hlen)
			return 0;
		break;
	default:
		return 0;
	}
	if (avail < REC_FIXED + hlen)
		return 0;
	if (!nodes_sealed(p, 18 + hlen, gen))
		return 0;
	return REC_FIXED + hlen;
}

/* ---- the log ------------------------------------------------------------ */

/* Bytes a compacted file of the live entries takes. Lock held. */
uint64_t nlog_live_bytes(const struct nodes *t)
{
	NODES_ASSERT_HELD(t);
	return NODES_HDR_SIZE + t->live * REC_FIXED + t->live_hbytes;
}


static int recover(struct nodes *t);

/* Append one record. On failure the log is cut back to where it was; if
 * even that fails the table is marked broken (the next change rewrites
 * it), since a torn record must not sit in front of later ones. Lock held
 * (wr). */
int nlog_append(struct nodes *t, const uint8_t *rec, size_t len)
{
	NODES_ASSERT_WR(t);
	NODES_ASSERT_WR(t);
	int ret = recover(t);

	if (ret)
		return ret;
	ret = nlog_inject(t);
	if (!ret)
		ret = pwrite_all(t->fd, rec, len, t->log_end);
	if (ret) {
		nodes_warn("write failed (%s)", strerror(-ret));
		if (ftruncate(t->fd, (off_t)t->log_end) < 0)
			nlog_set_broken(t, "truncate after a failed write", -errno);
		return ret;
	}
	t->log_end += len;
	return 0;
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
	len = nlog_rec_encode(rec, t->gen, REC_RESERVE, hwm, 0, NULL, 0);
	ret = nlog_append(t, rec, len);
	if (ret)
		return ret;
	ret = nlog_fsync(t, t->fd);
	if (ret) {
		nlog_set_broken(t, "fdatasync", ret);
		return ret;
	}
	t->hwm = hwm;
	return 0;
}

/* ---- open: replay ------------------------------------------------------- */

struct replay {
	uint64_t max_id;		/* largest ADD id seen */
	uint64_t reserved;		/* largest RESERVE seen */
	uint64_t good_end;		/* end of the last valid record */
	uint64_t bad_run;		/* invalid bytes since the last valid one */
	bool mid_damage;		/* invalid bytes before a valid record */
};

/* Apply one valid record. -errno only for out-of-memory. */
static int replay_rec(struct nodes *t, struct replay *rp,
		      const uint8_t *p, size_t len)
{
	uint64_t a = get64(p + 2), b = get64(p + 10);
	size_t hlen = p[1];
	const uint8_t *h = p + 18;
	uint32_t idx, h32;
	uint64_t slot;

	if (p[0] == REC_RESERVE) {
		/* NODES_ID_LIMIT itself: every id may have been handed out. */
		if (a <= NODES_ID_LIMIT && a > rp->reserved)
			rp->reserved = a;
		return 0;
	}
	if (a < NODES_FIRST_ID || a >= NODES_ID_LIMIT) {
		/* Checksummed but impossible: count as damage, use nothing. */
		t->skipped_bytes += len;
		rp->mid_damage = true;
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
			rp->mid_damage = true;
		}
		return 0;
	}
	/* add() only adds absent handles: an older id of this handle was
	 * removed, even if its REMOVE record was lost. */
	slot = tab_h_slot(t, h, hlen, h32);
	if (slot != UINT64_MAX)
		tab_remove(t, t->htab[slot].ent1 - 1);
	return tab_add(t, a, b, h, hlen, h32);
}

/* Replay every record after the header. An invalid byte is skipped and the
 * scan resumes at the next byte, so damage in the middle loses only the
 * records it hit. */
static int replay_log(struct nodes *t, struct replay *rp)
{
	uint8_t *buf = malloc(NODES_LOAD_BUF);
	uint64_t boff = NODES_HDR_SIZE;	/* file offset of buf[0] */
	size_t blen = 0, pos = 0;
	bool eof = false;
	int ret = 0;

	if (!buf)
		return -ENOMEM;
	rp->good_end = NODES_HDR_SIZE;
	for (;;) {
		size_t len;

		if (blen - pos < REC_MAX && !eof) {
			ssize_t n;

			memmove(buf, buf + pos, blen - pos);
			boff += pos;
			blen -= pos;
			pos = 0;
			n = pread_all(t->fd, buf + blen, NODES_LOAD_BUF - blen,
				       boff + blen);
			if (n < 0) {
				ret = (int)n;
				goto out;
			}
			eof = (size_t)n < NODES_LOAD_BUF - blen;
			blen += (size_t)n;
		}
		if (pos >= blen)
			break;
		len = rec_check(buf + pos, blen - pos, t->gen);
		if (!len) {
			pos++;
			rp->bad_run++;
			t->skipped_bytes++;
			continue;
		}
		ret = replay_rec(t, rp, buf + pos, len);
		if (ret)
			goto out;
		if (rp->bad_run)
			rp->mid_damage = true;
		rp->bad_run = 0;
		pos += len;
		rp->good_end = boff + pos;
	}
out:
	free(buf);
	return ret;
}

/* ---- open: files -------------------------------------------------------- */

/* Write a complete table file to NODES_TMP: header plus an ADD record per
 * live entry; fsync it. Returns the fd (flocked when writable) or -errno. */
static int write_tmp(struct nodes *t, uint64_t reserved,
		     uint64_t *size)
{
	size_t cap = 1u << 20, used = NODES_HDR_SIZE;
	uint8_t *buf = malloc(cap);
	uint64_t off = 0;
	int fd, ret;

	if (!buf)
		return -ENOMEM;
	fd = openat(t->dirfd, NODES_TMP,
		    O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		ret = -errno;
		goto out_free;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		ret = -errno;
		goto out_close;
	}
	hdr_encode(buf, t->gen, reserved);
	for (uint32_t idx = 0; ; idx++) {
		const struct tab_ent *e;

		if (used + REC_MAX > cap || idx == t->nents) {
			ret = nlog_inject(t);
			if (!ret)
				ret = pwrite_all(fd, buf, used, off);
			if (ret)
				goto out_unlink;
			off += used;
			used = 0;
		}
		if (idx == t->nents)
			break;
		e = &t->ents[idx];
		if (e->id)
			used += nlog_rec_encode(buf + used, t->gen, REC_ADD, e->id,
					   e->parent, tab_handle(t, e),
					   e->hlen);
	}
	ret = nlog_fsync(t, fd);
	if (ret)
		goto out_unlink;
	free(buf);
	*size = off;
	return fd;

out_unlink:
	unlinkat(t->dirfd, NODES_TMP, 0);
out_close:
	close(fd);
out_free:
	free(buf);
	return ret;
}

/* Replace nodes.log with a file of the live entries only: write a new
 * file, fsync, rename, fsync the directory. Lock held (wr). */
static int compact(struct nodes *t)
{
	NODES_ASSERT_WR(t);
	uint64_t size = 0;
	int fd, ret;

	fd = write_tmp(t, t->next_id, &size);
	if (fd < 0)
		return fd;
	ret = nlog_inject(t);
	if (!ret && renameat(t->dirfd, NODES_TMP, t->dirfd,
			     NODES_FILE) < 0)
		ret = -errno;
	if (ret)
		goto out_unlink;
	/* If this fails the rename may not be durable yet; both files are
	 * complete tables with the same ids, so either is right. */
	(void)nlog_fsync(t, t->dirfd);
	if (t->fd >= 0)
		close(t->fd);
	t->fd = fd;
	t->log_end = size;
	t->room_end = size;	/* a new file: nothing allocated ahead */
	t->hwm = t->next_id;
	t->compacted = true;
	return 0;

out_unlink:
	unlinkat(t->dirfd, NODES_TMP, 0);
	close(fd);
	return ret;
}

/* A write to the log failed in a way that leaves the file untrustworthy.
 * After a failed fsync the kernel may have dropped the dirty pages:
 * nothing written since the last good one can be trusted to be there.
 * The table in memory is still right, so the next change rewrites the
 * file from it (recover) instead of appending to this one. */
void nlog_set_broken(struct nodes *t, const char *what, int err)
{
	if (!t->broken)
		nodes_warn("%s failed (%s); the table will be rewritten",
			  what, strerror(-err));
	t->broken = true;
}

/* A broken table: write a new file of the live entries (compact: new
 * file, fsync, rename), which needs nothing of the old one. 0 if the table
 * is whole again; else -errno of the rewrite, and the next change tries
 * again. Lock held (wr). */
static int recover(struct nodes *t)
{
	bool compacted = t->compacted;	/* "open rewrote the file" */
	int ret;

	if (!t->broken)
		return 0;
	ret = compact(t);
	if (ret) {
		nodes_warn("rewrite failed (%s)", strerror(-ret));
		return ret;
	}
	t->broken = false;
	t->compacted = compacted;
	nodes_warn("rewritten, writable again");
	return 0;
}

static int new_generation(uint32_t *gen)
{
	do {
		if (getrandom(gen, sizeof(*gen), 0) != sizeof(*gen))
			return errno ? -errno : -EIO;
	} while (!*gen);
	return 0;
}

/* Read and check the header. */
static int read_header(struct nodes *t, char *err, size_t errlen)
{
	uint8_t hdr[NODES_HDR_SIZE];
	ssize_t n = pread_all(t->fd, hdr, sizeof(hdr), 0);
	uint32_t version;

	if (n < 0) {
		seterr(err, errlen, "%s: read: %s", NODES_FILE,
		       strerror((int)-n));
		return (int)n;
	}
	if (n < NODES_HDR_SIZE || memcmp(hdr, NODES_MAGIC, 8) ||
	    get64(hdr + 56) != XXH3_64bits(hdr, 56)) {
		seterr(err, errlen, "%s: not a node-id table or header damaged",
		       NODES_FILE);
		return -EBADMSG;
	}
	version = get32(hdr + 8);
	if (version != NODES_VERSION) {
		seterr(err, errlen, "%s: format version %u, expected %u",
		       NODES_FILE, version, NODES_VERSION);
		return -EPROTO;
	}
	t->gen = get32(hdr + 12);
	t->next_id = get64(hdr + 16);
	/* reserved_id NODES_ID_LIMIT: every id handed out (the table then
	 * refuses adds), not damage. */
	if (!t->gen || t->next_id > NODES_ID_LIMIT) {
		seterr(err, errlen, "%s: header damaged", NODES_FILE);
		return -EBADMSG;
	}
	return 0;
}

/* Open nodes.log, creating an empty table when writable and missing. */
static int open_file(struct nodes *t, const char *dir, char *err,
		     size_t errlen)
{
	int ret;

	/* No link inside the cache directory is followed. */
	t->fd = openat(t->dirfd, NODES_FILE,
		       (t->readonly ? O_RDONLY : O_RDWR) | O_NOFOLLOW |
		       O_CLOEXEC);
	if (t->fd >= 0 || errno != ENOENT || t->readonly) {
		if (t->fd < 0 && errno == ELOOP) {
			seterr(err, errlen, "cache_dir %s: %s is a symbolic "
			       "link; cachegw follows no links inside its "
			       "cache_dir: remove it", dir, NODES_FILE);
			return -ELOOP;
		}
		if (t->fd < 0) {
			ret = -errno;
			seterr(err, errlen, "%s: open: %s", NODES_FILE,
			       strerror(errno));
			return ret;
		}
		if (!t->readonly && flock(t->fd, LOCK_EX | LOCK_NB) < 0) {
			ret = errno == EWOULDBLOCK ? -EBUSY : -errno;
			seterr(err, errlen, "%s: held by another writer",
			       NODES_FILE);
			return ret;
		}
		return 0;
	}
	/* New table: complete file under the temporary name, then rename,
	 * so nodes.log always has a whole header. */
	ret = new_generation(&t->gen);
	if (ret)
		goto out_err;
	t->next_id = NODES_FIRST_ID;
	ret = compact(t);
	if (ret)
		goto out_err;
	t->compacted = false;
	return 0;

out_err:
	seterr(err, errlen, "%s: create: %s", NODES_FILE,
	       strerror(-ret));
	return ret;
}

int nodes_open(const char *cache_dir, bool readonly,
		     struct nodes **out, char *err, size_t errlen)
{
	struct nodes *t;
	struct replay rp = { 0 };
	pthread_rwlockattr_t attr;
	uint64_t live_bytes;
	int ret;

	*out = NULL;
	t = calloc(1, sizeof(*t));
	if (!t) {
		seterr(err, errlen, "out of memory");
		return -ENOMEM;
	}
	t->readonly = readonly;
	t->fd = -1;
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
	/* 2. The directory; a leftover temporary file is an interrupted
	 * compaction: nodes.log is still the whole table. */
	t->dirfd = open(cache_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (t->dirfd < 0) {
		ret = -errno;
		seterr(err, errlen, "%s: %s", cache_dir, strerror(errno));
		goto out_lock;
	}
	if (!readonly)
		unlinkat(t->dirfd, NODES_TMP, 0);
	/* 3. The file and its header. */
	ret = open_file(t, cache_dir, err, errlen);
	if (ret)
		goto out_close;
	ret = read_header(t, err, errlen);
	if (ret)
		goto out_close;
	/* 4. Replay; the counter restarts beyond everything reserved. */
	ret = replay_log(t, &rp);
	if (ret) {
		seterr(err, errlen, "%s: load: %s", NODES_FILE,
		       strerror(-ret));
		goto out_close;
	}
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
	t->log_end = rp.good_end;
	/* 5. Writable: cut a torn tail; compact when damaged or mostly
	 * garbage. */
	live_bytes = nlog_live_bytes(t);
	if (!readonly && (rp.mid_damage || (rp.good_end > 2 * live_bytes &&
			  rp.good_end - live_bytes > NODES_COMPACT_SLACK))) {
		ret = compact(t);
		if (ret) {
			seterr(err, errlen, "%s: compact: %s",
			       NODES_FILE, strerror(-ret));
			goto out_close;
		}
	} else if (!readonly && rp.bad_run) {
		ret = nlog_inject(t);
		if (!ret && ftruncate(t->fd, (off_t)rp.good_end) < 0)
			ret = -errno;
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
	if (t->fd >= 0)
		close(t->fd);
	close(t->dirfd);
out_lock:
	pthread_rwlock_unlock(&t->lock);
	pthread_rwlock_destroy(&t->lock);
out_free:
	free(t->ents);
	free(t->arena);
	free(t->idtab);
	free(t->htab);
	free(t);
	return ret;
}

int nodes_sync(struct nodes *t)
{
	int ret;

	if (t->readonly)
		return 0;
	pthread_rwlock_wrlock(&t->lock);
	if (t->broken) {
		ret = recover(t);	/* a rewrite is fsync'd */
	} else {
		ret = nlog_fsync(t, t->fd);
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
	if (!t->readonly && t->broken)
		(void)recover(t);
	else if (!t->readonly)
		(void)fdatasync(t->fd);
	pthread_rwlock_unlock(&t->lock);
	close(t->fd);		/* releases the flock */
	close(t->dirfd);
	pthread_rwlock_destroy(&t->lock);
	free(t->ents);
	free(t->arena);
	free(t->idtab);
	free(t->htab);
	free(t);
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
	uint64_t live = nlog_live_bytes(t);
	int ret;

	if (t->log_end <= 2 * live ||
	    t->log_end - live <= NODES_COMPACT_SLACK ||
	    t->log_end <= t->compact_retry)
		return;
	ret = compact(t);
	if (ret) {
		t->compact_retry = t->log_end + live / 2 + NODES_COMPACT_SLACK;
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
	uint64_t want = NODES_ROOM_CHUNK;
	int ret;

	if (t->room_unsupported || t->room_end >= t->log_end + NODES_ROOM_LOW)
		return 0;
	for (;;) {
		ret = nlog_inject(t);
		if (!ret && fallocate(t->fd, FALLOC_FL_KEEP_SIZE,
				      (off_t)t->log_end, (off_t)want) < 0)
			ret = -errno;
		if (!ret) {
			t->room_end = t->log_end + want;
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
