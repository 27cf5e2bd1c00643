/* takeover_probe.c - the new process: a live gateway's control socket in
 * cache_dir found; the origin reached first (else the old one serves on);
 * the old one asked for its connection, and waited for when it hands over
 * with the cache still held (its commits unfinished). */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "cache.h"
#include "takeover_i.h"
#include "gw_state.h"

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

/* Ask it for state version ver; the pid that handed over, with fds[0] the
 * connection and fds[1] the state, or -errno with a line in err (*prev:
 * it refused because it keeps GW_STATE_VERSION_PREV, in our cache
 * format). */
static int request(int fd, unsigned ver, const char *mnt, int fds[2],
		   char *err, size_t len, bool *prev)
{
	unsigned their_ver, their_fmt;
	char line[512], msg[16];
	size_t got = 0;
	ssize_t n;
	int nfds = 2, pid;
	FILE *f;

	f = fdopen(dup(fd), "w");
	*prev = false;
	if (!f || fprintf(f, "takeover %u %u %s\n", ver,
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
		/* The refusal of another version (takeover_ctl.c), the same
		 * words in every version since 2. */
		*prev = sscanf(line, "refused: this gateway (pid %d) keeps "
			       "takeover state version %u and cache format %u",
			       &pid, &their_ver, &their_fmt) == 3 &&
			their_ver == GW_STATE_VERSION_PREV &&
			their_fmt == CACHE_FORMAT_VERSION;
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

/* An upgrade in place: this process must reach the origin before the
 * serving gateway is asked to stop. One that could not would serve the
 * clients no better than the old one does (hard: they wait; offline=:
 * answers from the cache) and could not commit what the old one hands
 * over. Its connections, mounted, are the ones it serves with: made
 * here, before the pause, they cost the clients no round trip. No kept
 * root handle is offered: it would let nfsc_open start without the
 * origin. */
static int origin_reach(const struct gw_opts *o, struct nfsc **n, char *err,
			size_t len)
{
	struct nfsc_opts no;
	char caller[192];

	gw_origin_opts(o, &no, caller, sizeof(caller));
	return nfsc_open(o->source, &no, n, err, len);
}

int gw_takeover_ask(struct gw_opts *o, int fds[2], struct nfsc **origin)
{
	char err[1024];		/* request's: its answer's line and more */
	bool prev, upgraded = false;
	int pid, live;

	*origin = NULL;
	/* 1. The origin first, with nothing asked yet: the control
	 *    thread would not wait for us (ctl.c: 2 s). */
	if (origin_reach(o, origin, err, sizeof(err))) {
		fprintf(stderr, "cachegw: %s is served by a live cachegw on the "
			"same cache_dir, which serves on: not taking over, this "
			"process cannot reach the origin (%s); run the command "
			"again once it answers\n", o->mountpoint_real, err);
		return EXIT_FAILURE;
	}
	/* 2. Ask. */
	live = gw_takeover_probe(o->cache_dir);
	if (live < 0)
		return 0;
	pid = request(live, GW_STATE_VERSION, o->mountpoint_real, fds, err,
		      sizeof(err), &prev);
	close(live);
	/* 3. A process of the version before (a binary released before this
	 *    one) refuses ours: asked again for its own, on a connection of
	 *    its own (ctl.c answers one command per connection), its state
	 *    converted once it is ours. */
	if (pid < 0 && prev) {
		gw_log("takeover: the serving gateway keeps takeover state "
		       "version %u: taking it over with that state, converted "
		       "to version %u", GW_STATE_VERSION_PREV,
		       GW_STATE_VERSION);
		live = gw_takeover_probe(o->cache_dir);
		if (live < 0)
			return 0;
		pid = request(live, GW_STATE_VERSION_PREV, o->mountpoint_real,
			      fds, err, sizeof(err), &prev);
		close(live);
		if (pid >= 0 && gw_state_upgrade(fds[1], err, sizeof(err))) {
			close(fds[0]);
			close(fds[1]);
			fds[0] = fds[1] = -1;
			nfsc_close(*origin);
			*origin = NULL;
			fprintf(stderr, "cachegw: %s: the connection handed "
				"over by pid %d is lost: %s\n",
				o->mountpoint_real, pid, err);
			return EXIT_FAILURE;
		}
		upgraded = pid >= 0;
	}
	if (pid < 0) {
		nfsc_close(*origin);
		*origin = NULL;
		fprintf(stderr, "cachegw: %s is served by a live cachegw on "
			"the same cache_dir, which did not hand over: %s\n",
			o->mountpoint_real, err);
		return EXIT_FAILURE;
	}
	gw_log("took over %s from pid %d%s", o->mountpoint_real, pid,
	       upgraded ? " (its takeover state converted)" : "");
	return 0;
}
