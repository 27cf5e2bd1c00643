/* ctl_warm.c - control commands behind `cachegw-inspect warm`.
 *
 *   mountpoint        the mount's absolute path (a tool checks that the
 *                     paths it was given are inside this gateway's mount)
 *   cached REL-PATH   what the cache holds of the file at REL-PATH below
 *                     the mount: "file SIZE CACHED_BYTES COMPLETE(0|1)"
 *   drain             wait until every fill queued so far is on disk, so
 *                     that a following `cached` sees the blocks just read
 * Errors are one line "error: ...". `cached` resolves the path through
 * the names the gateway knows, else at the origin with LOOKUPs as the
 * asking user, and never makes or changes a cache object: a dry run
 * leaves the cache as it was. The control socket serves GW_CTL_THREADS
 * clients at once: the tool asks about that many files in parallel.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cache.h"
#include "daemon.h"
#include "nodes.h"

/* A drain gives up after this long: it holds one of the GW_CTL_THREADS
 * control threads meanwhile. */
#define GW_DRAIN_MAX_MS 30000

void gw_ctl_mountpoint(struct gw_proc *pr, FILE *out)
{
	fprintf(out, "%s\n", pr->o->mountpoint_real ? pr->o->mountpoint_real :
			     pr->o->mountpoint);
}

/* rel through the names the gateway knows (md.log: LOOKUP and
 * READDIRPLUS replies, such as those of the tool's own walk through the
 * mount just before), then one GETATTR as the asking user: the handle and
 * attributes of what it names, with one origin call instead of one per
 * component. -ENOENT if a name is not known (then walk() asks), -ESTALE
 * if the origin no longer has the file. */
static int walk_kept(struct gw_proc *pr, const struct nfsc_cred *cr,
		     const char *rel, struct nfsc_fh *fh, struct nfsc_attr *a)
{
	char *copy = strdup(rel), *name, *save = NULL;
	uint64_t id = FUSE_ROOT_ID;
	size_t hlen;
	int ret = 0;

	if (!copy)
		return -ENOMEM;
	for (name = strtok_r(copy, "/", &save); name && !ret;
	     name = strtok_r(NULL, "/", &save)) {
		if (!strcmp(name, "."))
			continue;
		if (!strcmp(name, ".."))
			ret = -EINVAL;
		else
			ret = gw_md_dent_any(pr->gw, id, name, &id);
	}
	free(copy);
	if (ret)
		return ret;
	if (id == FUSE_ROOT_ID) {
		*fh = *nfsc_root(pr->nfs);
	} else {
		hlen = sizeof(fh->data);
		if (nodes_get(pr->nodes, id, fh->data, &hlen, NULL, NULL))
			return -ENOENT;
		fh->len = (uint32_t)hlen;
	}
	return nfsc_getattr(pr->nfs, cr, fh, a);
}

/* LOOKUP rel (components split by '/') from the export's root: the
 * handle and attributes of what it names. 0 or -errno. */
static int walk(struct gw_proc *pr, const struct nfsc_cred *cr, const char *rel,
		struct nfsc_fh *fh, struct nfsc_attr *a)
{
	char *copy = strdup(rel), *name, *save = NULL;
	struct nfsc_fh dir = *nfsc_root(pr->nfs);
	bool has_attr = false;
	int ret = 0;

	if (!copy)
		return -ENOMEM;
	*fh = dir;
	for (name = strtok_r(copy, "/", &save); name;
	     name = strtok_r(NULL, "/", &save)) {
		if (!strcmp(name, "."))
			continue;
		/* ".." could climb out of the export: the tool sends paths
		 * made absolute and resolved (realpath) first. */
		if (!strcmp(name, "..")) {
			ret = -EINVAL;
			goto out;
		}
		ret = nfsc_lookup(pr->nfs, cr, &dir, name, fh, a, &has_attr);
		if (ret)
			goto out;
		dir = *fh;
	}
	if (!has_attr)
		ret = nfsc_getattr(pr->nfs, cr, fh, a);
out:
	free(copy);
	return ret;
}

void gw_ctl_cached(struct gw_proc *pr, const struct nfsc_cred *cr,
		   const char *rel, FILE *out)
{
	struct nfsc_attr a;
	struct nfsc_fh fh;
	uint64_t cached;
	bool complete;
	int ret;

	ret = walk_kept(pr, cr, rel, &fh, &a);
	if (ret == -ENOENT || ret == -ESTALE)
		ret = walk(pr, cr, rel, &fh, &a);
	if (ret) {
		fprintf(out, "error: %s: %s\n", rel, strerror(-ret));
		return;
	}
	ret = gw_cache_state(pr->gw, &fh, &a, &cached, &complete);
	if (ret == -EINVAL)
		fprintf(out, "error: %s: not a regular file\n", rel);
	else if (ret)
		fprintf(out, "error: %s: %s\n", rel, strerror(-ret));
	else
		fprintf(out, "file %llu %llu %d\n", (unsigned long long)a.size,
			(unsigned long long)cached, complete ? 1 : 0);
}

void gw_ctl_drain(struct gw_proc *pr, FILE *out)
{
	struct timespec tick = { .tv_nsec = 10 * 1000000 };
	unsigned waited = 0;

	if (!pr->cache) {
		fprintf(out, "error: no cache\n");
		return;
	}
	/* 1. Every fetch a read was answered from so far has been handed
	 *    to the cache (fills_pending counts a fetch's fill before the
	 *    fetch is published done, so none slips through);
	 * 2. the cache's writes of them complete (cache_drain). */
	while (gw_fills_pending(pr->gw)) {
		if (waited >= GW_DRAIN_MAX_MS) {
			fprintf(out, "error: fills still queued after %u s\n",
				GW_DRAIN_MAX_MS / 1000);
			return;
		}
		nanosleep(&tick, NULL);
		waited += 10;
	}
	cache_drain(pr->cache);
	fprintf(out, "ok\n");
}
