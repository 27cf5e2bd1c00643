/* gw_state.h - what a process needs to serve a FUSE connection another
 * one made (doc/takeover.md): the state shared with a successor.
 *
 * One memfd per mount, made by the process that mounted, passed with the
 * /dev/fuse descriptor to every successor (SCM_RIGHTS on an upgrade, kept
 * by the supervisor for a crash). It holds:
 *   - the FUSE_INIT request the kernel sent once per connection, as read:
 *     a successor replays it through fuse_session_process_buf;
 *   - what the first process negotiated (want, max_write, ...);
 *   - one record per open file or directory (fi->fh), indexed by the
 *     handle's slot, written before the open's reply and cleared at its
 *     release (handles.c): a successor adopts them;
 *   - in each writer's record, what of its file the origin answered
 *     UNSTABLE and has not committed (the verifier it came under), so
 *     that a successor after a crash can tell whether writes the dead
 *     process acknowledged survived (their COMMIT answers the same
 *     verifier), and the write error the writer has not been told yet;
 *   - the changes sent to the origin and not yet answered (intent.c);
 *   - the owners of locks taken at the origin (lock/locks.c): a
 *     successor lets them go when their holders close, as the process
 *     that took them would have;
 *   - takeover counters (generation, pause) and pids for the metrics.
 * The records are written by the request path without a lock: a record's
 * id is stored last (release) and cleared first; a successor reads them
 * only after the process that wrote them is gone or has stopped.
 */
#ifndef CACHEGW_GW_STATE_H
#define CACHEGW_GW_STATE_H

#include <limits.h>
#include <stdint.h>

#include "nfsc.h"

#define GW_STATE_MAGIC 0x31746174737767ULL	/* "gwstat1" */
/* Bump when the layout below changes. An upgrade from a process of
 * another version is refused before the old process stops, except from
 * GW_STATE_VERSION_PREV, whose layout is a prefix of this one (the new
 * process converts its state: gw_state_upgrade, takeover_state.c);
 * a binary of an older version never takes over from a newer one.
 *   2: everything up to recs[GW_STATE_SLOTS];
 *   3: the lock records after them (gw_state_locks). */
#define GW_STATE_VERSION 3
#define GW_STATE_VERSION_PREV 2
#define GW_STATE_INIT_MAX 512
#define GW_STATE_SLOTS (1024u * 4096u)	/* handles.c: H_PAGE * H_PAGES */
#define GW_STATE_INTENTS 512u
#define GW_STATE_LOCKS 4096u

enum { GW_HREC_FILE = 1, GW_HREC_DIR = 2 };

/* A writer's record of its file's data that the origin answered UNSTABLE
 * and that no COMMIT has covered yet (write_commit.c keeps it, for every
 * writer of the file, as the file's uncommitted extents change): */
enum {
	GW_UNSTABLE = 1,	/* there is some; verf: the verifier of a
				 * WRITE that sent it */
	GW_UNSTABLE_MIXED = 2,	/* it came under more than one verifier (or
				 * one WRITE's pieces under two): the origin
				 * restarted in between and lost some */
};

struct gw_hrec {
	uint64_t id;			/* fi->fh; 0: a free slot */
	uint64_t nodeid;
	uint32_t kind;			/* GW_HREC_FILE, GW_HREC_DIR */
	uint32_t writer;		/* opened for writing */
	int32_t werr;			/* a write error this writer has not
					 * been told yet (errseq) */
	uint32_t unstable;		/* GW_UNSTABLE, GW_UNSTABLE_MIXED */
	uint64_t verf;			/* with GW_UNSTABLE: the WRITE
					 * verifier (its 8 bytes) */
	struct nfsc_cred cred;		/* the opener's */
};

/* A change at the origin sent and not yet answered to the kernel
 * (intent.c). */
struct gw_intent_rec {
	uint64_t key;			/* 0: a free slot */
	uint64_t made;			/* a create: hash of the handle the
					 * origin answered; 0: none yet */
	uint8_t verf[8];		/* an O_EXCL create: its EXCLUSIVE
					 * verifier; zeros: none */
};

/* A lock owner's locks on one file at the origin (lock/locks.c): written
 * before its first LOCK is sent (so a lock granted just before a crash is
 * let go too), cleared once they are let go. */
struct gw_lock_rec {
	uint64_t nodeid;		/* 0: a free slot; stored last */
	uint64_t owner;			/* the kernel's lock owner */
	uint64_t file;			/* fi->fh it first locked through */
	uint32_t svid;			/* its NLM svid */
	uint32_t pad;
	struct nfsc_fh fh;
	struct nfsc_cred cred;
};

struct gw_state {
	uint64_t magic;
	uint32_t version;
	uint32_t init_len;		/* bytes of init[] */
	uint8_t init[GW_STATE_INIT_MAX];	/* the kernel's FUSE_INIT */
	/* negotiated by the first process (ops.c gw_init) */
	uint64_t want;
	uint32_t max_write, max_read, max_readahead, max_background;
	uint32_t congestion_threshold, time_gran;
	uint32_t negotiated;		/* the fields above are set */
	uint32_t handed_over;		/* the last process stopped cleanly:
					 * its writes committed, its handles'
					 * errors in werr */
	uint64_t generation;		/* takeovers since the mount */
	uint64_t stopped_ns;		/* CLOCK_MONOTONIC: the last process
					 * stopped taking requests (a takeover)
					 * or was seen dead (a crash) */
	uint64_t pause_ns;		/* the last takeover's: stopped_ns to
					 * the successor serving */
	int32_t serving_pid, supervisor_pid, previous_pid;
	uint32_t last_was_crash;
	uint32_t slots_hwm;		/* records at or past it were never
					 * written */
	/* Changes at the origin sent and not yet answered to the kernel
	 * (intent.c): one per operation. */
	struct gw_intent_rec intents[GW_STATE_INTENTS];
	struct gw_hrec recs[];		/* GW_STATE_SLOTS */
	/* then, from version 3: struct gw_lock_rec [GW_STATE_LOCKS], the
	 * owners of locks taken at the origin (lock/locks.c) */
};

/* Where version 2 ended: its size, and where the lock records begin. */
#define GW_STATE_LOCKS_OFF \
	(sizeof(struct gw_state) + (size_t)GW_STATE_SLOTS * sizeof(struct gw_hrec))
#define GW_STATE_SIZE_PREV GW_STATE_LOCKS_OFF
#define GW_STATE_SIZE \
	(GW_STATE_LOCKS_OFF + (size_t)GW_STATE_LOCKS * sizeof(struct gw_lock_rec))

_Static_assert(GW_STATE_LOCKS_OFF % _Alignof(struct gw_lock_rec) == 0,
	       "the lock records are aligned");

static inline struct gw_lock_rec *gw_state_locks(struct gw_state *st)
{
	return (struct gw_lock_rec *)((char *)st + GW_STATE_LOCKS_OFF);
}

/* The mapping of this process (NULL: none; then handles are not
 * recorded). Set at start, before any request. */
extern struct gw_state *gw_state;

#endif
