/* serve.c - one serving process: the takeover state, the signals, the
 * cache and the origin, the request path, the mount (or the connection
 * handed over), the service threads, the session loop; then the handover
 * or the commits at exit, and everything closed in the reverse order.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache.h"
#include "config.h"
#include "daemon.h"
#include "takeover_i.h"
#include "nodes.h"

/* fsname= shows the source in /proc/mounts; escape what fuse_opt splits. */
static int add_mount_opts(struct gw_opts *o)
{
	size_t len = strlen(o->source);
	char *opts = malloc(len * 2 + 128), *p;
	const char *s;
	int ret;

	if (!opts)
		return -ENOMEM;
	p = opts + sprintf(opts, "max_read=%u,default_permissions,"
			   "subtype=cachegw%s%s,fsname=", 1u << 20,
			   o->allow_other ? ",allow_other" : "",
			   o->ro ? ",ro" : "");
	for (s = o->source; *s; s++) {
		if (*s == ',' || *s == '\\')
			*p++ = '\\';
		*p++ = *s;
	}
	*p = 0;
	ret = fuse_opt_add_arg(&o->fuse_args, "-o");
	if (!ret)
		ret = fuse_opt_add_arg(&o->fuse_args, opts);
	if (!ret && o->debug)
		ret = fuse_opt_add_arg(&o->fuse_args, "-d");
	free(opts);
	return ret ? -ENOMEM : 0;
}

/* The NLM caller name of this gateway: the host's name and its cache
 * directory's (hashed), so that two gateways on one host are two lock
 * clients to the origin, and a successor (same host, same cache_dir) is
 * the same one. */
static void lock_caller_name(const struct gw_opts *o, char *buf, size_t len)
{
	char host[128] = "localhost";
	const char *p;
	uint32_t h = 2166136261u;	/* FNV-1a */

	if (gethostname(host, sizeof(host) - 1) != 0)
		strcpy(host, "localhost");
	host[sizeof(host) - 1] = 0;
	for (p = o->cache_dir ? o->cache_dir : ""; *p; p++)
		h = (h ^ (uint8_t)*p) * 16777619u;
	snprintf(buf, len, "%s.cachegw-%08x", host, h);
}

void gw_origin_opts(const struct gw_opts *o, struct nfsc_opts *no,
		    char *caller, size_t clen)
{
	lock_caller_name(o, caller, clen);
	*no = (struct nfsc_opts){
		.nconnect = o->nconnect,
		.rsize = o->rsize,
		.wsize = o->wsize,
		.timeo = o->timeo,
		.retrans = o->retrans,
		.soft = o->soft,
		.offline = o->offline,
		.lock_caller = caller,
	};
}

static int open_origin(struct gw_proc *pr, struct nfsc *pre)
{
	struct nfsc_opts no;
	char err[512], where[1024], caller[192];
	struct nfsc_fh root;
	struct nfsc_origin_stat os;
	int ret;

	gw_origin_opts(pr->o, &no, caller, sizeof(caller));
	if (pre) {
		pr->nfs = pre;
		goto opened;
	}
	/* With offline=, a start while the origin cannot be reached uses
	 * the root handle kept from the last mount of the same export; so
	 * does every successor: clients wait for the origin (hard) or are
	 * answered from the cache (offline=), as they would be had the
	 * process not changed (doc/takeover.md). */
	if (pr->o->offline || pr->successor) {
		ret = gw_origin_root_load(pr->o->cache_dir, where,
					  sizeof(where), &root);
		if (ret == 0) {
			no.known_root = &root;
			no.known_where = where;
		} else if (ret != -ENOENT)
			gw_log("origin-root in the cache directory is damaged: "
			       "a start without the origin is not possible "
			       "until the next mount rewrites it");
	}
	ret = nfsc_open(pr->o->source, &no, &pr->nfs, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "cachegw: %s%s\n", err,
			pr->o->offline && !no.known_root ?
			" (offline=: no root handle of this export is kept in "
			"the cache, so the gateway cannot start without the "
			"origin)" : "");
		return ret;
	}
opened:
	gw_use_origin(pr->gw, pr->nfs);
	nfsc_origin_stat(pr->nfs, &os);
	if (!os.started_lost &&
	    (ret = gw_origin_root_save(pr->o->cache_dir, nfsc_server(pr->nfs),
				       nfsc_export(pr->nfs),
				       nfsc_root(pr->nfs))) < 0)
		gw_log("cannot keep the export's root handle in the cache "
		       "directory (%s): offline= starts without the origin "
		       "will not be possible", strerror(-ret));
	return 0;
}

static int open_cache(struct gw_proc *pr)
{
	struct cache_opts co = {
		.dir = pr->o->cache_dir,
		.mode = CACHE_OPEN_OWNER,
		.block_size = pr->o->cache_block,
		.write_mode = (enum cache_write_mode)pr->o->cache_write,
		.max_bytes = pr->o->cache_size,
		.brun = pr->o->brun,
		.bcull = pr->o->bcull,
		.bstop = pr->o->bstop,
	};
	char err[512];
	struct nodes_stats ns;
	int ret;

	ret = cache_open(&co, &pr->cache, err, sizeof(err));
	if (!ret)
		ret = nodes_open(pr->o->cache_dir, false, &pr->nodes,
				       err, sizeof(err));
	if (ret) {
		fprintf(stderr, "cachegw: %s\n", err);
		return ret;
	}
	nodes_stats(pr->nodes, &ns);
	gw_use_cache(pr->gw, pr->cache, pr->nodes, ns.generation);
	ret = gw_fleet_check_dir(pr->gw);
	if (ret)
		return ret;
	/* A fleet's key comes from its store (gw_fleet_start). */
	ret = pr->o->fleet ? 0 : gw_handle_key_load(pr->gw, pr->o->cache_dir,
						    ns.reserved_id);
	if (ret) {
		fprintf(stderr, "cachegw: cache_dir '%s': cannot read or make "
			"handle-key: %s\n", pr->o->cache_dir, strerror(-ret));
		return ret;
	}
	if (ns.skipped_bytes)
		gw_log("node-id table: %llu damaged bytes skipped",
		       (unsigned long long)ns.skipped_bytes);
	/* What was known of the files (kept_md.c): a cache; one that
	 * cannot be opened is logged, and the gateway runs without. */
	ret = nodes_md_open(pr->o->cache_dir, ns.generation, &pr->md, err,
			    sizeof(err));
	if (ret) {
		gw_log("kept metadata: %s: starting without it", err);
		pr->md = NULL;
	} else {
		struct nodes_md_stats ms;

		nodes_md_stats(pr->md, &ms);
		if (ms.started_afresh && ms.dropped_bytes)
			gw_log("kept metadata (md.log) was not this node-id "
			       "table's or was damaged: started afresh");
		else if (ms.dropped_bytes)
			gw_log("kept metadata (md.log): %llu bytes after a "
			       "torn or damaged record dropped",
			       (unsigned long long)ms.dropped_bytes);
		gw_use_md(pr->gw, pr->md);
		/* A successor's predecessor died, the machine did not:
		 * every record it wrote is there (kept_md.c). */
		if (!ms.clean && !pr->successor)
			gw_md_unclean(pr->gw);
	}
	return 0;
}

int gw_serve(struct gw_opts *o, const int fds[2], struct nfsc *origin,
	     int sup_fd, int notify_fd)
{
	struct gw_proc pr = {
		.o = o,
		.ctl_fd = -1,
		.metrics_fd = -1,
		.takeover_fd = -1,
		.handover_fuse_fd = -1,
		.sup_fd = sup_fd,
		.successor = fds[0] >= 0,
	};
	struct fuse_loop_config *cfg = NULL;
	int ret = EXIT_FAILURE;
	char err[256];
	bool handed = false;

	/* What a successor needs, kept from the start (gw_state.h). */
	if (pr.successor ? gw_state_open(fds[1], err, sizeof(err)) :
			   (snprintf(err, sizeof(err), "cannot make the "
				     "takeover state"), gw_state_create())) {
		fprintf(stderr, "cachegw: %s\n", err);
		if (pr.successor)
			close(fds[1]);
		goto out_cache;
	}
	pr.gw = gw_new(o, pr.successor);
	if (!pr.gw) {
		fprintf(stderr, "cachegw: out of memory\n");
		goto out_cache;
	}
	/* Before any thread: every thread inherits HUP, INT and TERM
	 * blocked, so only drain.c's thread takes them. */
	if (gw_drain_block_signals() || gw_drain_start(&pr)) {
		fprintf(stderr, "cachegw: cannot set up signal handling\n");
		goto out_cache;
	}
	/* 1. the cache, then the origin */
	if (open_cache(&pr))
		goto out_cache;
	if (open_origin(&pr, origin)) {
		origin = NULL;	/* closed by open_origin's failure path */
		goto out_cache;
	}
	origin = NULL;		/* pr.nfs now, closed with it */
	if (gw_fleet_start(pr.gw, CACHEGW_VERSION))
		goto out_nfs;
	if (gw_gateway_init(pr.gw)) {
		fprintf(stderr, "cachegw: out of memory\n");
		goto out_nfs;
	}
	/* 2. the FUSE session and the mount */
	if (add_mount_opts(o)) {
		fprintf(stderr, "cachegw: out of memory\n");
		goto out_itable;
	}
	pr.se = fuse_session_new(&o->fuse_args, &gw_oper, sizeof(gw_oper),
				 pr.gw);
	if (!pr.se) {
		fprintf(stderr, "cachegw: cannot create the FUSE session "
			"(bad mount options?)\n");
		goto out_itable;
	}
	gw_use_session(pr.gw, pr.se);
	if (pr.successor) {
		char dev[32];

		/* The connection as it is: libfuse takes /dev/fd/N as an open
		 * /dev/fuse and mounts nothing. */
		snprintf(dev, sizeof(dev), "/dev/fd/%d", fds[0]);
		if (fuse_session_mount(pr.se, dev)) {
			fprintf(stderr, "cachegw: cannot serve the FUSE "
				"connection handed over\n");
			close(fds[0]);
			goto out_session;
		}
	} else if (fuse_session_mount(pr.se, o->mountpoint)) {
		fprintf(stderr, "cachegw: cannot mount on '%s' (is /dev/fuse "
			"available and are you allowed to mount?)\n",
			o->mountpoint);
		goto out_session;
	}
	gw_drain_mounted();
	/* 3. service threads, now that no fork follows */
	if (gw_fill_start(pr.gw)) {
		fprintf(stderr, "cachegw: cannot start the fill thread\n");
		goto out_unmount;
	}
	pr.fill_started = true;
	if (nfsc_start(pr.nfs)) {
		fprintf(stderr, "cachegw: cannot start connection threads\n");
		goto out_unmount;
	}
	gw_locks_start(pr.gw);
	/* Before the first request: hidden names of files an earlier run
	 * had open when it died. */
	if (gw_silly_start(pr.gw, o->cache_dir, pr.successor)) {
		fprintf(stderr, "cachegw: out of memory\n");
		goto out_unmount;
	}
	ret = gw_reclaim_start(pr.gw);
	if (ret) {
		fprintf(stderr, "cachegw: cannot start the reclaim thread: "
			"%s\n", strerror(-ret));
		ret = EXIT_FAILURE;
		goto out_unmount;
	}
	ret = gw_ctl_start(&pr, o->cache_dir);
	if (ret) {
		fprintf(stderr, "cachegw: cannot serve the control socket in "
			"'%s': %s\n", o->cache_dir, strerror(-ret));
		ret = EXIT_FAILURE;
		goto out_unmount;
	}
	ret = gw_metrics_start(&pr);
	if (ret) {
		char addr[80];

		gw_metrics_describe(o, addr, sizeof(addr));
		fprintf(stderr, "cachegw: metrics=: cannot listen on %s: %s\n",
			addr, strerror(-ret));
		ret = EXIT_FAILURE;
		goto out_unmount;
	}
	cfg = fuse_loop_cfg_create();
	if (!cfg) {
		fprintf(stderr, "cachegw: out of memory\n");
		goto out_unmount;
	}
	fuse_loop_cfg_set_max_threads(cfg, o->max_threads);
	fuse_loop_cfg_set_clone_fd(cfg, 0);
	if (o->foreground && o->logfile &&
	    (ret = gw_log_to_file(o->logfile)) < 0) {
		fprintf(stderr, "cachegw: logfile '%s': %s\n", o->logfile,
			strerror(-ret));
		ret = EXIT_FAILURE;
		fuse_loop_cfg_destroy(cfg);
		goto out_unmount;
	}
	/* The connection's INIT: served now (and kept), or replayed. */
	ret = gw_takeover_init(&pr, pr.successor);
	if (ret) {
		fprintf(stderr, "cachegw: cannot read the kernel's FUSE INIT: "
			"%s\n", strerror(-ret));
		ret = EXIT_FAILURE;
		fuse_loop_cfg_destroy(cfg);
		goto out_unmount;
	}
	if (pr.successor) {
		size_t left = gw_intent_takeover();

		if (left)
			gw_log("takeover: %zu changes the last process had sent "
			       "to the origin were not answered: each is taken "
			       "as done if it comes again and fails as a "
			       "repeat would", left);
		ret = gw_takeover_adopt(pr.gw);
		if (ret) {
			fprintf(stderr, "cachegw: cannot adopt the open files "
				"of the connection: %s\n", strerror(-ret));
			ret = EXIT_FAILURE;
			fuse_loop_cfg_destroy(cfg);
			goto out_unmount;
		}
		/* What the last process read and never answered: to the
		 * queue again, for this one. */
		ret = gw_takeover_resend(&pr);
		if (ret)
			gw_log("takeover: the kernel did not take "
			       "FUSE_NOTIFY_RESEND (%s; Linux >= 6.9 has it): "
			       "requests the last process had read stay "
			       "unanswered, their callers wait until killed",
			       strerror(-ret));
		ret = 0;
	} else if (sup_fd >= 0) {
		int both[2] = { fuse_session_fd(pr.se), gw_state_fd() };

		if (gw_send_fds(sup_fd, "fds\n", both, 2))
			gw_log("supervise: cannot pass the connection to the "
			       "supervisor: a crash will not be survived");
	}
	gw_takeover_serving(&pr, pr.successor);
	/* A successor serves: its supervisor counts it as started
	 * (supervise.c: the delay after failed starts). */
	if (pr.successor && sup_fd >= 0 &&
	    gw_send_fds(sup_fd, "serving\n", NULL, 0))
		gw_log("supervise: cannot tell the supervisor");
	if (sup_fd < 0)
		gw_pidfile_write(o);
	if (notify_fd >= 0) {
		gw_daemon_notify(&notify_fd, EXIT_SUCCESS);
		if (!o->foreground)
			gw_daemon_detach(o);
	}
	if (gw_drain_serving())
		gw_log("cannot take signals: SIGTERM ends the gateway "
		       "without committing");
	ret = fuse_session_loop_mt(pr.se, cfg);
	/* The kernel ends the connection when the last use of an unmounted
	 * (or detached) mount goes. A worker that had just taken a request
	 * off the queue then gets ECONNABORTED where the others get ENODEV
	 * (fuse_dev_do_read: no request goes on the processing list after
	 * fuse_abort_conn), and libfuse takes only ENODEV for the end of the
	 * session. Both are that end: seen as "fuse: splice from device:
	 * Software caused connection abort" and exit status 1 after SIGINT
	 * with a COMMIT in flight (test 49, CI, once). */
	if (ret == -ECONNABORTED)
		ret = 0;
	ret = ret ? EXIT_FAILURE : EXIT_SUCCESS;
	fuse_loop_cfg_destroy(cfg);
	gw_drain_loop_ended(&pr);
	/* No request runs: the walk threads (listing ahead) go too. */
	gw_walk_stop();
	/* Asked to hand over: the writers' data committed, the connection
	 * kept aside for the successor, the handles only freed below. */
	if (__atomic_load_n(&pr.takeover_fd, __ATOMIC_ACQUIRE) >= 0) {
		gw_takeover_handover_begin(&pr);
		handed = true;
	}
	/* Lock requests still waiting are answered (or left to the
	 * successor) while the session can still answer them. */
	gw_locks_stop(pr.gw);
	/* No request runs any more, the origin is still there: what the
	 * kernel never released (an unmount drops queued RELEASEs) is
	 * released now. */
	if (gw_handles_release(pr.gw) && !handed)
		gw_log("released at exit the files and directories whose "
		       "release never came");
	gw_handles_fini();
	if (gw_exit_commit_errors(pr.gw))
		ret = EXIT_FAILURE;
out_unmount:
	if (pr.successor && !handed)
		gw_drain_detach_if_ours();
	fuse_session_unmount(pr.se);
out_session:
	fuse_session_destroy(pr.se);
out_itable:
	/* The control thread reads counters of both layers, and the
	 * connection threads may still complete calls into inodes: stop
	 * them before freeing what they use. */
	gw_metrics_stop(&pr);
	gw_walk_stop();
	gw_reclaim_stop(pr.gw);
	gw_ctl_stop(&pr);
	gw_reclaim_free(pr.gw);
	nfsc_close(pr.nfs);
	pr.nfs = NULL;
	gw_use_origin(pr.gw, NULL);
	/* COMMITs still owed are cancelled now (a stop that did not wait
	 * for them: drain.c); their inodes go next. */
	gw_write_owed_stop(pr.gw);
	if (pr.fill_started)
		gw_fill_stop(pr.gw);
	gw_itable_free(pr.gw);
	gw_listings_free();
	gw_silly_stop(pr.gw);
out_nfs:
	gw_fleet_stop(pr.gw);
	nfsc_close(pr.nfs);
out_cache:
	nfsc_close(origin);	/* reached, never used: a start that failed */
	gw_ctl_stop(&pr);
	nodes_md_close(pr.md);
	if (pr.nodes)
		nodes_close(pr.nodes);
	if (pr.cache)
		cache_close(pr.cache);	/* completes the fills holding buffers */
	gw_buf_trim(true);
	if (gw_buf_mapped())
		gw_log("BUG: %llu bytes of data buffers still referenced at exit",
		       (unsigned long long)gw_buf_mapped());
	if (handed) {
		ret = gw_takeover_handover_end(&pr) ? EXIT_FAILURE :
						      EXIT_SUCCESS;
		if (sup_fd >= 0 && ret == EXIT_SUCCESS &&
		    gw_send_fds(sup_fd, "handed\n", NULL, 0))
			gw_log("supervise: cannot tell the supervisor");
	}
	gw_state_close();
	gw_intent_fini();
	/* Handed over: the pidfile is the new process's (it may have
	 * written it already; a check of the pid and an unlink would race
	 * with that rename). */
	if (sup_fd < 0 && !handed)
		gw_pidfile_remove(o);
	gw_drain_stop(ret);
	gw_free(pr.gw);
	gw_daemon_notify(&notify_fd, (unsigned char)ret);
	gw_log_stop();
	return ret;
}
