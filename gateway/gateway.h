/* gateway.h - the request path (gateway/) as the process around it
 * (daemon/) holds and drives it: the options, the gateway as an opaque
 * struct gw, and the calls that start it, stop it, hand it over and
 * count it, in the order the process makes them. daemon/ includes this
 * header and gw_state.h (the takeover state's layout) from gateway/, never
 * a room's header (test 52); the rooms see it through base/gw_i.h, which
 * defines struct gw.
 *
 * start.c: the gateway made and freed, what the process opened handed to
 *          it, the rooms tied together at start, its counters.
 * The other calls are each room's, named here with their file.
 */
#ifndef CACHEGW_GATEWAY_H
#define CACHEGW_GATEWAY_H

#define FUSE_USE_VERSION 312

#include <fuse_lowlevel.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>

#include "lathist.h"
#include "nfsc.h"

struct cache;
struct gw;
struct fleet;
struct nodes;
struct nodes_md;

/* ---- the options (daemon/opts.c parses them) ---- */

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
	unsigned walk_ahead;		/* subdirectories listed ahead of a
					 * walk (walkahead.c), 0: none */
	uint64_t reclaim_after;		/* node-id table entries added before
					 * a reclaim pass (0: on demand only) */
	uint64_t write_window;		/* bytes of WRITE in flight */
	uint64_t dirty_max;		/* writeback: bdi max_bytes, strict
					 * (0: the global dirty limits) */
	bool cache_writes_around;	/* drop written blocks, not update */
	int local_lock;			/* local_lock=: GW_LOCAL_LOCK_* */
	int lookupcache;		/* lookupcache=: 0 all (names known
					 * absent answered ENOENT, dirknown.c),
					 * 1 positive, 2 pos, 3 none: not */
	bool fill_skip;			/* fill_behind=skip: fills the cache
					 * disk cannot take now are dropped */
	char *logfile;
	char *pidfile;			/* pidfile= (NULL: none) */
	char *fleet;			/* fleet store's libpq connection
					 * string (NULL: no fleet) */
	char *fleet_member;		/* name in the store (NULL: host) */
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

/* local_lock= (nfs(5)): which locks stay in the kernel of the gateway's
 * host; the others are taken at the origin (lock/). */
enum {
	GW_LOCAL_LOCK_NONE = 0,	/* both at the origin */
	GW_LOCAL_LOCK_ALL,	/* both local */
	GW_LOCAL_LOCK_FLOCK,	/* flock local, fcntl at the origin */
	GW_LOCAL_LOCK_POSIX,	/* fcntl local, flock at the origin */
};

/* ---- start.c: the gateway of one serving process ---- */
/* Made before anything is opened: its locks and tables, nothing running.
 * successor: it serves a connection another process made (gw_state.h);
 * the node-ids the kernel holds are adopted on first use. NULL: out of
 * memory. */
struct gw *gw_new(struct gw_opts *o, bool successor);
/* What the process opened, handed over as it opens it: the gateway uses
 * them and closes none (NULL: none, or closed). generation: the node-id
 * table's. */
void gw_use_cache(struct gw *gw, struct cache *cache, struct nodes *nodes,
		  uint32_t generation);
void gw_use_md(struct gw *gw, struct nodes_md *md);
void gw_use_origin(struct gw *gw, struct nfsc *nfs);
void gw_use_session(struct gw *gw, struct fuse_session *se);
/* The inode table with its root (and the root's kept metadata), and what
 * each room lets go with an inode. Before the session starts: 0, or
 * -ENOMEM. */
int gw_gateway_init(struct gw *gw);
/* The operations table for fuse_session_new, whose userdata is the gw
 * (ops/ops.c). */
extern const struct fuse_lowlevel_ops gw_oper;
/* Everything stopped and freed (gw_itable_free and the rest): the
 * gateway itself. */
void gw_free(struct gw *gw);

/* ---- start and stop, in the order the process calls them ---- */
/* handlekey.c: */
/* Read cache_dir/handle-key, or make it with cutover high (the node-id
 * table's high-water mark); an older file is rewritten, keeping every
 * node-id below high on its generation; logs how many live node-ids (of
 * the node-id table, if given) keep guessable ones. 0 or -errno. */
int gw_handle_key_load(struct gw *gw, const char *dir, uint64_t high);
/* kept_md.c: */
/* At start, after a stop that was not clean: keep only ACCESS answers. */
void gw_md_unclean(struct gw *gw);
/* fill_thread.c: the fill thread (completed fetches into the cache). */
int gw_fill_start(struct gw *gw);
/* Fill what is queued, then stop. */
void gw_fill_stop(struct gw *gw);
/* silly.c: removes the hidden names an earlier run left (recorded in
 * cache_dir; keep: a successor's, adopted instead); once the origin
 * answers. */
int gw_silly_start(struct gw *gw, const char *cache_dir, bool keep);
void gw_silly_stop(struct gw *gw);
/* reclaim.c: node-ids of files gone at the origin given back. */
int gw_reclaim_start(struct gw *gw);	/* main thread, before gw_ctl_start */
void gw_reclaim_stop(struct gw *gw);	/* ends passes; before gw_ctl_stop */
void gw_reclaim_free(struct gw *gw);	/* after gw_ctl_stop */
/* listing.c: at start (before any request); the directory listings no
 * open holds any more (kept a while for the next open) freed, at exit. */
void gw_listings_init(void);
void gw_listings_free(void);
/* How many listings no open holds are kept, and their entries. */
void gw_listings_kept(uint64_t *listings, uint64_t *entries);
/* walkahead.c: the walk threads (walk_ahead=) stopped and joined, what
 * they had queued dropped; after the session loop, before the origin and
 * the inodes go (idempotent). */
void gw_walk_stop(void);
/* lock_wait.c: blocking lock requests still waiting answered EINTR (a
 * successor is sent them again), the waiters' thread stopped; after the
 * session loop, before the session is destroyed. */
void gw_locks_stop(struct gw *gw);
/* lock_reclaim.c: once the origin's threads run: a successor that took
 * lock owners over watches for the origin's restart at once (otherwise
 * from the first lock granted). */
void gw_locks_start(struct gw *gw);
/* locks.c: an owner that locked through the open file file (fi->fh) of
 * nodeid lost a lock when the origin restarted (its reads and writes
 * through it fail with EIO until it is closed). Cheap when none is. */
bool gw_lock_lost(struct gw *gw, uint64_t nodeid, uint64_t file);
/* intent.c: */
/* A successor, before its first request: what the last process left;
 * how many. */
size_t gw_intent_takeover(void);
void gw_intent_fini(void);
/* handles.c: */
/* After the session loop, with the origin still connected: release the
 * handles never released; returns how many. */
size_t gw_handles_release(struct gw *gw);
/* At exit, after gw_handles_release: the table's memory. */
void gw_handles_fini(void);
/* start.c: COMMITs that failed at exit (the process's exit status). */
uint64_t gw_exit_commit_errors(struct gw *gw);
/* inode.c: */
void gw_itable_free(struct gw *gw);
/* buf.c: */
void gw_buf_trim(bool force);		/* unmap the recycled ones when idle */

/* ---- a takeover (doc/takeover.md) ---- */
/* adopt.c: */
/* A successor: the open files and directories of the state; after a
 * crash, the COMMITs of what the dead process wrote owed (made while this
 * process serves, by a thread of their own; gw_write_owed_stop). */
int gw_takeover_adopt(struct gw *gw);
/* handover.c: */
/* Handing over: every writer's data committed, errors into the records;
 * how many writers had one. */
size_t gw_files_handover(struct gw *gw);
/* start.c: */
/* Handing over, the commits made: releases from now on leave the records
 * alone, and the handles left are freed, not released. */
void gw_handover_freeze(struct gw *gw);
/* write_commit.c: */
/* After the last release, before the inodes go: the thread making the
 * COMMITs a successor owes (gw_takeover_adopt) joined, their list freed. */
void gw_write_owed_stop(struct gw *gw);

/* ---- the control socket and the metrics ---- */
/* start.c: the counters, read once (each atomic, or under its lock). */
struct gw_counters {
	/* the write window (write_window.c), read at one instant */
	uint64_t win_used;		/* bytes of WRITE in flight now */
	uint64_t win_waits;		/* writers that waited for room */
	uint64_t win_wait_ns;		/* and how long, in all */
	uint64_t win_used_max;		/* high-water mark of win_used */
	unsigned win_writes_max;	/* most FUSE WRITEs in flight */
	/* the write path */
	uint64_t writepage_writes;	/* WRITEs of the kernel's dirty pages */
	uint64_t write_spliced;		/* WRITEs whose bytes came by splice */
	uint64_t writepage_errors;	/* of them, refused by the origin */
	uint64_t resends;		/* extents resent (verifier change) */
	uint64_t wcc_foreign;		/* WRITEs showing another's change */
	/* the read path */
	uint64_t fill_queue_skipped;	/* fill_behind=skip: not queued */
	uint64_t fill_queue_skipped_bytes;
	uint64_t kernel_cache_drops;	/* the kernel's pages dropped */
	uint64_t readahead_bytes;	/* fetched ahead of sequential reads */
	uint64_t readahead_throttled;	/* readaheads skipped: fills behind */
	uint64_t fetches;		/* fetches in flight or kept */
	uint64_t fetch_bytes;		/* and the bytes they hold */
	/* what outlives a restart */
	uint64_t md_restored_attrs;	/* new inodes given kept attributes */
	uint64_t md_restored_access;	/* and kept ACCESS answers */
	uint64_t md_kept_lookups;	/* LOOKUPs answered from kept names */
	uint64_t known_absent;		/* LOOKUPs answered ENOENT from a
					 * directory's known names */
	uint64_t md_kept_listings;	/* opendirs listed from what was kept */
	uint64_t walk_ahead_listings;	/* listings read ahead of a walk */
	uint64_t walk_ahead_used;	/* opendirs answered by one of them */
	uint64_t walk_ahead_stale;	/* of another version by the open */
	uint64_t getattr_joined;	/* GETATTRs that joined one in flight */
	uint64_t cto_joined;		/* opens whose close-to-open check was
					 * the kernel's GETATTR or LOOKUP */
	uint64_t offline_answers;	/* answered while the origin is lost */
	/* locks at the origin (lock/) */
	uint64_t locks_granted;		/* LOCKs granted */
	uint64_t locks_denied;		/* held by another at the first ask */
	uint64_t locks_waited;		/* requests that waited */
	uint64_t locks_interrupted;	/* of them, ended by an interrupt */
	uint64_t locks_released;	/* owners' locks let go at a close */
	uint64_t lock_owners;		/* owners known now */
	uint64_t locks_reclaimed;	/* taken again after the origin's
					 * lock manager came back */
	uint64_t locks_lost;		/* could not be: their holders get
					 * EIO */
	/* latencies */
	struct lat_hist origin_read_lat;	/* each origin READ of fetches */
	struct lat_hist cache_read_lat;		/* each cache read that hit */
};
void gw_counters(struct gw *gw, struct gw_counters *c);
/* Fetches whose fill is decided and not yet handed to the cache (counted
 * before the fetch is published done: a read that saw its data sees it
 * counted), for `drain`. */
uint64_t gw_fills_pending(struct gw *gw);
/* reclaim_pass.c, reclaim.c: */
struct gw_reclaim_result {
	uint64_t checked;		/* entries walked */
	uint64_t held;			/* of them held by the kernel: skipped */
	uint64_t probed;		/* of them asked about (GETATTR) */
	uint64_t reclaimed;		/* removed: the origin called them
					 * stale twice, believably */
	uint64_t errors;		/* not known (no answer, other errors):
					 * kept */
	uint64_t kept;			/* stale once, not confirmed: kept */
	uint64_t entries;		/* live entries after the pass */
	bool aborted;			/* the origin did not look right:
					 * nothing removed, why says why */
	char why[192];
};
struct gw_reclaim_counters {
	uint64_t runs, checked, held, reclaimed, errors;
	uint64_t refusals;		/* makes refused: no room in the table */
	uint64_t aborted;		/* passes that removed nothing: the
					 * origin did not look right */
};
/* One pass now (reclaim_pass.c; waits for a pass in progress first).
 * 0, -EINTR (told to stop), -ENOMEM, -ENOTCONN (not started). */
int gw_reclaim_run(struct gw *gw, struct gw_reclaim_result *res);
void gw_reclaim_counters(struct gw *gw, struct gw_reclaim_counters *c);
/* inode.c, handles.c, buf.c: how many there are now. */
size_t gw_itable_count(struct gw *gw);
size_t gw_handles_count(void);		/* open files and directories */
uint64_t gw_buf_mapped(void);		/* bytes mapped, for the metrics */
/* hist.c: */
uint64_t gw_now_ns(void);			/* CLOCK_MONOTONIC */
/* cobj.c, kept_names.c: for `cachegw-inspect warm`. */
/* What the cache holds of the origin file fh whose current attributes
 * are a (a regular file, whether open or not): *cached bytes of this
 * version, *complete if every block is present. 0, -EINVAL (not a
 * regular file), -ENOTSUP (no cache), -errno. Changes nothing. */
int gw_cache_state(struct gw *gw, const struct nfsc_fh *fh,
		   const struct nfsc_attr *a, uint64_t *cached, bool *complete);
/* The node-id name in dir was last known to have, at any age: 0, or
 * -ENOENT. */
int gw_md_dent_any(struct gw *gw, uint64_t dir, const char *name,
		   uint64_t *child);

/* ---- logging.c ---- */
/* fleet=: the cache_dir's tie to a fleet checked (a fleet's cache_dir
 * without fleet=, or one with node-ids of its own with it, refused with a
 * message on stderr), after the node-id table is open; then, once the
 * origin's root is known, the store joined (its key gives every
 * generation) and left. 0 or -errno; all three do nothing without
 * fleet=. */
int gw_fleet_check_dir(struct gw *gw);
int gw_fleet_start(struct gw *gw, const char *version);
void gw_fleet_stop(struct gw *gw);
/* The fleet store (NULL without fleet=), for its counters. */
struct fleet *gw_fleet(struct gw *gw);

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

/* ---- bdi.c ---- */
/* The device of the top mount on path (the last line of mountinfo naming
 * it) and whether it is a cachegw mount; -ENOENT: nothing mounted there. */
int gw_mount_at(const char *path, unsigned *maj, unsigned *min, bool *ours);

#endif
