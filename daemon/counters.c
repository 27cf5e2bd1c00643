/* counters.c - every metric of the serving process: the request path's
 * counters (gateway.h's gw_counters), the cache's, the node-id table's and
 * kept metadata's, the origin's calls by procedure, the takeovers; printed
 * as `stats` (one "name value" a line) or in the Prometheus text
 * exposition format with the histograms, for the control socket (ctl.c)
 * and the metrics= endpoint (metrics.c).
 */
#include <stdio.h>
#include <unistd.h>

#include "cache.h"
#include "daemon.h"
#include "fleet.h"
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
	{
		uint64_t nl, ne;

		gw_listings_kept(&nl, &ne);
		M("dir_listings_kept", "gauge",
		  "Directory listings no open holds, kept for the next open (30 s, 16 at most).",
		  nl);
		M("dir_listing_entries_kept", "gauge",
		  "Their entries (262144 at most).", ne);
	}
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
		M("cto_joined_total", "counter",
		  "Opens whose close-to-open check was the origin's answer to the kernel's own GETATTR or LOOKUP for that open (no GETATTR of their own).",
		  gc->cto_joined);
		M("md_kept_listings_total", "counter",
		  "Directories listed from what was kept before a restart instead of the origin.",
		  gc->md_kept_listings);
		M("dir_walk_ahead_listings_total", "counter",
		  "Directories listed ahead of a walk (walk_ahead=), before the walk opened them.",
		  gc->walk_ahead_listings);
		M("dir_walk_ahead_used_total", "counter",
		  "Opens of a directory answered by its listing read ahead (no READDIRPLUS, no store call of their own).",
		  gc->walk_ahead_used);
		M("dir_walk_ahead_stale_total", "counter",
		  "Listings read ahead that the directory's open found of another version (listed again).",
		  gc->walk_ahead_stale);
		M("md_kept_lookups_total", "counter",
		  "LOOKUPs answered from names kept (young enough) instead of the origin.",
		  gc->md_kept_lookups);
		M("lookups_known_absent_total", "counter",
		  "LOOKUPs answered ENOENT without the origin: a directory the gateway made, every change since its own (doc/how-it-works.md).",
		  gc->known_absent);
		M("md_restored_access_total", "counter",
		  "ACCESS answers kept (before a restart, or by an inode the kernel forgot) that new inodes started with.",
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
		M("locks_granted_total", "counter",
		  "Locks the origin granted (NLM LOCK), at once or after a wait.",
		  gc->locks_granted);
		M("locks_denied_total", "counter",
		  "Lock requests the origin refused at first: another owner held the range.",
		  gc->locks_denied);
		M("locks_waited_total", "counter",
		  "Blocking lock requests that waited for the range to be freed (or the origin's grace period).",
		  gc->locks_waited);
		M("locks_interrupted_total", "counter",
		  "Of them, ended by a signal (EINTR); none left a lock at the origin.",
		  gc->locks_interrupted);
		M("locks_released_total", "counter",
		  "Owners whose locks on a file were let go at the origin at a close.",
		  gc->locks_released);
		M("locks_reclaimed_total", "counter",
		  "Locks taken again (NLM LOCK, reclaim in the grace period) after the origin's lock manager came back.",
		  gc->locks_reclaimed);
		M("locks_lost_total", "counter",
		  "Locks that could not be taken again after the origin's lock manager came back (another client took them, or owners taken over): their holders' next lock, read or write of the file fails with EIO.",
		  gc->locks_lost);
		M("lock_owners", "gauge",
		  "Lock owners (per file) the gateway knows of now.",
		  gc->lock_owners);
		if (pr->nfs) {
			uint64_t calls, errors;

			nfsc_lock_stat(pr->nfs, &calls, &errors);
			M("origin_lock_calls_total", "counter",
			  "NLM calls (TEST, LOCK, UNLOCK) sent to the origin's lock manager.",
			  calls);
			M("origin_lock_call_errors_total", "counter",
			  "Of them, answered other than granted (denials count).",
			  errors);
		}
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

/* The fleet store's calls (fleet=), beside the origin's. */
static void print_fleet(struct gw_proc *pr, FILE *out, bool prometheus)
{
	struct fleet_stats st;
	char key[64], lab[48];
	unsigned c;

	if (!gw_fleet(pr->gw))
		return;
	fleet_stats(gw_fleet(pr->gw), &st);
#define FL(nm, ty, hp, v) do {						\
		if (prometheus)						\
			fprintf(out, "# HELP cachegw_%s %s\n# TYPE "	\
				"cachegw_%s %s\ncachegw_%s %llu\n", nm, hp, \
				nm, ty, nm, (unsigned long long)(v));	\
		else							\
			fprintf(out, "%-36s %llu\n", nm,		\
				(unsigned long long)(v));		\
	} while (0)
	FL("fleet_connected", "gauge", "1 while the fleet store is "
	   "connected.", st.connected);
	FL("fleet_losses_total", "counter", "Times the fleet store went "
	   "away.", st.losses);
	FL("fleet_names_total", "counter", "Origin handles sent to the "
	   "store to be named.", st.names_assigned);
	for (c = 0; c < FLEET_NCALLS; c++) {
		snprintf(key, sizeof(key), "fleet_%s_calls_total",
			 fleet_call_name(c));
		FL(key, "counter", "Fleet store round trips answered, by "
		   "call.", st.call[c].calls);
		snprintf(key, sizeof(key), "fleet_%s_errors_total",
			 fleet_call_name(c));
		FL(key, "counter", "Fleet store round trips not answered "
		   "(store away, SQL error), by call.", st.call[c].errors);
	}
#undef FL
	if (!prometheus)
		return;
	fprintf(out, "# HELP cachegw_fleet_call_duration_seconds Time of a "
		"fleet store round trip, by call.\n# TYPE "
		"cachegw_fleet_call_duration_seconds histogram\n");
	for (c = 0; c < FLEET_NCALLS; c++) {
		if (!st.call[c].lat.count)
			continue;
		snprintf(lab, sizeof(lab), "call=\"%s\"", fleet_call_name(c));
		lat_hist_print_series(&st.call[c].lat,
				      "cachegw_fleet_call_duration_seconds",
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
	/* More than collect() makes: one past it would be dropped unseen. */
	struct metric m[96];
	size_t n, i;

	gw_counters(pr->gw, &gc);
	n = collect(pr, &gc, m, sizeof(m) / sizeof(m[0]));
	if (n == sizeof(m) / sizeof(m[0]))
		gw_log("BUG: metrics: the table is full, some are not shown");

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
	print_fleet(pr, out, prometheus);
	if (!prometheus)
		return;
	print_hist(&gc.origin_read_lat, "cachegw_origin_read_duration_seconds",
		   "Time from sending an origin READ to its reply.", out);
	print_hist(&gc.cache_read_lat, "cachegw_cache_read_duration_seconds",
		   "Time of a cache read that returned verified data.", out);
}
