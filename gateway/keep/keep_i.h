/* keep_i.h - the continuity room (gateway/keep/): what outlives a restart
 * or a takeover, kept where the next process finds it. One section per
 * file.
 *
 * kept_md.c: attributes, ACCESS answers and links' targets kept across a
 *            restart (md.log: nodes/md.c), and their records.
 * kept_names.c: names and listings kept across a restart.
 * offline.c: what is answered while the origin is lost (offline=).
 * intent.c:  changes a dead process made, answered as done to its
 *            successor (../gw_state.h: the state a successor inherits).
 * handles.c: open files and directories (fi->fh), recorded for a
 *            successor, released at exit when the kernel never did.
 * silly.c:   files unlinked or renamed over while open: hidden names.
 */
#ifndef CACHEGW_KEEP_I_H
#define CACHEGW_KEEP_I_H

#include "gw_i.h"

/* kept_md.c: attributes and ACCESS answers kept across a restart. */
struct gw_access;
uint64_t gw_md_now_ns(void);	/* CLOCK_REALTIME: a record's time */
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
/* cr (s) read dir's listing, of the version s is stamped with, from the
 * origin (gw_access_note_listed). */
void gw_md_note_reader(struct gw *gw, uint64_t dir, const struct gw_access *s);
/* The reader kept for this credential of dir's listing: true and *out. */
bool gw_md_reader_any(struct gw *gw, uint64_t dir, uint32_t uid,
		      uint32_t gid, uint64_t groups, struct gw_access *out);
/* A listing just read whole from the origin (version ver): keep it. Its
 * files are given node-ids (the records' keys): returns how many were new
 * in the node-id table, for the caller to tell reclaim. */
uint64_t gw_md_note_listing(struct gw *gw, struct gw_inode *dir,
			    const struct nfsc_attr *ver,
			    const struct nfsc_dirlist *l);
/* dir's listing from what a start before kept, if usable (and of version
 * ver when given): 0, *out and in *at (malloc'd, one per entry) when each
 * entry's attributes were fetched (CLOCK_MONOTONIC), or -ENOENT (ask the
 * origin). Who may see it is the caller's to check
 * (gw_access_kept_listing). */
int gw_md_listing(struct gw *gw, struct gw_inode *dir,
		  const struct nfsc_attr *ver, bool offline,
		  struct nfsc_dirlist *out, struct timespec **at);
/* The version of dir's kept listing, if there is one. */
bool gw_md_listing_version(struct gw *gw, struct gw_inode *dir,
			   struct nfsc_attr *ver);
/* The node-id kept for dir/name: 0 and *child, or -ENOENT (not kept;
 * or, unless offline, older than dir's attribute timeout, or kept in
 * this run). */
int gw_md_kept_child(struct gw *gw, struct gw_inode *dir, const char *name,
		     bool offline, uint64_t *child);
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
/* STATFS: the last answer kept (gw_offline_note_fsstat, with the time
 * the FSSTAT was sent, at), or -EHOSTDOWN. gw_fsstat_kept: the same if
 * it was asked for less than max_age seconds ago, else -ENODATA (ask the
 * origin). */
void gw_offline_note_fsstat(struct gw *gw, const struct nfsc_fsstat *fs,
			    const struct timespec *at);
int gw_offline_fsstat(struct gw *gw, struct nfsc_fsstat *fs);
int gw_fsstat_kept(struct gw *gw, double max_age, struct nfsc_fsstat *fs);

/* ---- intent.c: changes a dead process made, resent to its successor ----
 * A change as it is keyed: the operation, its directory and name, what
 * else makes it itself (LINK: the source's node-id in obj; SYMLINK: the
 * target in name2; RENAME: the new directory in obj, the new name in
 * name2; else 0 and NULL), and who asked (the caller's pid and uid).
 * gw_intent_begin before a change is sent (0: not kept); with verf, a new
 * random EXCLUSIVE verifier is made into it and kept with the key.
 * gw_intent_made once the origin gave the made file's handle;
 * gw_intent_end after the reply. gw_intent_was_done when it failed as a
 * repeat would (EEXIST, ENOENT): true if a dead process had sent this very
 * change (once per key), with its record in *rec (may be NULL): what that
 * process knew of the file it made (see gw_state.h). */
enum { GW_I_CREATE = 1, GW_I_MKDIR, GW_I_MKNOD, GW_I_SYMLINK, GW_I_LINK,
       GW_I_REMOVE, GW_I_RMDIR, GW_I_RENAME };
struct gw_intent {
	unsigned op;
	uint64_t dir;
	const char *name;
	uint64_t obj;
	const char *name2;
	uint32_t pid, uid;
};
struct gw_intent_rec;
unsigned gw_intent_begin(const struct gw_intent *in, uint8_t verf[8]);
void gw_intent_made(unsigned slot, const struct nfsc_fh *fh);
void gw_intent_end(unsigned slot);
bool gw_intent_was_done(const struct gw_intent *in, struct gw_intent_rec *rec);
/* The key of in, and the hash of a handle as a record keeps it. */
uint64_t gw_intent_key(const struct gw_intent *in);
uint64_t gw_intent_fh_hash(const struct nfsc_fh *fh);

/* ---- silly.c: files unlinked or renamed over while open ----
 * gw_silly_start removes the hidden names an earlier run left (recorded in
 * cache_dir); call it once the origin answers. */
struct gw_silly;
struct gw_silly_tab;
/* A successor: the hidden name of the file fileid, kept from the last
 * process (gw_silly_start with keep), is ino's again: removed at its
 * last close. */
void gw_silly_adopt(struct gw *gw, struct gw_inode *ino, uint64_t fileid);
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
/* The open file whose id the kernel sent (NULL if none). */
#define gw_file_of(fi) ((struct gw_file *)gw_handle_get((fi)->fh))
void gw_handle_del(struct gw_handle *h);	/* NULL, or off: nothing */
/* A successor's (gw_state.h): */
/* Record h for a successor (gw_state->recs), before the open's reply. */
void gw_handle_publish(struct gw_handle *h, unsigned kind, uint64_t nodeid,
		       const struct nfsc_cred *cred, bool writer);
/* List h under the id a dead or retired process gave the kernel: 0,
 * -EEXIST, -EINVAL, -ENOMEM. Before the first request only. */
int gw_handle_adopt(struct gw_handle *h,
		    void (*release)(struct gw *, struct gw_handle *),
		    uint64_t id);
/* h's record (gw_state->recs), or NULL: no state. */
struct gw_hrec *gw_handle_rec(const struct gw_handle *h);
/* After the last gw_handle_adopt: the slots between free again. */
int gw_handles_adopted(void);
/* Handing over (start.c's gw_handover_freeze): releases from now on
 * leave the records alone, for the successor. */
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
	struct gw_hrec *rec;		/* a writer's record for a successor,
					 * kept by the write path from when it
					 * is published (NULL: not yet, or no
					 * records); ino->lock */
	bool inval_attr;		/* the open found a new version: the
					 * kernel's attributes are stale */
};

/* ---- inside keep/: the records kept_md.c and kept_names.c share ----
 * Record types of md.log (nodes_md_put's kind; NODES_MD_DENT is the
 * store's own, for names): */
#define MD_ATTR 1
#define MD_ACCESS 2
#define MD_LISTED 3			/* a directory's whole listing is kept */
#define MD_LINK 4			/* a symbolic link's target (a link's
					 * target never changes: a new target
					 * is a new file) */
#define MD_READER 5			/* who read a directory's listing from
					 * the origin, per credential: an
					 * md_access stamped with the version
					 * read */
#define MD_LIST_MAX 65536		/* larger listings are not kept */
#define MD_NAME_MAX (NODES_MD_BLOB_MAX - 8)	/* longer names: not kept */

struct md_attr {
	uint8_t type;
	uint8_t pad[3];
	uint32_t mode, nlink, uid, gid, rdev_major, rdev_minor;
	uint64_t size, used, fsid, fileid;
	int64_t at_s, mt_s, ct_s;
	uint32_t at_ns, mt_ns, ct_ns;
} __attribute__((packed));

/* Attributes into and out of an MD_ATTR record; false for a record that
 * cannot be attributes. */
void md_pack_attr(const struct nfsc_attr *a, struct md_attr *m);
bool md_unpack_attr(const struct nodes_md_rec *r, struct nfsc_attr *a);
/* Seconds since a fetch at fetched_ns, or a negative number when the
 * clock went back since (then nothing kept is trusted). */
double md_age_of(uint64_t fetched_ns, uint64_t now_ns);
/* CLOCK_MONOTONIC "now minus age", as a timespec and in seconds. */
void md_mono_minus(double age, struct timespec *ts, double *secs);

#endif
