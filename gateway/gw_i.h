/* gw_i.h - private to gateway/, the only layer that knows FUSE.
 *
 * main.c:  command line, daemon start-up, session loop, teardown.
 * opts.c:  -o option parsing and validation.
 * inode.c: inode table, FUSE node-id <-> origin file handle, attributes.
 * ops.c:   FUSE low-level operations (the gw_oper table).
 * read.c:  the read path (origin READs, cache hits and fills).
 * log.c:   logging (stderr in the foreground, syslog as a daemon).
 */
#ifndef CACHEGW_GW_I_H
#define CACHEGW_GW_I_H

#define FUSE_USE_VERSION 312

#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "nfsc.h"

struct cache;
struct cache_obj;

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
	/* cache */
	uint64_t cache_size;		/* bytes, 0 = no cap */
	uint32_t cache_block;		/* bytes, 0 = default */
	int cache_write;		/* enum cache_write_mode */
	unsigned brun, bcull, bstop;	/* percent */
	uint64_t readahead;		/* bytes, max readahead window */
	unsigned max_threads;		/* FUSE worker threads */
	char *logfile;
	/* what is passed on to libfuse (mount options it understands) */
	struct fuse_args fuse_args;
};

/* Parse argv into o. Returns 0, or 1 after printing usage/version (exit 0),
 * or -1 after printing a one-line error (exit 2). */
int gw_opts_parse(int argc, char **argv, struct gw_opts *o);
void gw_opts_free(struct gw_opts *o);
void gw_usage(const char *prog);

/* ---- log.c ---- */
void gw_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Route stderr to syslog (or logfile) once the daemon has detached. */
int gw_log_detach(const char *logfile);
void gw_log_stop(void);

/* ---- inode.c ---- */

struct gw_inode {
	uint64_t nodeid;		/* FUSE node-id, never reused */
	struct nfsc_fh fh;		/* origin file handle */
	struct gw_inode *next_id;	/* hash chain by nodeid, itable lock */
	struct gw_inode *next_fh;	/* hash chain by fh, itable lock */
	uint64_t nlookup;		/* kernel references, itable lock */
	pthread_mutex_t lock;		/* guards the fields below */
	struct nfsc_attr attr;		/* last attributes from the origin */
	struct timespec attr_at;	/* CLOCK_MONOTONIC time attr was got */
	bool attr_valid;
	bool opened_before;		/* an open has seen attr (keep_cache) */
	struct nfsc_attr open_attr;	/* attributes at the last open */
	struct cache_obj *obj;		/* cache object, opened lazily */
	unsigned opens;			/* open files */
	char *fetch;			/* last origin fetch (read.c) */
	uint64_t fetch_off;
	size_t fetch_len;
	bool fetch_eof;			/* fetch ends at end of file */
};

struct gw_itable {
	pthread_mutex_t lock;
	struct gw_inode **by_id;	/* buckets, lock */
	struct gw_inode **by_fh;	/* buckets, lock */
	size_t nbuckets;		/* power of two, lock */
	size_t count;			/* inodes in the table, lock */
	uint64_t next_nodeid;		/* next node-id to hand out, lock */
	struct gw_inode *root;
};

struct gw;
int gw_itable_init(struct gw_itable *t, const struct nfsc_fh *rootfh);
void gw_itable_free(struct gw *gw);
/* The inode for a node-id the kernel holds, or NULL. */
struct gw_inode *gw_inode_find(struct gw *gw, uint64_t nodeid);
/* Find or create the inode for fh, take one kernel reference, and store
 * attr in it. NULL on allocation failure. */
struct gw_inode *gw_inode_ref(struct gw *gw, const struct nfsc_fh *fh,
			      const struct nfsc_attr *attr);
void gw_inode_forget(struct gw *gw, uint64_t nodeid, uint64_t n);
size_t gw_itable_count(struct gw *gw);
void gw_inode_set_attr(struct gw_inode *ino, const struct nfsc_attr *attr);
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

/* ---- read.c ---- */
struct gw_file {
	struct nfsc_cred cred;		/* the opener's credentials */
};
/* Read for a FUSE read request; replies itself. */
void gw_read(struct gw *gw, fuse_req_t req, struct gw_inode *ino,
	     struct gw_file *f, size_t size, off_t off);

/* Open (or check) the inode's cache object against the origin's current
 * attributes a. Returns 1 if cached data was dropped because the file
 * changed, 0 if not, -errno if the cache cannot hold it (reads then go
 * to the origin). */
void gw_inode_drop_fetch(struct gw_inode *ino);
int gw_cache_attach(struct gw *gw, struct gw_inode *ino,
		    const struct nfsc_attr *a);

/* ---- ctl.c ---- */
int gw_ctl_start(struct gw *gw, const char *dir);
void gw_ctl_stop(struct gw *gw);

/* ---- the gateway ---- */
struct gw {
	struct gw_opts *o;
	struct nfsc *nfs;
	struct cache *cache;
	struct fuse_session *se;
	struct gw_itable it;
	/* control socket */
	int ctl_fd;
	int ctl_stop[2];
	pthread_t ctl_thread;
	char *ctl_path;
};

#endif
