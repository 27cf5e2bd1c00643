/* ctl.c - the control socket: live statistics for cachegw-inspect.
 *
 * A unix stream socket `control.sock` in the cache directory, mode 0600
 * (only the cache's owner may ask). A client sends one command line and
 * reads the reply until EOF:
 *   stats       human-readable counters (counters.c)
 *   prometheus  Prometheus text exposition format (counters.c)
 *   mountpoint, cached PATH, drain: for `warm` (ctl_warm.c)
 *   reclaim     one pass over the node-id table (reclaim.c)
 * GW_CTL_THREADS threads each take the next client (the listening socket
 * is non-blocking; a thread that loses the accept race polls again), so a
 * `cached` stuck on an origin that does not answer, or a long `drain`,
 * leaves `stats` answered by another. Every 5 s the first thread also
 * trims the heap (malloc_trim) and, if none was taken meanwhile, unmaps
 * the recycled data buffers.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "cache.h"
#include "daemon.h"
#include "fleet.h"
#include "takeover_i.h"

/* The client's credentials, for calls made on its behalf (the socket is
 * 0600, so this is the cache's owner or root). */
static void peer_cred(int fd, struct nfsc_cred *cr)
{
	struct ucred uc;
	socklen_t len = sizeof(uc);

	memset(cr, 0, sizeof(*cr));
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &len) == 0) {
		cr->uid = uc.uid;
		cr->gid = uc.gid;
	}
}

/* "reclaim": one pass now (reclaim.c); one line of what it did. */
static void ctl_reclaim(struct gw_proc *pr, FILE *out)
{
	struct gw_reclaim_result r;
	int ret = gw_reclaim_run(pr->gw, &r);

	if (ret)
		fprintf(out, "error: reclaim: %s\n", strerror(-ret));
	else
		fprintf(out, "checked %llu held %llu reclaimed %llu "
			"unanswered %llu kept %llu entries %llu%s%s\n",
			(unsigned long long)r.checked,
			(unsigned long long)r.held,
			(unsigned long long)r.reclaimed,
			(unsigned long long)r.errors,
			(unsigned long long)r.kept,
			(unsigned long long)r.entries,
			r.aborted ? " aborted: " : "", r.aborted ? r.why : "");
}

/* "fleet": the store's health and the export's members, for people. */
static void ctl_fleet(struct gw_proc *pr, FILE *out)
{
	struct fleet *fl = gw_fleet(pr->gw);
	struct fleet_member m[64];
	struct fleet_stats st;
	time_t now = time(NULL);
	unsigned c;
	int n, i;

	if (!fl) {
		fprintf(out, "error: this gateway is not in a fleet (no "
			"fleet= option)\n");
		return;
	}
	fleet_stats(fl, &st);
	fprintf(out, "store: %s, export %llu, lost %llu times\n",
		st.connected ? "connected" : "AWAY",
		(unsigned long long)st.export_id,
		(unsigned long long)st.losses);
	for (c = 0; c < FLEET_NCALLS; c++)
		if (st.call[c].calls || st.call[c].errors)
			fprintf(out, "  %-10s %8llu calls %6llu errors  "
				"%8.3f ms mean\n", fleet_call_name(c),
				(unsigned long long)st.call[c].calls,
				(unsigned long long)st.call[c].errors,
				st.call[c].lat.count ?
				(double)st.call[c].lat.sum_ns /
				(double)st.call[c].lat.count / 1e6 : 0.0);
	n = fleet_members(fl, m, sizeof(m) / sizeof(m[0]));
	if (n < 0) {
		fprintf(out, "members: the store cannot be asked now\n");
		return;
	}
	fprintf(out, "members: %d\n", n);
	for (i = 0; i < n; i++)
		fprintf(out, "  %-24s %-10s pid %-8d up %llds, last heartbeat "
			"%llds ago\n", m[i].name, m[i].version, m[i].pid,
			(long long)(now - m[i].started),
			(long long)(now - m[i].heartbeat));
}

static void serve_client(struct gw_proc *pr, int fd)
{
	char cmd[PATH_MAX + 64];
	size_t got = 0;
	ssize_t n;
	FILE *out;
	struct nfsc_cred cr;
	struct timeval tv = { .tv_sec = 2 };

	/* A client that never speaks must not stall the control thread. */
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	/* One line; a path may come in more than one read. */
	while (got < sizeof(cmd) - 1) {
		n = read(fd, cmd + got, sizeof(cmd) - 1 - got);
		if (n <= 0)
			break;
		got += (size_t)n;
		if (memchr(cmd, '\n', got))
			break;
	}
	if (got == 0)
		return;
	cmd[got] = 0;
	cmd[strcspn(cmd, "\r\n")] = 0;
	out = fdopen(dup(fd), "w");
	if (!out)
		return;
	if (!strcmp(cmd, "stats"))
		gw_metrics_print(pr, out, false);
	else if (!strcmp(cmd, "prometheus"))
		gw_metrics_print(pr, out, true);
	else if (!strcmp(cmd, "mountpoint"))
		gw_ctl_mountpoint(pr, out);
	else if (!strncmp(cmd, "cached ", 7)) {
		peer_cred(fd, &cr);
		gw_ctl_cached(pr, &cr, cmd + 7, out);
	} else if (!strcmp(cmd, "drain"))
		gw_ctl_drain(pr, out);
	else if (!strcmp(cmd, "reclaim"))
		ctl_reclaim(pr, out);
	else if (!strcmp(cmd, "fleet"))
		ctl_fleet(pr, out);
	else if (!strncmp(cmd, "takeover ", 9))
		gw_ctl_takeover(pr, fd, cmd + 9, out);
	else
		fprintf(out, "error: unknown command '%s' (stats, "
			"prometheus, mountpoint, cached PATH, drain, "
			"reclaim, fleet, takeover)\n", cmd);
	fclose(out);
}

int gw_accept_failed(const char *what, int err, uint64_t *last_log,
		     uint64_t *count)
{
	uint64_t now, last, n;

	if (err == EAGAIN || err == EWOULDBLOCK || err == EINTR ||
	    err == ECONNABORTED)
		return 0;
	n = __atomic_add_fetch(count, 1, __ATOMIC_RELAXED);
	now = gw_now_ns();
	last = __atomic_load_n(last_log, __ATOMIC_RELAXED);
	/* One thread of the endpoint's wins the line. */
	if ((!last || now - last >= (uint64_t)GW_ACCEPT_LOG_S * 1000000000) &&
	    __atomic_compare_exchange_n(last_log, &last, now, false,
					__ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
		__atomic_store_n(count, 0, __ATOMIC_RELAXED);
		gw_log("%s: accept: %s (%llu times since the last such line); "
		       "clients wait, retrying every %d ms",
		       what, strerror(err), (unsigned long long)n,
		       GW_ACCEPT_PAUSE_MS);
	}
	return GW_ACCEPT_PAUSE_MS;
}

static void *ctl_thread(void *arg)
{
	struct gw_ctl_thread *t = arg;
	struct gw_proc *pr = t->pr;
	time_t last_tick = 0;

	for (;;) {
		struct pollfd p[2] = {
			{ .fd = pr->ctl_fd, .events = POLLIN },
			{ .fd = pr->ctl_stop[0], .events = POLLIN },
		};
		struct timespec now;
		int fd;

		int n = poll(p, 2, 5000);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		/* Housekeeping every 5 s, however often clients come (a
		 * metrics scraper): read buffers of all sizes come and go
		 * on many threads; give the freed pages back so the
		 * gateway's memory stays flat under load. */
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (t->idx == 0 && now.tv_sec - last_tick >= 5) {
			last_tick = now.tv_sec;
			gw_buf_trim(false);
			malloc_trim(0);
		}
		if (n == 0)
			continue;
		/* The stop pipe is never read: every thread sees it. */
		if (p[1].revents)
			break;
		fd = accept4(pr->ctl_fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0) {
			/* EAGAIN: another thread took it. Out of fds: the
			 * client stays pending and poll() would wake at once;
			 * pause (the stop pipe still heard). */
			int ms = gw_accept_failed("control socket", errno,
						  &pr->ctl_accept_log,
						  &pr->ctl_accept_errs);

			if (ms) {
				struct pollfd s = { .fd = pr->ctl_stop[0],
						    .events = POLLIN };

				if (poll(&s, 1, ms) > 0)
					break;
			}
			continue;
		}
		serve_client(pr, fd);
		close(fd);
	}
	return NULL;
}

int gw_ctl_start(struct gw_proc *pr, const char *dir)
{
	struct sockaddr_un sa;
	mode_t old;
	int ret, dirfd;

	ret = cache_ctl_sockaddr(dir, &sa, &dirfd);
	if (ret)
		return ret;
	pr->ctl_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
			    0);
	if (pr->ctl_fd < 0) {
		ret = -errno;
		goto out_dirfd;
	}
	/* We hold the cache lock, so a socket file left here is stale. */
	unlink(sa.sun_path);
	old = umask(0077);
	ret = bind(pr->ctl_fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	/* bind() made it 0777 & ~umask = 0700; the cache's files are 0600.
	 * (A umask of 0177 would do it, but umask is process-wide and other
	 * threads run: a directory made meanwhile would lose its x bit.) */
	if (ret == 0 && chmod(sa.sun_path, 0600) < 0)
		ret = -1;
	if (ret < 0 || listen(pr->ctl_fd, 8) < 0)
		goto out_errno;
	if (pipe2(pr->ctl_stop, O_CLOEXEC) < 0)
		goto out_errno;
	pr->ctl_nthreads = 0;
	for (unsigned i = 0; i < GW_CTL_THREADS; i++) {
		struct gw_ctl_thread *t = &pr->ctl_threads[i];

		t->pr = pr;
		t->idx = i;
		ret = pthread_create(&t->tid, NULL, ctl_thread, t);
		if (ret)
			break;
		pr->ctl_nthreads++;
	}
	/* Fewer threads than asked for still serve, one client each. */
	if (pr->ctl_nthreads == 0) {
		close(pr->ctl_stop[0]);
		close(pr->ctl_stop[1]);
		errno = ret;
		goto out_errno;
	}
	/* Unlinked at stop by its real path, whatever bind() went through. */
	if (asprintf(&pr->ctl_path, "%s/%s", dir, CACHE_CTL_NAME) < 0)
		pr->ctl_path = NULL;
	ret = 0;
	goto out_dirfd;

out_errno:
	ret = -errno;
	close(pr->ctl_fd);
	pr->ctl_fd = -1;
out_dirfd:
	if (dirfd >= 0)
		close(dirfd);
	return ret;
}

void gw_ctl_stop(struct gw_proc *pr)
{
	if (pr->ctl_fd < 0)
		return;
	if (write(pr->ctl_stop[1], "x", 1) != 1)
		perror("cachegw: control stop");
	for (unsigned i = 0; i < pr->ctl_nthreads; i++)
		pthread_join(pr->ctl_threads[i].tid, NULL);
	pr->ctl_nthreads = 0;
	close(pr->ctl_stop[0]);
	close(pr->ctl_stop[1]);
	close(pr->ctl_fd);
	pr->ctl_fd = -1;
	if (pr->ctl_path) {
		unlink(pr->ctl_path);
		free(pr->ctl_path);
		pr->ctl_path = NULL;
	}
}
