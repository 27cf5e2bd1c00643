/* fleet.h - the fleet store (fleet/): where the gateways of one origin
 * export agree on node-ids, so that a handle minted by one decodes on
 * another. This header is the module's whole interface.
 *
 * The store is a PostgreSQL database reached through libpq (doc/fleet.md
 * says why that engine). It holds, per export (named by the origin's
 * root file handle, which every gateway of the export gets from the
 * origin): the handle key the generations are computed with, the map
 * origin handle -> node-id (+ parent), and the gateways that serve it.
 * Node-ids come from one database sequence: never reused, the same on
 * every gateway. Every mapping this returns is committed (the store's own
 * durability: synchronous_commit, replication) before it returns.
 *
 * The gateway keeps what it learnt in its own node-id table (nodes/), so
 * a name or handle it knows never asks the store again, also after a
 * restart; the store is asked for new names (in batches: a listing's
 * worth in one round trip) and for node-ids this gateway never saw.
 *
 * The store may go away: every call that needs it then retries until it
 * is back (hard) or until the timeout (soft: -EIO); the loss and the
 * return are logged once each. Thread-safe.
 */
#ifndef CACHEGW_FLEET_H
#define CACHEGW_FLEET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lathist.h"

#define FLEET_KEY_LEN 16		/* bytes of the shared handle key */
#define FLEET_HANDLE_MAX 64		/* bytes of an origin handle */
#define FLEET_SCHEMA_VERSION 1
#define FLEET_FILE "fleet"		/* in cache_dir: what ties it to a
					 * store's export */

struct fleet;

struct fleet_opts {
	const char *conninfo;		/* libpq connection string or URI */
	const char *member;		/* this gateway's name in the store */
	const char *version;		/* this gateway's version */
	const char *origin;		/* the origin's URL, for people */
	const void *root_fh;		/* the export's root handle: names it */
	size_t root_len;
	bool hard;			/* wait for a lost store, or ... */
	unsigned timeout_s;		/* ... give up after this (soft) */
	unsigned heartbeat_s;		/* 0: 10 */
	void (*log)(const char *fmt, ...)
		__attribute__((format(printf, 1, 2)));
	/* Asked, in the waiting thread, between tries while the store is
	 * away: an errno > 0 ends the wait with it negated (the gateway is
	 * stopping; the request waiting was interrupted), 0 waits on. */
	int (*give_up)(void *arg);
	void *give_up_arg;
};

/* One name to map: an origin handle and the node-id of its directory. */
struct fleet_name {
	const uint8_t *h;
	size_t hlen;
	uint64_t parent;
};

enum fleet_call {
	FLEET_CALL_CONNECT,
	FLEET_CALL_ASSIGN,
	FLEET_CALL_RESOLVE,
	FLEET_CALL_PARENT,
	FLEET_CALL_HEARTBEAT,
	FLEET_CALL_MEMBERS,
	FLEET_NCALLS
};

struct fleet_call_stats {
	uint64_t calls;			/* round trips that got an answer */
	uint64_t errors;		/* round trips that did not */
	struct lat_hist lat;
};

struct fleet_stats {
	bool connected;
	uint64_t export_id;
	uint64_t losses;		/* times the store went away */
	uint64_t names_assigned;	/* handles sent to be named */
	struct fleet_call_stats call[FLEET_NCALLS];
};

/* One gateway of the export, as the store lists it. */
struct fleet_member {
	char name[128];
	char version[32];
	int64_t started;		/* unix seconds */
	int64_t heartbeat;		/* unix seconds */
	int pid;
};

/* Connect, create or check the schema (refusing one newer than this
 * gateway's), find or create the export's row and its key, and record
 * this gateway as a member; then a thread keeps the member's heartbeat.
 * With kept (a cache_dir's fleet file: fleet_keep_load), a store that
 * cannot be reached is not an error: the gateway starts on what it kept
 * and connects later. Without, it is: -EHOSTUNREACH with libpq's reason
 * in err. Other errors: -EPROTO (schema newer than ours, or the kept
 * export is not the store's one for this root: err says which), -ENOMEM. */
struct fleet_kept {
	uint64_t export_id;
	uint8_t key[FLEET_KEY_LEN];
};
int fleet_open(const struct fleet_opts *o, const struct fleet_kept *kept,
	       struct fleet **out, char *err, size_t errlen);

/* Mark this member stopped in the store (when reachable) and close. */
void fleet_close(struct fleet *f);

void fleet_key(const struct fleet *f, uint8_t key[FLEET_KEY_LEN]);
uint64_t fleet_export_id(const struct fleet *f);

/* Node-ids of n names, in one round trip (two when another gateway named
 * one of them at the same moment: then both get its one node-id). ids[i]
 * for names[i]; each mapping is committed in the store before this
 * returns. Calls that wait, of a few names (a CREATE's, a LOOKUP's), made
 * while another is in flight go to the store together in the next round
 * trip (group commit: one statement and one commit for all of them). !wait: a store that is away is not waited for (-EAGAIN at
 * once). 0, -EIO (soft, the store away past the timeout), -EINVAL (a
 * handle of 0 or more than FLEET_HANDLE_MAX bytes), -ENOMEM. */
int fleet_assign(struct fleet *f, const struct fleet_name *names, size_t n,
		 uint64_t *ids, bool wait);

/* Handle and parent of a node-id another gateway (or an earlier run)
 * named. *hlen: size of h in, length out. 0, -ENOENT (not this export's
 * node-id), -ERANGE, -EIO (soft, store away). */
int fleet_resolve(struct fleet *f, uint64_t id, void *h, size_t *hlen,
		  uint64_t *parent);

/* A directory moved: record its new parent. 0, -EIO. */
int fleet_set_parent(struct fleet *f, uint64_t id, uint64_t parent);

/* Up to max members of this export into out; the count, or -EIO. */
int fleet_members(struct fleet *f, struct fleet_member *out, size_t max);

void fleet_stats(struct fleet *f, struct fleet_stats *st);
const char *fleet_call_name(enum fleet_call c);

/* The cache_dir's fleet file: which store export its node-ids belong to.
 * load: 0, -ENOENT (none: not a fleet cache_dir), -EBADMSG (damaged).
 * save: written to a temporary file, fsynced, renamed, directory synced. */
int fleet_keep_load(const char *cache_dir, struct fleet_kept *k);
int fleet_keep_save(const char *cache_dir, const struct fleet_kept *k);

#endif
