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

int fleet_assign(struct fleet *f, const struct fleet_name *names, size_t n,
		 uint64_t *ids, bool wait)
{
	size_t *idx, i, m, done;
	int ret = 0, round;

	for (i = 0; i < n; i++) {
		if (!names[i].hlen || names[i].hlen > FLEET_HANDLE_MAX)
			return -EINVAL;
		ids[i] = 0;
	}
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
	if (!ret)
		for (i = 0; i < n; i++)
			if (!ids[i]) {
				f->log("fleet store: no node-id for a name "
				       "after 3 tries");
				ret = -EIO;
				break;
			}
	free(idx);
	return ret;
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
