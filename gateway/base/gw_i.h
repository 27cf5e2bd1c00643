/* gw_i.h - the request path (gateway/): the only layer that knows FUSE.
 * It is rooms by job, each a folder behind one sectioned header that is its
 * whole interface; this one is the base they all stand on (gateway/base/):
 * struct gw, the inode, and what every room uses. The process around the
 * request path (daemon/) sees only ../gateway.h (the options, struct gw
 * as an opaque handle, what starts, stops and counts it), which this
 * header includes; gateway/ never includes daemon/'s headers (test 52).
 *
 * The rooms, from the top down. A room's files include the headers of
 * the rooms below it that they use, never one above (test 52):
 *   handover/ handover_i.h open files handed over and adopted
 *   ops/      ops_i.h      the FUSE operations
 *   lock/     lock_i.h     locks taken at the origin (NLM)
 *   write/    write_i.h    the write path
 *   read/     read_i.h     the read path and the cache object
 *   cred/     cred_i.h     credentials and ACCESS
 *   inode/    inode_i.h    the inode table, handle keys, reclaim
 *   keep/     keep_i.h     what outlives a restart or a takeover
 *   base/     gw_i.h       (this file)
 * On top, ../start.c ties them together at start.
 *
 * logging.c: one-line log messages (stderr in the foreground, syslog as a
 *            daemon, or logfile=).
 * buf.c:     shared data buffers.
 * hist.c:    latency histograms for the metrics.
 * bdi.c:     the mount as the kernel sees it (mountinfo, readahead, dirty
 *            limits).
 * attr.c:    what the origin's attributes say: how long they hold, the
 *            struct stat the kernel is given.
 * The process (daemon/daemon.h): main, options, signals and the stop,
 * the control socket, the metrics endpoint.
 *
 * Lock order: a lock on a line may be taken while holding one on an
 * earlier line, never the other way round. Each _locked function says which
 * lock it expects with GW_ASSERT_HELD (common/lockcheck.h); a function
 * that takes ino->lock or ino->coh_lock itself asserts the caller does not
 * hold it (GW_ASSERT_NOT_HELD), which would deadlock.
 *   0. The lock room's reclaim_rw (lock/lock_reclaim.c), a rwlock that
 *      prefers its writer: the read side held across one LOCK or UNLOCK
 *      at the origin (a lock or unlock call, the release's unlock), the
 *      write side across a whole reclaim pass; taken with no other
 *      gateway lock held, and nothing that waits for another request
 *      (a RELEASE in progress) is waited for under it. Under it: the
 *      lock room's leaves (line 3).
 *   1. gw->it.lock (the inode table). Held across nodes_* calls
 *      (the node-id table's own lock) and nodes_md_get (a new inode's
 *      kept metadata, kept_md.c), never while taking an ino->lock.
 *   1b. ino->coh_lock (cobj.c): taken with no other gateway lock held,
 *      across cache_obj_set_coh and the own write's cache_write_ref
 *      (the cache's locks only).
 *   1c. gw->owed_lock (write_commit.c: COMMITs a successor owes); the
 *      owed thread claims an inode's commit round under it.
 *   2. ino->lock. Held across cache_present(), cache_obj_grab() and the
 *      other quick cache calls (the cache's o->lock, then c->lock, then
 *      c->sq_lock: cache/cache_i.h); waits on ino->fetch_cond. Never held
 *      while waiting for the origin: READ callbacks (chunk_done) take it
 *      on a connection thread.
 *   3. gw->fill_lock, gw->win_lock, buf.c's pool lock, a write batch's
 *      waiter (nfsc_waiter, write.c), the hidden-name table's lock (silly.c; held
 *      across its file's write, never across an origin call), the
 *      open-handle list's lock (handles.c), the user database's groups
 *      (groups.c; never held across NSS), the lock owners' table and the
 *      lock waiters' list, the NSM state's nsm_lock and the reclaim
 *      thread's rlock (lock/: never held across an origin call nor
 *      fuse_req_interrupt_func), the directory snapshots' snap_lock
 *      (ops/listing.c; its waiters wait on snap_cond for a loader that
 *      holds no gateway lock): leaves, nothing is taken while holding
 *      them, but for walk_lock (ops/walkahead.c), which is held across
 *      gw_listing_with and so is taken before snap_lock, never after.
 *   nfsclient/ runs every callback with none of its locks held, and cache/
 *   calls a fill's release (gw_buf_release_cb) with none of its own held,
 *   so neither layer's locks ever nest outside a gateway lock.
 * Fields are annotated with the lock that guards them; "atomic": __atomic
 * builtins only; "set at start": written before the session loop starts
 * (or after it ended), read-only while requests run.
 */
#ifndef CACHEGW_GW_I_H
#define CACHEGW_GW_I_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>

#include "gateway.h"	/* first: it sets FUSE_USE_VERSION */
#include "lathist.h"
#include "lockcheck.h"
#include "nfsc.h"
#include "nodes.h"

struct cache;
struct gw;
struct gw_fetch;
struct gw_inode;
struct gw_locks;
struct gw_owed;
struct gw_reclaim;
struct gw_silly_tab;
struct cache_obj;
struct nodes;
struct nodes_md;

/* ---- the gateway: what its fields hold (the process holds it opaque:
 * gateway.h; start.c makes it) ---- */

/* A latency histogram (hist.c; atomic; common/lathist.h). */
struct gw_hist {
	struct lat_hist h;
};

/* ---- handlekey.c: what cache_dir/handle-key says ---- */
#define GW_HANDLE_KEY_LEN 16
/* What cache_dir/handle-key says: the generation rule of each node-id. */
struct gw_handle_key {
	uint8_t key[GW_HANDLE_KEY_LEN];	/* node-ids from cutover on:
					 * gw_handle_gen under it */
	uint64_t cutover;
	uint64_t old_seed;		/* [old_cutover, cutover): XXH3-64
					 * seeded with it (older files) */
	uint64_t old_cutover;		/* below: the table's generation */
};

/* ---- inode.c: the inode table (inode/inode_i.h: its calls) ---- */
struct gw_itable {
	pthread_mutex_t lock;		/* "the itable lock" */
	struct gw_inode **by_id;	/* buckets, lock */
	struct gw_inode **by_fh;	/* buckets, lock */
	size_t nbuckets;		/* power of two, lock */
	size_t count;			/* inodes in the table, lock */
	struct gw_inode *root;		/* set at start, never freed */
	/* What the rooms above the inodes hang on one (its fetches, its
	 * uncommitted extents), let go before it is freed: start.c's,
	 * set at start; NULL until then (nothing hangs on the root). */
	void (*evict)(struct gw *gw, struct gw_inode *ino);
};

struct gw {
	struct gw_opts *o;		/* set at start */
	struct nfsc *nfs;		/* set at start; thread-safe */
	struct cache *cache;		/* set at start (NULL: no cache);
					 * thread-safe */
	struct nodes *nodes;	/* persistent node-id table; set at
					 * start; thread-safe */
	struct fleet *fleet;		/* fleet=: where node-ids come from
					 * (NULL: the table makes them); set
					 * at start; thread-safe */
	uint32_t generation;		/* the node-id table's generation:
					 * node-ids below hkey.old_cutover
					 * keep it; set at start */
	struct gw_handle_key hkey;	/* the other node-ids' generations
					 * (handlekey.c); set at start */
	int readahead_set;		/* kernel readahead raised (atomic) */
	struct fuse_session *se;	/* set at start */
	bool successor;			/* serves a connection another process
					 * made (gw_state.h): node-ids the
					 * kernel holds are adopted on first
					 * use; set at start */
	bool handing_over;		/* the loop ended for a takeover:
					 * handles are freed, not released
					 * (gw_handover_freeze); main thread
					 * only */
	struct gw_itable it;		/* its own lock */
	struct gw_reclaim *reclaim;	/* reclaim.c; set at start */
	struct nodes_md *md;		/* kept_md.c: kept metadata; set at
					 * start (NULL: none); thread-safe */
	uint64_t md_epoch;		/* start (CLOCK_REALTIME ns, gw_new):
					 * only what was kept before is
					 * used; set at start */
	uint64_t md_restored_attrs;	/* new inodes given kept attributes
					 * (atomic) */
	uint64_t md_restored_access;	/* and kept ACCESS answers (atomic) */
	uint64_t known_absent;		/* LOOKUPs answered ENOENT from a
					 * directory known whole (dirknown.c) */
	uint64_t md_kept_lookups;	/* LOOKUPs answered from kept names
					 * (atomic) */
	uint64_t md_kept_listings;	/* opendirs listed from what was kept
					 * (atomic) */
	uint64_t walk_ahead_listings;	/* listings read ahead of a walk
					 * (walkahead.c; atomic) */
	uint64_t walk_ahead_used;	/* opendirs answered by one (atomic) */
	uint64_t walk_ahead_stale;	/* of them found of another version
					 * by the open (atomic) */
	uint64_t fill_queue_skipped;	/* fill_behind=skip: fetches not
					 * queued for the cache (atomic) */
	uint64_t fill_queue_skipped_bytes;	/* atomic */
	uint64_t offline_answers;	/* answers from what is held while the
					 * origin is lost (atomic) */
	pthread_mutex_t fs_lock;	/* offline.c: the last FSSTAT */
	bool fs_known;			/* fs_lock */
	struct nfsc_fsstat fs_last;	/* fs_lock */
	struct timespec fs_at;		/* fs_lock: when fs_last was asked
					 * for (CLOCK_MONOTONIC) */
	uint64_t getattr_joined;	/* GETATTRs not sent: the request took
					 * the answer of one in flight
					 * (atomic) */
	uint64_t cto_joined;		/* opens that sent no GETATTR: the
					 * kernel's GETATTR or LOOKUP for them
					 * had the origin's attributes
					 * (gw_inode_take_fresh; atomic) */
	uint64_t fetch_bytes;		/* bytes held by fetches (atomic) */
	uint64_t fetches;		/* fetches alive (atomic) */
	/* fill thread (fill_thread.c) */
	pthread_mutex_t fill_lock;
	pthread_cond_t fill_cond;	/* with fill_lock: queue or stop */
	struct gw_fetch *fill_head, *fill_tail;	/* fill_lock */
	bool fill_stop;				/* fill_lock */
	pthread_t fill_thread;			/* main thread only */
	uint64_t fill_queued_bytes;		/* atomic */
	uint64_t fills_pending;			/* atomic: fetches whose fill is
						 * decided and not yet handed to
						 * the cache; counted before
						 * the fetch is published done,
						 * so a reader that saw its
						 * data also sees it (drain) */
	uint64_t readahead_throttled;		/* atomic */
	uint64_t readahead_bytes;		/* atomic: fetched ahead of a
						 * sequential reader */
	uint64_t kernel_cache_drops;		/* atomic: opens without
						 * keep_cache after an earlier
						 * open, and invalidations */
	/* write window */
	pthread_mutex_t win_lock;
	pthread_cond_t win_cond;	/* with win_lock: room in the window */
	uint64_t win_used;		/* bytes of WRITE in flight, win_lock */
	uint64_t win_waits;		/* writers that waited, win_lock */
	uint64_t win_wait_ns;		/* and how long, in all, win_lock */
	uint64_t win_used_max;		/* high-water mark of win_used, win_lock */
	unsigned win_writes;		/* FUSE WRITEs holding room now, win_lock */
	unsigned win_writes_max;	/* and their high-water mark, win_lock */
	uint64_t writepage_writes;	/* WRITEs of the kernel's dirty pages
					 * (writeback, mmap) (atomic) */
	uint64_t write_spliced;		/* WRITEs whose bytes came through a
					 * pipe (splice): copied once (atomic) */
	uint64_t writepage_errors;	/* of them, refused by the origin:
					 * the error kept for the next flush
					 * or fsync (atomic) */
	int dirty_limits_set;		/* bdi dirty limits raised (atomic) */
	uint64_t resends;		/* extents resent after a verifier
					 * change (atomic) */
	uint64_t wcc_foreign;		/* WRITEs whose pre-op attributes
					 * showed someone else's change
					 * (atomic) */
	struct gw_silly_tab *silly;	/* hidden names (silly.c), set at
					 * start */
	/* latencies, recorded where the reads happen */
	struct gw_hist origin_read_lat;	/* each origin READ of a fetch */
	struct gw_hist cache_read_lat;	/* each cache_read that hit */
	uint64_t exit_commit_errors;	/* COMMITs failed at exit (atomic) */
	/* COMMITs owed after a crash (write_commit.c) */
	pthread_mutex_t owed_lock;	/* before ino->lock (lock order 1c) */
	struct gw_owed *owed;		/* set at start; entries owed_lock */
	struct gw_locks *locks;		/* lock/: the owners of locks taken
					 * at the origin and their waiters;
					 * set at start, its own locks */
	size_t nowed;			/* set at start */
	size_t owed_left, owed_lost;	/* owed_lock */
	pthread_t owed_thread;		/* main thread only */
	bool owed_started;		/* main thread only */
};

/* ---- bdi.c: the mount as the kernel sees it ---- */
/* Raise the mount's read_ahead_kb to readahead= (at the first open). */
void gw_set_kernel_readahead(const struct gw_opts *o);
/* /sys/class/bdi/MAJ:MIN of our mount into path; false if not found. */
bool gw_bdi_dir(const struct gw_opts *o, char *path, size_t len);

/* ---- buf.c: shared, page-aligned data buffers (gateway.h: the count
 * and trim the process asks for) ----
 * gw_buf_get gives a buffer of at least len bytes (gw_buf_capacity) with
 * one reference, aligned for O_DIRECT; gw_buf_put drops one, and the last
 * recycles it. NULL on failure. */
char *gw_buf_get(size_t len);
size_t gw_buf_capacity(const char *data);
void gw_buf_ref(char *data);
void gw_buf_put(char *data);
void gw_buf_release_cb(void *data);	/* gw_buf_put as a callback */

/* ---- logging.c: gw_log and the rest are gateway.h's ---- */

/* ---- inode.c ---- */

#define GW_ACCESS_SLOTS 4
struct gw_access {
	bool valid;
	uint32_t uid, gid;
	uint64_t groups;		/* hash of the supplementary groups */
	uint32_t asked, granted;	/* ACCESS3 bits */
	double at;			/* CLOCK_MONOTONIC seconds */
	bool stamped;			/* the file's attributes were known: */
	struct timespec ctime;		/* the answer holds only while the */
	uint32_t mode, fuid, fgid;	/* inode's still show these */
};

struct gw_extent;
struct gw_dirknown;

struct gw_inode {
	uint64_t nodeid;		/* FUSE node-id, never reused; const */
	uint64_t parent;		/* node-id of the directory it was
					 * found in (for ".."), itable lock */
	struct nfsc_fh fh;		/* origin file handle; const */
	struct gw_inode *next_id;	/* hash chain by nodeid, itable lock */
	struct gw_inode *next_fh;	/* hash chain by fh, itable lock */
	uint64_t nlookup;		/* kernel references, itable lock */
	bool adopted;			/* made by a successor for a node-id
					 * the kernel had from an earlier
					 * process: nlookup is a guess, a
					 * FORGET of more ends it; itable lock */
	pthread_mutex_t coh_lock;	/* orders the cache's coherency data
					 * of own writes (cobj.c); guards
					 * coh_attr, coh_set only */
	struct nfsc_attr coh_attr;	/* the newest attributes given to the
					 * cache by an own write or change */
	bool coh_set;
	pthread_mutex_t lock;		/* ino->lock: guards every field
					 * below */
	struct nfsc_attr attr;		/* last attributes from the origin */
	struct timespec attr_at;	/* CLOCK_MONOTONIC time attr was got */
	bool attr_valid;
	bool attr_dropped;		/* attr was let go after a change:
					 * what md.log keeps is older too */
	uint64_t attr_gen;		/* bumped by every attr update */
	pid_t fresh_tid;		/* attr as the origin answered a
					 * GETATTR or LOOKUP the kernel sent
					 * for this thread (0: none), at */
	struct timespec fresh_at;	/* fresh_at (CLOCK_MONOTONIC), when */
	uint64_t fresh_gen;		/* attr_gen was fresh_gen: an open of
					 * the same thread right after takes
					 * it for its own close-to-open check
					 * (gw_inode_take_fresh) */
	struct gw_getattr *ga;		/* the GETATTR in flight that stat
					 * requests join (ops.c), or NULL */
	bool opened_before;		/* an open has seen attr (keep_cache) */
	bool entry_kept;		/* the kernel was given kept_attr by a
					 * LOOKUP answered from what a start
					 * before kept (kept_md.c) */
	struct nfsc_attr kept_attr;
	struct nfsc_attr open_attr;	/* attributes at the last open */
	struct cache_obj *obj;		/* cache object, opened lazily; holds
					 * a reference, dropped by the last
					 * release: use it outside the lock
					 * only through gw_inode_obj() */
	unsigned opens;			/* open files */
	unsigned writers;		/* of them, open for writing */
	struct gw_fetch *fetches;	/* origin fetches in flight or recent
					 * (fetch.c) */
	pthread_cond_t fetch_cond;	/* a fetch completed, a shared GETATTR
					 * was answered (ops.c) (and see
					 * writes_done, committing) */
	unsigned fills_queued;		/* fetches waiting for the fill thread */
	uint64_t wgen;			/* bumped by every answered write or
					 * truncate through the gateway */
	uint64_t writes_started;	/* FUSE writes taken in, and answered */
	uint64_t writes_done;		/* (fetch_cond is broadcast on each).
					 * While they differ the origin's
					 * attributes may already show a write
					 * not yet answered: gw_inode_writing */
	uint64_t ra_next;		/* where a sequential read goes next */
	uint64_t ra_win;		/* readahead window, bytes */
	uint64_t ra_front;		/* end of the furthest readahead */
	struct gw_extent *uncommitted;	/* written, not yet COMMITted:
					 * newest first (write.c) */
	size_t uncommitted_bytes;
	uint32_t unstable;		/* what the uncommitted list holds, */
	uint64_t unstable_verf;		/* as the writers' records say it
					 * (GW_UNSTABLE..., gw_state.h) */
	bool committing;		/* a COMMIT round is running; */
	bool resending;			/* it writes lost extents again (new
					 * writes wait). fetch_cond is
					 * broadcast when either ends */
	int write_err;			/* the last failed write-back WRITE's
					 * or COMMIT's -errno, and */
	uint64_t werr_seq;		/* how many there were: each writer
					 * reports one at its next flush or
					 * fsync if it came while it was open
					 * (gw_file.werr_seen, errseq) */
	struct gw_file *wfiles;		/* files open for writing, oldest
					 * first (gw_file.wnext) */
	unsigned opening;		/* opens past the kernel's lookup but
					 * not yet counted in opens: an
					 * unlink meanwhile hides the name
					 * instead of removing the file */
	uint64_t name_dir;		/* the directory and name a regular */
	char *name;			/* file was last found by (NULL: none
					 * yet), for gw_inode_refused_name */
	bool write_refused;		/* writeback: the origin refused a
					 * WRITE of the kernel's pages: their
					 * size and bytes are not the origin's
					 * (gw_release drops the inode) */
	bool pages_stale;		/* the kernel's pages may hold a
					 * version changed by someone else
					 * before our write (wcc): the next
					 * open drops them */
	struct gw_access access[GW_ACCESS_SLOTS];
	unsigned access_next;
	struct gw_dirknown *known;	/* a directory: every name in it,
					 * known (dirknown.c), or NULL */
	struct gw_silly *silly;		/* hidden name it was unlinked to
					 * while open (silly.c), lock */
	bool md_changed;		/* an own change was marked in md.log
					 * this run (gw_md_note_changed),
					 * atomic */
	struct gw_owed *owed;		/* a successor's COMMIT owed for what
					 * the dead process wrote
					 * (write_commit.c), gw->owed_lock */
};


/* The gateway a FUSE request came to. */
static inline struct gw *req_gw(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

/* ---- cred/caller.c: an interrupted request ----
 * gw_intr_errno: the errno an interrupted request of caller pid (FUSE's
 * pid, 0 if outside the gateway's pid namespace) answers: EINTR for a
 * process, ETIMEDOUT for a kernel thread or pid 0 (caller.c says why).
 * The request this thread serves, set (ops.c) around the operations that
 * may wait for the fleet store, so that a wait far below them
 * (fleet_ids.c) ends when the request is interrupted. gw_req_interrupted:
 * the errno its waits end with (gw_intr_errno) once it is, else 0 (also
 * outside such an operation). */
int gw_intr_errno(pid_t pid);
void gw_req_enter(fuse_req_t req);
void gw_req_leave(void);
int gw_req_interrupted(void);

/* ---- attr.c: what the origin's attributes say ---- */
/* Seconds the kernel (and we) may trust attr, from acregmin..acdirmax. */
double gw_attr_ttl(const struct gw *gw, const struct nfsc_attr *attr);
/* What is left of that for attributes got at at (CLOCK_MONOTONIC). */
double gw_attr_ttl_left(const struct gw *gw, const struct nfsc_attr *attr,
			const struct timespec *at);
/* Seconds from t (CLOCK_MONOTONIC) to now. */
double gw_elapsed_since(const struct timespec *t);
void gw_attr_to_stat(const struct nfsc_attr *a, uint64_t nodeid,
		     struct stat *st);
/* Is a a later version of the file than b (ctime, then size)? */
static inline bool gw_attr_newer(const struct nfsc_attr *a,
				 const struct nfsc_attr *b)
{
	if (a->ctime.tv_sec != b->ctime.tv_sec)
		return a->ctime.tv_sec > b->ctime.tv_sec;
	if (a->ctime.tv_nsec != b->ctime.tv_nsec)
		return a->ctime.tv_nsec > b->ctime.tv_nsec;
	return a->size > b->size;
}

/* One version of a file's contents: the same size, mtime and ctime (what
 * an open's keep_cache, a listing's sharing and a WRITE's pre-op check
 * all compare). */
static inline bool gw_version_eq(uint64_t as, const struct timespec *am,
				 const struct timespec *ac, uint64_t bs,
				 const struct timespec *bm,
				 const struct timespec *bc)
{
	return as == bs && am->tv_sec == bm->tv_sec &&
	       am->tv_nsec == bm->tv_nsec && ac->tv_sec == bc->tv_sec &&
	       ac->tv_nsec == bc->tv_nsec;
}

static inline bool gw_attr_same_version(const struct nfsc_attr *a,
					const struct nfsc_attr *b)
{
	return gw_version_eq(a->size, &a->mtime, &a->ctime, b->size,
			     &b->mtime, &b->ctime);
}
/* A write through the gateway is taken in and not yet answered.
 * ino->lock held. */
static inline bool gw_inode_writing(const struct gw_inode *ino)
{
	return ino->writes_started != ino->writes_done;
}

/* writeback: raise the FUSE bdi's dirty limits (bdi.c). */
void gw_set_kernel_dirty_limits(const struct gw_opts *o);

/* ---- hist.c: latency histograms (atomic; common/lathist.h) ---- */
/* Record the time from start_ns (gw_now_ns) to now. */
void gw_hist_record(struct gw_hist *h, uint64_t start_ns);

#endif
