/* nfsc.h - cachegw's NFSv3 client (public API of nfsclient/).
 *
 * A pool of `nconnect` libnfs contexts to one export, each owned by one
 * service thread that polls its socket and an eventfd-fed submission queue.
 * Calls are NFSv3 by file handle through libnfs's raw RPC layer. Every call
 * carries the caller's credentials (AUTH_SYS). nfsclient/ knows nothing of
 * FUSE or of the cache.
 *
 * Conventions: functions return 0 or -errno. An async call returns 0 if it
 * was queued, and then its callback runs exactly once, on a service thread,
 * with status 0 or -errno (NFS errors mapped to the errno a local filesystem
 * would give: NFS3ERR_STALE -> -ESTALE, NFS3ERR_NOTEMPTY -> -ENOTEMPTY, ...).
 * It returns <0 if it was not queued, and then the callback never runs.
 * Output structures passed to an async call must stay valid until its
 * callback has run. Callbacks must not block for long: they run on the
 * thread that services the connection.
 */
#ifndef CACHEGW_NFSC_H
#define CACHEGW_NFSC_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "lathist.h"

#define NFSC_IO_MIN 4096	/* floor of READ/WRITE sizes from FSINFO */
#define NFSC_FH_MAX 64		/* NFSv3 file handles are at most 64 bytes */
#define NFSC_NGROUPS_MAX 16	/* AUTH_SYS carries at most 16 groups */
#define NFSC_NAME_MAX 255
/* What a 0 in struct nfsc_opts stands for; the gateway's options table
 * (daemon/opts.c) takes its defaults from these. */
#define NFSC_NCONNECT_DEFAULT 4
#define NFSC_NCONNECT_MAX 64
#define NFSC_TIMEO_DEFAULT 600		/* deciseconds */
#define NFSC_RETRANS_DEFAULT 3

struct nfsc;			/* a connection pool to one export */

struct nfsc_fh {
	uint32_t len;
	uint8_t data[NFSC_FH_MAX];
};

enum nfsc_type {
	NFSC_REG = 1, NFSC_DIR, NFSC_BLK, NFSC_CHR, NFSC_LNK, NFSC_SOCK,
	NFSC_FIFO,
};

struct nfsc_attr {
	enum nfsc_type type;
	uint32_t mode;			/* permission bits only (07777) */
	uint32_t nlink;
	uint32_t uid, gid;
	uint64_t size;			/* bytes */
	uint64_t used;			/* bytes allocated at the origin */
	uint32_t rdev_major, rdev_minor;
	uint64_t fsid;
	uint64_t fileid;
	struct timespec atime, mtime, ctime;
};

struct nfsc_cred {
	uint32_t uid, gid;
	uint32_t ngroups;
	uint32_t groups[NFSC_NGROUPS_MAX];
};

struct nfsc_opts {
	unsigned nconnect;		/* connections, at most
					 * NFSC_NCONNECT_MAX; 0: the default */
	uint32_t rsize, wsize;		/* caps in bytes; 0 = server's max */
	unsigned timeo;			/* deciseconds before a retry; 0: the
					 * default */
	unsigned retrans;		/* retries before a soft call fails; 0:
					 * the default */
	bool soft;			/* fail with -ETIMEDOUT instead of retrying
					 * forever (hard, the default) */
	unsigned offline;		/* seconds without an answer after which
					 * the origin is lost (origin.c); 0:
					 * never */
	const struct nfsc_fh *known_root; /* the export's root handle as
					 * last known, and where */
	const char *lock_caller;	/* NLM caller_name of this gateway
					 * (nlm.c; NULL: "cachegw"); copied */
	const char *known_where;	/* from ("SERVER:EXPORT"); if given,
					 * the origin cannot be reached and
					 * the URL names that export,
					 * nfsc_open succeeds started_lost and
					 * each connection is made by its
					 * thread when the origin answers;
					 * calls wait for it meanwhile (with
					 * offline, the origin is lost from
					 * the start) */
};

struct nfsc_fsinfo {
	uint32_t rtmax, rtpref, wtmax, wtpref, dtpref;
	uint64_t maxfilesize;
};

struct nfsc_fsstat {
	uint64_t tbytes, fbytes, abytes;
	uint64_t tfiles, ffiles, afiles;
};

/* One directory entry from READDIRPLUS. */
struct nfsc_dirent {
	char *name;			/* NUL-terminated, owned by the list */
	uint64_t fileid;
	uint64_t cookie;
	bool has_attr, has_fh;
	struct nfsc_attr attr;
	struct nfsc_fh fh;
};

#define NFSC_NAME_MAX 255		/* longer names are skipped, as is "" and
					 * any name with '/' */
struct nfsc_dirlist {
	struct nfsc_dirent *ents;
	size_t n, cap;
	size_t max;			/* more entries: -EFBIG; 0 = no cap */
	size_t skipped;			/* entries with names skipped */
	char skipped_first[64];		/* the first one's name, cut short */
	bool seen_dot, seen_dotdot;
};

/* Attributes to change (SETATTR, and the initial ones of CREATE/MKDIR/...).
 * A field is sent only when its set_ flag is true. */
enum nfsc_time_how { NFSC_TIME_KEEP = 0, NFSC_TIME_SERVER, NFSC_TIME_CLIENT };
struct nfsc_sattr {
	bool set_mode, set_uid, set_gid, set_size;
	uint32_t mode, uid, gid;
	uint64_t size;
	enum nfsc_time_how atime_how, mtime_how;
	struct timespec atime, mtime;
};

/* NFSv3 pre-operation attributes (wcc_attr): what the origin says the
 * object was just before the call changed it. */
struct nfsc_wcc {
	uint64_t size;
	struct timespec mtime, ctime;
};

/* Post-operation attributes of the object a call changed; for calls whose
 * reply carries wcc_data (SETATTR, WRITE, COMMIT) also the pre-operation
 * ones, when the origin sends them (FreeBSD's nfsd does for WRITE; knfsd
 * only for SETATTR, nfs-ganesha 4.3 never). */
struct nfsc_post {
	bool has_attr;
	struct nfsc_attr attr;
	bool has_pre;
	struct nfsc_wcc pre;
};

/* What CREATE, MKDIR, SYMLINK and MKNOD answer: the new object, and the
 * directory's wcc_data (dir: its attributes after the change). */
struct nfsc_created {
	bool has_fh, has_attr;
	struct nfsc_fh fh;
	struct nfsc_attr attr;
	struct nfsc_post dir;
};

typedef void (*nfsc_cb)(int status, void *priv);

/* A countdown of async calls, usually on the caller's stack: add before
 * each call, pass nfsc_waiter_done (an nfsc_cb) and the waiter to it (or
 * call it with the error of a call that was not queued), then wait: the
 * first error of them all, or 0. wait destroys the waiter. */
struct nfsc_waiter {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned pending;		/* calls not yet completed, lock */
	int status;			/* first error seen, lock */
};
void nfsc_waiter_init(struct nfsc_waiter *w);
void nfsc_waiter_add(struct nfsc_waiter *w);
void nfsc_waiter_done(int status, void *waiter);
int nfsc_waiter_wait(struct nfsc_waiter *w);

/* Connect `nconnect` contexts to the export named by url (libnfs URL syntax,
 * with its arguments: nfsport=, mountport=, uid=, gid=, ...), mount it once,
 * read FSINFO. Service threads are not started yet (so that the caller may
 * fork); call nfsc_start() before the first call. On failure a one-line
 * reason is written to err and -errno returned: -EINVAL for a URL that is not
 * an NFS URL, -ENOENT for an export the server does not have, -ECONNREFUSED /
 * -EHOSTUNREACH / -ETIMEDOUT for a server that cannot be reached. */
int nfsc_open(const char *url, const struct nfsc_opts *opts, struct nfsc **out,
	      char *err, size_t errlen);
/* Test-only fault injection, read from the environment by nfsc_open (each
 * logs a line on stderr when it fires, so a test can act at that moment):
 *   CACHEGW_INJECT_COMMIT_DELAY=MS         every COMMIT waits MS before it
 *                                          is sent (on the caller's thread)
 *   CACHEGW_INJECT_COMMIT_ERROR=ERRNO[:N]  the next N COMMITs (all if no N)
 *                                          that succeed fail with ERRNO (a
 *                                          number or EIO, ENOSPC, ...)
 *   CACHEGW_INJECT_WRITE_DELAY=OFF:MS      the first WRITE at offset >= OFF
 *                                          waits MS before it is queued
 *   CACHEGW_INJECT_ACCESS_DELAY=MS[:N]     the next N ACCESS calls (all if
 *                                          no N) wait MS before they are
 *                                          sent (on the caller's thread)
 *   CACHEGW_INJECT_CREATE_DELAY=MS[:N]     the next N CREATE calls (all if
 *                                          no N) wait MS before they are
 *                                          sent (on the caller's thread)
 *   CACHEGW_INJECT_CHANGE_HOLD=MS[:N]      the next N changes of a name (a
 *                                          CREATE, MKDIR, MKNOD, SYMLINK,
 *                                          LINK, REMOVE, RMDIR, RENAME) the
 *                                          origin has done (all if no N)
 *                                          wait MS before their caller hears
 *                                          of it: "done at the origin, not
 *                                          answered" (a crash's window)
 *   CACHEGW_INJECT_RELEASE=PATH            a call held by those above (not a
 *                                          COMMIT ERROR) also waits (up
 *                                          to 120 s)
 *                                          until PATH exists: a test acts
 *                                          while it is held, however slowly
 *   CACHEGW_INJECT_WRITE_ZERO=N            the next N WRITE replies (all if
 *                                          N is 0) say 0 bytes, status OK
 *   CACHEGW_INJECT_AUTH_ERROR=UID          AUTH_SYS credentials for UID
 *                                          cannot be built (as if
 *                                          libnfs_authunix_create failed) */
int nfsc_start(struct nfsc *n);
/* Stop the threads (in-flight calls complete with -ECANCELED) and free. */
void nfsc_close(struct nfsc *n);

const struct nfsc_fh *nfsc_root(const struct nfsc *n);
const char *nfsc_server(const struct nfsc *n);
const char *nfsc_export(const struct nfsc *n);
uint32_t nfsc_rsize(const struct nfsc *n);
uint32_t nfsc_wsize(const struct nfsc *n);
unsigned nfsc_nconnect(const struct nfsc *n);
/* Bytes of READ payload received from the origin since nfsc_open(). */
uint64_t nfsc_read_bytes(const struct nfsc *n);
/* Bytes the origin accepted in WRITE replies since nfsc_open(). */
uint64_t nfsc_write_bytes(const struct nfsc *n);

/* The origin lost and back (origin.c), with opts.offline: the origin is
 * lost once it has not answered any call for opts.offline seconds (a
 * probe, GETATTR of the root as root, goes out each second the origin is
 * quiet, so an idle gateway notices too); it is back at its next answer.
 * While it is lost the idempotent calls (GETATTR, LOOKUP, ACCESS,
 * READLINK, FSSTAT, READ, READDIRPLUS) fail at once with -EHOSTDOWN and
 * synchronous waits for them end with -EHOSTDOWN (the call goes on, its
 * answer dropped); every other call is queued as always (a hard mount
 * waits, a soft one times out). One line on stderr at each change. */
struct nfsc_origin_stat {
	bool lost;
	bool started_lost;		/* nfsc_open could not reach it */
	uint64_t lost_total;		/* times lost */
	uint64_t back_total;		/* times back */
	uint64_t refused;		/* calls failed with -EHOSTDOWN */
	uint64_t probes;		/* probes sent */
};
bool nfsc_origin_lost(const struct nfsc *n);
void nfsc_origin_stat(const struct nfsc *n, struct nfsc_origin_stat *out);

/* Interrupts: a thread that serves a request arms its token (any pointer
 * that stays unique while the request lives, e.g. the fuse_req_t) before
 * it makes synchronous calls; nfsc_intr_fire(i, token, err) from any
 * thread then ends the thread's waits for idempotent calls (nfsc_getattr,
 * nfsc_lookup, nfsc_access, nfsc_readlink, nfsc_fsstat) with -err (an
 * errno > 0: the caller says what an interrupted wait answers), the one
 * in progress and any later, until the thread arms another token or
 * disarms. An abandoned call goes on; its answer is dropped. A fire for a
 * token no longer armed does nothing. nfsc_intr_arm returns the thread's
 * state to pass to nfsc_intr_fire (NULL if it could not be made: then
 * nothing is interruptible). */
struct nfsc_intr;
struct nfsc_intr *nfsc_intr_arm(const void *token);
void nfsc_intr_disarm(void);
void nfsc_intr_fire(struct nfsc_intr *i, const void *token, int err);

/* Origin calls by NFSv3 procedure (0 NULL .. 21 COMMIT), as nfsstat and
 * mountstats give a kernel client's admin: calls answered (a call retried
 * after a timeout counts once, when it ends), of them ended with an error
 * (the origin's status or the transport's), timeouts seen (each retry),
 * and the time from first sending to the answer. Calls that never reached
 * the wire (stopping, no credentials) are not counted. */
#define NFSC_NPROC 22
struct nfsc_proc_stat {
	uint64_t calls;			/* atomic */
	uint64_t errors;		/* atomic */
	uint64_t timeouts;		/* atomic */
	struct lat_hist lat;		/* first send -> answer */
};
/* "lookup", "readdirplus", ...; NULL for a procedure the gateway never
 * sends (and past NFSC_NPROC). */
const char *nfsc_proc_name(unsigned proc);
/* A copy of proc's counters (zero past NFSC_NPROC). */
void nfsc_proc_stat(const struct nfsc *n, unsigned proc,
		    struct nfsc_proc_stat *out);

/* Map an NFSv3 status to -errno (0 for NFS3_OK). */
int nfsc_status_to_errno(int nfsstat3);

/* ---- async calls: 0 if queued (callback will run), <0 if not ---- */

/* conn selects the connection (taken modulo nconnect); pass -1 for
 * round-robin. Spreading a large read over connections is the caller's
 * choice. */
int nfsc_getattr_async(struct nfsc *n, int conn, const struct nfsc_cred *cr,
		       const struct nfsc_fh *fh, struct nfsc_attr *attr,
		       nfsc_cb cb, void *priv);
/* On success *out and (when *has_attr) *attr describe name in dir. */
int nfsc_lookup_async(struct nfsc *n, int conn, const struct nfsc_cred *cr,
		      const struct nfsc_fh *dir, const char *name,
		      struct nfsc_fh *out, struct nfsc_attr *attr,
		      bool *has_attr, nfsc_cb cb, void *priv);
/* *granted receives the subset of mask (ACCESS3_* bits) the origin grants;
 * post (may be NULL) the object's attributes, which come with the reply. */
int nfsc_access_async(struct nfsc *n, int conn, const struct nfsc_cred *cr,
		      const struct nfsc_fh *fh, uint32_t mask,
		      uint32_t *granted, struct nfsc_post *post,
		      nfsc_cb cb, void *priv);
/* Read up to count bytes at off into buf. *got receives the bytes read, *eof
 * whether the read reached the end of the file; *attr (when *has_attr) the
 * file's post-op attributes. */
int nfsc_read_async(struct nfsc *n, int conn, const struct nfsc_cred *cr,
		    const struct nfsc_fh *fh, uint64_t off, uint32_t count,
		    void *buf, uint32_t *got, bool *eof,
		    struct nfsc_attr *attr, bool *has_attr,
		    nfsc_cb cb, void *priv);
/* One READDIRPLUS round: appends entries to list, updates *cookie and verf
 * (8 bytes) for the next round, sets *eof at the end of the directory. */
int nfsc_readdirplus_async(struct nfsc *n, int conn, const struct nfsc_cred *cr,
			   const struct nfsc_fh *dir, uint64_t *cookie,
			   uint8_t verf[8], struct nfsc_dirlist *list,
			   bool *eof, nfsc_cb cb, void *priv);
/* buf receives the NUL-terminated target (truncated to size-1). */
int nfsc_readlink_async(struct nfsc *n, int conn, const struct nfsc_cred *cr,
			const struct nfsc_fh *fh, char *buf, size_t size,
			nfsc_cb cb, void *priv);
int nfsc_fsstat_async(struct nfsc *n, int conn, const struct nfsc_cred *cr,
		      const struct nfsc_fh *fh, struct nfsc_fsstat *st,
		      nfsc_cb cb, void *priv);
int nfsc_fsinfo_async(struct nfsc *n, int conn, const struct nfsc_cred *cr,
		      const struct nfsc_fh *fh, struct nfsc_fsinfo *fi,
		      nfsc_cb cb, void *priv);

/* ---- calls that change the origin (calls_write.c) ---- */

int nfsc_setattr_async(struct nfsc *n, int conn, const struct nfsc_cred *cr,
		       const struct nfsc_fh *fh, const struct nfsc_sattr *sa,
		       struct nfsc_post *post, nfsc_cb cb, void *priv);
/* WRITE count bytes of buf at off; stable: FILE_SYNC instead of UNSTABLE.
 * *written receives the bytes the origin took, verf its write verifier. */
int nfsc_write_async(struct nfsc *n, int conn, const struct nfsc_cred *cr,
		     const struct nfsc_fh *fh, uint64_t off, uint32_t count,
		     const void *buf, bool stable, uint32_t *written,
		     uint8_t verf[8], struct nfsc_post *post,
		     nfsc_cb cb, void *priv);
/* COMMIT the whole file; verf receives the verifier to compare with the
 * WRITEs': a different one means the origin lost them (it rebooted). */
int nfsc_commit_async(struct nfsc *n, int conn, const struct nfsc_cred *cr,
		      const struct nfsc_fh *fh, uint8_t verf[8],
		      struct nfsc_post *post, nfsc_cb cb, void *priv);
/* CREATE a regular file; exclusive: GUARDED (fails -EEXIST). */
int nfsc_create_async(struct nfsc *n, int conn, const struct nfsc_cred *cr,
		      const struct nfsc_fh *dir, const char *name,
		      const struct nfsc_sattr *sa, bool exclusive,
		      struct nfsc_created *out, nfsc_cb cb, void *priv);
/* CREATE a regular file EXCLUSIVE with verifier verf (NFSv3 createverf3):
 * the origin keeps verf with the file (in its atime and mtime, as a rule)
 * and answers a repeat with the same verifier as done, with that file;
 * any other existing file fails -EEXIST. No attributes are set: SETATTR
 * them after (which also replaces the verifier), as the kernel's NFS
 * client does. */
int nfsc_create_verf_async(struct nfsc *n, int conn,
			   const struct nfsc_cred *cr,
			   const struct nfsc_fh *dir, const char *name,
			   const uint8_t verf[8], struct nfsc_created *out,
			   nfsc_cb cb, void *priv);
int nfsc_mkdir_async(struct nfsc *n, int conn, const struct nfsc_cred *cr,
		     const struct nfsc_fh *dir, const char *name,
		     const struct nfsc_sattr *sa, struct nfsc_created *out,
		     nfsc_cb cb, void *priv);
int nfsc_symlink_async(struct nfsc *n, int conn, const struct nfsc_cred *cr,
		       const struct nfsc_fh *dir, const char *name,
		       const char *target, struct nfsc_created *out,
		       nfsc_cb cb, void *priv);
/* MKNOD of a FIFO, socket or device (type NFSC_FIFO/SOCK/CHR/BLK). */
int nfsc_mknod_async(struct nfsc *n, int conn, const struct nfsc_cred *cr,
		     const struct nfsc_fh *dir, const char *name,
		     enum nfsc_type type, const struct nfsc_sattr *sa,
		     uint32_t major, uint32_t minor, struct nfsc_created *out,
		     nfsc_cb cb, void *priv);
/* LINK fh as dir/name; post receives fh's new attributes (nlink). */
int nfsc_link_async(struct nfsc *n, int conn, const struct nfsc_cred *cr,
		    const struct nfsc_fh *fh, const struct nfsc_fh *dir,
		    const char *name, struct nfsc_post *post,
		    nfsc_cb cb, void *priv);
int nfsc_remove_async(struct nfsc *n, int conn, const struct nfsc_cred *cr,
		      const struct nfsc_fh *dir, const char *name,
		      nfsc_cb cb, void *priv);
int nfsc_rmdir_async(struct nfsc *n, int conn, const struct nfsc_cred *cr,
		     const struct nfsc_fh *dir, const char *name,
		     nfsc_cb cb, void *priv);
int nfsc_rename_async(struct nfsc *n, int conn, const struct nfsc_cred *cr,
		      const struct nfsc_fh *fromdir, const char *from,
		      const struct nfsc_fh *todir, const char *to,
		      nfsc_cb cb, void *priv);

/* ---- byte-range locks at the origin: NLM v4 (nlm.c) ----
 * On a connection of their own to the origin's lock manager: its port is
 * nlmport= of the URL, or rpcbind's. Synchronous; never from a callback.
 * Every LOCK is non-blocking: a caller that waits asks again. An owner is
 * oh (text, unique per lock owner of the caller) with svid (a 32-bit id
 * per owner: some servers, knfsd among them, tell owners by svid alone),
 * both the same on every call for that owner. len 0: to the end of the
 * file and beyond. Returns 0; -EAGAIN (held by another owner: for TEST,
 * *holder is that lock, its oh empty); -EINPROGRESS (the origin is in its
 * grace period: ask again later); -EDEADLK, -ESTALE, -EROFS, -EFBIG as
 * the origin says; -ENOLCK (no locks there, the lock manager cannot be
 * reached on a soft mount, or the origin is lost with offline=);
 * -ECANCELED/-ESHUTDOWN (the gateway stops). */
#define NFSC_LOCK_OH_MAX 48
struct nfsc_lock {
	uint64_t off, len;
	bool exclusive;
	uint32_t svid;
	bool reclaim;			/* LOCK: a reclaim after the origin
					 * restarted (only in its grace
					 * period; outside it the origin
					 * answers -EINPROGRESS) */
	char oh[NFSC_LOCK_OH_MAX];	/* NUL-terminated (libnfs 4.0 sends
					 * the owner handle as a string) */
};
int nfsc_lock_test(struct nfsc *n, const struct nfsc_cred *cr,
		   const struct nfsc_fh *fh, const struct nfsc_lock *lk,
		   struct nfsc_lock *holder);
int nfsc_lock(struct nfsc *n, const struct nfsc_cred *cr,
	      const struct nfsc_fh *fh, const struct nfsc_lock *lk);
int nfsc_unlock(struct nfsc *n, const struct nfsc_cred *cr,
		const struct nfsc_fh *fh, const struct nfsc_lock *lk);
/* Before nfsc_start: state is this gateway's NSM state number, sent in
 * every LOCK (a server that hears of a reboot keeps the locks taken with
 * the new number); notify: the gateway started cold, so the origin's
 * status monitor is told first (SM_NOTIFY with caller_name and state) and
 * its lock manager lets go what an earlier instance held. */
void nfsc_lock_nsm(struct nfsc *n, int state, bool notify);
/* keep: the lock manager's connection is made again at once when it
 * fails, also with no call waiting (the gateway holds locks there). The
 * epoch counts the connections made after a failure: each may be to an
 * origin that restarted and lost our locks. */
void nfsc_lock_keep(struct nfsc *n, bool keep);
uint64_t nfsc_lock_epoch(const struct nfsc *n);
/* NLM calls sent, and of them ended with an error (denials count). No
 * CANCEL is ever needed: no LOCK is left blocked at the origin. */
void nfsc_lock_stat(const struct nfsc *n, uint64_t *calls,
		    uint64_t *errors);

/* ---- sync helpers, built on the async calls; must not be called from a
 * callback ---- */
int nfsc_getattr(struct nfsc *n, const struct nfsc_cred *cr,
		 const struct nfsc_fh *fh, struct nfsc_attr *attr);
int nfsc_lookup(struct nfsc *n, const struct nfsc_cred *cr,
		const struct nfsc_fh *dir, const char *name,
		struct nfsc_fh *out, struct nfsc_attr *attr, bool *has_attr);
int nfsc_access(struct nfsc *n, const struct nfsc_cred *cr,
		const struct nfsc_fh *fh, uint32_t mask, uint32_t *granted,
		struct nfsc_post *post);
int nfsc_readlink(struct nfsc *n, const struct nfsc_cred *cr,
		  const struct nfsc_fh *fh, char *buf, size_t size);
int nfsc_fsstat(struct nfsc *n, const struct nfsc_cred *cr,
		const struct nfsc_fh *fh, struct nfsc_fsstat *st);
/* Read the whole directory (READDIRPLUS rounds until eof). Entries with
 * names the kernel would refuse are skipped and counted (list->skipped);
 * more than max entries (0: no cap) fail with -EFBIG. */
int nfsc_readdir_all(struct nfsc *n, const struct nfsc_cred *cr,
		     const struct nfsc_fh *dir, struct nfsc_dirlist *list,
		     size_t max);
void nfsc_dirlist_free(struct nfsc_dirlist *list);
/* Read [off, off+len) with READs of rsize spread over the connections, in
 * parallel. Returns the bytes read (short only at end of file) or -errno.
 * *attr receives the newest post-op attributes when *has_attr. */
ssize_t nfsc_pread(struct nfsc *n, const struct nfsc_cred *cr,
		   const struct nfsc_fh *fh, void *buf, size_t len,
		   uint64_t off, struct nfsc_attr *attr, bool *has_attr);

int nfsc_setattr(struct nfsc *n, const struct nfsc_cred *cr,
		 const struct nfsc_fh *fh, const struct nfsc_sattr *sa,
		 struct nfsc_post *post);
int nfsc_commit(struct nfsc *n, const struct nfsc_cred *cr,
		const struct nfsc_fh *fh, uint8_t verf[8],
		struct nfsc_post *post);
int nfsc_create(struct nfsc *n, const struct nfsc_cred *cr,
		const struct nfsc_fh *dir, const char *name,
		const struct nfsc_sattr *sa, bool exclusive,
		struct nfsc_created *out);
/* again: the repeat of a create sent before with the same verifier (to
 * learn whether it made the file): fault injection does not hold it. */
int nfsc_create_verf(struct nfsc *n, const struct nfsc_cred *cr,
		     const struct nfsc_fh *dir, const char *name,
		     const uint8_t verf[8], bool again,
		     struct nfsc_created *out);
int nfsc_mkdir(struct nfsc *n, const struct nfsc_cred *cr,
	       const struct nfsc_fh *dir, const char *name,
	       const struct nfsc_sattr *sa, struct nfsc_created *out);
int nfsc_symlink(struct nfsc *n, const struct nfsc_cred *cr,
		 const struct nfsc_fh *dir, const char *name,
		 const char *target, struct nfsc_created *out);
int nfsc_mknod(struct nfsc *n, const struct nfsc_cred *cr,
	       const struct nfsc_fh *dir, const char *name,
	       enum nfsc_type type, const struct nfsc_sattr *sa,
	       uint32_t major, uint32_t minor, struct nfsc_created *out);
int nfsc_link(struct nfsc *n, const struct nfsc_cred *cr,
	      const struct nfsc_fh *fh, const struct nfsc_fh *dir,
	      const char *name, struct nfsc_post *post);
int nfsc_remove(struct nfsc *n, const struct nfsc_cred *cr,
		const struct nfsc_fh *dir, const char *name);
int nfsc_rmdir(struct nfsc *n, const struct nfsc_cred *cr,
	       const struct nfsc_fh *dir, const char *name);
int nfsc_rename(struct nfsc *n, const struct nfsc_cred *cr,
		const struct nfsc_fh *fromdir, const char *from,
		const struct nfsc_fh *todir, const char *to);

#endif
