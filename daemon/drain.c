/* drain.c - signals, and stopping with nothing written lost.
 *
 * libfuse's fuse_set_signal_handlers() ends the session loop on SIGHUP,
 * SIGINT and SIGTERM; an ended loop is followed by closing /dev/fuse, which
 * fails every open file (ENOTCONN) and drops the requests still queued in
 * the kernel, writes included. Instead, HUP, INT and TERM are blocked in
 * every thread (gw_drain_block_signals, before the first thread starts)
 * and taken by one thread here with sigtimedwait, so no other thread is
 * ever interrupted and nothing runs in a signal handler:
 *
 *   SIGHUP           reopen logfile= (logrotate); without one, a log line.
 *   SIGTERM, SIGINT  1. the first detaches the mount, as `umount -l`: the
 *                       name goes at once, open files keep working; when
 *                       the last is closed the kernel ends the session
 *                       and the gateway commits and exits 0. Open files
 *                       get drain_timeout= seconds.
 *                    2. after that, or at a second signal: the session
 *                       stops, what is still open fails with ENOTCONN, and
 *                       every file's written data is COMMITted.
 *                    3. the commits at exit (after any end of the session,
 *                       an unmount too) get drain_timeout= seconds; after
 *                       that, or at a third signal, the gateway logs what
 *                       it gives up and exits 1.
 *
 * A takeover (takeover/) stops the session as step 2 does, without
 * detaching; when its commits take drain_timeout= seconds, the call it
 * gave (gw_drain_takeover) hands the connection to the new process
 * without them, which commits them as after a crash: nothing is given up,
 * nothing detached.
 *
 * Before the mount, TERM and INT do what they do by default (a start-up
 * hung on an unreachable origin is interrupted, nothing is to be saved);
 * between the mount and the session loop they are kept until it starts.
 *
 * The session loop's main thread sleeps in sem_wait; step 2 wakes it with
 * SIGUSR2 (a handler that does nothing, only that thread gets it) after
 * fuse_session_exit(), again every 100 ms until the loop has returned.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "daemon.h"
#include "lockcheck.h"

#define WAKE_SIGNAL SIGUSR2
#define KICK_NS (100 * 1000000L)

enum drain_phase {
	DRAIN_STARTING,		/* start-up: TERM/INT kill (before the mount)
				 * or wait for DRAIN_SERVING (after it) */
	DRAIN_SERVING,		/* mounted, serving */
	DRAIN_DETACHED,		/* detached by a signal; open files served */
	DRAIN_STOPPING,		/* session asked to stop; loop not yet back */
	DRAIN_COMMITTING,	/* session loop returned; releasing, committing */
	DRAIN_DONE,		/* exit path finished; thread to return */
};

static struct {
	pthread_mutex_t lock;
	struct gw_proc *pr;			/* set at start */
	pthread_t thread;		/* set at start */
	pthread_t main_thread;		/* set at start: runs the loop */
	bool started;			/* main thread only */
	unsigned dev_major, dev_minor;	/* our mount's device; set at start */
	bool have_dev;			/* set at start */
	enum drain_phase phase;		/* lock */
	struct timespec deadline;	/* lock: DETACHED, COMMITTING */
	bool detached;			/* lock: we took the mount away */
	int signals;			/* lock: TERM/INT received */
	bool mounted;			/* lock: STARTING, mount made */
	int pending;			/* lock: STARTING, signal kept */
	/* lock: a takeover's call, for commits that take drain_timeout= */
	void (*late)(struct gw_proc *pr);
	bool handover_late;		/* lock: late was called */
} dr = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void wake_noop(int sig)
{
	(void)sig;
}

static sigset_t drain_set(void)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, WAKE_SIGNAL);
	return set;
}

int gw_drain_block_signals(void)
{
	sigset_t set = drain_set();
	struct sigaction sa = { .sa_handler = SIG_IGN };

	/* What libfuse's handlers did besides: writes to a closed socket
	 * (control, metrics) are errors, not deaths. */
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGPIPE, &sa, NULL) < 0)
		return -errno;
	/* A handler (never run: the signals are blocked everywhere) so that
	 * HUP and TERM are taken even when inherited ignored (nohup);
	 * an ignored INT (a script's background job) stays ignored. */
	sa.sa_handler = wake_noop;
	if (sigaction(WAKE_SIGNAL, &sa, NULL) < 0 ||
	    sigaction(SIGHUP, &sa, NULL) < 0 ||
	    sigaction(SIGTERM, &sa, NULL) < 0)
		return -errno;
	return -pthread_sigmask(SIG_BLOCK, &set, NULL);
}

/* Still our mount at the mountpoint (not unmounted, not mounted over by
 * someone else since)? */
static bool mount_is_ours(void)
{
	unsigned maj, min;
	bool ours;

	return dr.have_dev &&
	       !gw_mount_at(dr.pr->o->mountpoint_real, &maj, &min, &ours) &&
	       ours && maj == dr.dev_major && min == dr.dev_minor;
}

/* umount -l, or fusermount3 -u -z when not root. */
static int detach_mount(void)
{
	const char *mnt = dr.pr->o->mountpoint_real;
	char *argv[] = { "fusermount3", "-u", "-z", "-q", "--", (char *)mnt,
			 NULL };
	posix_spawnattr_t attr;
	sigset_t none;
	pid_t pid;
	int st, ret;

	if (!mount_is_ours())
		return -ENOENT;
	if (umount2(mnt, MNT_DETACH | UMOUNT_NOFOLLOW) == 0)
		return 0;
	if (errno != EPERM)
		return -errno;
	/* The child must not inherit our blocked signals. */
	sigemptyset(&none);
	posix_spawnattr_init(&attr);
	posix_spawnattr_setsigmask(&attr, &none);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
	ret = posix_spawnp(&pid, "fusermount3", NULL, &attr, argv, environ);
	posix_spawnattr_destroy(&attr);
	if (ret)
		return -ret;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -EPERM;
}

static const char *signame(int sig)
{
	return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" :
	       sig == SIGHUP ? "SIGHUP" : "signal";
}

static void deadline_in(struct timespec *ts, unsigned secs)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_sec += secs;
}

static void stop_session_locked(void)
{
	GW_ASSERT_HELD(&dr.lock);
	dr.phase = DRAIN_STOPPING;
	fuse_session_exit(dr.pr->se);
	pthread_kill(dr.main_thread, WAKE_SIGNAL);
}

/* The exit path did not finish in time, or was told not to wait. */
static void give_up(const char *why)
{
	gw_log("stop: %s: exiting now, status 1; written data the origin "
	       "has not committed may be lost (%zu more files and directories "
	       "not released)", why, gw_handles_count());
	if (!dr.detached && mount_is_ours())
		umount2(dr.pr->o->mountpoint_real, MNT_DETACH | UMOUNT_NOFOLLOW);
	fflush(stderr);
	_exit(EXIT_FAILURE);
}

static void on_term_locked(int sig)
{
	unsigned t = dr.pr->o->drain_timeout;
	size_t open;
	int ret;

	GW_ASSERT_HELD(&dr.lock);
	if (dr.phase == DRAIN_STARTING && !dr.mounted) {
		/* Nothing to detach or commit yet (the origin may be what
		 * start-up waits for): the signal's own default, as before
		 * any handler. */
		sigset_t one;

		signal(sig, SIG_DFL);
		sigemptyset(&one);
		sigaddset(&one, sig);
		pthread_sigmask(SIG_UNBLOCK, &one, NULL);
		raise(sig);
	}
	if (dr.phase == DRAIN_STARTING) {
		dr.pending = sig;	/* handled once serving */
		return;
	}
	dr.signals++;
	switch (dr.phase) {
	case DRAIN_STARTING:
	case DRAIN_DONE:
		return;
	case DRAIN_SERVING:
		open = gw_handles_count();
		ret = detach_mount();
		if (ret == -ENOENT) {
			/* Unmounted already (umount -l, or its last close is
			 * ending the session): the same wait for open files,
			 * and the path is left alone, it is not ours. */
			dr.detached = true;
			dr.phase = DRAIN_DETACHED;
			deadline_in(&dr.deadline, t);
			gw_log("%s: %s is unmounted already; %zu open files "
			       "and directories are served until closed (at "
			       "most %u s, drain_timeout=); a second %s stops "
			       "them now", signame(sig),
			       dr.pr->o->mountpoint_real, open, t,
			       signame(sig));
			return;
		}
		if (ret) {
			gw_log("%s: cannot detach %s (%s); stopping now",
			       signame(sig), dr.pr->o->mountpoint_real,
			       strerror(-ret));
			stop_session_locked();
			return;
		}
		dr.detached = true;
		dr.phase = DRAIN_DETACHED;
		deadline_in(&dr.deadline, t);
		if (!open) {
			gw_log("%s: unmounted %s; nothing open: committing "
			       "and exiting", signame(sig),
			       dr.pr->o->mountpoint_real);
			return;
		}
		gw_log("%s: unmounted %s (lazily); %zu open files and "
		       "directories are served until closed (at most %u s, "
		       "drain_timeout=), then written data is committed and "
		       "the gateway exits; a second %s stops them now",
		       signame(sig), dr.pr->o->mountpoint_real, open, t,
		       signame(sig));
		return;
	case DRAIN_DETACHED:
		gw_log("%s again: stopping the %zu open files and directories "
		       "now (ENOTCONN) and committing what was written",
		       signame(sig), gw_handles_count());
		stop_session_locked();
		return;
	case DRAIN_STOPPING:
	case DRAIN_COMMITTING:
		if (dr.signals >= 3) {
			char why[64];

			snprintf(why, sizeof(why), "%s while committing",
				 signame(sig));
			pthread_mutex_unlock(&dr.lock);
			give_up(why);
		}
		dr.signals = 2;		/* the next one gives up */
		gw_log("%s: still committing written data to the origin (at "
		       "most %u s, drain_timeout=); send it again to exit "
		       "without waiting", signame(sig), t);
		return;
	}
}

static void on_hup(void)
{
	char path[PATH_MAX];
	int ret = gw_log_reopen(path, sizeof(path));

	if (ret == -ENOENT)
		gw_log("SIGHUP: no logfile= to reopen; ignored");
	else if (ret)
		gw_log("SIGHUP: cannot reopen logfile '%s': %s; still logging "
		       "to the old file", path, strerror(-ret));
	else
		gw_log("SIGHUP: reopened logfile '%s'", path);
}

static bool passed(const struct timespec *d)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return now.tv_sec > d->tv_sec ||
	       (now.tv_sec == d->tv_sec && now.tv_nsec >= d->tv_nsec);
}

/* How long to wait for the next signal: NULL for ever. */
static struct timespec *wait_for_locked(struct timespec *ts)
{
	struct timespec now;

	GW_ASSERT_HELD(&dr.lock);
	switch (dr.phase) {
	case DRAIN_STOPPING:
		ts->tv_sec = 0;
		ts->tv_nsec = KICK_NS;
		return ts;
	case DRAIN_DETACHED:
	case DRAIN_COMMITTING:
		clock_gettime(CLOCK_MONOTONIC, &now);
		ts->tv_sec = dr.deadline.tv_sec - now.tv_sec;
		ts->tv_nsec = dr.deadline.tv_nsec - now.tv_nsec;
		if (ts->tv_nsec < 0) {
			ts->tv_nsec += 1000000000L;
			ts->tv_sec--;
		}
		if (ts->tv_sec < 0)
			ts->tv_sec = ts->tv_nsec = 0;
		return ts;
	default:
		return NULL;
	}
}

static void *drain_thread(void *arg)
{
	sigset_t set = drain_set();

	(void)arg;
	pthread_mutex_lock(&dr.lock);
	while (dr.phase != DRAIN_DONE) {
		struct timespec ts, *tp = wait_for_locked(&ts);
		int sig;

		pthread_mutex_unlock(&dr.lock);
		sig = tp ? sigtimedwait(&set, NULL, tp) : sigwaitinfo(&set, NULL);
		if (sig == SIGHUP)
			on_hup();
		pthread_mutex_lock(&dr.lock);
		if (sig == SIGTERM || sig == SIGINT) {
			on_term_locked(sig);
			continue;
		}
		if (dr.phase == DRAIN_STOPPING) {
			/* the loop may have missed the first wake-up */
			pthread_kill(dr.main_thread, WAKE_SIGNAL);
		} else if (dr.phase == DRAIN_DETACHED && passed(&dr.deadline)) {
			gw_log("stop: %zu files and directories still open "
			       "after %u s (drain_timeout=): stopping them "
			       "(ENOTCONN) and committing what was written",
			       gw_handles_count(), dr.pr->o->drain_timeout);
			stop_session_locked();
		} else if (dr.phase == DRAIN_COMMITTING &&
			   passed(&dr.deadline) && !dr.handover_late &&
			   dr.late) {
			/* A handover: its successor takes what is not
			 * committed (late returns only if the main thread is
			 * past the commits: then once more the time). */
			void (*late)(struct gw_proc *pr) = dr.late;

			dr.handover_late = true;
			deadline_in(&dr.deadline, dr.pr->o->drain_timeout);
			pthread_mutex_unlock(&dr.lock);
			late(dr.pr);
			pthread_mutex_lock(&dr.lock);
		} else if (dr.phase == DRAIN_COMMITTING &&
			   passed(&dr.deadline)) {
			char why[96];

			snprintf(why, sizeof(why), "the origin has not "
				 "completed the commits in %u s "
				 "(drain_timeout=)", dr.pr->o->drain_timeout);
			pthread_mutex_unlock(&dr.lock);
			give_up(why);
		}
	}
	pthread_mutex_unlock(&dr.lock);
	return NULL;
}

int gw_drain_start(struct gw_proc *pr)
{
	int ret;

	dr.pr = pr;
	dr.phase = DRAIN_STARTING;
	ret = pthread_create(&dr.thread, NULL, drain_thread, NULL);
	if (ret)
		return -ret;
	dr.started = true;
	return 0;
}

void gw_drain_mounted(void)
{
	pthread_mutex_lock(&dr.lock);
	dr.mounted = true;
	pthread_mutex_unlock(&dr.lock);
}

int gw_drain_serving(void)
{
	sigset_t wake;
	bool ours = false;

	if (!dr.started)
		return -ESRCH;
	pthread_mutex_lock(&dr.lock);
	dr.main_thread = pthread_self();
	if (!gw_mount_at(dr.pr->o->mountpoint_real, &dr.dev_major,
		      &dr.dev_minor, &ours) && ours)
		dr.have_dev = true;
	else
		gw_log("cannot find the mount of %s in /proc/self/mountinfo: "
		       "SIGTERM will stop without detaching it first",
		       dr.pr->o->mountpoint_real);
	dr.phase = DRAIN_SERVING;
	if (dr.pending)
		on_term_locked(dr.pending);
	pthread_mutex_unlock(&dr.lock);
	/* Only the loop's thread takes the wake-up signal. */
	sigemptyset(&wake);
	sigaddset(&wake, WAKE_SIGNAL);
	return -pthread_sigmask(SIG_UNBLOCK, &wake, NULL);
}

bool gw_drain_loop_ended(struct gw_proc *pr)
{
	sigset_t wake;
	bool detached;

	sigemptyset(&wake);
	sigaddset(&wake, WAKE_SIGNAL);
	pthread_sigmask(SIG_BLOCK, &wake, NULL);
	pthread_mutex_lock(&dr.lock);
	detached = dr.detached;
	if (dr.started && dr.phase != DRAIN_DONE) {
		dr.phase = DRAIN_COMMITTING;
		deadline_in(&dr.deadline, pr->o->drain_timeout);
		pthread_kill(dr.thread, WAKE_SIGNAL);	/* new timeout */
	}
	pthread_mutex_unlock(&dr.lock);
	if (detached) {
		/* Stopped with files open: end the connection now, so their
		 * users get ENOTCONN rather than wait on requests no one reads
		 * any more. In its place, a pipe with no reader: it polls
		 * POLLERR, as an ended connection does, which tells
		 * fuse_session_unmount not to unmount the path (it may be
		 * someone else's mount by now), only to close it. */
		int p[2];

		if (pipe2(p, O_CLOEXEC) == 0) {
			close(p[0]);
			dup2(p[1], fuse_session_fd(pr->se));
			close(p[1]);
		}
	}
	return detached;
}

void gw_drain_stop(int status)
{
	if (!dr.started)
		return;
	pthread_mutex_lock(&dr.lock);
	if (dr.signals)
		gw_log("stop: done, exit status %d%s", status, status ? "" :
		       ": everything written is committed at the origin");
	dr.phase = DRAIN_DONE;
	pthread_mutex_unlock(&dr.lock);
	pthread_kill(dr.thread, WAKE_SIGNAL);
	pthread_join(dr.thread, NULL);
	dr.started = false;
}

int gw_drain_takeover(void (*late)(struct gw_proc *pr))
{
	int ret = -EBUSY;

	pthread_mutex_lock(&dr.lock);
	if (dr.started && dr.phase == DRAIN_SERVING) {
		dr.late = late;
		stop_session_locked();
		ret = 0;
	}
	pthread_mutex_unlock(&dr.lock);
	return ret;
}

void gw_drain_detach_if_ours(void)
{
	if (dr.pr && !dr.detached && mount_is_ours())
		detach_mount();
}
