/* supervise.c - -o supervise: a crash of the serving process is survived.
 *
 * The process the user started (after its fork into the background)
 * becomes a small supervisor: it runs no thread and serves nothing. It
 * forks the serving process, which mounts and, once it has the
 * connection's INIT, passes the /dev/fuse descriptor and the takeover
 * state (gw_state.h) back over a socketpair. The supervisor's copies keep
 * the connection alive (the kernel ends it when its last descriptor
 * closes); when the serving process dies of a signal (kill -9, abort,
 * the OOM killer) it forks a successor on them (gw_run with the
 * descriptors), which replays INIT, adopts the open files, commits what
 * the dead one wrote and asks the kernel to resend what it had read but
 * not answered (FUSE_NOTIFY_RESEND; without it those requests stay
 * unanswered and their callers wait until killed: the supervisor says so
 * once and starts the successor anyway, so everything else is served).
 *
 * SIGTERM, SIGINT and SIGHUP are passed on to the serving process; its
 * exit with a status ends the supervisor with that status. A serving
 * process that handed the connection to a new binary (an upgrade) says
 * so first: the supervisor then exits 0, the new one supervises.
 * Successors that die within seconds again and again (5 within 60 s):
 * the supervisor gives up, detaches the mount and exits 1, rather than
 * loop.
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
#include "gw_state.h"

#define CRASH_WINDOW_S 60
#define CRASH_MAX 5

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

static pid_t spawn(struct gw_opts *o, const int fds[2], int *sup,
		   int notify_fd)
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
		_exit(gw_run(o, mine, sp[1], notify_fd));
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

int gw_supervise(struct gw_opts *o, const int given[2], int notify_fd)
{
	int fds[2] = { given[0], given[1] }, sup = -1, sfd, status;
	bool handed = false, stopping = false, detached = false;
	bool have_dev = false;
	unsigned dev[2] = { 0, 0 };
	struct gw_state *st = NULL;
	uint64_t crashes[CRASH_MAX] = { 0 };
	unsigned ncrash = 0;
	sigset_t set;
	pid_t child;

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
	if (fds[1] >= 0) {
		bool ours = false;

		st = map_state(fds[1]);
		have_dev = !gw_mount_at(o->mountpoint_real, &dev[0], &dev[1],
					&ours) && ours;
	}
	gw_pidfile_write(o);
	child = spawn(o, fds, &sup, notify_fd);
	if (notify_fd >= 0)
		close(notify_fd);	/* the serving process's to answer */
	if (child < 0) {
		perror("cachegw: supervise: fork");
		return EXIT_FAILURE;
	}
	/* Taking over: the connection is here already; the serving process
	 * reports its start itself. */
	if (fds[0] >= 0 && !o->foreground) {
		gw_daemon_detach(o);
		detached = true;
	}
	for (;;) {
		struct pollfd pf[2] = {
			{ .fd = sfd, .events = POLLIN },
			{ .fd = sup, .events = POLLIN },
		};

		if (poll(pf, sup >= 0 ? 2 : 1, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (sup >= 0 && (pf[1].revents & (POLLIN | POLLHUP))) {
			char msg[16];
			int got[2], n = 2;
			ssize_t len = gw_recv_fds(sup, msg, sizeof(msg), got,
						  &n);

			if (len <= 0) {
				close(sup);
				sup = -1;
			} else if (!strcmp(msg, "fds\n") && n == 2) {
				drop_fds(fds);
				fds[0] = got[0];
				fds[1] = got[1];
			} else if (!strcmp(msg, "handed\n")) {
				handed = true;
			}
			for (int i = 0; i < n && strcmp(msg, "fds\n"); i++)
				close(got[i]);
			if (fds[1] >= 0 && !st)
				st = map_state(fds[1]);
			if (fds[0] >= 0 && !have_dev) {
				bool ours = false;

				have_dev = !gw_mount_at(o->mountpoint_real,
							&dev[0], &dev[1],
							&ours) && ours;
			}
			if (fds[1] >= 0 && !o->foreground && !detached) {
				gw_daemon_detach(o);
				detached = true;
			}
		}
		if (pf[0].revents & POLLIN) {
			struct signalfd_siginfo si;
			pid_t w;

			if (read(sfd, &si, sizeof(si)) != sizeof(si))
				continue;
			if (si.ssi_signo != SIGCHLD) {
				if (si.ssi_signo != SIGHUP)
					stopping = true;
				kill(child, (int)si.ssi_signo);
				continue;
			}
			w = waitpid(child, &status, WNOHANG);
			if (w != child)
				continue;
			if (sup >= 0) {
				/* what it said before it went */
				char msg[16];
				int got[2], n = 2;

				while (gw_recv_fds(sup, msg, sizeof(msg), got,
						   &n) > 0 && n == 0)
					if (!strcmp(msg, "handed\n"))
						handed = true;
				for (int i = 0; i < n; i++)
					close(got[i]);
				close(sup);
				sup = -1;
			}
			/* An exit with the mount still there and no stop
			 * asked for is a death too (a sanitizer's report, a
			 * fatal error): the stop paths end the mount first. */
			if (WIFEXITED(status) && !handed && !stopping &&
			    fds[0] >= 0 && have_dev && mount_still(o, dev)) {
				gw_log("supervise: the serving process exited "
				       "(status %d) with the mount still "
				       "there", WEXITSTATUS(status));
			} else if (WIFEXITED(status) || handed || stopping ||
				   fds[0] < 0) {
				int ret = WIFEXITED(status) ?
					  WEXITSTATUS(status) : EXIT_FAILURE;

				if (handed)
					gw_log("supervise: the connection was "
					       "handed to a new process; exiting");
				else if (!WIFEXITED(status))
					gw_log("supervise: the serving process "
					       "died (signal %d)%s; exiting",
					       WTERMSIG(status), fds[0] < 0 ?
					       " before it served" :
					       " while stopping");
				drop_fds(fds);
				if (st)
					munmap(st, GW_STATE_SIZE);
				gw_pidfile_remove(o);
				return handed ? EXIT_SUCCESS : ret;
			}
			/* Died while serving: a successor. */
			if (ncrash == CRASH_MAX &&
			    mono_ns() - crashes[0] <
			    (uint64_t)CRASH_WINDOW_S * 1000000000ull) {
				gw_log("supervise: the serving process died %d "
				       "times within %d s: giving up; the mount "
				       "is detached", CRASH_MAX,
				       CRASH_WINDOW_S);
				umount2(o->mountpoint_real,
					MNT_DETACH | UMOUNT_NOFOLLOW);
				drop_fds(fds);
				return EXIT_FAILURE;
			}
			if (ncrash == CRASH_MAX) {
				memmove(crashes, crashes + 1,
					sizeof(crashes[0]) * (CRASH_MAX - 1));
				ncrash--;
			}
			crashes[ncrash++] = mono_ns();
			if (st) {
				st->stopped_ns = mono_ns();
				st->last_was_crash = 1;
				st->handed_over = 0;
				st->previous_pid = child;
			}
			gw_log("supervise: the serving process (pid %d) %s %d: "
			       "starting a successor on its connection%s",
			       child, WIFEXITED(status) ? "exited with status" :
			       "died of signal", WIFEXITED(status) ?
			       WEXITSTATUS(status) : WTERMSIG(status),
			       gw_kernel_has_resend() ? "" :
			       " (this kernel has no FUSE_NOTIFY_RESEND: what "
			       "the dead process had read stays unanswered, "
			       "its callers wait until killed)");
			child = spawn(o, fds, &sup, -1);
			if (child < 0) {
				gw_log("supervise: cannot fork: %s",
				       strerror(errno));
				drop_fds(fds);
				return EXIT_FAILURE;
			}
		}
	}
	drop_fds(fds);
	return EXIT_FAILURE;
}
