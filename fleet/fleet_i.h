/* fleet_i.h - inside the fleet store.
 *
 *   conn.c    the connection: connect with the gateway's defaults under
 *             the user's connection string, one call with retry while
 *             the store is away (hard waits, soft gives up), loss and
 *             return logged once each, calls counted and timed
 *   schema.c  what a (re)connect sets up: the schema (created on first
 *             use, versioned), the export's row and key, this member's
 *             row; the heartbeat thread; open and close
 *   ids.c     the calls: assign (batched; concurrent small ones grouped
 *             into one round trip), resolve, set_parent, members
 *   keep.c    the cache_dir's fleet file
 *
 * Lock: f->lock guards the connection and everything the calls change
 * (one call at a time per gateway). Nothing else is taken under it; it is
 * released while a call sleeps before retrying. f->group_lock guards the
 * group commit's queue (ids.c); it is never held with f->lock (a leader
 * drops it before it sends).
 */
#ifndef CACHEGW_FLEET_I_H
#define CACHEGW_FLEET_I_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include <libpq-fe.h>

#include "fleet.h"
#include "lockcheck.h"

struct fleet {
	char *conninfo, *member, *version, *origin;
	uint8_t root[FLEET_HANDLE_MAX];
	size_t root_len;
	bool hard;
	unsigned timeout_s, heartbeat_s;
	void (*log)(const char *fmt, ...);
	int (*give_up)(void *arg);
	void *give_up_arg;

	uint64_t export_id;		/* set once, before any call */
	uint8_t key[FLEET_KEY_LEN];
	bool have_export;		/* export_id and key are known */

	pthread_mutex_t lock;
	PGconn *pg;			/* lock; NULL while away */
	bool up;			/* lock; as last logged */
	bool broken;			/* lock; the store lost our export:
					 * never asked again */
	struct timespec down_since;	/* lock; when the store went away */
	struct timespec next_try;	/* lock; no connect before this */
	unsigned backoff_ms;		/* lock */
	uint64_t attempts;		/* lock; connects tried */
	char why[256];			/* lock; libpq's last reason */
	const char *prepared[8];	/* lock; the calls' SQL prepared on
					 * this connection (statement "sN"
					 * is prepared[N]) */
	unsigned nprepared;		/* lock */

	pthread_t hb;
	pthread_cond_t hb_cond;		/* lock */
	bool hb_started, stop;		/* lock */

	/* Group commit (ids.c): names that wait for the store, queued
	 * while an assign is in flight and sent together in the next. */
	pthread_mutex_t group_lock;
	pthread_cond_t group_cond;	/* group_lock; a group was answered */
	struct fleet_group_req *group_head;	/* group_lock; queued */
	struct fleet_group_req **group_tail;	/* group_lock */
	bool group_busy;		/* group_lock; a leader is sending */
	bool away;			/* atomic; the last call found the
					 * store away (a hint, ids.c) */

	uint64_t losses;		/* atomic */
	uint64_t names_assigned;	/* atomic */
	struct fleet_call_stats call[FLEET_NCALLS];	/* atomic */
};

/* conn.c */

/* Run one SQL call (text parameters, text results; sql is a static
 * string, prepared once per connection) until it gets an
 * answer: a result of status want (returned; the caller PQclears it),
 * or NULL with *err set: -EIO (SQL error, logged; soft and the store away
 * past the timeout; the export lost), -EAGAIN (once: the store is away
 * and !wait). Lock held; released while sleeping between attempts. */
PGresult *fleet_call_locked(struct fleet *f, enum fleet_call c,
			    const char *sql, int nparams,
			    const char *const *params, ExecStatusType want,
			    bool wait, int *err);

/* Connect now if away and due (lock held): 0 when connected. */
int fleet_connect_locked(struct fleet *f);

uint64_t fleet_now_ns(void);

/* schema.c: set up a new connection (schema, export, member). 0, or
 * -EPROTO (our export is not the store's: f->broken set), -EIO (SQL
 * error; the connection is dropped and tried again later). Lock held. */
int fleet_setup_locked(struct fleet *f, char *err, size_t errlen);

/* A bigint result field, or 0 when not a number. */
uint64_t fleet_u64(const PGresult *r, int row, int col);

/* Hex of n bytes into out (2n + 1 bytes). */
void fleet_hex(char *out, const uint8_t *b, size_t n);
/* Bytes of hex text: count, or -1 if not hex or longer than max. */
int fleet_unhex(uint8_t *out, size_t max, const char *hex);

#endif
