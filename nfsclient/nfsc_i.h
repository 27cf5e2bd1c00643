/* nfsc_i.h - private to nfsclient/.
 *
 * mount.c: nfsc_open: the connections made and mounted, the root's handle,
 *          the I/O sizes; made later when started without the origin.
 * pool.c:  the connections' service threads, submission queues,
 *          completion (resend on timeout), counters; nfsc_close.
 * calls.c: one request type per NFSv3 procedure that reads the origin:
 *          argument building, the procedure's reply decoding.
 * reply.c: what every reply passes (nfsc_reply): transport outcome,
 *          nfsstat3 -> errno; fattr3, post-op attributes, file handles.
 * calls_write.c: the same for the procedures that change the origin
 *          (SETATTR, WRITE, COMMIT, CREATE ... RENAME).
 * sync.c:  sync helpers made from the async calls plus a stack waiter.
 * sync_intr.c: the sync calls a caller can give up on (nfsc_intr_*):
 *          waiter and answer on the heap, shared with the call.
 * origin.c: the origin lost and back (offline=): probes, fail-fast.
 * inject.c: test-only fault injection (CACHEGW_INJECT_*, see nfsc.h).
 *
 * Locks, and what they guard:
 * - nfsc_conn.lock: the connection's submission queue (head, tail) and
 *   stopping. Held only to queue or unqueue; nothing is called under it.
 * - sync.c's struct waiter .lock: that waiter's pending and status.
 * - nfsc.watch_lock (origin.c): watch_stop and the probe slots; a leaf.
 * Nesting: none. No nfsclient lock is held while another is taken, while
 * a libnfs call runs, or while a caller's callback runs (callbacks may take
 * their own locks and submit new calls, which takes nfsc_conn.lock).
 * Everything else of a connection (nfs, rpc, auth_cred, auth_set) belongs
 * to its service thread and needs no lock; counters are atomics.
 */
#ifndef CACHEGW_NFSC_I_H
#define CACHEGW_NFSC_I_H

#include <pthread.h>
#include <stdatomic.h>
#include <sys/time.h>	/* libnfs.h uses struct timeval */
#include <nfsc/libnfs.h>
#include <nfsc/libnfs-raw.h>
#include <nfsc/libnfs-raw-nfs.h>

#include "nfsc.h"

struct nfsc_req;

/* How a request is put on the wire: called on the connection's service
 * thread; returns 0 if libnfs queued it (its rpc callback will run). */
typedef int (*nfsc_issue_fn)(struct rpc_context *rpc, struct nfsc_req *r);

struct nfsc_req {
	struct nfsc_req *next;		/* submission queue link */
	struct nfsc *n;
	struct nfsc_conn *conn;
	nfsc_issue_fn issue;
	/* The procedure's part of its reply (reply.c's nfsc_reply), set by
	 * issue; NULL: the status is all. */
	int (*decode)(struct nfsc_req *r, void *data, int status);
	struct nfsc_cred cred;
	struct nfsc_fh fh;		/* the object the call is about */
	char name[NFSC_NAME_MAX + 1];	/* LOOKUP, CREATE, ..., RENAME from */
	struct nfsc_fh fh2;		/* LINK/RENAME target directory */
	char name2[NFSC_NAME_MAX + 1];	/* LINK/RENAME target name */
	struct nfsc_sattr sa;		/* SETATTR, CREATE, MKDIR, ... */
	char *target;			/* SYMLINK, owned */
	unsigned tries;			/* timeouts seen so far */
	uint8_t proc;			/* NFSv3 procedure, set when issued */
	uint64_t sent_ns;		/* first issued (CLOCK_MONOTONIC) */
	union {
		struct { struct nfsc_attr *attr; } getattr;
		struct {
			struct nfsc_fh *out; struct nfsc_attr *attr;
			bool *has_attr;
		} lookup;
		struct { uint32_t mask; uint32_t *granted; } access;
		struct {
			uint64_t off; uint32_t count; void *buf;
			uint32_t *got; bool *eof;
			struct nfsc_attr *attr; bool *has_attr;
		} read;
		struct {
			uint64_t *cookie; uint8_t *verf;
			struct nfsc_dirlist *list; bool *eof;
		} rdp;
		struct { char *buf; size_t size; } readlink;
		struct { struct nfsc_fsstat *st; } fsstat;
		struct { struct nfsc_fsinfo *fi; } fsinfo;
		struct {
			uint64_t off; uint32_t count; const void *buf;
			bool stable; uint32_t *written; uint8_t *verf;
		} write;
		struct { uint8_t *verf; } commit;
		struct {
			bool exclusive; enum nfsc_type type;
			uint32_t major, minor;
			bool verf_set;	/* CREATE EXCLUSIVE with verf */
			uint8_t verf[8];
		} mk;
	} u;
	struct nfsc_post *post;		/* SETATTR, WRITE, COMMIT, LINK */
	struct nfsc_created *created;	/* CREATE, MKDIR, SYMLINK, MKNOD */
	nfsc_cb cb;
	void *priv;
};

struct nfsc_conn {
	struct nfsc *n;
	unsigned idx;
	struct nfs_context *nfs;	/* owned by the service thread once
					 * started */
	struct rpc_context *rpc;
	pthread_t thread;
	bool started;
	int efd;			/* eventfd: queue non-empty / stop */
	pthread_mutex_t lock;
	struct nfsc_req *head, *tail;	/* submission queue, under lock */
	bool stopping;			/* under lock */
	/* Service-thread only: */
	struct nfsc_cred auth_cred;	/* credentials rpc's AUTH carries */
	bool auth_set;
};

/* Test-only faults, fixed at nfsc_open (inject.c); budgets are atomics. */
struct nfsc_inject {
	unsigned commit_delay_ms;	/* hold every COMMIT this long */
	unsigned access_delay_ms;	/* hold ACCESS calls this long */
	int access_delay_count;		/* how many; -1 all */
	unsigned create_delay_ms;	/* hold CREATE calls this long */
	int create_delay_count;		/* how many; -1 all */
	unsigned change_hold_ms;	/* hold a done change this long */
	int change_hold_count;		/* how many; -1 all */
	int commit_err;			/* errno a COMMIT fails with */
	int commit_err_count;		/* of how many; -1 all */
	uint64_t write_delay_off;	/* the first WRITE at or past this */
	unsigned write_delay_ms;	/* is held this long */
	int write_delay_armed;		/* not yet done */
	int write_zero_count;		/* WRITE replies made 0 bytes; -1 all */
	char *release_path;		/* a held call also waits for this
					 * file to exist (malloc'd, or NULL) */
	bool auth_err;			/* credentials of auth_err_uid cannot */
	uint32_t auth_err_uid;		/* be built (as if libnfs failed) */
};

#define NFSC_PROBES 8	/* origin probes in flight at most */

struct nfsc_probe {		/* origin.c: one probe's slot */
	struct nfsc *n;
	unsigned slot;
	struct nfsc_attr attr;	/* the answer, dropped */
};

struct nfsc {
	char *url;
	char *server;
	char *export;
	struct nfsc_fh root;
	struct nfsc_opts opts;
	uint32_t rsize, wsize;
	unsigned nconn;
	struct nfsc_conn *conns;
	atomic_uint rr;			/* round-robin cursor */
	atomic_uint_fast64_t read_bytes;/* READ payload bytes received */
	atomic_uint_fast64_t write_bytes;/* WRITE payload bytes accepted */
	struct nfsc_proc_stat procs[NFSC_NPROC];	/* by procedure; atomic */
	struct nfsc_inject inject;
	/* origin.c: the origin lost and back. */
	bool started_lost;		/* set before nfsc_start */
	uint64_t last_answer_ns;	/* atomic; any RPC reply */
	int lost;			/* atomic */
	uint64_t lost_since_ns;		/* watcher thread only */
	uint64_t lost_total, back_total, refused, probes; /* atomic */
	pthread_mutex_t watch_lock;
	pthread_cond_t watch_cond;
	bool watch_stop;		/* watch_lock */
	bool watch_started;
	pthread_t watch;
	unsigned probe_busy;		/* slots in flight; watch_lock */
	struct nfsc_probe probe[NFSC_PROBES];
};

/* origin.c */
void nfsc_origin_init(struct nfsc *n);
void nfsc_origin_start_lost(struct nfsc *n);	/* before nfsc_start */
int nfsc_origin_start(struct nfsc *n);		/* the watcher thread */
void nfsc_origin_stop(struct nfsc *n);
void nfsc_origin_free(struct nfsc *n);
/* An RPC reply came (any status): the origin answers. */
void nfsc_origin_answered(struct nfsc *n);
/* The watcher's decisions at now (CLOCK_MONOTONIC ns), given last, the
 * stamp of the last answer; no clock read, no I/O, so a test can drive
 * them. A probe is due after a second without an answer and without a
 * probe. nfsc_origin_look makes the change it returns (lost,
 * lost_since_ns, the counters); its caller logs it. Watcher thread only. */
enum nfsc_origin_change {
	NFSC_ORIGIN_SAME = 0,
	NFSC_ORIGIN_LOST,		/* quiet for opts.offline seconds */
	NFSC_ORIGIN_BACK,		/* an answer since it was lost */
};
bool nfsc_origin_probe_due(uint64_t now, uint64_t last, uint64_t last_probe);
enum nfsc_origin_change nfsc_origin_look(struct nfsc *n, uint64_t now,
					 uint64_t last);
/* Queue r, or fail it at once with -EHOSTDOWN while the origin is lost
 * (idempotent calls only); frees r when it is not queued. */
int nfsc_submit_idem(struct nfsc *n, int conn, struct nfsc_req *r);

/* mount.c: on c's service thread, started without the origin: mount c
 * once the origin answers, then issue what waited. false if the gateway
 * stops first (what waited is cancelled). */
bool nfsc_conn_mount_later(struct nfsc_conn *c);

/* pool.c */
uint64_t nfsc_now_ns(void);
/* On c's service thread: issue every request queued on c (cancel them
 * if c is stopping; *stop says so). */
void nfsc_conn_issue_queued(struct nfsc_conn *c, bool *stop);
int nfsc_submit(struct nfsc *n, int conn, struct nfsc_req *r);
/* Finish r: on -ETIMEDOUT, a hard mount resubmits it; otherwise the
 * caller's callback runs and r is freed. */
void nfsc_complete(struct nfsc_req *r, int status);
struct nfsc_req *nfsc_req_new(struct nfsc *n, const struct nfsc_cred *cr,
			      const struct nfsc_fh *fh, nfsc_issue_fn issue,
			      nfsc_cb cb, void *priv);
/* The request's completion frees what it owns (nfsc_complete). */
void nfsc_req_free(struct nfsc_req *r);

/* inject.c: each hook is a no-op unless its variable was set. */
void nfsc_inject_from_env(struct nfsc *n);
void nfsc_inject_commit_delay(struct nfsc *n);	/* caller's thread */
void nfsc_inject_access_delay(struct nfsc *n);	/* caller's thread */
void nfsc_inject_create_delay(struct nfsc *n);	/* caller's thread */
int nfsc_inject_change_hold(struct nfsc *n, const char *op, int status);
int nfsc_inject_commit_status(struct nfsc *n, int status);
void nfsc_inject_write_delay(struct nfsc *n, uint64_t off); /* caller's */
bool nfsc_inject_write_zero(struct nfsc *n);
bool nfsc_inject_auth_error(struct nfsc *n, uint32_t uid);

/* reply.c */
int nfsc_rpc_status(struct nfsc_req *r, int rpc_status, void *data);
/* The libnfs callback of every call (r is priv): see r->decode. */
void nfsc_reply(struct rpc_context *rpc, int status, void *data, void *priv);
int nfsc_attr_from_fattr3(struct nfsc_attr *a, const struct fattr3 *f);
void nfsc_post_op(const post_op_attr *p, struct nfsc_attr *attr,
		  bool *has_attr);
void nfsc_fh3_set(nfs_fh3 *dst, const struct nfsc_fh *fh);
int nfsc_fh_from3(struct nfsc_fh *dst, const nfs_fh3 *src);

/* calls.c */
int nfsc_submit_or_free(struct nfsc *n, int conn, struct nfsc_req *r);
/* GETATTR; refused while the origin is lost unless !idem (origin.c's
 * probes). */
int nfsc_getattr_submit(struct nfsc *n, int conn, const struct nfsc_cred *cr,
			const struct nfsc_fh *fh, struct nfsc_attr *attr,
			nfsc_cb cb, void *priv, bool idem);

#endif
