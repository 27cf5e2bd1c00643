/* fleet_ids.c - node-ids from the fleet store (fleet=): a cache_dir tied
 * to one store export, the store's key for the generations, names the
 * table does not know sent to the store (a listing's in one round trip)
 * and node-ids another gateway minted brought in from it.
 *
 * What the store gave is written to the node-id table (nodes_put) before
 * the kernel sees it, so a known name or handle never asks the store
 * again, also after a restart or takeover; the table makes no id of its
 * own (nodes_external_ids), so its ids are always the fleet's.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fleet.h"
#include "inode_i.h"
#include "nodes.h"

int gw_fleet_check_dir(struct gw *gw)
{
	struct fleet_kept k;
	struct nodes_stats ns;
	int ret = fleet_keep_load(gw->o->cache_dir, &k);

	if (ret == -EBADMSG) {
		fprintf(stderr, "cachegw: cache_dir '%s': its %s file is "
			"damaged: its node-ids cannot be tied to a fleet "
			"store; use an empty cache_dir\n", gw->o->cache_dir,
			FLEET_FILE);
		return ret;
	}
	if (ret && ret != -ENOENT) {
		fprintf(stderr, "cachegw: cache_dir '%s': cannot read %s: "
			"%s\n", gw->o->cache_dir, FLEET_FILE, strerror(-ret));
		return ret;
	}
	if (!gw->o->fleet) {
		if (!ret) {
			fprintf(stderr, "cachegw: cache_dir '%s' belongs to a "
				"fleet (its node-ids come from a fleet "
				"store): start with -o fleet=..., or use "
				"another cache_dir\n", gw->o->cache_dir);
			return -EPERM;
		}
		return 0;
	}
	nodes_stats(gw->nodes, &ns);
	if (ret == -ENOENT && (ns.entries || ns.next_id > NODES_ROOT_ID + 1)) {
		fprintf(stderr, "cachegw: cache_dir '%s' has node-ids of its "
			"own (it served without fleet=): a fleet gateway "
			"needs a cache_dir of its own; use an empty one\n",
			gw->o->cache_dir);
		return -EPERM;
	}
	nodes_external_ids(gw->nodes);
	return 0;
}

/* A request waiting for the store ends once the FUSE session is over
 * (unmounted, or the process is stopping: libfuse joins its workers at
 * exit, and one waiting for ever would hold the exit up), and once it is
 * interrupted: knfsd stopping its threads (a fleet's failover, with the
 * store away meanwhile) waits for the request each one serves, and the
 * stop would wait for the store. Its client is then told to try again
 * (gw_intr_errno), at the gateway that has the address by then. */
static int give_up(void *arg)
{
	struct gw *gw = arg;

	if (gw->se && fuse_session_exited(gw->se))
		return EIO;
	return gw_req_interrupted();
}

int gw_fleet_start(struct gw *gw, const char *version)
{
	const struct nfsc_fh *root = nfsc_root(gw->nfs);
	struct fleet_opts fo = {
		.conninfo = gw->o->fleet,
		.member = gw->o->fleet_member,
		.version = version,
		.origin = gw->o->source,
		.root_fh = root->data,
		.root_len = root->len,
		.hard = !gw->o->soft,
		/* soft: as long as an origin call may take (timeo is in
		 * tenths of a second, nfs(5)) */
		.timeout_s = gw->o->timeo * (gw->o->retrans + 1) / 10 + 1,
		.log = gw_log,
		.give_up = give_up,
		.give_up_arg = gw,
	};
	struct fleet_kept k, *kept = NULL;
	char host[128], err[512];
	int ret;

	if (!gw->o->fleet)
		return 0;
	if (!fo.member) {
		if (gethostname(host, sizeof(host)) < 0)
			snprintf(host, sizeof(host), "cachegw");
		host[sizeof(host) - 1] = '\0';
		fo.member = host;
	}
	if (!fleet_keep_load(gw->o->cache_dir, &k))
		kept = &k;
	ret = fleet_open(&fo, kept, &gw->fleet, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "cachegw: fleet store: %s\n", err);
		return ret;
	}
	if (!kept) {
		k.export_id = fleet_export_id(gw->fleet);
		fleet_key(gw->fleet, k.key);
		ret = fleet_keep_save(gw->o->cache_dir, &k);
		if (ret) {
			fprintf(stderr, "cachegw: cache_dir '%s': cannot "
				"write %s: %s\n", gw->o->cache_dir,
				FLEET_FILE, strerror(-ret));
			fleet_close(gw->fleet);
			gw->fleet = NULL;
			return ret;
		}
	}
	/* Every generation from the fleet's key, the root's too: the same
	 * on every gateway of the export. */
	memcpy(gw->hkey.key, k.key, GW_HANDLE_KEY_LEN);
	gw->hkey.cutover = gw->hkey.old_cutover = 0;
	gw->hkey.old_seed = 0;
	gw->generation = gw_handle_gen(k.key, FUSE_ROOT_ID);
	gw_log("fleet: export %llu of the store, member '%s'%s",
	       (unsigned long long)k.export_id, fo.member,
	       kept ? "" : " (this cache_dir joined it)");
	return 0;
}

struct fleet *gw_fleet(struct gw *gw)
{
	return gw->fleet;
}

void gw_fleet_stop(struct gw *gw)
{
	fleet_close(gw->fleet);
	gw->fleet = NULL;
}

/* Node-ids for the names of fhs the table does not know, from the store,
 * into the table. */
static int name_many(struct gw *gw, const struct nfsc_fh *const *fhs,
		     const uint64_t *parents, size_t n, bool wait)
{
	const struct nfsc_fh *root;
	struct fleet_name *names;
	size_t *which, m = 0, i;
	uint64_t *ids, id;
	int ret = 0, r;

	if (!gw->fleet || !n)
		return 0;
	names = calloc(n, sizeof(*names));
	which = calloc(n, sizeof(*which));
	ids = calloc(n, sizeof(*ids));
	if (!names || !which || !ids) {
		ret = -ENOMEM;
		goto out;
	}
	root = nfsc_root(gw->nfs);
	for (i = 0; i < n; i++) {
		/* The root is node-id 1 everywhere, never named. */
		if ((fhs[i]->len == root->len &&
		     !memcmp(fhs[i]->data, root->data, root->len)) ||
		    !nodes_find(gw->nodes, fhs[i]->data, fhs[i]->len, &id,
				NULL))
			continue;
		names[m].h = fhs[i]->data;
		names[m].hlen = fhs[i]->len;
		names[m].parent = parents[i];
		which[m++] = i;
	}
	if (!m)
		goto out;
	ret = fleet_assign(gw->fleet, names, m, ids, wait);
	for (i = 0; !ret && i < m; i++) {
		r = nodes_put(gw->nodes, names[i].h, names[i].hlen,
			      names[i].parent, ids[i]);
		if (r == 1)
			gw_reclaim_note_add(gw, 1);
		else if (r < 0 && r != -EEXIST)
			ret = r;
		else if (r == -EEXIST)
			/* The table has this handle under another id, or
			 * this id under another handle: the store and the
			 * table disagree, which only a store replaced under
			 * a running fleet does. Never hand either out. */
			ret = -EIO;
	}
out:
	free(names);
	free(which);
	free(ids);
	return ret;
}

int gw_fleet_name(struct gw *gw, const struct nfsc_fh *fh, uint64_t parent)
{
	return name_many(gw, &fh, &parent, 1, true);
}

int gw_fleet_name_list(struct gw *gw, const struct nfsc_dirlist *l,
		       uint64_t parent)
{
	const struct nfsc_fh **fhs;
	uint64_t *parents;
	size_t i, n = 0;
	int ret;

	if (!gw->fleet || !l->n)
		return 0;
	fhs = calloc(l->n, sizeof(*fhs));
	parents = calloc(l->n, sizeof(*parents));
	if (!fhs || !parents) {
		free(fhs);
		free(parents);
		return -ENOMEM;
	}
	for (i = 0; i < l->n; i++) {
		const struct nfsc_dirent *de = &l->ents[i];

		if (!de->has_fh || !strcmp(de->name, ".") ||
		    !strcmp(de->name, ".."))
			continue;
		fhs[n] = &de->fh;
		parents[n++] = parent;
	}
	/* A listing does not wait for a store that is away: its new names
	 * go out as plain entries, and a LOOKUP of one waits (or fails)
	 * as any new name does. */
	ret = name_many(gw, fhs, parents, n, false);
	free(fhs);
	free(parents);
	return ret;
}

int gw_fleet_bring(struct gw *gw, uint64_t nodeid)
{
	uint8_t h[FLEET_HANDLE_MAX];
	size_t hlen = sizeof(h);
	uint64_t parent = 0;
	int ret;

	if (!gw->fleet)
		return -ENOENT;
	ret = fleet_resolve(gw->fleet, nodeid, h, &hlen, &parent);
	if (ret)
		return ret;
	ret = nodes_put(gw->nodes, h, hlen, parent, nodeid);
	if (ret == 1)
		gw_reclaim_note_add(gw, 1);
	return ret < 0 ? ret : 0;
}

bool gw_fleet_known(struct gw *gw, const struct nfsc_fh *fh)
{
	uint64_t id;

	return !nodes_find(gw->nodes, fh->data, fh->len, &id, NULL);
}

int gw_fleet_set_parent(struct gw *gw, uint64_t nodeid, uint64_t parent)
{
	return gw->fleet ? fleet_set_parent(gw->fleet, nodeid, parent) : 0;
}
