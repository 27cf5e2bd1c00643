/* schema.c - what each (re)connect sets up, the heartbeat, open and close.
 *
 * Schema version 1 (created on first use, in one transaction under an
 * advisory lock so that two gateways starting at once make it once):
 *   cachegw_schema (version)
 *   cachegw_nodeid: the sequence node-ids come from (never reused)
 *   cachegw_export: one row per origin export, named by its root handle,
 *                   with the handle key its generations are computed with
 *   cachegw_node:   (export, node-id) <-> (export, origin handle), parent
 *                   (no foreign key to cachegw_export: its check per row
 *                   was half the time of a listing's insert)
 *   cachegw_member: the gateways of an export, with their heartbeat
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "fleet_i.h"
#include "seterr.h"

#define SCHEMA_LOCK "8355711001"	/* pg_advisory_xact_lock key */

static const char schema_v1[] =
	"CREATE SEQUENCE cachegw_nodeid MINVALUE 2 START 2;"
	"CREATE TABLE cachegw_export ("
	" export_id bigserial PRIMARY KEY,"
	" root_fh bytea NOT NULL UNIQUE,"
	" origin text NOT NULL,"
	" handle_key bytea NOT NULL,"
	" created timestamptz NOT NULL DEFAULT now());"
	"CREATE TABLE cachegw_node ("
	" export_id bigint NOT NULL,"
	" nodeid bigint NOT NULL,"
	" fh bytea NOT NULL,"
	" parent bigint NOT NULL,"
	" PRIMARY KEY (export_id, nodeid),"
	" UNIQUE (export_id, fh));"
	"CREATE TABLE cachegw_member ("
	" export_id bigint NOT NULL REFERENCES cachegw_export,"
	" name text NOT NULL,"
	" version text NOT NULL,"
	" pid integer NOT NULL,"
	" started timestamptz NOT NULL,"
	" heartbeat timestamptz NOT NULL,"
	" stopped timestamptz,"
	" PRIMARY KEY (export_id, name));"
	"INSERT INTO cachegw_schema VALUES (1);";

/* One statement on the connection as it is: the result if its status is
 * want, else NULL (err says why; the connection may be gone). */
static PGresult *q(struct fleet *f, const char *sql, int n,
		   const char *const *p, ExecStatusType want, char *err,
		   size_t errlen)
{
	/* Without parameters, as a simple query: it may hold several
	 * statements (the schema). */
	PGresult *r = n ? PQexecParams(f->pg, sql, n, NULL, p, NULL, NULL, 0) :
			  PQexec(f->pg, sql);

	if (r && PQresultStatus(r) == want)
		return r;
	seterr(err, errlen, "%s", r ? PQresultErrorMessage(r) :
				      PQerrorMessage(f->pg));
	PQclear(r);
	return NULL;
}

static int exec(struct fleet *f, const char *sql, char *err, size_t errlen)
{
	PGresult *r = q(f, sql, 0, NULL, PGRES_COMMAND_OK, err, errlen);

	PQclear(r);
	return r ? 0 : -EIO;
}

static int schema(struct fleet *f, char *err, size_t errlen)
{
	PGresult *r;
	int ret, version = 0;

	if (exec(f, "BEGIN", err, errlen))
		return -EIO;
	r = q(f, "SELECT pg_advisory_xact_lock(" SCHEMA_LOCK ")", 0, NULL,
	      PGRES_TUPLES_OK, err, errlen);
	if (!r)
		goto fail;
	PQclear(r);
	if (exec(f, "SET LOCAL client_min_messages = warning;"
		 "CREATE TABLE IF NOT EXISTS cachegw_schema "
		 "(version integer NOT NULL)", err, errlen))
		goto fail;
	r = q(f, "SELECT max(version) FROM cachegw_schema", 0, NULL,
	      PGRES_TUPLES_OK, err, errlen);
	if (!r)
		goto fail;
	version = (int)fleet_u64(r, 0, 0);
	PQclear(r);
	if (version > FLEET_SCHEMA_VERSION) {
		seterr(err, errlen, "the store's schema is version %d, newer "
		       "than this gateway's (%d): upgrade the gateway",
		       version, FLEET_SCHEMA_VERSION);
		exec(f, "ROLLBACK", NULL, 0);
		return -EPROTO;
	}
	if (!version && exec(f, schema_v1, err, errlen))
		goto fail;
	ret = exec(f, "COMMIT", err, errlen);
	return ret;
fail:
	exec(f, "ROLLBACK", NULL, 0);
	return -EIO;
}

/* Find or make the export's row; a kept or earlier-known export must be
 * the same row with the same key (else the store was replaced, and its
 * node-ids are not ours: never answer from it). */
static int export_row(struct fleet *f, char *err, size_t errlen)
{
	char root[2 * FLEET_HANDLE_MAX + 1], key[2 * FLEET_KEY_LEN + 1];
	const char *p[3] = { root, f->origin, key };
	uint8_t newkey[FLEET_KEY_LEN], got[FLEET_KEY_LEN];
	PGresult *r;
	uint64_t id;

	fleet_hex(root, f->root, f->root_len);
	if (getrandom(newkey, sizeof(newkey), 0) != sizeof(newkey)) {
		seterr(err, errlen, "getrandom: %s", strerror(errno));
		return -EIO;
	}
	fleet_hex(key, newkey, sizeof(newkey));
	r = q(f, "INSERT INTO cachegw_export (root_fh, origin, handle_key) "
	      "VALUES (decode($1, 'hex'), $2, decode($3, 'hex')) "
	      "ON CONFLICT (root_fh) DO NOTHING", 3, p, PGRES_COMMAND_OK,
	      err, errlen);
	if (!r)
		return -EIO;
	PQclear(r);
	r = q(f, "SELECT export_id, encode(handle_key, 'hex') FROM "
	      "cachegw_export WHERE root_fh = decode($1, 'hex')", 1, p,
	      PGRES_TUPLES_OK, err, errlen);
	if (!r)
		return -EIO;
	if (PQntuples(r) != 1 || !(id = fleet_u64(r, 0, 0)) ||
	    fleet_unhex(got, sizeof(got), PQgetvalue(r, 0, 1)) !=
	    FLEET_KEY_LEN) {
		seterr(err, errlen, "the store's export row is damaged");
		PQclear(r);
		return -EIO;
	}
	PQclear(r);
	if (f->have_export && (id != f->export_id ||
			       memcmp(got, f->key, FLEET_KEY_LEN))) {
		seterr(err, errlen, "the store's export for this origin is "
		       "not the one this cache_dir's node-ids belong to "
		       "(store: export %llu, cache_dir: export %llu%s): the "
		       "store was replaced or restored from another; use an "
		       "empty cache_dir, or the store the fleet was made in",
		       (unsigned long long)id,
		       (unsigned long long)f->export_id,
		       id == f->export_id ? ", another key" : "");
		f->broken = true;
		return -EPROTO;
	}
	f->export_id = id;
	memcpy(f->key, got, FLEET_KEY_LEN);
	f->have_export = true;
	return 0;
}

static int member_row(struct fleet *f, char *err, size_t errlen)
{
	char id[24], pid[16];
	const char *p[4] = { id, f->member, f->version, pid };
	PGresult *r;

	snprintf(id, sizeof(id), "%llu", (unsigned long long)f->export_id);
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	r = q(f, "INSERT INTO cachegw_member (export_id, name, version, pid, "
	      "started, heartbeat) VALUES ($1, $2, $3, $4, now(), now()) "
	      "ON CONFLICT (export_id, name) DO UPDATE SET version = $3, "
	      "pid = $4, started = now(), heartbeat = now(), stopped = NULL",
	      4, p, PGRES_COMMAND_OK, err, errlen);
	PQclear(r);
	return r ? 0 : -EIO;
}

int fleet_setup_locked(struct fleet *f, char *err, size_t errlen)
{
	int ret;

	GW_ASSERT_HELD(&f->lock);
	ret = schema(f, err, errlen);
	if (!ret)
		ret = export_row(f, err, errlen);
	if (!ret)
		ret = member_row(f, err, errlen);
	return ret;
}

static void *heartbeat(void *arg)
{
	static const char sql[] =
		"UPDATE cachegw_member SET heartbeat = now(), stopped = NULL "
		"WHERE export_id = $1 AND name = $2";
	struct fleet *f = arg;
	char id[24];
	const char *p[2] = { id, f->member };

	int err;

	pthread_mutex_lock(&f->lock);
	/* A kept start: connect now (or log the store lost). */
	if (!f->pg)
		fleet_connect_locked(f);
	while (!f->stop) {
		struct timespec until;
		PGresult *r;

		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += f->heartbeat_s;
		while (!f->stop &&
		       pthread_cond_timedwait(&f->hb_cond, &f->lock,
					      &until) != ETIMEDOUT)
			;
		if (f->stop)
			break;
		/* One try: a store that is away is tried again at the next
		 * beat (its return is logged by the connect). */
		snprintf(id, sizeof(id), "%llu",
			 (unsigned long long)f->export_id);
		r = fleet_call_locked(f, FLEET_CALL_HEARTBEAT, sql, 2, p,
				      PGRES_COMMAND_OK, false, &err);
		PQclear(r);
	}
	pthread_mutex_unlock(&f->lock);
	return NULL;
}

static char *dup_or(const char *s, const char *dflt)
{
	return strdup(s && *s ? s : dflt);
}

int fleet_open(const struct fleet_opts *o, const struct fleet_kept *kept,
	       struct fleet **out, char *err, size_t errlen)
{
	struct fleet *f;
	pthread_condattr_t ca;
	int ret;

	*out = NULL;
	if (!o->root_len || o->root_len > FLEET_HANDLE_MAX) {
		seterr(err, errlen, "the origin's root handle is %zu bytes",
		       o->root_len);
		return -EINVAL;
	}
	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->conninfo = dup_or(o->conninfo, "");
	f->member = dup_or(o->member, "cachegw");
	f->version = dup_or(o->version, "?");
	f->origin = dup_or(o->origin, "?");
	if (!f->conninfo || !f->member || !f->version || !f->origin) {
		ret = -ENOMEM;
		goto fail;
	}
	memcpy(f->root, o->root_fh, o->root_len);
	f->root_len = o->root_len;
	f->hard = o->hard;
	f->timeout_s = o->timeout_s ? o->timeout_s : 60;
	f->heartbeat_s = o->heartbeat_s ? o->heartbeat_s : 10;
	f->log = o->log;
	f->give_up = o->give_up;
	f->give_up_arg = o->give_up_arg;
	if (kept) {
		f->export_id = kept->export_id;
		memcpy(f->key, kept->key, FLEET_KEY_LEN);
		f->have_export = true;
	}
	pthread_mutex_init(&f->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_cond_init(&f->hb_cond, &ca);
	pthread_condattr_destroy(&ca);
	pthread_mutex_init(&f->group_lock, NULL);
	pthread_cond_init(&f->group_cond, NULL);
	f->group_tail = &f->group_head;

	pthread_mutex_lock(&f->lock);
	/* With a kept export the store is not needed to start (an upgrade,
	 * a crash successor, a restart): the heartbeat thread connects at
	 * once, off the request path. */
	ret = kept ? -EAGAIN : fleet_connect_locked(f);
	if (ret && (f->broken || !kept)) {
		seterr(err, errlen, "%s%s", f->broken ? "" :
		       "cannot reach the fleet store: ", f->why);
		pthread_mutex_unlock(&f->lock);
		ret = f->broken ? -EPROTO : -EHOSTUNREACH;
		goto fail_lock;
	}
	/* Up until the first connect says otherwise: a store away at a
	 * kept start is logged as lost, once, by the heartbeat's try. */
	f->up = true;
	pthread_mutex_unlock(&f->lock);
	if (pthread_create(&f->hb, NULL, heartbeat, f)) {
		ret = -ENOMEM;
		goto fail_lock;
	}
	f->hb_started = true;
	*out = f;
	return 0;
fail_lock:
	if (f->pg)
		PQfinish(f->pg);
	pthread_cond_destroy(&f->hb_cond);
	pthread_mutex_destroy(&f->lock);
	pthread_cond_destroy(&f->group_cond);
	pthread_mutex_destroy(&f->group_lock);
fail:
	free(f->conninfo);
	free(f->member);
	free(f->version);
	free(f->origin);
	free(f);
	return ret;
}

void fleet_close(struct fleet *f)
{
	static const char sql[] =
		"UPDATE cachegw_member SET stopped = now() "
		"WHERE export_id = $1 AND name = $2";
	char id[24];
	const char *p[2] = { id, NULL };
	PGresult *r;

	if (!f)
		return;
	pthread_mutex_lock(&f->lock);
	f->stop = true;
	pthread_cond_broadcast(&f->hb_cond);
	pthread_mutex_unlock(&f->lock);
	if (f->hb_started)
		pthread_join(f->hb, NULL);
	if (f->pg) {
		snprintf(id, sizeof(id), "%llu",
			 (unsigned long long)f->export_id);
		p[1] = f->member;
		r = PQexecParams(f->pg, sql, 2, NULL, p, NULL, NULL, 0);
		PQclear(r);
		PQfinish(f->pg);
	}
	pthread_cond_destroy(&f->hb_cond);
	pthread_mutex_destroy(&f->lock);
	pthread_cond_destroy(&f->group_cond);
	pthread_mutex_destroy(&f->group_lock);
	free(f->conninfo);
	free(f->member);
	free(f->version);
	free(f->origin);
	free(f);
}

void fleet_key(const struct fleet *f, uint8_t key[FLEET_KEY_LEN])
{
	memcpy(key, f->key, FLEET_KEY_LEN);
}

uint64_t fleet_export_id(const struct fleet *f)
{
	return f->export_id;
}
