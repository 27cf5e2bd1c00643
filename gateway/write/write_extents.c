/* write_extents.c - the write path's bookkeeping, free of FUSE and the
 * origin (tests/unit/gw_extents_test runs it alone): the list of extents
 * written but not yet committed (newest first), which of them a COMMIT's
 * verifier shows lost and must be written again, what a writer's record
 * says of them for a successor after a crash, and what the WRITE replies
 * of one range said (verifiers, post-op attributes, someone else's change
 * between them).
 */
#include <stdint.h>
#include <string.h>

#include "gw_state.h"
#include "write_i.h"

bool wr_extent_lost(const struct gw_extent *e, const uint8_t verf[8])
{
	return e->mixed || memcmp(e->verf, verf, 8);
}

void wr_extents_cut(struct gw_extent **list, size_t *bytes,
		    struct gw_extent *first)
{
	struct gw_extent **pp = list, *e;

	while (*pp && *pp != first)
		pp = &(*pp)->next;
	*pp = NULL;
	for (e = first; e; e = e->next)
		*bytes -= e->len;
}

size_t wr_extents_resend_from(struct gw_extent *const *v, size_t n,
			      const struct gw_extent *first,
			      const uint8_t verf[8])
{
	size_t i, oldest = SIZE_MAX;
	bool ours = false;

	/* Extents newer than first are not this COMMIT's to judge; they
	 * are written again only to keep the order. */
	for (i = 0; i < n; i++) {
		if (v[i] == first)
			ours = true;
		if (ours && wr_extent_lost(v[i], verf))
			oldest = i;
	}
	return oldest;
}

void wr_unstable_add(uint32_t *fl, uint64_t *verf, uint32_t fl2,
		     uint64_t verf2)
{
	if (!(fl2 & GW_UNSTABLE))
		return;
	if (!(*fl & GW_UNSTABLE)) {
		*fl = fl2;
		*verf = verf2;
		return;
	}
	/* Two verifiers: whichever a COMMIT answers, the data that came
	 * under the other is gone. The list's order cannot tell which is
	 * older (a WRITE answered before a restart may be listed after one
	 * answered since). */
	*fl |= fl2 & GW_UNSTABLE_MIXED;
	if (*verf != verf2)
		*fl |= GW_UNSTABLE_MIXED;
}

void wr_unstable_add_extent(uint32_t *fl, uint64_t *verf,
			    const struct gw_extent *e)
{
	uint64_t v;

	if (!e->len)	/* holds nothing to lose */
		return;
	memcpy(&v, e->verf, 8);
	wr_unstable_add(fl, verf, GW_UNSTABLE | (e->mixed ?
						 GW_UNSTABLE_MIXED : 0), v);
}

bool wr_unstable_lost(uint32_t fl, uint64_t verf, const uint8_t commit[8])
{
	return (fl & GW_UNSTABLE) &&
	       ((fl & GW_UNSTABLE_MIXED) || memcmp(&verf, commit, 8));
}

bool wr_wcc_is(const struct nfsc_wcc *w, const struct nfsc_attr *a)
{
	return gw_version_eq(w->size, &w->mtime, &w->ctime, a->size,
			     &a->mtime, &a->ctime);
}

/* wcc: an origin that sends pre-op attributes with its WRITE replies
 * (FreeBSD's nfsd; not knfsd, not nfs-ganesha 4.3) says which version each
 * WRITE found. The pieces of one range run in parallel, so a piece may
 * find another piece's "after" rather than the version the gateway knew
 * when it sent the range (known). A "before" that is neither is someone
 * else's change, made between the gateway's last view and this write: then
 * the post-op attributes are not just our write's. True if piece i of n
 * shows such a change (known NULL: nothing to judge against). */
bool wr_wcc_foreign(const struct nfsc_attr *known, const struct wchunk *ch,
			size_t n, size_t i)
{
	size_t j;

	if (!known || !ch[i].post.has_pre || wr_wcc_is(&ch[i].post.pre, known))
		return false;
	for (j = 0; j < n; j++)
		if (j != i && ch[j].post.has_attr &&
		    wr_wcc_is(&ch[i].post.pre, &ch[j].post.attr))
			return false;
	return true;
}

void wr_result_add(struct wresult *r, const struct wchunk *ch)
{
	if (ch->post.has_attr &&
	    (!r->post.has_attr || gw_attr_newer(&ch->post.attr, &r->post.attr)))
		r->post = ch->post;
	/* A piece that took nothing vouches for nothing. */
	if (!ch->written)
		return;
	if (!r->have_verf) {
		memcpy(r->verf, ch->verf, 8);
		r->have_verf = true;
	} else if (memcmp(r->verf, ch->verf, 8)) {
		r->mixed = true;
	}
}

