/* takeover.c - one FUSE connection, served by one process after another
 * (doc/takeover.md; the state they share: gateway/gw_state.h).
 *
 * Upgrade in place: `cachegw SOURCE MOUNTPOINT -o cache_dir=DIR,...` finds
 * DIR's control socket answering, makes sure it can reach the origin
 * (main.c: else it refuses, and the old process serves on) and asks
 * `takeover VERSION FORMAT MNT`. The serving process refuses with one line
 * (another state version or cache format, another mount point, a kernel
 * without FUSE_NOTIFY_RESEND, a stop under way) and serves on, or answers
 * "ok PID", stops taking requests (fuse_session_exit: what a worker reads
 * from then on stays unanswered in the kernel), lets the requests it holds
 * finish, commits every writer's data, closes the cache, and sends the
 * /dev/fuse descriptor and the state memfd over the same connection
 * (SCM_RIGHTS); then it exits 0. Commits that do not finish within
 * drain_timeout=: the connection goes without them, and the successor
 * commits as after a crash (gw_takeover_abandon). The successor replays
 * the connection's FUSE_INIT into a new session (fuse_session_process_buf;
 * its reply goes to the kernel under a unique the kernel never gave out
 * and is dropped there, ENOENT, which libfuse ignores), adopts the open
 * files and directories under the ids the kernel holds
 * (gateway/handover/adopt.c), asks the kernel to queue again what the old
 * process read but never answered (FUSE_NOTIFY_RESEND, Linux >= 6.9), and
 * serves.
 *
 * Crash: the supervisor (supervise.c) holds a copy of both descriptors and
 * starts a successor the same way; what the dead process acknowledged but
 * had not committed is COMMITted by the successor while it serves
 * (write_commit.c: owed), and a verifier other than the one the writers'
 * records name for it is reported to them. A successor that cannot reach
 * the origin starts without it (main.c, nfsclient's started_lost).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "cache.h"
#include "daemon.h"
#include "gw_state.h"

#ifndef FUSE_NOTIFY_RESEND
#define FUSE_NOTIFY_RESEND 7
#endif
/* The unique of the replayed INIT: the kernel counts its own up from 0 in
 * steps of 2 and never reaches it; the reply's write fails with ENOENT. */
#define REPLAY_UNIQUE (1ULL << 61)

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- the shared state ---- */

static int state_fd = -1;

int gw_state_create(void)
{
	struct gw_state *st;
	int fd = memfd_create("cachegw-state", MFD_CLOEXEC);

	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)GW_STATE_SIZE) < 0) {
		int e = errno;

		close(fd);
		return -e;
	}
	st = mmap(NULL, GW_STATE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		  0);
	if (st == MAP_FAILED) {
		int e = errno;

		close(fd);
		return -e;
	}
	st->magic = GW_STATE_MAGIC;
	st->version = GW_STATE_VERSION;
	gw_state = st;
	state_fd = fd;
	return 0;
}

int gw_state_open(int fd, char *err, size_t len)
{
	struct gw_state *st;
	struct stat sb;

	if (fstat(fd, &sb) < 0)
		sb.st_size = 0;
	if ((size_t)sb.st_size != GW_STATE_SIZE) {
		snprintf(err, len, "the takeover state passed is not of this "
			 "version (%lld bytes, %zu expected)",
			 (long long)sb.st_size, GW_STATE_SIZE);
		return -EINVAL;
	}
	st = mmap(NULL, GW_STATE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		  0);
	if (st == MAP_FAILED) {
		snprintf(err, len, "cannot map the takeover state: %s",
			 strerror(errno));
		return -errno;
	}
	if (st->magic != GW_STATE_MAGIC || st->version != GW_STATE_VERSION ||
	    !st->negotiated || !st->init_len ||
	    st->init_len > GW_STATE_INIT_MAX) {
		snprintf(err, len, "the takeover state passed is damaged or of "
			 "another version (%u, this is %u)", st->version,
			 GW_STATE_VERSION);
		munmap(st, GW_STATE_SIZE);
		return -EINVAL;
	}
	gw_state = st;
	state_fd = fd;
	return 0;
}

int gw_state_fd(void)
{
	return state_fd;
}

void gw_state_close(void)
{
	if (gw_state)
		munmap(gw_state, GW_STATE_SIZE);
	gw_state = NULL;
	if (state_fd >= 0)
		close(state_fd);
	state_fd = -1;
}

/* ---- descriptors over a unix socket ---- */

int gw_send_fds(int sock, const char *msg, const int *fds, int n)
{
	char cbuf[CMSG_SPACE(sizeof(int) * 4)];
	struct iovec iov = { .iov_base = (void *)msg, .iov_len = strlen(msg) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct cmsghdr *c;

	if (n > 0) {
		memset(cbuf, 0, sizeof(cbuf));
		mh.msg_control = cbuf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)n);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)n);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)n);
	}
	while (sendmsg(sock, &mh, MSG_NOSIGNAL) < 0)
		if (errno != EINTR)
			return -errno;
	return 0;
}

ssize_t gw_recv_fds(int sock, char *msg, size_t len, int *fds, int *n)
{
	char cbuf[CMSG_SPACE(sizeof(int) * 4)];
	struct iovec iov = { .iov_base = msg, .iov_len = len - 1 };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = cbuf,
			     .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *c;
	ssize_t got;
	int max = *n;

	*n = 0;
	do
		got = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
	while (got < 0 && errno == EINTR);
	if (got < 0)
		return -errno;
	msg[got] = 0;
	for (c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		int k, *v = (int *)CMSG_DATA(c);

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		for (int i = 0; i < k; i++) {
			if (*n < max)
				fds[(*n)++] = v[i];
			else
				close(v[i]);
		}
	}
	return got;
}

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

int gw_takeover_init(struct gw *gw, bool successor)
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
		fuse_session_process_buf(gw->se, &fb);
		return 0;
	}
	/* The first request of a connection is the kernel's INIT: read
	 * here, kept, then served as the loop would have. */
	res = fuse_session_receive_buf(gw->se, &fb);
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
	fuse_session_process_buf(gw->se, &fb);
	free(fb.mem);
	return 0;
}

int gw_takeover_resend(struct gw *gw)
{
	struct fuse_out_header oh = {
		.len = sizeof(oh),
		.error = FUSE_NOTIFY_RESEND,
		.unique = 0,
	};
	ssize_t n;

	n = write(fuse_session_fd(gw->se), &oh, sizeof(oh));
	return n == (ssize_t)sizeof(oh) ? 0 : n < 0 ? -errno : -EIO;
}

/* The successor serves from now: counters for the metrics and the log. */
void gw_takeover_serving(struct gw *gw, bool successor)
{
	struct gw_state *st = gw_state;

	(void)gw;
	if (!st)
		return;
	/* The control threads read these (the metrics): atomic. */
	if (successor) {
		uint64_t gen = st->generation + 1;
		uint64_t pause = mono_ns() -
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

/* ---- the old process ---- */

void gw_ctl_takeover(struct gw *gw, int fd, const char *args, FILE *out)
{
	unsigned ver, fmt;
	char mnt[PATH_MAX];
	int expect = -1, mine;

	if (sscanf(args, "%u %u %4095[^\n]", &ver, &fmt, mnt) != 3) {
		fprintf(out, "refused: a malformed takeover request\n");
		return;
	}
	if (ver != GW_STATE_VERSION || fmt != CACHE_FORMAT_VERSION) {
		fprintf(out, "refused: this gateway (pid %d) keeps takeover "
			"state version %u and cache format %u, the new one %u "
			"and %u: stop it and start the new one instead\n",
			getpid(), GW_STATE_VERSION, CACHE_FORMAT_VERSION, ver,
			fmt);
		return;
	}
	if (strcmp(mnt, gw->o->mountpoint_real)) {
		fprintf(out, "refused: cache_dir %s is in use by another "
			"cachegw (pid %d), which serves %s, not %s\n",
			gw->o->cache_dir, getpid(), gw->o->mountpoint_real,
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
	if (!__atomic_compare_exchange_n(&gw->takeover_fd, &expect, mine,
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
	gw->handover_fuse_fd = dup(fuse_session_fd(gw->se));
	if (gw->handover_fuse_fd < 0) {
		fprintf(out, "refused: %s\n", strerror(errno));
		goto undo;
	}
	/* Atomic: an upgrade asked for as soon as this process serves
	 * races with gw_takeover_serving's read. */
	__atomic_store_n(&gw_state->stopped_ns, mono_ns(), __ATOMIC_RELAXED);
	if (gw_drain_takeover()) {
		close(gw->handover_fuse_fd);
		gw->handover_fuse_fd = -1;
		fprintf(out, "refused: the gateway is stopping\n");
		goto undo;
	}
	gw_log("takeover: asked by a new process; stopping to hand the "
	       "connection over");
	fprintf(out, "ok %d\n", getpid());
	return;
undo:
	__atomic_store_n(&gw->takeover_fd, -1, __ATOMIC_RELEASE);
	close(mine);
}

void gw_takeover_handover_begin(struct gw *gw)
{
	size_t errs = gw_files_handover(gw);
	int p[2], expect = 0;

	/* Too late: the drain thread has handed the connection over without
	 * these commits (gw_takeover_abandon) and is ending the process. */
	if (!__atomic_compare_exchange_n(&gw->handover_phase, &expect, 1,
					 false, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE))
		for (;;)
			pause();
	if (errs)
		gw_log("takeover: %zu writers have a write error to be told "
		       "by the successor", errs);
	gw_handles_freeze_records();
	gw->handing_over = true;
	gw_state->handed_over = 1;
	gw_state->last_was_crash = 0;
	gw_state->previous_pid = getpid();
	/* libfuse closes its descriptor at the end, and unmounts unless it
	 * polls POLLERR, as an ended connection does: a pipe with no reader
	 * in its place, as drain.c does. */
	if (pipe2(p, O_CLOEXEC) == 0) {
		close(p[0]);
		dup2(p[1], fuse_session_fd(gw->se));
		close(p[1]);
	}
}

int gw_takeover_handover_end(struct gw *gw)
{
	int fds[2] = { gw->handover_fuse_fd, state_fd };
	struct ucred uc = { 0 };
	socklen_t ul = sizeof(uc);
	int ret;

	getsockopt(gw->takeover_fd, SOL_SOCKET, SO_PEERCRED, &uc, &ul);
	ret = gw_send_fds(gw->takeover_fd, "fds\n", fds, 2);
	if (ret)
		gw_log("takeover: cannot hand the connection to pid %d: %s; "
		       "it ends when this process does", uc.pid,
		       strerror(-ret));
	else
		gw_log("takeover: handed the connection over to pid %d",
		       uc.pid);
	close(gw->handover_fuse_fd);
	gw->handover_fuse_fd = -1;
	close(gw->takeover_fd);
	__atomic_store_n(&gw->takeover_fd, -1, __ATOMIC_RELEASE);
	return ret;
}

void gw_takeover_abandon(struct gw *gw)
{
	int fds[2] = { gw->handover_fuse_fd, state_fd }, expect = 0;
	struct gw_state *st = gw_state;
	struct ucred uc = { 0 };
	socklen_t ul = sizeof(uc);
	int ret;

	if (!__atomic_compare_exchange_n(&gw->handover_phase, &expect, 2,
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
	getsockopt(gw->takeover_fd, SOL_SOCKET, SO_PEERCRED, &uc, &ul);
	ret = gw_send_fds(gw->takeover_fd, "fds wait\n", fds, 2);
	if (ret)
		gw_log("takeover: the commits of the handover did not finish in "
		       "%u s (drain_timeout=), and the connection cannot be "
		       "handed to pid %d either: %s; exiting", gw->o->drain_timeout,
		       uc.pid, strerror(-ret));
	else
		gw_log("takeover: the commits of the handover did not finish in "
		       "%u s (drain_timeout=; is the origin answering?): handed "
		       "the connection to pid %d without them, which COMMITs "
		       "what this process wrote as after a crash; exiting",
		       gw->o->drain_timeout, uc.pid);
	/* The supervisor must not start a successor of its own. */
	if (!ret && gw->sup_fd >= 0 &&
	    gw_send_fds(gw->sup_fd, "handed\n", NULL, 0))
		gw_log("supervise: cannot tell the supervisor");
	fflush(stderr);
	_exit(ret ? EXIT_FAILURE : EXIT_SUCCESS);
}

/* ---- the new process ---- */

int gw_takeover_probe(const char *cache_dir)
{
	struct sockaddr_un sa;
	int fd, dirfd, ret;

	/* A long cache_dir: through /proc/self/fd, as the socket was made
	 * (ctl.c) and as cachegw-inspect reaches it. */
	ret = cache_ctl_sockaddr(cache_dir, &sa, &dirfd);
	if (ret < 0)
		return ret;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		ret = -errno;
	else if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		ret = -errno;
		close(fd);
	} else
		ret = fd;
	if (dirfd >= 0)
		close(dirfd);
	return ret;
}

/* Until process pid has ended (its descriptors closed), at most 60 s. */
static void wait_gone(int pid)
{
	int pfd = (int)syscall(SYS_pidfd_open, pid, 0);

	if (pfd >= 0) {
		struct pollfd p = { .fd = pfd, .events = POLLIN };

		while (poll(&p, 1, 60000) < 0 && errno == EINTR)
			;
		close(pfd);
		return;
	}
	for (int i = 0; i < 6000 && kill(pid, 0) == 0; i++)
		usleep(10000);
}

int gw_takeover_request(int fd, const char *mnt, int fds[2], char *err,
			size_t len)
{
	char line[512], msg[16];
	size_t got = 0;
	ssize_t n;
	int nfds = 2, pid;
	FILE *f;

	f = fdopen(dup(fd), "w");
	if (!f || fprintf(f, "takeover %u %u %s\n", GW_STATE_VERSION,
			  CACHE_FORMAT_VERSION, mnt) < 0 || fflush(f)) {
		if (f)
			fclose(f);
		snprintf(err, len, "cannot ask the serving gateway: %s",
			 strerror(errno));
		return -EIO;
	}
	fclose(f);
	/* Its answer, one line, byte by byte: what follows it comes with
	 * the descriptors. */
	while (got < sizeof(line) - 1) {
		n = read(fd, line + got, 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		if (line[got++] == '\n')
			break;
	}
	line[got] = 0;
	line[strcspn(line, "\n")] = 0;
	if (strncmp(line, "ok ", 3)) {
		snprintf(err, len, "the serving gateway %s",
			 got ? line : "did not answer the takeover request "
			 "(an older version?)");
		return -EPERM;
	}
	n = gw_recv_fds(fd, msg, sizeof(msg), fds, &nfds);
	if (n <= 0 || nfds != 2 ||
	    (strcmp(msg, "fds\n") && strcmp(msg, "fds wait\n"))) {
		for (int i = 0; i < nfds; i++)
			close(fds[i]);
		snprintf(err, len, "the serving gateway (pid %s) stopped "
			 "without handing the connection over (see its log)",
			 line + 3);
		return -EIO;
	}
	pid = atoi(line + 3);
	/* Handed over with its commits unfinished (gw_takeover_abandon):
	 * it still holds the cache, until it is gone. */
	if (!strcmp(msg, "fds wait\n"))
		wait_gone(pid);
	return pid;
}

/* ---- pidfile= ---- */

void gw_pidfile_write(const struct gw_opts *o)
{
	char tmp[PATH_MAX], line[24];
	bool ok;
	int fd, n;

	if (!o->pidfile)
		return;
	/* A name of its own in the pidfile's directory (mkostemp: O_EXCL,
	 * so a link someone put there in advance is never followed: the
	 * pid, say "PIDFILE.1234", would be theirs to guess), then renamed
	 * over it: readers see the old pid or the new, never half. */
	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.XXXXXX", o->pidfile) >=
	    sizeof(tmp)) {
		gw_log("pidfile '%s': %s", o->pidfile, strerror(ENAMETOOLONG));
		return;
	}
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		gw_log("pidfile '%s': %s", o->pidfile, strerror(errno));
		return;
	}
	n = snprintf(line, sizeof(line), "%d\n", getpid());
	ok = fchmod(fd, 0644) == 0 && write(fd, line, (size_t)n) == n;
	if (close(fd) < 0)
		ok = false;
	if (!ok || rename(tmp, o->pidfile) < 0) {
		gw_log("pidfile '%s': %s", o->pidfile, strerror(errno));
		unlink(tmp);
	}
}

void gw_pidfile_remove(const struct gw_opts *o)
{
	FILE *f;
	int pid = 0;

	if (!o->pidfile || !(f = fopen(o->pidfile, "r")))
		return;
	if (fscanf(f, "%d", &pid) != 1)
		pid = 0;
	fclose(f);
	if (pid == getpid())	/* not a successor's */
		unlink(o->pidfile);
}
