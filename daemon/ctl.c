/* ctl.c - the control socket: live statistics for cachegw-inspect.
 *
 * A unix stream socket `control.sock` in the cache directory, mode 0600
 * (only the cache's owner may ask). A client sends one command line and
 * reads the reply until EOF:
 *   stats       human-readable counters
 *   prometheus  Prometheus text exposition format
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
#include "takeover_i.h"
#include "gw_state.h"
#include "nodes.h"


struct metric {
	const char *name;
	const char *type;	/* counter | gauge */
	const char *help;
	uint64_t value;
};

static size_t collect(struct gw_proc *pr, const struct gw_counters *gc,
		      struct metric *m, size_t max)
{
	struct cache_stats cs = { 0 };
	size_t n = 0;

	if (pr->cache)
		cache_get_stats(pr->cache, &cs);
#define M(nm, ty, hp, v) do { if (n < max) m[n++] = (struct metric){ \
		"cachegw_" nm, ty, hp, (uint64_t)(v) }; } while (0)
	if (gw_state) {
		M("serving_pid", "gauge", "The process serving the mount now.",
		  getpid());
		M("supervisor_pid", "gauge", "The supervising process "
		  "(supervise; 0: none).",
		  __atomic_load_n(&gw_state->supervisor_pid,
				  __ATOMIC_RELAXED));
		M("takeover_generation", "counter", "Takeovers of the mount's "
		  "connection since it was made (upgrades and crashes).",
		  __atomic_load_n(&gw_state->generation, __ATOMIC_RELAXED));
		M("takeover_pause_us", "gauge", "How long the clients waited "
		  "at the last takeover (microseconds).",
		  __atomic_load_n(&gw_state->pause_ns, __ATOMIC_RELAXED) /
		  1000);
	}
	M("origin_read_bytes_total", "counter",
	  "Bytes of READ payload received from the origin.",
	  nfsc_read_bytes(pr->nfs));
	M("origin_write_bytes_total", "counter",
	  "Bytes of WRITE payload the origin accepted.",
	  nfsc_write_bytes(pr->nfs));
	M("write_window_bytes", "gauge", "Bytes of WRITE in flight now.",
	  gc->win_used);
	M("write_window_waits_total", "counter",
	  "Writes that waited for room in the write window.", gc->win_waits);
	M("write_window_wait_microseconds_total", "counter",
	  "Time writes waited for room in the write window.",
	  gc->win_wait_ns / 1000);
	M("write_window_bytes_max", "gauge",
	  "Most bytes of WRITE that were in flight at once.",
	  gc->win_used_max);
	M("write_inflight_max", "gauge",
	  "Most FUSE WRITEs that were in flight to the origin at once.",
	  gc->win_writes_max);
	M("write_writepage_total", "counter",
	  "WRITEs of dirty pages the kernel flushed (writeback, mmap).",
	  gc->writepage_writes);
	M("write_spliced_total", "counter",
	  "FUSE WRITEs whose bytes the kernel handed over through a pipe (one copy, not two).",
	  gc->write_spliced);
	M("write_writepage_errors_total", "counter",
	  "Of them, refused by the origin; the error is given at the file's next flush or fsync.",
	  gc->writepage_errors);
	M("write_resends_total", "counter",
	  "Extents written again because the origin's verifier changed.",
	  gc->resends);
	M("write_wcc_foreign_total", "counter",
	  "WRITEs whose pre-op attributes showed a change by someone else.",
	  gc->wcc_foreign);
	M("cache_hit_bytes_total", "counter",
	  "Bytes served from verified cache blocks.", cs.hit_bytes);
	M("cache_miss_bytes_total", "counter",
	  "Bytes asked for that were not in the cache.", cs.miss_bytes);
	M("cache_fill_bytes_total", "counter",
	  "Bytes written into the cache.", cs.fill_bytes);
	M("cache_reads_total", "counter",
	  "Reads asked of the cache (hits and misses).", cs.reads);
	M("cache_fills_total", "counter",
	  "Fills queued to the cache (origin fetches written into it).",
	  cs.fills);
	M("cache_corrupt_blocks_total", "counter",
	  "Cache blocks that failed their checksum and were dropped.",
	  cs.corrupt_blocks);
	M("cache_used_bytes", "gauge",
	  "Bytes allocated by cache objects on the cache filesystem.",
	  cs.used_bytes);
	M("cache_objects", "gauge", "Objects in the cache.", cs.objects);
	M("cache_culled_objects_total", "counter",
	  "Objects dropped to respect cache_size and free-space limits.",
	  cs.culled_objects);
	M("cache_errors_total", "counter",
	  "I/O errors on the cache that dropped an object.", cs.errors);
	M("cache_fills_skipped_total", "counter",
	  "Fills refused because the cache was full or below bstop.",
	  cs.fills_skipped);
	M("cache_checksum_loads_total", "counter",
	  "Cache reads that read their stored checksums from the metadata file (checksum cache misses).",
	  cs.csum_loads);
	M("cache_writes_skipped_total", "counter",
	  "Writes through the gateway not cached because fills in flight were at their limit (the cache disk was behind); their blocks are dropped.",
	  cs.writes_skipped);
	M("cache_writes_skipped_bytes_total", "counter",
	  "Bytes of those writes.", cs.writes_skipped_bytes);
	M("cache_fills_behind_total", "counter",
	  "fill_behind=skip: fills of what was read not made because the cache's writes in flight were at their limit.",
	  cs.fills_behind);
	M("cache_fills_behind_bytes_total", "counter",
	  "Bytes of those fills (read from the origin again next time).",
	  cs.fills_behind_bytes);
	M("fill_queue_skipped_total", "counter",
	  "fill_behind=skip: fetches not queued for the cache because the fill thread had 64 MiB waiting.",
	  gc->fill_queue_skipped);
	M("fill_queue_skipped_bytes_total", "counter",
	  "Bytes of those fetches.",
	  gc->fill_queue_skipped_bytes);
	M("inodes", "gauge", "Inodes the gateway holds for the kernel.",
	  gw_itable_count(pr->gw));
	M("kernel_cache_drops_total", "counter",
	  "Times the kernel was told to drop a file's pages (changed at the origin).",
	  gc->kernel_cache_drops);
	M("readahead_bytes_total", "counter",
	  "Bytes fetched from the origin ahead of a sequential reader.",
	  gc->readahead_bytes);
	M("readahead_throttled_total", "counter",
	  "Readaheads skipped because fills were behind.",
	  gc->readahead_throttled);
	M("fetch_buffers", "gauge", "Origin fetches in flight or kept.",
	  gc->fetches);
	M("fetch_buffer_bytes", "gauge",
	  "Bytes held by origin fetches in flight or kept.",
	  gc->fetch_bytes);
	M("data_buffer_bytes", "gauge",
	  "Bytes of data buffers mapped (in use and recycled).",
	  gw_buf_mapped());
	if (pr->nodes) {
		struct nodes_stats ns;
		struct gw_reclaim_counters rc;

		nodes_stats(pr->nodes, &ns);
		gw_reclaim_counters(pr->gw, &rc);
		M("nodes_entries", "gauge",
		  "Node-ids in the persistent node-id table.", ns.entries);
		M("nodes_file_bytes", "gauge",
		  "Bytes of the node-id table's file (compacted when more than twice its live entries).",
		  ns.file_bytes);
		M("nodes_reclaim_runs_total", "counter",
		  "Passes that asked the origin about node-ids the kernel does not hold.",
		  rc.runs);
		M("nodes_reclaim_checked_total", "counter",
		  "Node-ids those passes asked the origin about.", rc.checked);
		M("nodes_reclaimed_total", "counter",
		  "Node-ids given up because the origin called their files stale.",
		  rc.reclaimed);
		M("nodes_reclaim_aborted_total", "counter",
		  "Reclaim passes that gave nothing back: the origin's root or too many of its answers did not look right.",
		  rc.aborted);
		if (pr->md) {
			struct nodes_md_stats ms;

			nodes_md_stats(pr->md, &ms);
			M("md_records", "gauge",
			  "Attribute and ACCESS records kept across restarts (md.log).",
			  ms.records);
			M("md_file_bytes", "gauge", "Bytes of md.log.",
			  ms.file_bytes);
		}
		M("md_restored_attrs_total", "counter",
		  "New inodes that started with attributes kept from before (still within the attribute timeout).",
		  gc->md_restored_attrs);
		M("getattr_joined_total", "counter",
		  "GETATTRs not sent to the origin: the stat took the answer of one already in flight for the same file.",
		  gc->getattr_joined);
		M("md_kept_listings_total", "counter",
		  "Directories listed from what was kept before a restart instead of the origin.",
		  gc->md_kept_listings);
		M("md_kept_lookups_total", "counter",
		  "LOOKUPs answered from names kept (young enough) instead of the origin.",
		  gc->md_kept_lookups);
		M("md_restored_access_total", "counter",
		  "ACCESS answers kept from before that new inodes started with.",
		  gc->md_restored_access);
		M("nodes_room_refusals_total", "counter",
		  "Creates refused with ENOSPC before reaching the origin: the node-id table had no room.",
		  rc.refusals);
		if (pr->nfs) {
			struct nfsc_origin_stat os;

			nfsc_origin_stat(pr->nfs, &os);
			M("origin_lost", "gauge",
			  "1 while the origin is lost (offline=: no answer for that long), else 0.",
			  (uint64_t)os.lost);
			M("origin_lost_total", "counter",
			  "Times the origin was lost (a start without it counts).",
			  os.lost_total);
			M("origin_back_total", "counter",
			  "Times the origin answered again after it was lost.",
			  os.back_total);
			M("origin_refused_total", "counter",
			  "Origin calls failed at once (EHOSTDOWN) while it was lost.",
			  os.refused);
			M("origin_probes_total", "counter",
			  "GETATTRs of the root sent because the origin had been quiet for a second (offline=).",
			  os.probes);
		}
		M("offline_answers_total", "counter",
		  "Requests (GETATTR, LOOKUP, READDIR, ACCESS, READLINK, STATFS) answered from what the gateway holds while the origin was lost, each once.",
		  gc->offline_answers);
	}
#undef M
	return n;
}

/* Origin calls by procedure (nfsc_proc_stat). Text: a total, then calls,
 * errors and microseconds per procedure the gateway sends, zero or not, so
 * that scripts (and `cachegw-inspect top`) find every name. Prometheus:
 * three counters labelled proc="...", and one histogram series per
 * procedure that was called. */
static void print_origin_calls(struct gw_proc *pr, FILE *out, bool prometheus)
{
	static const char *const counters[3][2] = {
		{ "cachegw_origin_calls_total",
		  "Calls answered by the origin (or ended by an error), by NFSv3 procedure." },
		{ "cachegw_origin_call_errors_total",
		  "Of them, ended with an error (the origin's status or the transport's)." },
		{ "cachegw_origin_call_timeouts_total",
		  "Timeouts seen waiting for the origin (each retry of a hard mount counts)." },
	};
	struct nfsc_proc_stat s[NFSC_NPROC];
	uint64_t calls = 0, timeouts = 0, ns = 0;
	unsigned p, k;
	char lab[48];

	for (p = 0; p < NFSC_NPROC; p++) {
		nfsc_proc_stat(pr->nfs, p, &s[p]);
		calls += s[p].calls;
		timeouts += s[p].timeouts;
		ns += s[p].lat.sum_ns;
	}
	if (!prometheus) {
		fprintf(out, "%-36s %llu\n", "origin_calls_total",
			(unsigned long long)calls);
		fprintf(out, "%-36s %llu\n", "origin_timeouts_total",
			(unsigned long long)timeouts);
		fprintf(out, "%-36s %llu\n", "origin_call_microseconds_total",
			(unsigned long long)(ns / 1000));
		for (p = 0; p < NFSC_NPROC; p++) {
			const char *nm = nfsc_proc_name(p);
			char key[64];

			if (!nm)
				continue;
			snprintf(key, sizeof(key), "origin_%s_calls_total", nm);
			fprintf(out, "%-36s %llu\n", key,
				(unsigned long long)s[p].calls);
			snprintf(key, sizeof(key), "origin_%s_errors_total", nm);
			fprintf(out, "%-36s %llu\n", key,
				(unsigned long long)s[p].errors);
			snprintf(key, sizeof(key),
				 "origin_%s_microseconds_total", nm);
			fprintf(out, "%-36s %llu\n", key,
				(unsigned long long)(s[p].lat.sum_ns / 1000));
		}
		return;
	}
	for (k = 0; k < 3; k++) {
		fprintf(out, "# HELP %s %s\n# TYPE %s counter\n",
			counters[k][0], counters[k][1], counters[k][0]);
		for (p = 0; p < NFSC_NPROC; p++) {
			uint64_t v = k == 0 ? s[p].calls : k == 1 ?
				     s[p].errors : s[p].timeouts;

			if (nfsc_proc_name(p))
				fprintf(out, "%s{proc=\"%s\"} %llu\n",
					counters[k][0], nfsc_proc_name(p),
					(unsigned long long)v);
		}
	}
	fprintf(out, "# HELP cachegw_origin_call_duration_seconds Time from "
		"first sending an origin call to its answer, by NFSv3 "
		"procedure.\n# TYPE cachegw_origin_call_duration_seconds "
		"histogram\n");
	for (p = 0; p < NFSC_NPROC; p++) {
		if (!nfsc_proc_name(p) || !s[p].lat.count)
			continue;
		snprintf(lab, sizeof(lab), "proc=\"%s\"", nfsc_proc_name(p));
		lat_hist_print_series(&s[p].lat,
				      "cachegw_origin_call_duration_seconds",
				      lab, out);
	}
}

/* A latency histogram of the request path, in seconds. */
static void print_hist(const struct lat_hist *h, const char *name,
		       const char *help, FILE *out)
{
	fprintf(out, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
	lat_hist_print_series(h, name, NULL, out);
}

void gw_metrics_print(struct gw_proc *pr, FILE *out, bool prometheus)
{
	struct gw_counters gc;
	struct metric m[64];
	size_t n, i;

	gw_counters(pr->gw, &gc);
	n = collect(pr, &gc, m, 64);

	for (i = 0; i < n; i++) {
		if (prometheus)
			fprintf(out, "# HELP %s %s\n# TYPE %s %s\n%s %llu\n",
				m[i].name, m[i].help, m[i].name, m[i].type,
				m[i].name, (unsigned long long)m[i].value);
		else
			fprintf(out, "%-36s %llu\n", m[i].name + 8,
				(unsigned long long)m[i].value);
	}
	print_origin_calls(pr, out, prometheus);
	if (!prometheus)
		return;
	print_hist(&gc.origin_read_lat, "cachegw_origin_read_duration_seconds",
		   "Time from sending an origin READ to its reply.", out);
	print_hist(&gc.cache_read_lat, "cachegw_cache_read_duration_seconds",
		   "Time of a cache read that returned verified data.", out);
}

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
	else if (!strncmp(cmd, "takeover ", 9))
		gw_ctl_takeover(pr, fd, cmd + 9, out);
	else
		fprintf(out, "error: unknown command '%s' (stats, "
			"prometheus, mountpoint, cached PATH, drain, "
			"reclaim, takeover)\n", cmd);
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
