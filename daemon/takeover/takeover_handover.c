/* takeover_handover.c - the old process, once its loop has ended for a
 * takeover: the writers' data committed, the descriptors sent; or, when
 * the commits take drain_timeout=, the descriptors sent without them by
 * the drain thread (gw_takeover_abandon), for the successor to commit as
 * after a crash. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "takeover_i.h"
#include "gw_state.h"

void gw_takeover_handover_begin(struct gw_proc *pr)
{
	size_t errs = gw_files_handover(pr->gw);
	int p[2], expect = 0;

	/* Too late: the drain thread has handed the connection over without
	 * these commits (gw_takeover_abandon) and is ending the process. */
	if (!__atomic_compare_exchange_n(&pr->handover_phase, &expect, 1,
					 false, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE))
		for (;;)
			pause();
	if (errs)
		gw_log("takeover: %zu writers have a write error to be told "
		       "by the successor", errs);
	gw_handover_freeze(pr->gw);
	gw_state->handed_over = 1;
	gw_state->last_was_crash = 0;
	gw_state->previous_pid = getpid();
	/* libfuse closes its descriptor at the end, and unmounts unless it
	 * polls POLLERR, as an ended connection does: a pipe with no reader
	 * in its place, as drain.c does. */
	if (pipe2(p, O_CLOEXEC) == 0) {
		close(p[0]);
		dup2(p[1], fuse_session_fd(pr->se));
		close(p[1]);
	}
}

int gw_takeover_handover_end(struct gw_proc *pr)
{
	int fds[2] = { pr->handover_fuse_fd, gw_state_fd() };
	struct ucred uc = { 0 };
	socklen_t ul = sizeof(uc);
	int ret;

	getsockopt(pr->takeover_fd, SOL_SOCKET, SO_PEERCRED, &uc, &ul);
	ret = gw_send_fds(pr->takeover_fd, "fds\n", fds, 2);
	if (ret)
		gw_log("takeover: cannot hand the connection to pid %d: %s; "
		       "it ends when this process does", uc.pid,
		       strerror(-ret));
	else
		gw_log("takeover: handed the connection over to pid %d",
		       uc.pid);
	close(pr->handover_fuse_fd);
	pr->handover_fuse_fd = -1;
	close(pr->takeover_fd);
	__atomic_store_n(&pr->takeover_fd, -1, __ATOMIC_RELEASE);
	return ret;
}

void gw_takeover_abandon(struct gw_proc *pr)
{
	int fds[2] = { pr->handover_fuse_fd, gw_state_fd() }, expect = 0;
	struct gw_state *st = gw_state;
	struct ucred uc = { 0 };
	socklen_t ul = sizeof(uc);
	int ret;

	if (!__atomic_compare_exchange_n(&pr->handover_phase, &expect, 2,
					 false, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE))
		return;		/* the main thread is past its commits */
	/* As after a crash: the successor COMMITs every writer's file and
	 * checks the verifier; what a commit that did finish recorded in a
	 * writer's record is told as well. Nothing of this process's runs
	 * after the send but _exit. */
	st->handed_over = 0;
	st->last_was_crash = 0;
	st->previous_pid = getpid();
	getsockopt(pr->takeover_fd, SOL_SOCKET, SO_PEERCRED, &uc, &ul);
	ret = gw_send_fds(pr->takeover_fd, "fds wait\n", fds, 2);
	if (ret)
		gw_log("takeover: the commits of the handover did not finish in "
		       "%u s (drain_timeout=), and the connection cannot be "
		       "handed to pid %d either: %s; exiting", pr->o->drain_timeout,
		       uc.pid, strerror(-ret));
	else
		gw_log("takeover: the commits of the handover did not finish in "
		       "%u s (drain_timeout=; is the origin answering?): handed "
		       "the connection to pid %d without them, which COMMITs "
		       "what this process wrote as after a crash; exiting",
		       pr->o->drain_timeout, uc.pid);
	/* The supervisor must not start a successor of its own. */
	if (!ret && pr->sup_fd >= 0 &&
	    gw_send_fds(pr->sup_fd, "handed\n", NULL, 0))
		gw_log("supervise: cannot tell the supervisor");
	fflush(stderr);
	_exit(ret ? EXIT_FAILURE : EXIT_SUCCESS);
}
