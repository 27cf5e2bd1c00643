/* nfsc_i.h - private to nfsclient/.
 *
 * pool.c:  connections, mount, service threads, submission queues.
 * calls.c: one request type per NFSv3 procedure: argument building, reply
 *          decoding, nfsstat3 -> errno.
 * sync.c:  sync helpers made from the async calls plus a stack waiter.
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
	struct nfsc_cred cred;
	struct nfsc_fh fh;		/* the object the call is about */
	char name[NFSC_NAME_MAX + 1];	/* LOOKUP, CREATE, ..., RENAME from */
	struct nfsc_fh fh2;		/* LINK/RENAME target directory */
	char name2[NFSC_NAME_MAX + 1];	/* LINK/RENAME target name */
	struct nfsc_sattr sa;		/* SETATTR, CREATE, MKDIR, ... */
	char *target;			/* SYMLINK, owned */
	unsigned tries;			/* timeouts seen so far */
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

struct nfsc {
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
};

/* pool.c */
int nfsc_submit(struct nfsc *n, int conn, struct nfsc_req *r);
/* Finish r: on -ETIMEDOUT, a hard mount resubmits it; otherwise the
 * caller's callback runs and r is freed. */
void nfsc_complete(struct nfsc_req *r, int status);
struct nfsc_req *nfsc_req_new(struct nfsc *n, const struct nfsc_cred *cr,
			      const struct nfsc_fh *fh, nfsc_issue_fn issue,
			      nfsc_cb cb, void *priv);

/* calls.c */
int nfsc_rpc_status(struct nfsc_req *r, int rpc_status, void *data);
void nfsc_attr_from_fattr3(struct nfsc_attr *a, const struct fattr3 *f);
void nfsc_post_op(const post_op_attr *p, struct nfsc_attr *attr,
		  bool *has_attr);
void nfsc_fh3_set(nfs_fh3 *dst, const struct nfsc_fh *fh);
int nfsc_fh_from3(struct nfsc_fh *dst, const nfs_fh3 *src);
int nfsc_submit_or_free(struct nfsc *n, int conn, struct nfsc_req *r);
/* The request's completion frees what it owns (nfsc_complete). */
void nfsc_req_free(struct nfsc_req *r);

#endif
