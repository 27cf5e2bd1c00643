/* gw_i.h - the request path (gateway/): the only layer that knows FUSE.
 * This header is its whole interface: the process around it (daemon/)
 * includes it; gateway/ never includes daemon/'s (test 52).
 *
 * inode.c: inode table, FUSE node-id <-> origin file handle, attributes.
 * ops.c:   the operations table, INIT, credentials, LOOKUP, GETATTR,
 *          READLINK, FORGET, STATFS, interruptible operations.
 * ops_ns.c: namespace operations and setattr.
 * listing.c: directories (snapshots, readdir(plus)).
 * open.c:  files: open, release, flush, fsync, the read/write entries.
 * access.c: ACCESS checks and their cache.
 * read.c:  the read request: cache hits, waiting for fetches, replies.
 * fetch.c: fetches (origin READs of whole blocks) from start to free.
 * fill.c:  the fill thread (completed fetches into the cache).
 * readahead.c: readahead (rawindow.c: the window's policy).
 * write.c: a FUSE WRITE (write_i.h: write_window.c the window,
 *          write_send.c WRITEs as whoever may, write_commit.c COMMITs).
 * bdi.c:   the mount as the kernel sees it (mountinfo, readahead, dirty
 *          limits).
 * cobj.c:  an inode's cache object (key, coherency blob, own changes).
 * buf.c:   shared data buffers.
 * hist.c:  latency histograms for the metrics.
 * silly.c: files unlinked while open: hidden names (silly-rename).
 * handles.c: open files and directories, for those never released.
 * log.c:   logging (stderr in the foreground, syslog as a daemon).
 * groups.c: a caller's supplementary groups (/proc or the user database).
 * handlekey.c: unguessable re-export handles.
 * reclaim.c: node-ids of files gone at the origin given back.
 * remember.c: attributes and ACCESS answers kept across a restart.
 * The process (daemon/daemon.h): main, options, signals and the stop,
 * the control socket, the metrics endpoint.
 *
 * Lock order: a lock on a line may be taken while holding one on an
 * earlier line, never the other way round. Each _locked function says which
 * lock it expects with GW_ASSERT_HELD (common/lockcheck.h); a function
 * that takes ino->lock or ino->coh_lock itself asserts the caller does not
 * hold it (GW_ASSERT_NOT_HELD), which would deadlock.
 *   1. gw->it.lock (the inode table). Held across nodes_* calls
 *      (the node-id table's own lock) and nodes_md_get (a new inode's
 *      kept metadata, remember.c), never while taking an ino->lock.
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
 *      (groups.c; never held across NSS): leaves, nothing is taken
 *      while holding them.
 *   nfsclient/ runs every callback with none of its locks held, and cache/
 *   calls a fill's release (gw_buf_release_cb) with none of its own held,
 *   so neither layer's locks ever nest outside a gateway lock.
 * Fields are annotated with the lock that guards them; "atomic": __atomic
 * builtins only; "set at start": written before the session loop starts
 * (or after it ended), read-only while requests run.
 */
#ifndef CACHEGW_GW_I_H
#define CACHEGW_GW_I_H

#define FUSE_USE_VERSION 312

#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>

#include "lathist.h"
#include "lockcheck.h"
#include "nfsc.h"
#include "nodes.h"

struct cache;
struct gw;
struct cache_obj;
struct nodes;

/* ---- opts.c ---- */

struct gw_opts {
	char *source;			/* nfs:// URL */
	char *mountpoint;
	char *cache_dir;
	bool foreground;
	bool debug;
	bool allow_other;
	bool ro;
	/* nfs(5) */
	unsigned nconnect;
	uint32_t rsize, wsize;
	unsigned timeo, retrans;
	bool soft;
	unsigned acregmin, acregmax, acdirmin, acdirmax;	/* seconds */
	bool nocto;
	int supervise;			/* supervise: a crash is survived;
					 * parsed: 1, 0 (nosupervise), -1
					 * (neither: then !foreground) */
	bool writeback;			/* FUSE_CAP_WRITEBACK_CACHE */
	/* cache */
	uint64_t cache_size;		/* bytes, 0 = no cap */
	uint32_t cache_block;		/* bytes, 0 = default */
	int cache_write;		/* enum cache_write_mode */
	unsigned brun, bcull, bstop;	/* percent */
	uint64_t readahead;		/* bytes, max readahead window */
	unsigned max_threads;		/* FUSE worker threads */
	unsigned dir_max_entries;	/* entries of one listing, more: EFBIG */
	uint64_t reclaim_after;		/* node-id table entries added before
					 * a reclaim pass (0: on demand only) */
	uint64_t write_window;		/* bytes of WRITE in flight */
	uint64_t dirty_max;		/* writeback: bdi max_bytes, strict
					 * (0: the global dirty limits) */
	bool cache_writes_around;	/* drop written blocks, not update */
	bool fill_skip;			/* fill_behind=skip: fills the cache
					 * disk cannot take now are dropped */
	char *logfile;
	char *pidfile;			/* pidfile= (NULL: none) */
	unsigned drain_timeout;		/* seconds: open files after SIGTERM,
					 * then commits at exit */
	unsigned offline;		/* seconds without an answer before
					 * the origin is lost; 0: never */
	/* metrics=: where the HTTP endpoint listens (metrics_len 0: off) */
	struct sockaddr_storage metrics_addr;
	socklen_t metrics_len;
	char *mountpoint_real;		/* absolute, for the control socket */
	/* what is passed on to libfuse (mount options it understands) */
	struct fuse_args fuse_args;
};

/* Parse argv into o. Returns 0, or 1 after printing usage/version (exit 0),
 * or -1 after printing a one-line error (exit 2). */

/* ---- bdi.c: the mount as the kernel sees it ---- */
/* Raise the mount's read_ahead_kb to readahead= (at the first open). */
void gw_set_kernel_readahead(const struct gw_opts *o);
/* The device of the top mount on path (the last line of mountinfo naming
 * it) and whether it is a cachegw mount; -ENOENT: nothing mounted there. */
int gw_mount_at(const char *path, unsigned *maj, unsigned *min, bool *ours);
/* /sys/class/bdi/MAJ:MIN of our mount into path; false if not found. */
bool gw_bdi_dir(const struct gw_opts *o, char *path, size_t len);

/* ---- buf.c: shared, page-aligned data buffers ----
 * gw_buf_get gives a buffer of at least len bytes (gw_buf_capacity) with
 * one reference, aligned for O_DIRECT; gw_buf_put drops one, and the last
 * recycles it. NULL on failure. */
char *gw_buf_get(size_t len);
size_t gw_buf_capacity(const char *data);
void gw_buf_ref(char *data);
void gw_buf_put(char *data);
void gw_buf_release_cb(void *data);	/* gw_buf_put as a callback */
uint64_t gw_buf_mapped(void);		/* bytes mapped, for the metrics */
void gw_buf_trim(bool force);		/* unmap the recycled ones when idle */

/* ---- log.c ---- */
void gw_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Keep the lines said from now (afresh) until gw_log_detach, which writes
 * them to the log too: a daemon's, said on its starter's terminal. */
void gw_log_keep_early(void);
/* Route stderr to syslog (or logfile) once the daemon has detached. */
int gw_log_detach(const char *logfile);
/* stderr to logfile (appending; kept for gw_log_reopen). 0 or -errno. */
int gw_log_to_file(const char *logfile);
/* Open logfile= again (after logrotate renamed it), its name in path:
 * 0, -ENOENT when no logfile= is set, or -errno (still logging to the old
 * file). */
int gw_log_reopen(char *path, size_t len);
void gw_log_stop(void);

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
struct gw_fetch;

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
	struct gw_getattr *ga;		/* the GETATTR in flight that stat
					 * requests join (ops.c), or NULL */
	bool opened_before;		/* an open has seen attr (keep_cache) */
	bool entry_kept;		/* the kernel was given kept_attr by a
					 * LOOKUP answered from what a start
					 * before kept (remember.c) */
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
	struct gw_silly *silly;		/* hidden name it was unlinked to
					 * while open (silly.c), lock */
	bool md_changed;		/* an own change was marked in md.log
					 * this run (gw_md_note_changed),
					 * atomic */
	struct gw_owed *owed;		/* a successor's COMMIT owed for what
					 * the dead process wrote
					 * (write_commit.c), gw->owed_lock */
};

struct gw_itable {
	pthread_mutex_t lock;		/* "the itable lock" */
	struct gw_inode **by_id;	/* buckets, lock */
	struct gw_inode **by_fh;	/* buckets, lock */
	size_t nbuckets;		/* power of two, lock */
	size_t count;			/* inodes in the table, lock */
	struct gw_inode *root;		/* set at start, never freed */
};

struct gw;
int gw_itable_init(struct gw_itable *t, const struct nfsc_fh *rootfh);
void gw_itable_free(struct gw *gw);
/* The inode for a node-id the kernel holds, or NULL. */
struct gw_inode *gw_inode_find(struct gw *gw, uint64_t nodeid);
/* For a node-id a request names: gw_inode_find, or in a successor
 * (gw->successor) a node-id the kernel was given by an earlier process,
 * made from the node-id table (adopted). */
struct gw_inode *gw_inode_get(struct gw *gw, uint64_t nodeid);
/* Any node-id ever handed out, brought back from the node-id table if it
 * is not in memory; takes one kernel reference (drop it with
 * gw_inode_forget(gw, nodeid, 1) unless it goes to the kernel). NULL if
 * unknown, or if its origin handle is in memory under another node-id
 * (both: gw_inode_get's too). */
struct gw_inode *gw_inode_resolve(struct gw *gw, uint64_t nodeid);
/* The inode of an origin handle, if it is in memory, with one kernel
 * reference taken (drop it with gw_inode_forget(gw, nodeid, 1)). */
struct gw_inode *gw_inode_ref_fh(struct gw *gw, const struct nfsc_fh *fh);
/* Node-id of the directory ino was found in (the root for the root). */
uint64_t gw_inode_parent(struct gw *gw, struct gw_inode *ino);
/* The origin says the file is gone (ESTALE): retire its node-id. */
void gw_inode_gone(struct gw *gw, struct gw_inode *ino);
/* Find or create the inode for fh, take one kernel reference, and store
 * attr in it. NULL with errno set on failure: ENOMEM, or the node-id
 * table's error when it cannot record a new node-id (EIO, ENOSPC). */
struct gw_inode *gw_inode_ref(struct gw *gw, const struct nfsc_fh *fh,
			      const struct nfsc_attr *attr, uint64_t parent);
void gw_inode_forget(struct gw *gw, uint64_t nodeid, uint64_t n);
size_t gw_itable_count(struct gw *gw);
void gw_inode_set_attr(struct gw_inode *ino, const struct nfsc_attr *attr);
/* Changed through the gateway: ask the origin next time. */
void gw_inode_invalidate_attr(struct gw *gw, struct gw_inode *ino);
void gw_inode_set_attr_if_newer(struct gw_inode *ino,
				const struct nfsc_attr *attr);
/* Attributes from a reply to a call sent when the inode's attr_gen was
 * gen: kept only if nothing updated the attributes since (an origin call
 * can be answered after a WRITE that it preceded at the origin). */
uint64_t gw_inode_attr_gen(struct gw_inode *ino);
bool gw_inode_set_attr_since(struct gw_inode *ino,
			     const struct nfsc_attr *attr, uint64_t gen);
bool gw_inode_set_attr_since_locked(struct gw_inode *ino,
				    const struct nfsc_attr *attr, uint64_t gen);
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
/* Copy the cached attributes if still fresh; 0 or -ESTALE/-ENODATA. */
int gw_inode_cached_attr(struct gw *gw, struct gw_inode *ino,
			 struct nfsc_attr *out);
/* Seconds the kernel (and we) may trust attr, from acregmin..acdirmax. */
double gw_attr_ttl(const struct gw *gw, const struct nfsc_attr *attr);
void gw_attr_to_stat(const struct nfsc_attr *a, uint64_t nodeid,
		     struct stat *st);

/* ---- ops.c ---- */
extern const struct fuse_lowlevel_ops gw_oper;
void gw_req_cred(fuse_req_t req, struct nfsc_cred *cr);
void gw_make_entry(struct gw *gw, struct gw_inode *ino,
		   const struct nfsc_attr *a, struct fuse_entry_param *e);

/* ---- handles.c: every fi->fh, so that those the kernel never releases
 * (an unmount drops RELEASEs still queued) are released at exit ---- */
struct gw_handle {
	struct gw_handle *prev, *next;	/* the list's own lock */
	bool listed;			/* on the list; the list's lock */
	uint64_t id;			/* what fi->fh holds; set under the
					 * list's lock, read atomically */
	/* does what the RELEASE would have, and frees the handle */
	void (*release)(struct gw *gw, struct gw_handle *h);
};
/* List h and give it its id (h->id, for fi->fh): 0, or -ENOMEM. */
int gw_handle_add(struct gw_handle *h,
		  void (*release)(struct gw *, struct gw_handle *));
/* The handle of an id the kernel sent (fi->fh), or NULL. */
struct gw_handle *gw_handle_get(uint64_t id);
/* At exit, after gw_handles_release: the table's memory. */
void gw_handles_fini(void);
/* The open file whose id the kernel sent (NULL if none). */
#define gw_file_of(fi) ((struct gw_file *)gw_handle_get((fi)->fh))
void gw_handle_del(struct gw_handle *h);	/* NULL, or off: nothing */
/* After the session loop, with the origin still connected: release the
 * handles never released; returns how many. */
size_t gw_handles_release(struct gw *gw);
size_t gw_handles_count(void);		/* open files and directories */
/* A successor's (issue 22, takeover.h): */
/* Record h for a successor (gw_state->recs), before the open's reply. */
void gw_handle_publish(struct gw_handle *h, unsigned kind, uint64_t nodeid,
		       const struct nfsc_cred *cred, bool writer);
/* List h under the id a dead or retired process gave the kernel: 0,
 * -EEXIST, -EINVAL, -ENOMEM. Before the first request only. */
int gw_handle_adopt(struct gw_handle *h,
		    void (*release)(struct gw *, struct gw_handle *),
		    uint64_t id);
/* After the last gw_handle_adopt: the slots between free again. */
int gw_handles_adopted(void);
/* Handing over: releases from now on leave the records alone. */
void gw_handles_freeze_records(void);
/* fn on every listed handle (no request may run: a handle released
 * meanwhile would be used after its free); how many. */
size_t gw_handles_each(struct gw *gw,
		       void (*fn)(struct gw *, struct gw_handle *, void *),
		       void *arg);

struct gw_file {
	struct gw_handle h;		/* first: fi->fh's id names both */
	uint64_t nodeid;		/* of the file opened */
	struct nfsc_cred cred;		/* the opener's credentials */
	bool writer;			/* opened for writing */
	uint64_t werr_seen;		/* ino->werr_seq it has reported */
	struct gw_file *wnext;		/* in ino->wfiles, ino->lock */
	bool inval_attr;		/* the open found a new version: the
					 * kernel's attributes are stale */
};
/* Set up fi for ino (access check, close-to-open, keep_cache, cache
 * object). created: attributes from a CREATE that just made the file (no
 * checks: its creator may write it whatever its mode). */
int gw_file_open(struct gw *gw, fuse_req_t req, struct gw_inode *ino,
		 const struct nfsc_attr *created, struct fuse_file_info *fi);
/* The last of f (fi->fh's, gw_file_of): unlisted and freed. */
void gw_file_release(struct gw *gw, struct gw_inode *ino, struct gw_file *f);
struct gw_hrec;
/* Handing over: every writer's data committed, errors into the records;
 * how many writers had one. */
size_t gw_files_handover(struct gw *gw);
/* Taking over: a file or directory the kernel had from an earlier
 * process, under the same id. */
struct gw_adopted_file {
	struct gw_inode *ino;
	struct gw_file *f;
	struct nfsc_attr a;		/* gw_files_adopted_attach's */
	int ret;
	struct nfsc_waiter *w;
};
int gw_file_adopt(struct gw *gw, const struct gw_hrec *r,
		  struct gw_adopted_file *out);
/* Then, for all at once: the origin's attributes (GETATTRs in parallel),
 * the hidden name if the file had one, the cache object. A successor that
 * started without the origin asks nothing: the cache object for the
 * version the cache holds (or kept attributes), the inode's attributes
 * left unknown. */
void gw_files_adopted_attach(struct gw *gw, struct gw_adopted_file *v,
			     size_t n);
int gw_dir_adopt(struct gw *gw, const struct gw_hrec *r);

static inline struct gw *req_gw(fuse_req_t req)
{
	return fuse_req_userdata(req);
}
/* Fresh attributes: from the attribute cache unless force, else GETATTR.
 * 1 if the origin's answer shows the file's data changed (its cache
 * object was emptied), 0 if not, -errno on failure. (ops.c) */
int gw_get_attr(struct gw *gw, fuse_req_t req, struct gw_inode *ino,
		bool force, struct nfsc_attr *a);

/* ---- listing.c: directories ---- */
void gw_opendir(fuse_req_t req, fuse_ino_t nodeid, struct fuse_file_info *fi);
void gw_readdir(fuse_req_t req, fuse_ino_t nodeid, size_t size, off_t off,
		struct fuse_file_info *fi);
void gw_readdirplus(fuse_req_t req, fuse_ino_t nodeid, size_t size,
		    off_t off, struct fuse_file_info *fi);
void gw_releasedir(fuse_req_t req, fuse_ino_t nodeid,
		   struct fuse_file_info *fi);
void gw_fsyncdir(fuse_req_t req, fuse_ino_t nodeid, int datasync,
		 struct fuse_file_info *fi);

/* ---- open.c: files ---- */
void gw_open(fuse_req_t req, fuse_ino_t nodeid, struct fuse_file_info *fi);
void gw_read_op(fuse_req_t req, fuse_ino_t nodeid, size_t size, off_t off,
		struct fuse_file_info *fi);
void gw_write_buf_op(fuse_req_t req, fuse_ino_t nodeid,
		     struct fuse_bufvec *bufv, off_t off,
		     struct fuse_file_info *fi);
void gw_flush(fuse_req_t req, fuse_ino_t nodeid, struct fuse_file_info *fi);
void gw_fsync(fuse_req_t req, fuse_ino_t nodeid, int datasync,
	      struct fuse_file_info *fi);
void gw_fallocate(fuse_req_t req, fuse_ino_t nodeid, int mode, off_t off,
		  off_t len, struct fuse_file_info *fi);
void gw_release(fuse_req_t req, fuse_ino_t nodeid, struct fuse_file_info *fi);

/* ---- ops_ns.c ---- */
void gw_reply_created(struct gw *gw, fuse_req_t req, struct gw_inode *parent,
		      const char *name, const struct nfsc_cred *cr,
		      struct nfsc_created *c, struct fuse_file_info *fi,
		      bool existed);
void gw_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
	      mode_t mode);
void gw_mknod(fuse_req_t req, fuse_ino_t parent, const char *name,
	      mode_t mode, dev_t rdev);
void gw_symlink(fuse_req_t req, const char *target, fuse_ino_t parent,
		const char *name);
void gw_create(fuse_req_t req, fuse_ino_t parent, const char *name,
	       mode_t mode, struct fuse_file_info *fi);
void gw_link(fuse_req_t req, fuse_ino_t nodeid, fuse_ino_t newparent,
	     const char *newname);
void gw_unlink(fuse_req_t req, fuse_ino_t parent, const char *name);
void gw_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name);
void gw_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
	       fuse_ino_t newparent, const char *newname, unsigned int flags);
void gw_setattr(fuse_req_t req, fuse_ino_t nodeid, struct stat *st,
		int to_set, struct fuse_file_info *fi);
void gw_access(fuse_req_t req, fuse_ino_t nodeid, int mask);

/* ---- access.c ---- */
/* 0 if the origin lets cr do mask (R_OK|W_OK|X_OK) to ino, else -EACCES
 * (or the origin's error). When it had to ask the origin, *fresh receives
 * the attributes that came with the answer (*has_fresh; both may be
 * NULL). */
int gw_access_check(struct gw *gw, struct gw_inode *ino,
		    const struct nfsc_cred *cr, int mask,
		    struct nfsc_attr *fresh, bool *has_fresh);
/* A LOOKUP in dir as cr was answered by the origin: keep that cr may
 * search dir, as an ACCESS answer (for lookups from kept names, also after
 * a restart), so that no ACCESS is asked for what the origin just showed. */
void gw_access_note_search(struct gw *gw, struct gw_inode *dir,
			    const struct nfsc_cred *cr);
/* Under ino->lock: an own WRITE took the file from before to after (same
 * mode and owners): the answers stamped with before hold for after. */
void gw_access_restamp(struct gw_inode *ino, const struct nfsc_attr *before,
		       const struct nfsc_attr *after);

/* A regular file ino was found as dir/name (lookup, readdirplus, create,
 * rename): remembered for gw_inode_refused_name. Other types: nothing. */
void gw_inode_note_name(struct gw_inode *ino, uint64_t dir, const char *name,
			const struct nfsc_attr *a);
/* The last close of a file whose write-back WRITEs the origin refused:
 * the name it was found by (malloc'd; *dir its directory), once, for the
 * caller to invalidate in the kernel after replying. The kernel keeps its
 * own size of a file in write-back mode and zero-fills short reads as
 * holes: its inode would go on showing the refused bytes' size (zeros) on
 * this mount. Dropping the entry evicts the inode; the next lookup brings
 * the origin's size. NULL when there is nothing to drop. */
char *gw_inode_refused_name(struct gw_inode *ino, uint64_t *dir);

/* ---- write_window.c: bytes of WRITE in flight ---- */
/* Take n bytes of the window, waiting (never failing) until they fit;
 * a request bigger than the window runs alone. Counted in win_*. */
void gw_window_get(struct gw *gw, size_t n);
void gw_window_put(struct gw *gw, size_t n);

/* ---- write.c ---- */
/* buf: a gw_buf holding the size bytes, which gw_write takes over (it is
 * kept for resending until COMMIT, and the cache writes from it).
 * writepage: the kernel flushing its page cache (fi->writepage), not a
 * write(2) waiting for the answer. */
void gw_write(struct gw *gw, fuse_req_t req, struct gw_inode *ino,
	      struct gw_file *f, char *buf, size_t size, off_t off,
	      bool writepage);
/* writeback: raise the FUSE bdi's dirty limits (bdi.c). */
void gw_set_kernel_dirty_limits(const struct gw_opts *o);
/* commit: COMMIT first. Then the write error f should see: for a writer,
 * the last write-back WRITE or COMMIT failure since its last report, once
 * (errseq); for a reader none; with no f, this COMMIT's. */
int gw_write_flush(struct gw *gw, struct gw_inode *ino, struct gw_file *f,
		   bool commit);
void gw_write_forget(struct gw_inode *ino);
/* A successor's (takeover.h): a write error the last process had for f
 * (NULL: for every writer open now), reported at its next flush/fsync. */
void gw_write_adopt_err(struct gw_inode *ino, struct gw_file *f, int err);
/* After a crash: COMMIT what the dead process had written, as cr; a
 * verifier other than want_verf (its last WRITE's; 0: unknown) means the
 * origin restarted meanwhile and may have lost it: -EIO. An error is
 * recorded for the writers (errseq). */
int gw_write_adopt_commit(struct gw *gw, struct gw_inode *ino,
			  const struct nfsc_cred *cr, uint64_t want_verf);
/* Those COMMITs, owed rather than made before serving (write_commit.c):
 * one per inode, made by a thread of their own, or by the file's next
 * flush, fsync or release if it comes first (which then waits for it:
 * no writer is told its data is stable before it is). */
struct gw_owed {
	struct gw_inode *ino;		/* gw->owed_lock; NULL once done */
	struct nfsc_cred cred;		/* one of its writers' */
	uint64_t verf;			/* the dead process's last WRITE's */
};
/* Before serving: take v (n entries, malloc'd, each inode once) and start
 * the thread. */
void gw_write_owed_start(struct gw *gw, struct gw_owed *v, size_t n);
/* After the last release, before the inodes go: join it, free v. */
void gw_write_owed_stop(struct gw *gw);
/* The credentials of the files open for writing on ino other than cr,
 * each once, oldest open first, into out; at most GW_CRED_TRIES. */
#define GW_CRED_TRIES 8
size_t gw_write_other_creds(struct gw_inode *ino, const struct nfsc_cred *cr,
			    struct nfsc_cred *out);

/* ---- read.c: the read request (its helpers: read_i.h) ---- */
/* Read for a FUSE read request; replies itself. */
void gw_read(struct gw *gw, fuse_req_t req, struct gw_inode *ino,
	     struct gw_file *f, size_t size, off_t off);

/* ---- fetch.c: fetch lifetime ---- */
/* Wait for the inode's fetches in flight and its queued fills, then drop
 * every fetch it lists (after a write, a truncate, the last release). */
void gw_inode_drop_fetch(struct gw_inode *ino);

/* ---- fill.c: the fill thread ---- */
int gw_fill_start(struct gw *gw);
/* Fill what is queued, then stop. */
void gw_fill_stop(struct gw *gw);

/* reclaim.c: node-ids of files gone at the origin. */
struct gw_reclaim;
struct gw_reclaim_result {
	uint64_t checked;		/* entries walked */
	uint64_t held;			/* of them held by the kernel: skipped */
	uint64_t reclaimed;		/* removed: the origin called them stale */
	uint64_t errors;		/* not known (no answer, other errors):
					 * kept */
	uint64_t entries;		/* live entries after the pass */
};
struct gw_reclaim_counters {
	uint64_t runs, checked, held, reclaimed, errors;
	uint64_t refusals;		/* makes refused: no room in the table */
};
int gw_reclaim_start(struct gw *gw);	/* main thread, before gw_ctl_start */
void gw_reclaim_stop(struct gw *gw);	/* ends passes; before gw_ctl_stop */
void gw_reclaim_free(struct gw *gw);	/* after gw_ctl_stop */
/* One pass now (waits for a pass in progress first). 0, -EINTR (told to
 * stop), -ENOMEM, -ENOTCONN (not started). */
int gw_reclaim_run(struct gw *gw, struct gw_reclaim_result *res);
/* An entry was added to the table: may start a pass. */
void gw_reclaim_note_add(struct gw *gw);
/* Before a CREATE, MKDIR, MKNOD or SYMLINK at the origin: 0, or -ENOSPC
 * when the node-id table could not record what it makes (counted). */
int gw_reclaim_room(struct gw *gw);
void gw_reclaim_counters(struct gw *gw, struct gw_reclaim_counters *c);

/* remember.c: attributes and ACCESS answers kept across a restart. */
struct gw_access;
/* A new inode, not yet shared: what was kept of its node-id. */
void gw_md_attach(struct gw *gw, struct gw_inode *ino);
/* An inode about to be freed: keep its attributes as last known (its
 * own writes included), aged from when they were got. */
void gw_md_keep_inode(struct gw *gw, struct gw_inode *ino);
/* An ACCESS answer just got from the origin (a copy of its slot). */
void gw_md_note_access(struct gw *gw, uint64_t nodeid,
		       const struct gw_access *s);
/* ino is changed through the gateway (a write, a setattr, a name made
 * or removed in it): what is kept of its attributes is older (written
 * once per inode and run; a successor after a crash reads it). */
void gw_md_note_changed(struct gw *gw, struct gw_inode *ino);
/* The origin called nodeid's handle stale. */
void gw_md_forget(struct gw *gw, uint64_t nodeid);
/* The origin said name in dir is child (a LOOKUP or READDIRPLUS). */
void gw_md_note_dent(struct gw *gw, struct gw_inode *dir, const char *name,
		     uint64_t child);
/* dir/name was removed or renamed through the gateway. */
void gw_md_unname(struct gw *gw, struct gw_inode *dir, const char *name);
uint64_t gw_md_now_ns(void);	/* CLOCK_REALTIME */
/* A listing just read whole from the origin (version ver): keep it. */
void gw_md_note_listing(struct gw *gw, struct gw_inode *dir,
			const struct nfsc_attr *ver,
			const struct nfsc_dirlist *l);
/* dir's listing from what a start before kept, if usable (and of version
 * ver when given): 0 and *out, or -ENOENT (ask the origin). */
int gw_md_listing(struct gw *gw, struct gw_inode *dir,
		  const struct nfsc_attr *ver, bool offline,
		  struct nfsc_dirlist *out);
/* The version of dir's kept listing, if there is one. */
bool gw_md_listing_version(struct gw *gw, struct gw_inode *dir,
			   struct nfsc_attr *ver);
/* At start, after a stop that was not clean: keep only ACCESS answers. */
void gw_md_unclean(struct gw *gw);
/* A LOOKUP answered from kept names: 0 and *e (a new kernel reference),
 * -EACCES (the caller may not search dir), -ENOENT (not kept, too old,
 * or not usable: ask the origin). offline: the origin is lost; what was
 * kept at any age and in this run serves (offline.c). gw_md_listing too. */
int gw_md_lookup(struct gw *gw, fuse_req_t req, struct gw_inode *dir,
		 const char *name, bool offline, struct fuse_entry_param *e);
/* The node-id name in dir was last known to have, at any age: 0, or
 * -ENOENT. */
int gw_md_dent_any(struct gw *gw, uint64_t dir, const char *name,
		   uint64_t *child);
/* A symbolic link's target, from READLINK (up to 96 bytes are kept). */
void gw_md_note_link(struct gw *gw, uint64_t nodeid, const char *target);
/* The target kept for nodeid: 0 and buf, or -ENOENT. */
int gw_md_link_any(struct gw *gw, uint64_t nodeid, char *buf, size_t size);
/* Kept attributes of nodeid at any age: 0, or -ENOENT. */
int gw_md_attr_any(struct gw *gw, uint64_t nodeid, struct nfsc_attr *a);
/* Is dir's listing kept whole (so a name not kept is not there)? */
bool gw_md_listed_whole(struct gw *gw, struct gw_inode *dir);
/* The kept ACCESS answer of nodeid for this credential, at any age. */
bool gw_md_access_any(struct gw *gw, uint64_t nodeid, uint32_t uid,
		      uint32_t gid, uint64_t groups, struct gw_access *out);

/* In a FUSE operation: declare var, the inode of nodeid, or answer the
 * request ESTALE and return. */
#define GW_INODE_OR_ESTALE(gw, req, nodeid, var)			\
	struct gw_inode *var = gw_inode_get(gw, nodeid);		\
	if (!var) {							\
		fuse_reply_err(req, ESTALE);				\
		return;							\
	}

/* ---- offline.c: answers while the origin is lost (offline=) ---- */
/* The origin is lost: calls that only read from it fail with -EHOSTDOWN
 * (nfsclient's origin.c), and these answer from what the gateway holds. */
bool gw_offline(struct gw *gw);
/* One request answered from what is held while the origin is lost. */
void gw_offline_count(struct gw *gw);
/* ino's attributes as last known (any age): 0, or -EHOSTDOWN. Not
 * counted: offline_answers counts requests answered (once each, where
 * the reply is made: gw_offline_count). */
int gw_offline_attr(struct gw *gw, struct gw_inode *ino, struct nfsc_attr *a);
/* LOOKUP from kept names: 0 and *e, -ENOENT (dir's kept listing has no
 * such name), -EACCES, or -EHOSTDOWN (not held). */
int gw_offline_lookup(struct gw *gw, fuse_req_t req, struct gw_inode *dir,
		      const char *name, struct fuse_entry_param *e);
/* STATFS: the last answer kept (gw_offline_note_fsstat), or -EHOSTDOWN. */
void gw_offline_note_fsstat(struct gw *gw, const struct nfsc_fsstat *fs);
int gw_offline_fsstat(struct gw *gw, struct nfsc_fsstat *fs);

/* ---- cobj.c ---- */
/* ino->obj with a reference of the caller's own (cache_obj_put it after
 * use), or NULL: ino->obj's own may be dropped by the last release as soon
 * as ino->lock is let go. */
struct cache_obj *gw_inode_obj(struct gw_inode *ino);
/* Open (or check) the inode's cache object against the origin's current
 * attributes a. Returns 1 if cached data was dropped because the file
 * changed, 0 if not, -errno if the cache cannot hold it (reads then go
 * to the origin). */
int gw_cache_attach(struct gw *gw, struct gw_inode *ino,
		    const struct nfsc_attr *a);
/* A successor that cannot reach the origin, for a file it adopted open:
 * the object for the version the cache holds (the dead process kept it
 * current: opens, own writes), and its fileid. -ENOENT: none. */
int gw_cache_attach_stored(struct gw *gw, struct gw_inode *ino,
			   uint64_t *fileid);
/* gw_cache_attach for an inode that may not be open (GETATTR): checks the
 * object only if one is attached, never attaches one. An object is
 * attached only by an open (whose count is already up), so a closed file
 * never holds one: the last release drops it, and an attach racing that
 * release would keep its two fds until the inode is forgotten. */
int gw_cache_check(struct gw *gw, struct gw_inode *ino,
		   const struct nfsc_attr *a);
void gw_cache_drop(struct gw *gw, struct gw_inode *ino);
/* What the cache holds of the origin file fh whose current attributes
 * are a (a regular file, whether open or not): *cached bytes of this
 * version, *complete if every block is present. 0, -EINVAL (not a
 * regular file), -ENOTSUP (no cache), -errno. Changes nothing. */
int gw_cache_state(struct gw *gw, const struct nfsc_fh *fh,
		   const struct nfsc_attr *a, uint64_t *cached, bool *complete);
/* The gateway itself changed the file (setattr): a is the result. */
void gw_cache_own_change(struct gw *gw, struct gw_inode *ino,
			 const struct nfsc_attr *a, bool size_changed);
/* The gateway itself wrote buf (a gw_buf, the bytes from its start) at
 * off; a: the WRITE's post-op attrs. The cache writes whole blocks from
 * buf itself, taking a reference, and copies partial ones. */
void gw_cache_own_write(struct gw *gw, struct gw_inode *ino,
			const struct nfsc_attr *a, char *buf, size_t len,
			uint64_t off);

/* ---- intent.c: changes a dead process made, resent to its successor ----
 * gw_intent_begin before a change is sent (0: not kept), gw_intent_end
 * after its reply; gw_intent_was_done when it failed as a repeat would
 * (EEXIST, ENOENT): the dead process had made it. */
enum { GW_I_CREATE = 1, GW_I_MKDIR, GW_I_MKNOD, GW_I_SYMLINK, GW_I_LINK,
       GW_I_REMOVE, GW_I_RMDIR, GW_I_RENAME };
unsigned gw_intent_begin(fuse_req_t req, unsigned op, uint64_t dir,
			 const char *name);
void gw_intent_end(unsigned slot);
bool gw_intent_was_done(fuse_req_t req, unsigned op, uint64_t dir,
			const char *name);
/* A successor, before its first request: what the last process left;
 * how many. */
size_t gw_intent_takeover(void);
void gw_intent_fini(void);

/* ---- silly.c: files unlinked or renamed over while open ----
 * gw_silly_start removes the hidden names an earlier run left (recorded in
 * cache_dir); call it once the origin answers. */
struct gw_silly;
struct gw_silly_tab;
int gw_silly_start(struct gw *gw, const char *cache_dir, bool keep);
/* A successor: the hidden name of the file fileid, kept from the last
 * process (gw_silly_start with keep), is ino's again: removed at its
 * last close. */
void gw_silly_adopt(struct gw *gw, struct gw_inode *ino, uint64_t fileid);
void gw_silly_stop(struct gw *gw);
/* Should removing the name whose file is ino (attributes a) be a RENAME to
 * a hidden name instead: a regular file open through the mount, and this
 * its last name? */
bool gw_silly_wanted(struct gw_inode *ino, const struct nfsc_attr *a);
/* RENAME dir/name to a hidden name, removed at ino's last close (or now,
 * if that came meanwhile). 0 or the RENAME's -errno. */
int gw_silly_rename(struct gw *gw, const struct nfsc_cred *cr,
		    struct gw_inode *dir, const char *name,
		    struct gw_inode *ino, const struct nfsc_attr *a);
/* Put ino's hidden name back as dir/name (a RENAME over it failed). */
int gw_silly_undo(struct gw *gw, struct gw_inode *dir, const char *name,
		  struct gw_inode *ino);
void gw_silly_finish(struct gw *gw, struct gw_silly *s);
/* After a close: the last one removes ino's hidden name. */
void gw_silly_release(struct gw *gw, struct gw_inode *ino);
/* Is dir/name the hidden name of ino, an open file? Removing it, or
 * renaming another file over it, would destroy the file under its open
 * descriptors: both answer EBUSY, as on the Linux NFS client. */
bool gw_silly_is(struct gw_inode *ino, const struct gw_inode *dir,
		 const char *name);
/* ino lives on under a hidden name only (its nlink shows one less). */
bool gw_silly_has(struct gw_inode *ino);

/* ---- handlekey.c: unguessable handles ---- */
/* Read cache_dir/handle-key, or make it with cutover high (the node-id
 * table's high-water mark): 0 or -errno. */
int gw_handle_key_load(struct gw *gw, const char *dir, uint64_t high);
/* The FUSE generation of nodeid: the table's below the cutover (handles of
 * older gateways stay valid), a keyed hash of the node-id from it on. */
uint32_t gw_node_generation(const struct gw *gw, uint64_t nodeid);

/* ---- hist.c: latency histograms (atomic; common/lathist.h) ---- */
struct gw_hist {
	struct lat_hist h;
};
uint64_t gw_now_ns(void);			/* CLOCK_MONOTONIC */
/* Record the time from start_ns (gw_now_ns) to now. */
void gw_hist_record(struct gw_hist *h, uint64_t start_ns);
/* Print as a Prometheus histogram in seconds. */
void gw_hist_print(const struct gw_hist *h, const char *name,
		   const char *help, FILE *out);

/* ---- the gateway ---- */
/* Control-socket threads: each takes the next client, so a slow command
 * (`cached` waiting on the origin, `drain`) does not hold up `stats`. */
#define GW_CTL_THREADS 16

struct gw {
	struct gw_opts *o;		/* set at start */
	struct nfsc *nfs;		/* set at start; thread-safe */
	struct cache *cache;		/* set at start (NULL: no cache);
					 * thread-safe */
	struct nodes *nodes;	/* persistent node-id table; set at
					 * start; thread-safe */
	uint32_t generation;		/* the node-id table's generation:
					 * node-ids below handle_cutover
					 * keep it; set at start */
	uint64_t handle_key;		/* secret of the other node-ids'
					 * generations (handlekey.c); set
					 * at start */
	uint64_t handle_cutover;	/* set at start */
	int readahead_set;		/* kernel readahead raised (atomic) */
	struct fuse_session *se;	/* set at start */
	bool successor;			/* serves a connection another process
					 * made (takeover.h): node-ids the
					 * kernel holds are adopted on first
					 * use; set at start */
	int takeover_fd;		/* the successor's connection, once it
					 * asked (atomic; -1: none) */
	int handover_fuse_fd;		/* main thread: the connection, kept
					 * for the successor */
	int sup_fd;			/* to the supervisor (-1: none) */
	bool handing_over;		/* the loop ended for a takeover:
					 * handles are freed, not released;
					 * main thread only */
	struct gw_itable it;		/* its own lock */
	struct gw_reclaim *reclaim;	/* reclaim.c; set at start */
	struct nodes_md *md;		/* remember.c: kept metadata; set at
					 * start (NULL: none); thread-safe */
	uint64_t md_epoch;		/* start (CLOCK_REALTIME ns): only
					 * what was kept before is used;
					 * set at start */
	uint64_t md_restored_attrs;	/* new inodes given kept attributes
					 * (atomic) */
	uint64_t md_restored_access;	/* and kept ACCESS answers (atomic) */
	uint64_t md_kept_lookups;	/* LOOKUPs answered from kept names
					 * (atomic) */
	uint64_t md_kept_listings;	/* opendirs listed from what was kept
					 * (atomic) */
	uint64_t fill_queue_skipped;	/* fill_behind=skip: fetches not
					 * queued for the cache (atomic) */
	uint64_t fill_queue_skipped_bytes;	/* atomic */
	uint64_t offline_answers;	/* answers from what is held while the
					 * origin is lost (atomic) */
	pthread_mutex_t fs_lock;	/* offline.c: the last FSSTAT */
	bool fs_known;			/* fs_lock */
	struct nfsc_fsstat fs_last;	/* fs_lock */
	uint64_t getattr_joined;	/* GETATTRs not sent: the request took
					 * the answer of one in flight
					 * (atomic) */
	/* control socket: set by gw_ctl_start, used by the ctl threads,
	 * torn down by gw_ctl_stop after joining them */
	int ctl_fd;
	int ctl_stop[2];
	struct gw_ctl_thread {
		struct gw *gw;
		pthread_t tid;
		unsigned idx;		/* 0 also does the 5 s housekeeping */
	} ctl_threads[GW_CTL_THREADS];
	unsigned ctl_nthreads;		/* started */
	char *ctl_path;
	/* accept4() failures of the ctl threads, for gw_accept_failed's
	 * rate-limited log line: atomic */
	uint64_t ctl_accept_log, ctl_accept_errs;
	uint64_t fetch_bytes;		/* bytes held by fetches (atomic) */
	uint64_t fetches;		/* fetches alive (atomic) */
	/* fill thread (fill.c) */
	pthread_mutex_t fill_lock;
	pthread_cond_t fill_cond;	/* with fill_lock: queue or stop */
	struct gw_fetch *fill_head, *fill_tail;	/* fill_lock */
	bool fill_stop;				/* fill_lock */
	pthread_t fill_thread;			/* main thread only */
	bool fill_started;			/* main thread only */
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
	/* metrics= endpoint: set by gw_metrics_start, used by its thread,
	 * torn down by gw_metrics_stop after joining it */
	int metrics_fd;
	int metrics_stop[2];
	pthread_t metrics_thread;
	/* latencies, recorded where the reads happen */
	struct gw_hist origin_read_lat;	/* each origin READ of a fetch */
	struct gw_hist cache_read_lat;	/* each cache_read that hit */
	uint64_t exit_commit_errors;	/* COMMITs failed at exit (atomic) */
	/* COMMITs owed after a crash (write_commit.c) */
	pthread_mutex_t owed_lock;	/* before ino->lock (lock order 1c) */
	struct gw_owed *owed;		/* set at start; entries owed_lock */
	size_t nowed;			/* set at start */
	size_t owed_left, owed_lost;	/* owed_lock */
	pthread_t owed_thread;		/* main thread only */
	bool owed_started;		/* main thread only */
	/* the handover (takeover.c): whether the main thread (1) or the
	 * drain thread (2, its commits unfinished) hands over; atomic */
	int handover_phase;
};

#endif
