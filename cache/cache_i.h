/* cache_i.h - private definitions of cache/, one section per .c file.
 *
 * Each file calls only files below it here; the one call up is obj.c's
 * cache_reserve (cull.c): room for a new object may cull another.
 *
 *   ownwrite.c   the caller's own writes (cache_write, cache_write_ref)
 *                and cache_drop_range
 *   fill.c       fills (cache_fill and its kin) and their completion
 *   dir.c        opening a cache directory (checks, cache.conf, the lock
 *                file, layout) and closing it
 *   scan.c       rebuilding the registry at open; offline inspection
 *                (walk, info, verify, evict)
 *   cull.c       culling (cache_size, brun/bcull/bstop)
 *   obj.c        objects: the registry, get/put and references
 *   read.c       verified reads
 *   objfile.c    an object's files: names and paths, opening them (header
 *                checked, presence loaded), the check on every get,
 *                closing
 *   coherency.c  an object's data against the origin's identity: reset
 *                (a new incarnation), dropped blocks, failure, check,
 *                invalidate, set_coh
 *   presence.c   which blocks are present: the bitmap, marking, unmarking
 *   csc.c        the open object's checksum cache
 *   account.c    the LRU list, bytes used and reserved, free space
 *   meta.c       the per-object metadata record: header, presence,
 *                checksums
 *   io.c         the io_uring fill ring and every backing-store syscall,
 *                behind the fault-injection hook
 *   stats.c      counters and the one-line log
 *
 * Locks, what they guard (each field says which), and how they nest:
 *
 *   o->lock      an object's open state: fds, header, presence bitmap,
 *                gen, its fills in flight (o->inflight, r->skip)
 *   c->lock      the registry, LRU, accounting (used, reserved,
 *                o->refs, o->alloc_bytes)
 *   c->cull_lock the culler's wake-up and stop flag
 *   c->sq_lock   the io_uring SQ and c->ring_reqs (requests on the ring)
 *   c->io_lock   slots and bytes of fills in flight (cache_drain waits)
 *   c->sub_lock  the fills waiting for the submitter thread (c->sub_head)
 * (The node-id table, nodes/, has its own lock, taken under none of these.)
 *
 *   o->write_lock -> o->lock (cache_write: the caller's own writes)
 *   o->lock -> c->lock       (put, accounting, a fill taking a reference)
 *   o->lock -> c->cull_lock  (an I/O error wakes the culler)
 *
 * c->sq_lock, c->io_lock and c->sub_lock are leaves taken under no other
 * lock: a fill is queued and completed with o->lock dropped. c->lock is
 * never held while taking an o->lock (culling and eviction drop it first),
 * and no thread holds two o->locks. c->lock is held only for short in-memory
 * work plus, when an unreferenced object is culled or evicted, its two
 * unlink() calls (so a concurrent get cannot reopen files that are about
 * to disappear). Every *_locked function asserts its lock at entry
 * (GW_ASSERT_HELD, lockcheck.h).
 */
#ifndef CACHEGW_CACHE_I_H
#define CACHEGW_CACHE_I_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <liburing.h>

#include "cache.h"
#include "config.h"
#include "seterr.h"

#ifndef RWF_DONTCACHE
#define RWF_DONTCACHE 0x00000080	/* Linux 6.14; Debian 12 headers lack it */
#endif

#define CACHE_DIO_ALIGN 4096u		/* O_DIRECT offset/length/buffer unit */
#define CACHE_CONF_NAME "cache.conf"
#define CACHE_LOCK_NAME "lock"
#define CACHE_OBJ_DIR "objects"
#define CACHE_META_SUFFIX ".meta"
#define CACHE_URING_DEPTH 64
/* io-wq workers the ring may run at once (bounded and unbounded each).
 * Writes that cannot be issued without blocking (tmpfs always, ext4 when a
 * write allocates) go to io-wq, which by default starts a worker for each,
 * up to 4 per CPU: an own-write stream of 16 parallel WRITEs had 16+
 * workers copying into one file under its inode lock, and the gateway
 * spent 3.8 CPU s per GiB instead of 2.6 (1 GiB dd, cache on tmpfs: 5.2 ->
 * 3.8 s). Reads' fills measured no slower with 4 (cold 1 GiB read, tmpfs
 * and ext4). The limit is per submitting task: see c->sub_thread. */
#define CACHE_URING_WORKERS 4
#define CACHE_INFLIGHT_BYTES_MAX (64u << 20)	/* fill data in flight */
#define CACHE_OWN_WRITE_BYTES_MAX (CACHE_INFLIGHT_BYTES_MAX / 4)

#define ALIGN_UP(x, a) (((x) + (a) - 1) / (a) * (a))

struct cache_req;

/* ---- meta.c: the per-object metadata file ------------------------------
 *
 * <hash>.meta = one 512-byte header, then super-groups of 32768 blocks
 * (2 GiB of data with 64 KiB blocks). A super-group is one 4 KiB page of
 * presence words (512 of them, one per 64 blocks) followed by the
 * checksums of its blocks, one XXH3-64 per 4 KiB sector (CACHE_SECTOR) of
 * each block, in order (block_size / 4 KiB of them per block). Opening an
 * object reads one presence page per super-group, not the checksums.
 * Marking a block present is two pwrites (its checksums, then its
 * presence word; a run of blocks under one word: one of each), never a
 * rewrite of the file, and the file grows only as far as the highest
 * checksum written (it is sparse like the data file). A read verifies only
 * the sectors it returns, so a 4 KiB read of a 64 KiB block reads and
 * hashes 4 KiB, not the block (format version 2; version 1 had one
 * checksum per block, beside its presence word in groups of 64).
 *
 * Every checksum is seeded with the object's salt (random, new for each
 * incarnation of the object: creation, invalidation, reset) and the sector
 * index in the object. A stale entry from an older incarnation, an entry
 * copied to another index, or torn/garbage bytes cannot verify against any
 * data but the data they were computed from (2^-64), so the checksum alone
 * guards what is returned; the presence word only saves reading absent
 * blocks. A sector past the end of the object has the checksum 0 (never
 * consulted). All integers are host byte order: a cache is not moved
 * between hosts.
 */
#define META_MAGIC "CGWMETA1"
#define META_HDR_SIZE 512u
#define META_GROUP_BLOCKS 64u		/* blocks per presence word */
#define META_SUPER_BLOCKS 32768u	/* blocks per presence page */
#define META_PRESENCE_PAGE 4096u	/* bytes: META_SUPER_BLOCKS bits */
#define CACHE_SECTOR 4096u		/* checksum unit, bytes */

/* Sectors (checksums) per block for block size bs. */
static inline uint32_t cache_spb(uint32_t bs)
{
	return bs / CACHE_SECTOR;
}

/* Bytes of a super-group: its presence page and its checksums. */
static inline uint64_t cache_meta_super_size(uint32_t bs)
{
	return META_PRESENCE_PAGE + 8ull * META_SUPER_BLOCKS * cache_spb(bs);
}

struct meta_hdr {
	char magic[8];			/* META_MAGIC */
	uint32_t version;		/* CACHE_FORMAT_VERSION */
	uint32_t block_size;		/* bytes */
	uint64_t size;			/* logical object size, bytes */
	uint64_t salt;			/* checksum seed of this incarnation */
	uint32_t keylen;
	uint32_t cohlen;
	uint8_t key[CACHE_KEY_MAX];
	uint8_t coh[CACHE_COH_MAX];
	uint8_t reserved[264];		/* zero */
	uint64_t hdr_csum;		/* XXH3-64 of the bytes before it */
	/* Outside hdr_csum: advisory, rewritten alone on use. A torn value
	 * only misorders culling. */
	uint64_t last_use_ns;		/* CLOCK_REALTIME ns */
};

#define META_LAST_USE_OFF 504u

void cache_meta_init(struct meta_hdr *h, uint32_t bs, const void *key,
		     size_t keylen, const void *coh, size_t cohlen,
		     uint64_t size);
void cache_meta_seal(struct meta_hdr *h);
int cache_meta_check(const struct meta_hdr *h, uint32_t bs);
uint64_t cache_meta_nblocks(uint64_t size, uint32_t bs);
off_t cache_meta_word_off(uint32_t bs, uint64_t blk);
off_t cache_meta_csum_off(uint32_t bs, uint64_t blk);
off_t cache_meta_sector_off(uint32_t bs, uint64_t sector);
uint64_t cache_sector_csum(uint64_t salt, uint64_t sector,
			   const void *data, size_t len);
void cache_block_csums(uint64_t salt, uint32_t bs, uint64_t blk,
		       const void *data, size_t len, uint64_t *out);
uint64_t cache_new_salt(void);
uint64_t cache_now_ns(void);
int cache_meta_read_hdr(struct cache *c, int fd, struct meta_hdr *h);
int cache_meta_write_hdr(struct cache *c, int fd, struct meta_hdr *h);
int cache_meta_load_bitmap(struct cache *c, int fd, uint64_t nblocks,
			   uint64_t *bitmap);

/* ---- io.c: io_uring, syscalls behind the fault-injection hook ----------- */

/* The data buffer of one fill, shared by its requests: a fill is split at
 * the edges of its runs of zero blocks (see fill.c). */
struct cache_fillbuf {
	int refs;			/* requests + the filler: __atomic */
	void *buf;			/* the cache's copy (freed), or NULL */
	void (*release)(void *);	/* the caller's buffer: called instead */
	void *release_arg;
};

/* One fill in flight: a contiguous run of blocks of one object. */
struct cache_req {
	struct cache_obj *o;		/* holds a reference */
	/* Its write's result (bytes written, or -errno): called by the
	 * completion thread, or by io.c where the write could not be put on
	 * the ring. It owns r: frees it, or queues it again
	 * (cache_io_requeue). fill.c's, set when r is made. */
	void (*done)(struct cache *c, struct cache_req *r, int res);
	struct cache_req *next;		/* o->inflight; guarded by o->lock */
	uint64_t gen;			/* o->gen at submission */
	uint64_t first;			/* first block */
	uint32_t nblk;			/* blocks */
	size_t len;			/* logical bytes */
	size_t wlen;			/* bytes written (DIO-padded) */
	uint64_t off;
	uint64_t reserved;		/* bytes reserved in c->reserved */
	void *buf;			/* in fb's buffer, or zbuf; NULL for a
					 * zero run */
	void *zbuf;			/* zeros to write where holes cannot be
					 * punched (freed with r) */
	uint64_t io_bytes;		/* counted in c->inflight_bytes */
	int fd;
	int rw_flags;			/* RWF_DONTCACHE or 0 */
	int inject_err;			/* fault injected at submit: -errno */
	bool zero;			/* all zeros: punch a hole, no data */
	struct cache_req *rprev, *rnext;/* c->ring_reqs: on the ring, its
					 * CQE not reaped; c->sq_lock */
	struct cache_req *snext;	/* c->sub_head: waiting for the
					 * submitter; c->sub_lock */
	struct cache_fillbuf *fb;	/* shared buffer of a split fill */
	uint64_t *csums;		/* [nblk * cache_spb(bs)] */
	uint8_t *skip;			/* [nblk] 1 = do not mark; o->lock */
};

int cache_io_start(struct cache *c, unsigned depth);
void cache_io_stop(struct cache *c);
void cache_io_submit(struct cache *c, struct cache_req *r);
bool cache_io_behind(struct cache *c, uint64_t bytes, uint64_t limit);
void cache_io_requeue(struct cache *c, struct cache_req *r);
void cache_io_release(struct cache *c, uint64_t bytes);
int cache_inject(struct cache *c, unsigned op);
void cache_inject_from_env(struct cache *c);
/* VAR=ERRNO[:COUNT] (ERRNO a number or a name, COUNT as for
 * cache_inject_error, default -1): 1 and *err, *count if set, else 0.
 * Built with -Dfault_injection=false: always 0, VAR not even kept. */
#if CACHEGW_FAULT_INJECTION
int cache_inject_getenv(const char *var, int *err, int *count);
#else
#define cache_inject_getenv(var, err, count) \
	((void)(var), (void)(err), (void)(count), 0)
#endif
ssize_t cache_pread(struct cache *c, int fd, void *buf, size_t len,
		    off_t off, int flags);
int cache_pwrite(struct cache *c, int fd, const void *buf, size_t len,
		 off_t off);
int cache_ftruncate(struct cache *c, int fd, off_t len);

/* ---- obj.c: objects, the registry, references --------------------------- */

struct cache_obj {
	struct cache *c;
	uint64_t hash;			/* XXH3-64 of the key */
	char name[CACHE_NAME_LEN + 1];	/* hex of hash */

	/* Registry and accounting: guarded by c->lock. */
	struct cache_obj *hnext;	/* hash chain */
	struct cache_obj *lprev, *lnext;/* LRU list; head = least recent */
	int refs;			/* gets + fills in flight */
	uint64_t alloc_bytes;		/* allocated bytes, data + meta */
	uint64_t last_use_ns;		/* CLOCK_REALTIME ns */
	bool removed;			/* out of the registry, files gone */

	/* Open state: guarded by lock. */
	pthread_mutex_t lock;
	bool opened;			/* fds and hdr valid */
	bool broken;			/* reset failed: no I/O until closed */
	int data_fd, meta_fd;
	bool direct;			/* data_fd has O_DIRECT */
	struct meta_hdr *hdr;
	uint64_t nblocks;
	uint64_t *bitmap;		/* present blocks, nblocks bits */
	uint64_t gen;			/* bumped by every reset */
	uint64_t unmark_seq;		/* bumped when a present block is
					 * unmarked: a reader that raced with
					 * it does not report corruption */
	struct cache_req *inflight;	/* fills of this object in flight */
	/* The checksum cache (csc.c): stored checksums of recently read
	 * sectors, so that a warm read costs no pread of the metadata
	 * file. NULL until the first read; freed at close and reset. */
	struct cache_csum_chunk *csc;
	uint32_t csc_slots;		/* entries of csc */
	uint64_t csc_seq;		/* bumped by every change of stored
					 * checksums (mark, reset, resize):
					 * a chunk read from disk across one
					 * is not cached */
	/* Serializes cache_write: each one reads its partial edge blocks,
	 * merges its bytes in and plans its fill before the next reads
	 * them. Two merged from the same old copy, the later fill would
	 * mark the block without the earlier write's bytes (fsx, mapped
	 * writes: the kernel writes pages of one block back in parallel).
	 * Taken before lock. */
	pthread_mutex_t write_lock;
};

struct cache_obj *cache_obj_lookup_locked(struct cache *c, uint64_t hash);
struct cache_obj *cache_obj_new_locked(struct cache *c, uint64_t hash);
void cache_obj_forget_locked(struct cache *c, struct cache_obj *o);
void cache_obj_free(struct cache_obj *o);
/* Why a reference to an object is taken (cachefiles_grab_object's "why"):
 * counted per reason in the lock-checking builds (c->refs_taken), for a
 * debugger looking at a leak. */
enum cache_ref_why {
	CACHE_REF_GET,			/* cache_obj_get: a user of the object */
	CACHE_REF_GRAB,			/* cache_obj_grab: a holder's extra */
	CACHE_REF_BY_NAME,		/* inspection, verify, evict by name */
	CACHE_REF_FILL,			/* fills in flight (one each) */
	CACHE_REF_DROP_DATA,		/* cache_obj_drop_data (cull, evict) */
	CACHE_REF_NWHY
};
/* Take n references for why. c->lock held. */
void cache_obj_ref_locked(struct cache *c, struct cache_obj *o,
			  enum cache_ref_why why, int n);
/* An object no one holds: out of the registry and freed. Entered with
 * c->lock held (o->refs == 0), left with it dropped. */
void cache_obj_forget_free(struct cache *c, struct cache_obj *o);
/* An object in use: its data dropped (reset to empty, as if culled), its
 * identity kept for its holders; what names the caller in the log if the
 * reset fails. Entered with c->lock held, left with it dropped. */
void cache_obj_drop_data(struct cache *c, struct cache_obj *o,
			 const char *what);
void cache_close_objects(struct cache *c);
int cache_obj_ref_by_name(struct cache *c, const char *name,
			  struct cache_obj **out);

/* ---- presence.c: which blocks are present (o->lock) --------------------- */

static inline bool cache_bit(const uint64_t *bm, uint64_t i)
{
	return (bm[i / 64] >> (i % 64)) & 1;
}

/* The presence bitmap sized for an object of size bytes. */
int cache_obj_alloc_bitmap(struct cache_obj *o, uint64_t size);
void cache_obj_cancel_locked(struct cache_obj *o, uint64_t blk);
int cache_obj_unmark_locked(struct cache_obj *o, uint64_t blk);
int cache_obj_mark_run_locked(struct cache_obj *o, uint64_t first,
			      uint32_t n, const uint64_t *csums);

/* ---- coherency.c: reset, drops, failure, coherency (o->lock) ------------ */

/* Drop every block and start a new incarnation (new salt); key NULL keeps
 * the stored identity. */
int cache_obj_reset_locked(struct cache_obj *o, const void *key,
			   size_t keylen, const void *coh, size_t cohlen,
			   uint64_t size);
/* An I/O error on the object: counted, its data dropped. */
void cache_obj_fail_locked(struct cache_obj *o, int err, const char *what);
/* Blocks [first, end) no longer hold what their bits say: unmarked, their
 * fills in flight cancelled. */
int cache_obj_drop_blocks_locked(struct cache_obj *o, uint64_t first,
				 uint64_t end);

/* ---- objfile.c: an object's files --------------------------------------- */

int cache_obj_hash_name(const void *key, size_t keylen, uint64_t *hash,
			char *name);
int cache_obj_path(const struct cache *c, const char *name, bool meta,
		   char *buf, size_t len);
/* Open (create) the files and load the header and presence bitmap; key
 * NULL accepts the stored identity (inspection by name). */
int cache_obj_open_locked(struct cache_obj *o, const void *key,
			  size_t keylen, const void *coh, size_t cohlen,
			  uint64_t size, bool create);
/* An open object's header re-read: damage or another salt resets it. */
int cache_obj_revalidate_locked(struct cache_obj *o, const void *coh,
				size_t cohlen, uint64_t size);
void cache_obj_close_locked(struct cache_obj *o);

/* ---- csc.c: the checksum cache ------------------------------------------ */

/* The checksum cache of an open object: a direct-mapped table of chunks
 * of CACHE_CSC_CHUNK consecutive stored checksums (chunk k holds sectors
 * [k * CACHE_CSC_CHUNK, (k + 1) * CACHE_CSC_CHUNK), slot k % csc_slots),
 * at most CACHE_CSC_SLOTS_MAX of them per object: 520 bytes each, 2 MiB
 * for an object of 1 GiB or more, which is then held entirely (larger
 * ones share slots). A chunk is a copy of what the metadata file held
 * when it was read; any change of those checksums (cache_obj_mark_run_locked)
 * drops it, a reset or resize drops the table. The data is still read and
 * verified on every read: the cache saves the pread of the checksums, not
 * the check. Guarded by o->lock. */
#define CACHE_CSC_CHUNK 64u		/* checksums per chunk: 256 KiB of data */
#define CACHE_CSC_SLOTS_MAX 4096u

struct cache_csum_chunk {
	uint64_t tag;			/* chunk index + 1; 0 = empty */
	uint64_t v[CACHE_CSC_CHUNK];
};

void cache_csc_drop_locked(struct cache_obj *o);
void cache_csc_changed_locked(struct cache_obj *o, uint64_t first_sector,
			      uint64_t nsectors);
bool cache_csc_lookup_locked(struct cache_obj *o, uint64_t s0, uint64_t n,
			     uint64_t *out);
void cache_csc_insert_locked(struct cache_obj *o, uint64_t k0, uint64_t nk,
			     const uint64_t *v, uint64_t seq);

/* ---- read.c: verified reads --------------------------------------------- */

int cache_load_csums(struct cache *c, int meta_fd, uint64_t first,
		     uint64_t n, uint64_t *out);
int cache_load_block_csums(struct cache *c, int meta_fd, uint64_t first,
			   uint64_t n, uint64_t *out);
void *cache_alloc_aligned(size_t len);
int cache_obj_verify_locked(struct cache_obj *o, bool repair,
			    uint64_t *bad);

/* ---- fill.c: fills and their completion --------------------------------- */

/* A fill of the caller's own write (ownwrite.c): as cache_fill_ref, but
 * dropped (-EAGAIN) rather than waited for when the disk is behind. */
int cache_fill_own(struct cache_obj *o, void *buf, size_t len, uint64_t off,
		   void (*release)(void *), void *arg);

/* ---- ownwrite.c: the caller's own writes -------------------------------- */

/* Its calls are public (cache.h): cache_write, cache_write_ref,
 * cache_drop_range. Own writes of one object are ordered by
 * o->write_lock. */

/* ---- account.c: LRU, bytes used and reserved, free space ---------------- */

void cache_lru_touch_locked(struct cache *c, struct cache_obj *o);
void cache_lru_unlink_locked(struct cache *c, struct cache_obj *o);
void cache_lru_append_locked(struct cache *c, struct cache_obj *o);
void cache_account_locked(struct cache *c, struct cache_obj *o,
			  uint64_t alloc);
/* o's allocated bytes (data + meta, from fstat) counted again; o->lock
 * held. */
void cache_obj_update_alloc(struct cache_obj *o);
void cache_unreserve(struct cache *c, uint64_t bytes);
unsigned cache_free_pct(struct cache *c);
unsigned cache_free_pct_after(struct cache *c, uint64_t extra);

/* ---- cull.c: culling ---------------------------------------------------- */

int cache_reserve(struct cache *c, struct cache_obj *self, uint64_t bytes);
int cache_cull_start(struct cache *c);
void cache_cull_stop(struct cache *c);

/* ---- scan.c: rebuilding the registry at open ---------------------------- */

int cache_scan(struct cache *c, char *err, size_t errlen);

/* ---- stats.c ------------------------------------------------------------ */

#define STAT_ADD(c, field, n) \
	__atomic_fetch_add(&(c)->stats.field, (n), __ATOMIC_RELAXED)
void cache_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- dir.c: the cache itself -------------------------------------------- */

struct cache {
#ifdef CACHEGW_LOCK_CHECKS
	uint64_t refs_taken[CACHE_REF_NWHY];	/* c->lock */
#endif
	char *dir;
	int dirfd;
	int lockfd;			/* -1 in INSPECT mode */
	enum cache_open_mode mode;
	enum cache_write_mode write_mode;
	uint32_t block_size;		/* bytes */
	uint64_t max_bytes;		/* 0 = no cap */
	unsigned brun, bcull, bstop;	/* percent free */

	/* Updated with __atomic builtins; read by cache_get_stats. */
	struct cache_stats stats;

	/* Fault injection (io.c): __atomic. */
	unsigned inject_ops;		/* CACHE_INJECT_* mask */
	int inject_err;			/* positive errno */
	int inject_count;		/* <0 forever */
	unsigned inject_slow_ms;	/* each fill completion held this
					 * long: a slow cache disk (set at
					 * open) */

	/* Downgrades learnt at run time: __atomic, log once. */
	int no_direct;			/* O_DIRECT refused by the fs */
	int no_dontcache;		/* RWF_DONTCACHE refused */
	int no_punch;			/* FALLOC_FL_PUNCH_HOLE refused: zero
					 * blocks are written as data */
	/* Tests (white box): free space in percent to pretend, -1 = real. */
	int fake_free_pct;

	/* Registry and accounting: guarded by lock. */
	pthread_mutex_t lock;
	struct cache_obj **htab;	/* hash -> object chains */
	size_t hsize;			/* buckets, power of two */
	size_t nobj;			/* objects in htab */
	struct cache_obj *lru_head, *lru_tail;
	uint64_t used;			/* allocated bytes of objects */
	uint64_t overhead;		/* dirs, cache.conf, lock file */
	uint64_t reserved;		/* bytes of fills in flight */

	/* io_uring: ring submission guarded by sq_lock; inflight by
	 * io_lock (waited on by cache_drain and full-ring submitters). */
	struct io_uring ring;
	bool ring_up;
	pthread_mutex_t sq_lock;
	pthread_mutex_t io_lock;
	pthread_cond_t io_cond;
	unsigned depth;
	unsigned inflight;		/* guarded by io_lock */
	uint64_t inflight_bytes;	/* bytes of those fills, io_lock */
	struct cache_req *ring_reqs;	/* submitted, CQE not reaped: sq_lock */
	int ring_dead;			/* -errno once the completion loop
					 * gave up: fills are then written
					 * synchronously. Set under sq_lock,
					 * read __atomic. */
	bool ring_stop;			/* cache_io_stop: __atomic */
	pthread_t cq_thread;
	/* The submitter thread enters the ring for every fill: io_uring
	 * runs a blocking write in an io-wq worker of the task that
	 * submitted it, so one submitter keeps one pool of at most
	 * CACHE_URING_WORKERS (the FUSE threads each had their own). */
	pthread_mutex_t sub_lock;
	pthread_cond_t sub_cond;
	struct cache_req *sub_head, *sub_tail;	/* sub_lock */
	bool sub_stop;			/* sub_lock */
	bool sub_up;
	pthread_t sub_thread;

	/* Background culling for free space: guarded by cull_lock. */
	pthread_mutex_t cull_lock;
	pthread_cond_t cull_cond;
	bool cull_stop;
	bool cull_up;
	pthread_t cull_thread;
};

/* "cache_dir DIR: NAME is a symbolic link; ...: remove it" (an open
 * with O_NOFOLLOW failed with ELOOP). */
void cache_link_err(char *err, size_t errlen, const char *dir,
		    const char *name);

/* Not opened for inspection only: objects may be created and changed. */
static inline bool cache_writable(const struct cache *c)
{
	return c->mode != CACHE_OPEN_INSPECT;
}

#endif
