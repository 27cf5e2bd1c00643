/* ids.c - the store's calls: node-ids for names (batched), the handle of a
 * node-id, a directory's new parent, the export's members.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fleet_i.h"

#define BATCH 1000	/* names per round trip: 128 KiB of hex at most */

/* Known names answer from the table; the rest are inserted with ids from
 * the sequence, in the order of their handles (two gateways inserting
 * overlapping sets wait on each other's rows in one order: no deadlock). A name another gateway inserts at the same moment is not
 * seen by this statement (its snapshot is older) and is not inserted
 * either (ON CONFLICT): it comes back without a row and is asked again. */
static const char assign_sql[] =
	"WITH input AS ("
	" SELECT decode(h, 'hex') AS fh, p AS parent, i"
	" FROM unnest($2::text[], $3::int8[]) WITH ORDINALITY AS t(h, p, i)),"
	" old AS ("
	" SELECT input.i, n.nodeid FROM input JOIN cachegw_node n"
	" ON n.export_id = $1 AND n.fh = input.fh),"
	" ins AS ("
	" INSERT INTO cachegw_node (export_id, nodeid, fh, parent)"
	" SELECT $1::int8, nextval('cachegw_nodeid'), fh, parent FROM ("
	" SELECT DISTINCT ON (fh) fh, parent FROM input"
	" WHERE i NOT IN (SELECT i FROM old) ORDER BY fh) AS n"
	" ON CONFLICT (export_id, fh) DO NOTHING RETURNING fh, nodeid)"
	" SELECT i, nodeid FROM old"
	" UNION ALL SELECT input.i, ins.nodeid FROM ins"
	" JOIN input ON input.fh = ins.fh";

/* One round trip for names[idx[0..n-1]]: fills ids of those answered. */
static int assign_batch(struct fleet *f, const struct fleet_name *names,
			const size_t *idx, size_t n, uint64_t *ids, bool wait)
{
	char eid[24], *hs, *ps, *h, *p;
	const char *params[3] = { eid, NULL, NULL };
	PGresult *r = NULL;
	size_t i;
	int err = 0, row;

	hs = malloc(n * (2 * FLEET_HANDLE_MAX + 1) + 3);
	ps = malloc(n * 21 + 3);
	if (!hs || !ps) {
		err = -ENOMEM;
		goto out;
	}
	h = hs;
	p = ps;
	*h++ = '{';
	*p++ = '{';
	for (i = 0; i < n; i++) {
		const struct fleet_name *nm = &names[idx[i]];

		if (i) {
			*h++ = ',';
			*p++ = ',';
		}
		fleet_hex(h, nm->h, nm->hlen);
		h += 2 * nm->hlen;
		p += sprintf(p, "%llu", (unsigned long long)nm->parent);
	}
	strcpy(h, "}");
	strcpy(p, "}");
	snprintf(eid, sizeof(eid), "%llu", (unsigned long long)f->export_id);
	params[1] = hs;
	params[2] = ps;
	pthread_mutex_lock(&f->lock);
	r = fleet_call_locked(f, FLEET_CALL_ASSIGN, assign_sql, 3, params,
			      PGRES_TUPLES_OK, wait, &err);
	pthread_mutex_unlock(&f->lock);
	if (!r)
		goto out;
	for (row = 0; row < PQntuples(r); row++) {
		uint64_t k = fleet_u64(r, row, 0), id = fleet_u64(r, row, 1);

		if (k >= 1 && k <= n && id >= 2)
			ids[idx[k - 1]] = id;
	}
	__atomic_fetch_add(&f->names_assigned, n, __ATOMIC_RELAXED);
out:
	PQclear(r);
	free(hs);
	free(ps);
	return err;
}

/* Node-ids for names: as many round trips as BATCH and concurrent
 * inserts make it. A name left without one (ids[i] 0) is the caller's to
 * report; the return is a call's error. */
static int assign_rounds(struct fleet *f, const struct fleet_name *names,
			 size_t n, uint64_t *ids, bool wait)
{
	size_t *idx, i, m, done;
	int ret = 0, round;

	idx = malloc((n ? n : 1) * sizeof(*idx));
	if (!idx)
		return -ENOMEM;
	/* Round 2 asks only for what round 1 lost to a concurrent insert;
	 * a third would mean the store misbehaves. */
	for (round = 0; round < 3; round++) {
		for (i = m = 0; i < n; i++)
			if (!ids[i])
				idx[m++] = i;
		if (!m)
			break;
		for (done = 0; done < m && !ret; done += BATCH)
			ret = assign_batch(f, names, idx + done,
					   m - done < BATCH ? m - done : BATCH,
					   ids, wait);
		if (ret)
			break;
	}
	free(idx);
	return ret;
}

/* 0 when every name of ids[0..n-1] has its node-id, else -EIO (logged). */
static int all_named(struct fleet *f, const uint64_t *ids, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (!ids[i]) {
			f->log("fleet store: no node-id for a name after 3 "
			       "tries");
			return -EIO;
		}
	return 0;
}

/* Group commit. Every new name found by LOOKUP or made by CREATE, MKDIR,
 * ... waits for one assign: a statement and its commit, which waits for
 * the store's WAL flush. One gateway sends one call at a time (f->lock),
 * so concurrent creates would pay one flush each, one after the other.
 * Instead, a caller that finds an assign in flight queues its names; when
 * that one is answered, the first caller queued becomes the leader and
 * sends everything queued in one statement: one round trip and one
 * commit for the group. Each caller still returns only after the
 * statement that named its handles committed (a handle never reaches the
 * kernel before it is durable in the store), and the statement is the
 * same INSERT ... ON CONFLICT, so two gateways naming one file at the
 * same moment still agree on its node-id; the same handle asked twice in
 * one group gets one node-id (DISTINCT ON in assign_sql).
 *
 * Listings join groups too (several read at once: concurrent walks, the
 * walk threads of walk_ahead=), and do not wait for a store that is away
 * (-EAGAIN): a group with one of them is sent so, and on -EAGAIN the
 * waiting members of it are sent again, each waiting. A listing that
 * finds an assign in flight while the store was away at the last call
 * does not queue behind it (that one waits for the store). */
struct fleet_group_req {
	const struct fleet_name *names;
	size_t n;
	uint64_t *ids;
	bool wait;			/* for a store that is away */
	int ret;
	bool done;			/* group_lock; ret and ids are set */
	struct fleet_group_req *next;	/* group_lock */
};

#define GROUP_MAX_NAMES BATCH	/* larger requests go alone */

/* The leader's send: one assign for every request of the group. */
static void group_send(struct fleet *f, struct fleet_group_req *g)
{
	struct fleet_group_req *r;
	struct fleet_name *names;
	uint64_t *ids;
	size_t n = 0, k;
	bool wait = true;
	int ret;

	if (!g->next) {
		/* Alone: nothing to copy. */
		ret = assign_rounds(f, g->names, g->n, g->ids, g->wait);
		g->ret = ret ? ret : all_named(f, g->ids, g->n);
		return;
	}
	for (r = g; r; r = r->next) {
		n += r->n;
		wait = wait && r->wait;
	}
	names = malloc(n * sizeof(*names));
	ids = calloc(n, sizeof(*ids));
	ret = names && ids ? 0 : -ENOMEM;
	if (!ret) {
		for (r = g, k = 0; r; k += r->n, r = r->next)
			memcpy(names + k, r->names, r->n * sizeof(*names));
		ret = assign_rounds(f, names, n, ids, wait);
	}
	for (r = g, k = 0; r; k += r->n, r = r->next) {
		if (ret == -EAGAIN && r->wait) {
			/* The store is away: this one waits for it. */
			memset(r->ids, 0, r->n * sizeof(*r->ids));
			r->ret = assign_rounds(f, r->names, r->n, r->ids,
					       true);
			if (!r->ret)
				r->ret = all_named(f, r->ids, r->n);
			continue;
		}
		if (ret) {
			r->ret = ret;
			continue;
		}
		memcpy(r->ids, ids + k, r->n * sizeof(*ids));
		r->ret = all_named(f, r->ids, r->n);
	}
	free(names);
	free(ids);
}

static int assign_grouped(struct fleet *f, const struct fleet_name *names,
			  size_t n, uint64_t *ids, bool wait)
{
	struct fleet_group_req me = { .names = names, .n = n, .ids = ids,
				      .wait = wait };
	struct fleet_group_req *g, *r, *next;

	pthread_mutex_lock(&f->group_lock);
	if (!wait && f->group_busy &&
	    __atomic_load_n(&f->away, __ATOMIC_RELAXED)) {
		pthread_mutex_unlock(&f->group_lock);
		return -EAGAIN;
	}
	*f->group_tail = &me;
	f->group_tail = &me.next;
	while (f->group_busy && !me.done)
		pthread_cond_wait(&f->group_cond, &f->group_lock);
	if (me.done)
		goto out;
	/* 1. Lead: take the whole queue (this request is in it). */
	g = f->group_head;
	f->group_head = NULL;
	f->group_tail = &f->group_head;
	f->group_busy = true;
	pthread_mutex_unlock(&f->group_lock);
	/* 2. Send it; meanwhile new callers queue behind. */
	group_send(f, g);
	/* 3. Answer the group: a follower returns (and its request, on its
	 * stack, goes) once it sees done, so next is read first. */
	pthread_mutex_lock(&f->group_lock);
	for (r = g; r; r = next) {
		next = r->next;
		r->done = true;
	}
	f->group_busy = false;
	pthread_cond_broadcast(&f->group_cond);
out:
	pthread_mutex_unlock(&f->group_lock);
	return me.ret;
}

int fleet_assign(struct fleet *f, const struct fleet_name *names, size_t n,
		 uint64_t *ids, bool wait)
{
	size_t i;
	int ret;

	for (i = 0; i < n; i++) {
		if (!names[i].hlen || names[i].hlen > FLEET_HANDLE_MAX)
			return -EINVAL;
		ids[i] = 0;
	}
	if (n <= GROUP_MAX_NAMES)
		return assign_grouped(f, names, n, ids, wait);
	ret = assign_rounds(f, names, n, ids, wait);
	return ret ? ret : all_named(f, ids, n);
}

int fleet_resolve(struct fleet *f, uint64_t id, void *h, size_t *hlen,
		  uint64_t *parent)
{
	static const char sql[] =
		"SELECT encode(fh, 'hex'), parent FROM cachegw_node "
		"WHERE export_id = $1 AND nodeid = $2";
	char eid[24], nid[24];
	const char *p[2] = { eid, nid };
	uint8_t b[FLEET_HANDLE_MAX];
	PGresult *r;
	int err = 0, n;

	snprintf(eid, sizeof(eid), "%llu", (unsigned long long)f->export_id);
	snprintf(nid, sizeof(nid), "%llu", (unsigned long long)id);
	pthread_mutex_lock(&f->lock);
	r = fleet_call_locked(f, FLEET_CALL_RESOLVE, sql, 2, p,
			      PGRES_TUPLES_OK, true, &err);
	pthread_mutex_unlock(&f->lock);
	if (!r)
		return err;
	if (PQntuples(r) != 1) {
		PQclear(r);
		return -ENOENT;
	}
	n = fleet_unhex(b, sizeof(b), PQgetvalue(r, 0, 0));
	if (n < 1) {
		f->log("fleet store: node-id %llu has a damaged handle",
		       (unsigned long long)id);
		PQclear(r);
		return -EIO;
	}
	if (parent)
		*parent = fleet_u64(r, 0, 1);
	PQclear(r);
	if (*hlen < (size_t)n) {
		*hlen = (size_t)n;
		return -ERANGE;
	}
	memcpy(h, b, (size_t)n);
	*hlen = (size_t)n;
	return 0;
}

int fleet_set_parent(struct fleet *f, uint64_t id, uint64_t parent)
{
	static const char sql[] =
		"UPDATE cachegw_node SET parent = $3 "
		"WHERE export_id = $1 AND nodeid = $2";
	char eid[24], nid[24], pid[24];
	const char *p[3] = { eid, nid, pid };
	PGresult *r;
	int err = 0;

	snprintf(eid, sizeof(eid), "%llu", (unsigned long long)f->export_id);
	snprintf(nid, sizeof(nid), "%llu", (unsigned long long)id);
	snprintf(pid, sizeof(pid), "%llu", (unsigned long long)parent);
	pthread_mutex_lock(&f->lock);
	r = fleet_call_locked(f, FLEET_CALL_PARENT, sql, 3, p,
			      PGRES_COMMAND_OK, true, &err);
	pthread_mutex_unlock(&f->lock);
	PQclear(r);
	return r ? 0 : err;
}

int fleet_members(struct fleet *f, struct fleet_member *out, size_t max)
{
	static const char sql[] =
		"SELECT name, version, pid, extract(epoch FROM started)::int8,"
		" extract(epoch FROM heartbeat)::int8 FROM cachegw_member"
		" WHERE export_id = $1 AND stopped IS NULL ORDER BY name";
	char eid[24];
	const char *p[1] = { eid };
	PGresult *r;
	int err = 0, i, n;

	snprintf(eid, sizeof(eid), "%llu", (unsigned long long)f->export_id);
	pthread_mutex_lock(&f->lock);
	r = fleet_call_locked(f, FLEET_CALL_MEMBERS, sql, 1, p,
			      PGRES_TUPLES_OK, false, &err);
	pthread_mutex_unlock(&f->lock);
	if (!r)
		return err == -EAGAIN ? -EIO : err;
	n = PQntuples(r);
	for (i = 0; i < n && (size_t)i < max; i++) {
		snprintf(out[i].name, sizeof(out[i].name), "%s",
			 PQgetvalue(r, i, 0));
		snprintf(out[i].version, sizeof(out[i].version), "%s",
			 PQgetvalue(r, i, 1));
		out[i].pid = atoi(PQgetvalue(r, i, 2));
		out[i].started = (int64_t)fleet_u64(r, i, 3);
		out[i].heartbeat = (int64_t)fleet_u64(r, i, 4);
	}
	PQclear(r);
	return i;
}
