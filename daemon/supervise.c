/* supervise.c - -o supervise: a crash of the serving process is survived.
 *
 * The process the user started (after its fork into the background)
 * becomes a small supervisor: it runs no thread and serves nothing. It
 * forks the serving process, which mounts and, once it has the
 * connection's INIT, passes the /dev/fuse descriptor and the takeover
 * state (gw_state.h) back over a socketpair. The supervisor's copies keep
 * the connection alive (the kernel ends it when its last descriptor
 * closes); when the serving process dies of a signal (kill -9, abort,
 * the OOM killer) it forks a successor on them (gw_serve with the
 * descriptors), which replays INIT, adopts the open files, owes COMMITs
 * of what the dead one wrote and asks the kernel to resend what it had
 * read but not answered (FUSE_NOTIFY_RESEND; without it those requests
 * stay unanswered and their callers wait until killed: the supervisor
 * says so and starts the successor anyway, so everything else is served).
 * A successor says "serving" once it serves.
 *
 * SIGTERM, SIGINT and SIGHUP are passed on to the serving process (kept
 * until a successor serves, if one is starting); its exit with a status
 * ends the supervisor with that status. A serving process that handed the
 * connection to a new binary (an upgrade) says so first: the supervisor
 * then exits 0, the new one supervises.
 *
 * Nothing detaches the mount here: while the supervisor lives, clients
 * wait. Deaths that come quickly (CRASH_MAX within CRASH_WINDOW_S: a
 * successor that cannot start, a request that kills each one) start the
 * next successors after a delay that doubles from 1 s up to DELAY_MAX_S,
 * logged once when it begins and once when a successor serves again; the
 * mount unmounted meanwhile ends the supervisor.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "daemon.h"
#include "takeover_i.h"
#include "gw_state.h"

#define CRASH_WINDOW_S 60
#define CRASH_MAX 5
#define DELAY_MAX_S 60

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int sig_fd = -1;

static struct gw_state *map_state(int fd)
{
	struct gw_state *st = mmap(NULL, GW_STATE_SIZE, PROT_READ | PROT_WRITE,
				   MAP_SHARED, fd, 0);

	if (st == MAP_FAILED)
		return NULL;
	st->supervisor_pid = getpid();
	return st;
}

static pid_t spawn(struct gw_opts *o, const int fds[2], struct nfsc *origin,
		   int *sup, int notify_fd)
{
	int sp[2];
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
		return -1;
	pid = fork();
	if (pid < 0) {
		close(sp[0]);
		close(sp[1]);
		return -1;
	}
	if (pid == 0) {
		sigset_t none;
		int mine[2] = { -1, -1 };

		close(sp[0]);
		close(sig_fd);
		/* Its own copies: the supervisor keeps the originals. */
		if (fds[0] >= 0) {
			mine[0] = dup(fds[0]);
			mine[1] = dup(fds[1]);
			close(fds[0]);
			close(fds[1]);
		}
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		if (!o->foreground && notify_fd >= 0)
			gw_log_keep_early();	/* its own, until it detaches */
		_exit(gw_serve(o, mine, origin, sp[1], notify_fd));
	}
	close(sp[1]);
	*sup = sp[0];
	return pid;
}

/* Is our mount (device dev) still at the mount point? */
static bool mount_still(const struct gw_opts *o, const unsigned dev[2])
{
	unsigned maj, min;
	bool ours = false;

	return !gw_mount_at(o->mountpoint_real, &maj, &min, &ours) && ours &&
	       maj == dev[0] && min == dev[1];
}

static void drop_fds(int fds[2])
{
	for (int i = 0; i < 2; i++) {
		if (fds[i] >= 0)
			close(fds[i]);
		fds[i] = -1;
	}
}

/* Waiting: what comes in from the serving process, and the signals. */
struct sup {
	struct gw_opts *o;
	int fds[2];			/* the connection and the state */
	int sup;			/* to the serving process (-1: none) */
	pid_t child;			/* -1: none (a successor is due) */
	bool child_serves;		/* it said so ("fds" or "serving") */
	bool child_successor;		/* it was started on the connection */
	bool handed, stopping;
	int pending_sig;		/* for the successor, once it serves */
	bool have_dev;
	unsigned dev[2];
	struct gw_state *st;
	uint64_t crashes[CRASH_MAX];	/* CLOCK_MONOTONIC of the last deaths */
	unsigned ncrash;
	unsigned delay_s;		/* the next delay, while delaying */
	bool delaying;			/* quick deaths: successors wait */
	bool served;			/* one served since delaying began */
	uint64_t due_ns;		/* the successor's start (0: none due) */
};

/* Messages of the serving process: "fds" with the descriptors (the first
 * process, once it has INIT), "serving" (a successor), "handed". */
static void take_message(struct sup *s)
{
	char msg[16];
	int got[2], n = 2;
	ssize_t len = gw_recv_fds(s->sup, msg, sizeof(msg), got, &n);

	if (len <= 0) {
		close(s->sup);
		s->sup = -1;
		return;
	}
	if (!strcmp(msg, "fds\n") && n == 2) {
		drop_fds(s->fds);
		s->fds[0] = got[0];
		s->fds[1] = got[1];
		n = 0;
		s->child_serves = true;
	} else if (!strcmp(msg, "handed\n")) {
		s->handed = true;
	} else if (!strcmp(msg, "serving\n")) {
		s->child_serves = true;
		if (s->delaying && !s->served) {
			gw_log("supervise: a successor (pid %d) serves again; "
			       "while deaths come this quickly, the next ones "
			       "still start after a delay", s->child);
			s->served = true;
		}
		if (s->pending_sig) {
			kill(s->child, s->pending_sig);
			s->pending_sig = 0;
		}
	}
	for (int i = 0; i < n; i++)
		close(got[i]);
	if (s->fds[1] >= 0 && !s->st)
		s->st = map_state(s->fds[1]);
	if (s->fds[0] >= 0 && !s->have_dev) {
		bool ours = false;

		s->have_dev = !gw_mount_at(s->o->mountpoint_real, &s->dev[0],
					   &s->dev[1], &ours) && ours;
	}
}

/* The serving process died with the mount there and no stop asked: when
 * may its successor start (0: now)? */
static uint64_t next_start(struct sup *s, pid_t dead, int status)
{
	uint64_t now = mono_ns();
	bool quick;

	quick = s->ncrash == CRASH_MAX &&
		now - s->crashes[0] < (uint64_t)CRASH_WINDOW_S * 1000000000ull;
	if (s->ncrash == CRASH_MAX) {
		memmove(s->crashes, s->crashes + 1,
			sizeof(s->crashes[0]) * (CRASH_MAX - 1));
		s->ncrash--;
	}
	s->crashes[s->ncrash++] = now;
	if (!quick) {
		if (s->delaying)
			gw_log("supervise: fewer than %d deaths within %d s "
			       "again: successors start at once", CRASH_MAX,
			       CRASH_WINDOW_S);
		s->delaying = false;
		s->served = false;
		s->delay_s = 1;
		gw_log("supervise: the serving process (pid %d) %s %d: "
		       "starting a successor on its connection%s", dead,
		       WIFEXITED(status) ? "exited with status" :
		       "died of signal", WIFEXITED(status) ?
		       WEXITSTATUS(status) : WTERMSIG(status),
		       gw_kernel_has_resend() ? "" :
		       " (this kernel has no FUSE_NOTIFY_RESEND: what the dead "
		       "process had read stays unanswered, its callers wait "
		       "until killed)");
		return 0;
	}
	if (!s->delaying)
		gw_log("supervise: %d deaths of the serving process within %d "
		       "s (the last, pid %d: %s %d): the next successors start "
		       "after a delay, from 1 s doubling up to %d s, until one "
		       "serves; the mount stays, clients wait (see the lines "
		       "of the successors for why they end)", CRASH_MAX,
		       CRASH_WINDOW_S, dead, WIFEXITED(status) ?
		       "exit status" : "signal", WIFEXITED(status) ?
		       WEXITSTATUS(status) : WTERMSIG(status), DELAY_MAX_S);
	s->delaying = true;
	now += (uint64_t)s->delay_s * 1000000000ull;
	s->delay_s = s->delay_s * 2 > DELAY_MAX_S ? DELAY_MAX_S :
		     s->delay_s * 2;
	return now;
}

static void sup_exit(struct sup *s)
{
	drop_fds(s->fds);
	if (s->st)
		munmap(s->st, GW_STATE_SIZE);
	if (s->sup >= 0)
		close(s->sup);
	/* Handed over: the pidfile is the new supervisor's (it may have
	 * written it already; a check of the pid and an unlink would race
	 * with that rename). */
	if (!s->handed)
		gw_pidfile_remove(s->o);
}

int gw_supervise(struct gw_opts *o, const int given[2], struct nfsc *origin,
		 int notify_fd)
{
	struct sup s = {
		.o = o, .fds = { given[0], given[1] }, .sup = -1,
		.delay_s = 1,
	};
	bool detached = false;
	sigset_t set;
	int sfd, status;

	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	sigprocmask(SIG_BLOCK, &set, NULL);
	sfd = signalfd(-1, &set, SFD_CLOEXEC);
	if (sfd < 0) {
		perror("cachegw: supervise: signalfd");
		return EXIT_FAILURE;
	}
	sig_fd = sfd;
	/* -f with logfile=: the supervisor's lines go there too (without -f,
	 * gw_daemon_detach below sends them there). */
	if (o->foreground && o->logfile &&
	    (status = gw_log_to_file(o->logfile)) < 0)
		fprintf(stderr, "cachegw: logfile '%s': %s\n", o->logfile,
			strerror(-status));
	if (s.fds[1] >= 0) {
		bool ours = false;

		s.st = map_state(s.fds[1]);
		s.have_dev = !gw_mount_at(o->mountpoint_real, &s.dev[0],
					  &s.dev[1], &ours) && ours;
	}
	gw_pidfile_write(o);
	s.child_successor = s.fds[0] >= 0;
	s.child = spawn(o, s.fds, origin, &s.sup, notify_fd);
	/* The origin reached before the takeover is the child's: the
	 * supervisor's copy of it is closed (descriptors only; nothing is
	 * sent: the connections stay the child's). */
	nfsc_close(origin);
	if (notify_fd >= 0)
		close(notify_fd);	/* the serving process's to answer */
	if (s.child < 0) {
		perror("cachegw: supervise: fork");
		return EXIT_FAILURE;
	}
	/* Taking over: the connection is here already; the serving process
	 * reports its start itself. */
	if (s.fds[0] >= 0 && !o->foreground) {
		gw_daemon_detach(o);
		detached = true;
	}
	for (;;) {
		struct pollfd pf[2] = {
			{ .fd = sfd, .events = POLLIN },
			{ .fd = s.sup, .events = POLLIN },
		};
		int timeout = -1;

		if (s.due_ns) {
			uint64_t now = mono_ns();

			timeout = s.due_ns > now ?
				  (int)((s.due_ns - now) / 1000000u) + 1 : 0;
		}
		if (poll(pf, s.sup >= 0 ? 2 : 1, timeout) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (s.sup >= 0 && (pf[1].revents & (POLLIN | POLLHUP))) {
			take_message(&s);
			if (s.fds[1] >= 0 && !o->foreground && !detached) {
				gw_daemon_detach(o);
				detached = true;
			}
		}
		/* A successor due: unless the mount has gone meanwhile. */
		if (s.due_ns && mono_ns() >= s.due_ns) {
			s.due_ns = 0;
			if (s.have_dev && !mount_still(o, s.dev)) {
				gw_log("supervise: the mount is gone; exiting");
				sup_exit(&s);
				return s.stopping ? EXIT_FAILURE : EXIT_SUCCESS;
			}
			s.child_serves = false;
			s.child_successor = true;
			s.child = spawn(o, s.fds, NULL, &s.sup, -1);
			if (s.child < 0) {
				gw_log("supervise: cannot fork: %s; trying "
				       "again in %u s", strerror(errno),
				       s.delay_s);
				s.due_ns = mono_ns() +
					   (uint64_t)s.delay_s * 1000000000ull;
			}
		}
		if (pf[0].revents & POLLIN) {
			struct signalfd_siginfo si;
			pid_t w;

			if (read(sfd, &si, sizeof(si)) != sizeof(si))
				continue;
			if (si.ssi_signo != SIGCHLD) {
				int sig = (int)si.ssi_signo;

				if (sig != SIGHUP)
					s.stopping = true;
				/* A successor gets it once it serves (before,
				 * TERM would end it with nothing done); none
				 * running: start it now. */
				if (s.child > 0 &&
				    (s.child_serves || !s.child_successor))
					kill(s.child, sig);
				else if (sig != SIGHUP)
					s.pending_sig = sig;
				if (s.child < 0 && s.due_ns && s.stopping)
					s.due_ns = mono_ns();
				continue;
			}
			if (s.child < 0)
				continue;
			w = waitpid(s.child, &status, WNOHANG);
			if (w != s.child)
				continue;
			if (s.sup >= 0) {
				/* what it said before it went */
				while (s.sup >= 0)
					take_message(&s);
			}
			s.child = -1;
			/* An exit with the mount still there and no stop
			 * asked for is a death too (a sanitizer's report, a
			 * fatal error, a successor that could not start):
			 * the stop paths end the mount first. */
			if (WIFEXITED(status) && !s.handed && !s.stopping &&
			    s.fds[0] >= 0 && s.have_dev &&
			    mount_still(o, s.dev)) {
				if (!s.delaying)
					gw_log("supervise: the serving process "
					       "exited (status %d) with the "
					       "mount still there",
					       WEXITSTATUS(status));
			} else if (WIFEXITED(status) || s.handed ||
				   s.stopping || s.fds[0] < 0) {
				int ret = WIFEXITED(status) ?
					  WEXITSTATUS(status) : EXIT_FAILURE;

				if (s.handed)
					gw_log("supervise: the connection was "
					       "handed to a new process; exiting");
				else if (!WIFEXITED(status))
					gw_log("supervise: the serving process "
					       "died (signal %d)%s; exiting",
					       WTERMSIG(status), s.fds[0] < 0 ?
					       " before it served" :
					       " while stopping");
				sup_exit(&s);
				return s.handed ? EXIT_SUCCESS : ret;
			}
			/* Died while serving: a successor, now or later. */
			if (s.st) {
				s.st->stopped_ns = mono_ns();
				s.st->last_was_crash = 1;
				s.st->handed_over = 0;
				s.st->previous_pid = w;
			}
			s.due_ns = next_start(&s, w, status);
			if (!s.due_ns)
				s.due_ns = mono_ns();
		}
	}
	sup_exit(&s);
	return EXIT_FAILURE;
}
