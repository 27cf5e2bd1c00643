/* lock_nsm.c - this gateway's NSM state, kept in cache_dir/lock-nsm-state
 * (doc/locks.md "Restarts"), one line of fixed width, rewritten in
 * place:
 *
 *     cachegw-lock-nsm 1 STATE HELD
 *
 * STATE is the gateway's NSM state number (odd, growing: a "reboot" of
 * this lock client makes a new one), sent in every NLM LOCK; HELD is 1
 * while the gateway may hold locks at the origin (an owner exists: it is
 * written before the owner's first LOCK goes out, and 0 again when the
 * last owner is let go).
 *
 * A gateway that starts cold (no predecessor handed it its owners: after
 * a crash without a supervisor, a reboot, a cache_dir made afresh) takes
 * a new STATE and, if the file says an earlier instance may have held
 * locks (HELD 1) or there is no file, tells the origin's status monitor
 * that this client rebooted (nfsc_lock_nsm: SM_NOTIFY, as sm-notify(8)
 * does at boot), so that the origin lets go what the earlier instance
 * held. A clean stop leaves HELD 0: its successor tells nothing (the
 * notification lets go the locks of every NLM client of this host at
 * servers that tell clients by address, doc/locks.md). A successor of
 * a takeover keeps STATE: its owners are its predecessor's.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lock_i.h"

#define NSM_FILE "lock-nsm-state"
#define NSM_MAGIC "cachegw-lock-nsm 1"

/* nsm_lock held (or no other thread yet). */
static int nsm_write(struct gw_locks *l, bool held)
{
	char line[64];
	int n = snprintf(line, sizeof(line), "%s %010d %d\n", NSM_MAGIC,
			 l->nsm_state, held ? 1 : 0);

	if (pwrite(l->nsm_fd, line, (size_t)n, 0) != n)
		return -errno ? -errno : -EIO;
	l->nsm_held = held;
	return 0;
}

int gw_lock_nsm_init(struct gw *gw)
{
	struct gw_locks *l = gw->locks;
	char path[4096], line[64] = "";
	int state = 0, held = 1, fd, ret;
	bool known = false, damaged = false, notify;
	ssize_t n;

	/* No lock goes to the origin: nothing to tell it. */
	if (gw->o->local_lock == GW_LOCAL_LOCK_ALL || !gw->o->cache_dir)
		return 0;
	snprintf(path, sizeof(path), "%s/%s", gw->o->cache_dir, NSM_FILE);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0) {
		ret = -errno;
		gw_log("locks: cannot open %s: %s", path, strerror(-ret));
		return ret;
	}
	n = pread(fd, line, sizeof(line) - 1, 0);
	if (n > 0) {
		line[n] = 0;
		known = sscanf(line, NSM_MAGIC " %d %d", &state, &held) == 2 &&
			state > 0 && (held == 0 || held == 1);
		if (!known) {
			gw_log("locks: %s is damaged: taken as if an earlier "
			       "instance held locks", path);
			damaged = true;
		}
	}
	l->nsm_fd = fd;
	if (gw->successor && known) {
		l->nsm_state = state;
		l->nsm_held = held;
		nfsc_lock_nsm(gw->nfs, state, false);
		return 0;
	}
	/* A new state: odd (as statd's), above the last, and from the
	 * clock when it is ahead, so that two gateways of one host seldom
	 * send one number (statd passes on a change of state only). */
	if (state < 1 || state > INT_MAX - 4)
		state = 1;
	else
		state = (state + 2) | 1;
	if ((time_t)state < time(NULL) && time(NULL) < INT_MAX - 4)
		state = (int)time(NULL) | 1;
	l->nsm_state = state;
	/* A successor (an upgrade, a crash under supervise) holds its
	 * predecessor's locks: never told to drop them, also with no file
	 * (a predecessor from before lock-nsm-state). No file at a cold
	 * start: a new cache_dir (no earlier instance of this name held
	 * anything) or one of a gateway from before lock-nsm-state; not
	 * told either, since the origin drops the locks of every NLM client
	 * of this host's address (other gateways', the host's own NFS
	 * client's), not only ours. */
	notify = !gw->successor && ((known && held) || damaged);
	/* HELD stays 1 until the first owner is let go: if the origin could
	 * not be told, the next cold start tells it again; a successor that
	 * took owners over holds locks already. */
	ret = nsm_write(l, notify ||
			__atomic_load_n(&l->owners, __ATOMIC_RELAXED) > 0);
	if (ret == 0 && fsync(fd) < 0)
		ret = -errno;
	if (ret)
		gw_log("locks: cannot write %s: %s", path, strerror(-ret));
	nfsc_lock_nsm(gw->nfs, state, notify);
	if (notify)
		gw_log("locks: started cold%s: the origin is told that lock "
		       "client state %d replaces the earlier one",
		       damaged ? " (lock-nsm-state damaged)" : " after an instance that held locks",
		       state);
	return 0;
}

void gw_lock_nsm_update(struct gw_locks *l)
{
	bool held;

	if (l->nsm_fd < 0)
		return;
	pthread_mutex_lock(&l->nsm_lock);
	held = __atomic_load_n(&l->owners, __ATOMIC_RELAXED) > 0;
	if (held != l->nsm_held && nsm_write(l, held) && held)
		gw_log("locks: cannot mark lock-nsm-state: a cold start "
		       "after a crash may not tell the origin");
	pthread_mutex_unlock(&l->nsm_lock);
}

void gw_lock_nsm_free(struct gw_locks *l)
{
	if (l->nsm_fd >= 0)
		close(l->nsm_fd);
	l->nsm_fd = -1;
	pthread_mutex_destroy(&l->nsm_lock);
}
