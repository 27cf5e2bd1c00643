/* takeover_ctl.c - the old process asked: the control command "takeover
 * VERSION FORMAT MNT" refused with one line, or answered "ok PID" with the
 * session stopped (drain.c) for the connection to be handed over
 * (takeover_handover.c). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cache.h"
#include "takeover_i.h"
#include "gw_state.h"

void gw_ctl_takeover(struct gw_proc *pr, int fd, const char *args, FILE *out)
{
	unsigned ver, fmt;
	char mnt[PATH_MAX];
	int expect = -1, mine;

	if (sscanf(args, "%u %u %4095[^\n]", &ver, &fmt, mnt) != 3) {
		fprintf(out, "refused: a malformed takeover request\n");
		return;
	}
	/* Another version: its first words are read by a successor
	 * (takeover_probe.c: one of the next version asks again for ours)
	 * and stay as they are. An older one is refused: it would not know
	 * what this version keeps (the lock owners). */
	if (ver != GW_STATE_VERSION || fmt != CACHE_FORMAT_VERSION) {
		fprintf(out, "refused: this gateway (pid %d) keeps takeover "
			"state version %u and cache format %u, the new one %u "
			"and %u: %sstop it and start the new one instead\n",
			getpid(), GW_STATE_VERSION, CACHE_FORMAT_VERSION, ver,
			fmt, ver < GW_STATE_VERSION && fmt ==
			CACHE_FORMAT_VERSION ? "a binary older than this "
			"one cannot take it over; " : "");
		return;
	}
	if (strcmp(mnt, pr->o->mountpoint_real)) {
		fprintf(out, "refused: cache_dir %s is in use by another "
			"cachegw (pid %d), which serves %s, not %s\n",
			pr->o->cache_dir, getpid(), pr->o->mountpoint_real,
			mnt);
		return;
	}
	if (!gw_state || !gw_state->negotiated || !gw_state->init_len) {
		fprintf(out, "refused: this gateway (pid %d) kept no state a "
			"successor could take over with\n", getpid());
		return;
	}
	if (!gw_kernel_has_resend()) {
		fprintf(out, "refused: this kernel cannot hand a FUSE "
			"connection over without losing requests in flight "
			"(FUSE_NOTIFY_RESEND needs Linux >= 6.9): restart "
			"the gateway the old way (README)\n");
		return;
	}
	mine = dup(fd);
	if (mine < 0) {
		fprintf(out, "refused: %s\n", strerror(errno));
		return;
	}
	if (!__atomic_compare_exchange_n(&pr->takeover_fd, &expect, mine,
					 false, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE)) {
		close(mine);
		fprintf(out, "refused: another takeover is under way\n");
		return;
	}
	/* The connection for the successor, kept now: the drain thread
	 * may have to send it while the main thread is still committing
	 * (gw_takeover_abandon). gw_drain_takeover's lock orders this store
	 * before anything the drain thread does for the takeover. */
	pr->handover_fuse_fd = dup(fuse_session_fd(pr->se));
	if (pr->handover_fuse_fd < 0) {
		fprintf(out, "refused: %s\n", strerror(errno));
		goto undo;
	}
	/* Atomic: an upgrade asked for as soon as this process serves
	 * races with gw_takeover_serving's read. */
	__atomic_store_n(&gw_state->stopped_ns, gw_now_ns(), __ATOMIC_RELAXED);
	if (gw_drain_takeover(gw_takeover_abandon)) {
		close(pr->handover_fuse_fd);
		pr->handover_fuse_fd = -1;
		fprintf(out, "refused: the gateway is stopping\n");
		goto undo;
	}
	gw_log("takeover: asked by a new process; stopping to hand the "
	       "connection over");
	fprintf(out, "ok %d\n", getpid());
	return;
undo:
	__atomic_store_n(&pr->takeover_fd, -1, __ATOMIC_RELEASE);
	close(mine);
}
