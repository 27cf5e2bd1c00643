/* cache.h - cachegw's persistent object cache (public API of cache/).
 *
 * cache/ knows neither FUSE nor NFS. It stores objects under opaque keys,
 * each with an opaque coherency blob, as fscache does for its network
 * filesystems. Every present block carries an XXH3-64 checksum, verified on
 * every read; a mismatch drops the block and is reported as a miss, never
 * returned as data.
 *
 * All functions return 0 (or a byte count) on success and -errno on failure.
 * Thread-safety: every function may be called from any thread, concurrently.
 */
#ifndef CACHEGW_CACHE_H
#define CACHEGW_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define CACHE_FORMAT_VERSION 2	/* 2: a checksum per 4 KiB sector */
#define CACHE_KEY_MAX 128	/* bytes of an object key */
#define CACHE_COH_MAX 64	/* bytes of a coherency blob */
/* The largest file size an object takes (1 TiB): an object's presence
 * bitmap lives in memory, a bit per block (32 MiB at this size with 4 KiB
 * blocks), and a shrink walks the words of it. A file past it is not
 * cached: cache_obj_get answers -EFBIG (the gateway reads it from the
 * origin), and an object whose file grows past it drops its data and is
 * removed at its last reference. Sizes come from the origin (or whoever
 * answers for it), so nothing here trusts one past this. */
#define CACHE_OBJ_SIZE_MAX (1ull << 40)
#define CACHE_BLOCK_MIN (4u << 10)
#define CACHE_BLOCK_MAX (4u << 20)
#define CACHE_BLOCK_DEFAULT (64u << 10)
/* Free space thresholds in percent when cache_opts gives none (all 0):
 * cachefilesd's defaults. */
#define CACHE_BRUN_DEFAULT 10
#define CACHE_BCULL_DEFAULT 7
#define CACHE_BSTOP_DEFAULT 3

struct cache;		/* one cache directory, opened */
struct cache_obj;	/* one object, opened (reference counted) */

enum cache_write_mode {
	CACHE_WRITE_DIRECT = 0,	/* O_DIRECT, aligned buffers (default) */
	CACHE_WRITE_DONTCACHE,	/* pwritev2(RWF_DONTCACHE) */
	CACHE_WRITE_BUFFERED,	/* plain buffered writes */
	CACHE_WRITE_FADVISE,	/* buffered + POSIX_FADV_DONTNEED after write */
};

enum cache_open_mode {
	CACHE_OPEN_OWNER = 0,	/* a gateway: exclusive lock, creates the dir */
	CACHE_OPEN_INSPECT,	/* read-only look; works while a gateway runs */
	CACHE_OPEN_MODIFY,	/* offline repair/evict; fails -EBUSY if held */
};

struct cache_opts {
	const char *dir;		/* cache directory (required) */
	enum cache_open_mode mode;
	uint32_t block_size;		/* bytes, power of two; 0 = default.
					 * Only used when creating a cache; an
					 * existing cache keeps its own. */
	enum cache_write_mode write_mode;
	uint64_t max_bytes;		/* cache_size=, allocated bytes; 0 = none */
	unsigned brun, bcull, bstop;	/* percent free on the cache fs; all
					 * 0: the CACHE_B*_DEFAULTs */
	unsigned uring_depth;		/* io_uring queue depth; 0 = default */
};

struct cache_stats {
	uint64_t hit_bytes;		/* served from the cache */
	uint64_t miss_bytes;		/* asked for, not present */
	uint64_t fill_bytes;		/* written into the cache */
	uint64_t corrupt_blocks;	/* checksum mismatches found */
	uint64_t used_bytes;		/* allocated bytes of all objects */
	uint64_t objects;		/* objects in the cache */
	uint64_t culled_objects;	/* objects dropped by culling */
	uint64_t errors;		/* I/O errors that dropped an object */
	uint64_t fills_skipped;		/* fills refused (bstop/cache full) */
	/* Added after the first draft: */
	uint64_t corrupt_objects;	/* objects dropped for bad metadata;
					 * each also counts 1 corrupt_block */
	uint64_t reads;			/* cache_read calls */
	uint64_t fills;			/* cache_fill calls queued */
	uint64_t csum_loads;		/* cache_read preads of stored
					 * checksums (checksum cache misses) */
	uint64_t writes_skipped;	/* cache_write calls not taken: the
					 * disk was behind (blocks dropped) */
	uint64_t writes_skipped_bytes;
	uint64_t fills_behind;		/* cache_fill_ref_nowait calls not
					 * taken: the disk was behind */
	uint64_t fills_behind_bytes;
};

/* Open (OWNER: create if missing) the cache at opts->dir. On failure a
 * one-line reason is written to err. OWNER takes an exclusive lock; a
 * second owner gets -EBUSY. A cache of another format version: -EPROTO.
 * A directory that is not empty and not a cache: -ENOTEMPTY. */
int cache_open(const struct cache_opts *opts, struct cache **out,
	       char *err, size_t errlen);
void cache_close(struct cache *c);

uint32_t cache_block_size(const struct cache *c);
const char *cache_dir(const struct cache *c);
void cache_get_stats(struct cache *c, struct cache_stats *st);

/* Look up or create the object for key. coh is the caller's current
 * coherency blob; if the stored one differs, the object's data is dropped
 * and coh stored. size is the origin's current size (bounds the blocks).
 * Returns a reference in *out; drop it with cache_obj_put(). With
 * cache_size set, a new object's files need room: -ENOSPC when none can be
 * made now (every object referenced, or the cap taken by fills still in
 * flight); the caller goes on uncached, as for any cache error. */
int cache_obj_get(struct cache *c, const void *key, size_t keylen,
		  const void *coh, size_t cohlen, uint64_t size,
		  struct cache_obj **out);
void cache_obj_put(struct cache_obj *o);
/* One more reference to o, for a caller that already holds one (its own,
 * or one kept with a pointer it reads under its lock, taken while holding
 * that lock): an object whose last reference is dropped may be closed or
 * culled (freed) at once, so a pointer without a reference of its own is
 * not safe to use. Returns o (NULL for NULL); drop it with cache_obj_put().
 * Cheap: the cache's registry lock only. */
struct cache_obj *cache_obj_grab(struct cache_obj *o);

/* Compare coh with the stored blob; on change drop all data, store coh and
 * the new size. Returns 1 if the object was invalidated, 0 if unchanged. */
int cache_obj_check(struct cache_obj *o, const void *coh, size_t cohlen,
		    uint64_t size);
/* Drop every block of the object, keep its identity. */
void cache_obj_invalidate(struct cache_obj *o);

/* Read [off, off+len) from the cache. Every block it touches must be present
 * and pass its checksum; a block that fails is dropped (counted in
 * corrupt_blocks, one log line). Returns the bytes read (len clipped at the
 * object size), or -ENODATA if any touched block is absent or was dropped,
 * or another -errno on an I/O error (the object is then dropped).
 * Whole blocks read into a 4 KiB-aligned buf need no bounce copy. */
ssize_t cache_read(struct cache_obj *o, void *buf, size_t len, uint64_t off);

/* Are all blocks [off, off+len) touches marked present (not verified:
 * a hint to skip fetching them)? len 0 means to the end of the object. */
bool cache_present(struct cache_obj *o, uint64_t off, size_t len);

/* Offset of the first block at or after off's block, before end, that is
 * absent (cache_next_absent) or present (cache_next_present); end if
 * none. Blocks past the object's size count as absent. Hints, as above. */
uint64_t cache_next_absent(struct cache_obj *o, uint64_t off, uint64_t end);
uint64_t cache_next_present(struct cache_obj *o, uint64_t off, uint64_t end);

/* Store data for [off, off+len): off is block-aligned; len is a multiple of
 * the block size or reaches the object's size. buf is copied; the write goes
 * through io_uring and the blocks become present only after the data write
 * completed. Blocks that are all zeros are not written: they become holes
 * in the data file (punched, if they held data) and take no space. Returns
 * 0 when queued, -ENOSPC when filling is stopped (bstop or cache_size),
 * other -errno on failure. The caller never waits for it, except after the
 * ring failed (an error from its completion wait: logged once), when fills
 * are written synchronously. */
int cache_fill(struct cache_obj *o, const void *buf, size_t len, uint64_t off);

/* cache_fill without the copy: the cache writes buf itself. buf must be
 * aligned to CACHE_BUF_ALIGN with room for len rounded up to it (the cache
 * zeroes the bytes from len to there, never the caller's own bytes even
 * when it writes fewer because the object is shorter), and must not
 * change until release(arg) is
 * called. release is called exactly once, in every case (perhaps before
 * this returns, perhaps on another thread). Returns as cache_fill. */
#define CACHE_BUF_ALIGN 4096u
int cache_fill_ref(struct cache_obj *o, void *buf, size_t len, uint64_t off,
		   void (*release)(void *), void *arg);

/* Wait for every queued fill of the cache to complete (tests, shutdown). */
void cache_drain(struct cache *c);

/* ---- Additions: coherency update, inspection, culling, fault injection -- */

/* Store a new coherency blob and size WITHOUT dropping data: for changes the
 * caller made itself (write-through). Blocks beyond the new size and the old
 * last partial block are dropped. 0 or -errno. */
int cache_obj_set_coh(struct cache_obj *o, const void *coh, size_t cohlen,
		      uint64_t size);
/* Drop the blocks that [off, off+len) touches (cache_writes=around). */
int cache_drop_range(struct cache_obj *o, uint64_t off, size_t len);
/* cache_fill_ref, but never waiting for the disk: when the cache's
 * writes in flight are at their limit (CACHE_INFLIGHT_BYTES_MAX, or the
 * ring's depth) nothing is taken, release(arg) is called and -EAGAIN
 * returned (counted in fills_behind): for a reader that must not be held
 * to the cache disk's pace (fill_behind=skip). */
int cache_fill_ref_nowait(struct cache_obj *o, void *buf, size_t len,
			  uint64_t off, void (*release)(void *), void *arg);
/* Write-through of the caller's own write, any offset and length: whole
 * blocks are filled as by cache_fill; a partial block at either edge is
 * merged with its verified cached copy, or dropped when there is none.
 * Call after cache_obj_set_coh() with the new size. 0 when queued (the
 * same asynchronous contract as cache_fill), -errno otherwise (the caller
 * should then cache_drop_range()). Never waits for the disk: when fills
 * in flight are at their limit it takes nothing and returns -EAGAIN
 * (counted in writes_skipped), so a writer is never slowed to the cache
 * disk's speed - the bytes are at the origin already. */
int cache_write(struct cache_obj *o, const void *buf, size_t len,
		uint64_t off);
/* cache_write without the copy, as cache_fill_ref is to cache_fill: a
 * write of whole blocks (off block-aligned, len a multiple of the block
 * size or reaching the object's end) is written from buf itself, under
 * cache_fill_ref's contract for buf; any other is copied as by cache_write
 * before this returns. release(arg) is called exactly once, in every case.
 * Returns as cache_write. */
int cache_write_ref(struct cache_obj *o, void *buf, size_t len, uint64_t off,
		    void (*release)(void *), void *arg);

/* Objects are named by the hex of the XXH3-64 of their key: 16 characters.
 * Files: objects/<name[0..1]>/<name> (data), <name>.meta (metadata). */
#define CACHE_NAME_LEN 16
int cache_obj_name(const void *key, size_t keylen, char *name,
		   size_t namelen);
const char *cache_obj_get_name(const struct cache_obj *o);

struct cache_obj_info {
	char name[CACHE_NAME_LEN + 1];
	int damaged;			/* metadata unreadable: other fields 0 */
	uint8_t key[CACHE_KEY_MAX];
	size_t keylen;
	uint8_t coh[CACHE_COH_MAX];
	size_t cohlen;
	uint64_t size;			/* logical object size */
	uint32_t block_size;
	uint64_t blocks_total;		/* blocks of size */
	uint64_t blocks_present;	/* per the presence bitmap */
	uint64_t cached_bytes;		/* logical bytes of present blocks */
	uint64_t alloc_bytes;		/* allocated on disk, data + meta */
	uint64_t last_use_ns;		/* CLOCK_REALTIME ns, 0 if unknown */
	int open_refs;			/* references in this process */
};

/* Call fn for every object, read from disk, in no particular order. A
 * non-zero return of fn stops the walk and is returned. Any mode. */
int cache_iterate(struct cache *c,
		  int (*fn)(const struct cache_obj_info *info, void *arg),
		  void *arg);
/* One object by name (-ENOENT if none). Any mode. */
int cache_obj_info(struct cache *c, const char *name,
		   struct cache_obj_info *info);
/* Verify every present block of one object (name) or of all (name NULL).
 * *bad gets the damaged blocks (an object with damaged metadata counts 1).
 * repair: drop them (and remove objects whose metadata is damaged); needs
 * OWNER or MODIFY mode, else -EROFS. 0 or -errno. */
int cache_verify(struct cache *c, const char *name, int repair,
		 uint64_t *bad);
/* Evict one object (name) or every object (name NULL): files removed, or,
 * for an object referenced in this process, its data dropped. Needs OWNER
 * or MODIFY mode (-EROFS). 0, -ENOENT, or -errno. */
int cache_evict(struct cache *c, const char *name);

/* Fault injection in front of every backing-store call (kernel
 * cachefiles_inject_write_error() style). The next count calls of the kinds
 * in ops (count < 0: every call; 0: off) fail with -err instead of reaching
 * the disk. The environment variables CACHEGW_INJECT_WRITE_ERROR and
 * CACHEGW_INJECT_READ_ERROR=ERRNO[:COUNT] (ERRNO a number or a name such as
 * EIO, ENOSPC) set the same at cache_open. */
enum {
	CACHE_INJECT_READ = 1,		/* data and metadata reads */
	CACHE_INJECT_WRITE = 2,		/* data/metadata writes, truncates */
	CACHE_INJECT_RING_WAIT = 4,	/* the fill ring's completion wait:
					 * the next CQE is reported as this
					 * error instead (EINTR/EAGAIN are
					 * retried, others fail the ring) */
	CACHE_INJECT_RING_SUBMIT = 8,	/* the fill ring's io_uring_submit */
};
void cache_inject_error(struct cache *c, unsigned ops, int err, int count);

/* ---- the control socket's address (dir.c) ----
 * A live gateway serves DIR/control.sock. sockaddr_un holds 107 bytes of
 * path: for a longer cache_dir, *dirfd receives an O_PATH descriptor of
 * DIR and the address goes through /proc/self/fd/N/; close it after
 * bind() or connect() (it is -1 otherwise). */
#define CACHE_CTL_NAME "control.sock"
struct sockaddr_un;
int cache_ctl_sockaddr(const char *dir, struct sockaddr_un *sa, int *dirfd);

#endif
