/* takeover_init.c - the connection's FUSE_INIT, kept by the process that
 * mounted and replayed by each successor into its new session; the
 * kernel asked to queue again what the last process read and never
 * answered (FUSE_NOTIFY_RESEND, Linux >= 6.9); the successor's start
 * counted. */
#include <errno.h>
#include <linux/fuse.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "takeover_i.h"
#include "gw_state.h"

#ifndef FUSE_NOTIFY_RESEND
#define FUSE_NOTIFY_RESEND 7
#endif
/* The unique of the replayed INIT: the kernel counts its own up from 0 in
 * steps of 2 and never reaches it; the reply's write fails with ENOENT. */
#define REPLAY_UNIQUE (1ULL << 61)

/* ---- the kernel ---- */

bool gw_kernel_has_resend(void)
{
	struct utsname u;
	unsigned maj = 0, min = 0;

	if (uname(&u) < 0 || sscanf(u.release, "%u.%u", &maj, &min) != 2)
		return false;
	return maj > 6 || (maj == 6 && min >= 9);
}

/* ---- the successor: INIT, handles, resend ---- */

int gw_takeover_init(struct gw_proc *pr, bool successor)
{
	struct gw_state *st = gw_state;
	struct fuse_buf fb = { 0 };
	struct fuse_in_header *in;
	uint8_t buf[GW_STATE_INIT_MAX];
	int res;

	if (successor) {
		memcpy(buf, st->init, st->init_len);
		in = (struct fuse_in_header *)buf;
		in->unique = REPLAY_UNIQUE;
		fb.mem = buf;
		fb.size = st->init_len;
		fuse_session_process_buf(pr->se, &fb);
		return 0;
	}
	/* The first request of a connection is the kernel's INIT: read
	 * here, kept, then served as the loop would have. */
	res = fuse_session_receive_buf(pr->se, &fb);
	if (res <= 0) {
		free(fb.mem);
		return res < 0 ? res : -EIO;
	}
	in = fb.mem;
	if (st && !(fb.flags & FUSE_BUF_IS_FD) && fb.size >= sizeof(*in) &&
	    in->opcode == FUSE_INIT && fb.size <= GW_STATE_INIT_MAX) {
		memcpy(st->init, fb.mem, fb.size);
		st->init_len = (uint32_t)fb.size;
	} else if (st) {
		gw_log("takeover: the connection's first request was not an "
		       "INIT of a known size: no successor can take over");
	}
	fuse_session_process_buf(pr->se, &fb);
	free(fb.mem);
	return 0;
}

int gw_takeover_resend(struct gw_proc *pr)
{
	struct fuse_out_header oh = {
		.len = sizeof(oh),
		.error = FUSE_NOTIFY_RESEND,
		.unique = 0,
	};
	ssize_t n;

	n = write(fuse_session_fd(pr->se), &oh, sizeof(oh));
	return n == (ssize_t)sizeof(oh) ? 0 : n < 0 ? -errno : -EIO;
}

/* The successor serves from now: counters for the metrics and the log. */
void gw_takeover_serving(struct gw_proc *pr, bool successor)
{
	struct gw_state *st = gw_state;

	(void)pr;
	if (!st)
		return;
	/* The control threads read these (the metrics): atomic. */
	if (successor) {
		uint64_t gen = st->generation + 1;
		uint64_t pause = gw_now_ns() -
				 __atomic_load_n(&st->stopped_ns,
						 __ATOMIC_RELAXED);

		__atomic_store_n(&st->generation, gen, __ATOMIC_RELAXED);
		__atomic_store_n(&st->pause_ns, pause, __ATOMIC_RELAXED);
		gw_log("takeover: serving the connection of pid %d (%s), "
		       "generation %llu; clients waited %.3f s",
		       st->previous_pid, st->last_was_crash ? "died" :
		       "handed over", (unsigned long long)gen,
		       (double)pause / 1e9);
	}
	st->previous_pid = getpid();
	__atomic_store_n(&st->serving_pid, getpid(), __ATOMIC_RELAXED);
	st->handed_over = 0;
	st->last_was_crash = 0;
}
