/* gateway.h - the request path (gateway/) as the process around it
 * (daemon/) holds and drives it: the options, the gateway's shared state
 * (struct gw), and the calls that start it, stop it, hand it over and
 * count it. daemon/ includes this header and gw_state.h (the takeover
 * state's layout) from gateway/, never a room's header (test 52); the
 * rooms see it through base/gw_i.h.
 *
 * start.c: what ties the rooms together at start (the inode table's
 *            evict hook).
 * The other calls are each room's, named here with their file.
 */
#ifndef CACHEGW_GATEWAY_H
#define CACHEGW_GATEWAY_H

#define FUSE_USE_VERSION 312

#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>

#include "lathist.h"
#include "nfsc.h"

struct cache;
struct gw;
struct gw_inode;
struct gw_owed;
struct gw_reclaim;
struct gw_silly_tab;
struct gw_fetch;
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

/* ---- the gateway: what its fields hold ---- */

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
	struct nodes_md *md;		/* kept_md.c: kept metadata; set at
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
	/* fill thread (fill_thread.c) */
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
	/* the handover (daemon/takeover/takeover_handover.c): whether the main thread (1) or
	 * the drain thread (2, its commits unfinished) hands over; atomic */
	int handover_phase;
};

/* ---- start.c ---- */
/* The inode table with its root (and the root's kept metadata), and what
 * each room lets go with an inode. Before the session starts: 0, or
 * -ENOMEM. */
int gw_gateway_init(struct gw *gw);
/* The operations table for fuse_session_new (ops/ops.c). */
extern const struct fuse_lowlevel_ops gw_oper;

/* ---- start and stop, in the order the process calls them ---- */
/* handlekey.c: */
/* Read cache_dir/handle-key into gw->hkey, or make it with cutover high
 * (the node-id table's high-water mark); an older file is rewritten,
 * keeping every node-id below high on its generation; logs how many live
 * node-ids (gw->nodes, if set) keep guessable ones. 0 or -errno. */
int gw_handle_key_load(struct gw *gw, const char *dir, uint64_t high);
/* kept_md.c: */
uint64_t gw_md_now_ns(void);	/* CLOCK_REALTIME */
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
/* write_commit.c: */
/* After the last release, before the inodes go: the thread making the
 * COMMITs a successor owes (gw_takeover_adopt) joined, their list freed. */
void gw_write_owed_stop(struct gw *gw);
/* handles.c: */
/* Handing over: releases from now on leave the records alone. */
void gw_handles_freeze_records(void);

/* ---- the control socket and the metrics ---- */
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
/* Print as a Prometheus histogram in seconds. */
void gw_hist_print(const struct gw_hist *h, const char *name,
		   const char *help, FILE *out);
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
