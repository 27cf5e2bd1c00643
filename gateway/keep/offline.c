/* offline.c - what the gateway answers while the origin is lost
 * (offline=SECONDS; nfsclient/origin.c decides lost and back).
 *
 * Calls that only read from the origin fail at once with -EHOSTDOWN
 * then, and each operation answers from what the gateway holds, as last
 * known, whatever its age: attributes (the inode's, else those kept in
 * md.log), names (kept in md.log: LOOKUP replies, listings, creates) and
 * whole listings, ACCESS answers (access.c: this run's, else kept; none
 * for this user: EHOSTDOWN, never a guess), symbolic links' targets
 * (ops.c: up to 96 bytes, kept at each READLINK), the last FSSTAT, and
 * the cache's verified blocks. What it does not hold is answered with
 * EHOSTDOWN at once; a name that a directory's kept whole listing does
 * not have is ENOENT. Names, listings and what they lead to are shown
 * only to a user with an answer of the origin for the directory (to
 * search it: a LOOKUP, a READDIRPLUS that gave handles, or an ACCESS; to
 * list it: a READDIRPLUS or an ACCESS, or that very listing read as this
 * user): refused before, EACCES; never asked, EHOSTDOWN, as for a file
 * not held (the kernel checked the mode bits, but root squash and ACLs
 * are the origin's). Nothing that changes the origin is answered from
 * here: those calls wait for it (hard) or time out (soft), as before.
 * What is answered from here keeps its age: the kernel is told to trust
 * attributes only for what is left of their timeout. When the origin
 * answers again, attribute timeouts and close-to-open revalidate as
 * usual: what changed at the origin meanwhile is seen then.
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "keep_i.h"

bool gw_offline(struct gw *gw)
{
	return nfsc_origin_lost(gw->nfs);
}

void gw_offline_count(struct gw *gw)
{
	__atomic_add_fetch(&gw->offline_answers, 1, __ATOMIC_RELAXED);
}

int gw_offline_attr(struct gw *gw, struct gw_inode *ino, struct nfsc_attr *a)
{
	bool valid;

	GW_ASSERT_NOT_HELD(&ino->lock);
	pthread_mutex_lock(&ino->lock);
	valid = ino->attr_valid;
	if (valid)
		*a = ino->attr;
	pthread_mutex_unlock(&ino->lock);
	if (!valid && gw_md_attr_any(gw, ino->nodeid, a))
		return -EHOSTDOWN;
	return 0;
}

void gw_offline_note_fsstat(struct gw *gw, const struct nfsc_fsstat *fs,
			    const struct timespec *at)
{
	pthread_mutex_lock(&gw->fs_lock);
	gw->fs_last = *fs;
	gw->fs_at = *at;
	gw->fs_known = true;
	pthread_mutex_unlock(&gw->fs_lock);
}

int gw_fsstat_kept(struct gw *gw, double max_age, struct nfsc_fsstat *fs)
{
	int ret = -ENODATA;

	pthread_mutex_lock(&gw->fs_lock);
	if (gw->fs_known && gw_elapsed_since(&gw->fs_at) < max_age) {
		*fs = gw->fs_last;
		ret = 0;
	}
	pthread_mutex_unlock(&gw->fs_lock);
	return ret;
}

int gw_offline_fsstat(struct gw *gw, struct nfsc_fsstat *fs)
{
	bool known;

	pthread_mutex_lock(&gw->fs_lock);
	known = gw->fs_known;
	if (known)
		*fs = gw->fs_last;
	pthread_mutex_unlock(&gw->fs_lock);
	if (!known)
		return -EHOSTDOWN;
	gw_offline_count(gw);
	return 0;
}
