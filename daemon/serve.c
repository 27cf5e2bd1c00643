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

static int open_origin(struct gw *gw)
{
	struct nfsc_opts no = {
		.nconnect = gw->o->nconnect,
		.rsize = gw->o->rsize,
		.wsize = gw->o->wsize,
		.timeo = gw->o->timeo,
		.retrans = gw->o->retrans,
		.soft = gw->o->soft,
		.offline = gw->o->offline,
	};
	char err[512], where[1024];
	struct nfsc_fh root;
	struct nfsc_origin_stat os;
	int ret;

	/* With offline=, a start while the origin cannot be reached uses
	 * the root handle kept from the last mount of the same export; so
	 * does every successor: clients wait for the origin (hard) or are
	 * answered from the cache (offline=), as they would be had the
	 * process not changed (doc/takeover.md). */
	if (gw->o->offline || gw->successor) {
		ret = gw_origin_root_load(gw->o->cache_dir, where,
					  sizeof(where), &root);
		if (ret == 0) {
			no.known_root = &root;
			no.known_where = where;
		} else if (ret != -ENOENT)
			gw_log("origin-root in the cache directory is damaged: "
			       "a start without the origin is not possible "
			       "until the next mount rewrites it");
	}
	ret = nfsc_open(gw->o->source, &no, &gw->nfs, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "cachegw: %s%s\n", err,
			gw->o->offline && !no.known_root ?
			" (offline=: no root handle of this export is kept in "
			"the cache, so the gateway cannot start without the "
			"origin)" : "");
		return ret;
	}
	nfsc_origin_stat(gw->nfs, &os);
	if (!os.started_lost &&
	    (ret = gw_origin_root_save(gw->o->cache_dir, nfsc_server(gw->nfs),
				       nfsc_export(gw->nfs),
				       nfsc_root(gw->nfs))) < 0)
		gw_log("cannot keep the export's root handle in the cache "
		       "directory (%s): offline= starts without the origin "
		       "will not be possible", strerror(-ret));
	return 0;
}

static int open_cache(struct gw *gw)
{
	struct cache_opts co = {
		.dir = gw->o->cache_dir,
		.mode = CACHE_OPEN_OWNER,
		.block_size = gw->o->cache_block,
		.write_mode = (enum cache_write_mode)gw->o->cache_write,
		.max_bytes = gw->o->cache_size,
		.brun = gw->o->brun,
		.bcull = gw->o->bcull,
		.bstop = gw->o->bstop,
	};
	char err[512];
	struct nodes_stats ns;
	int ret;

	ret = cache_open(&co, &gw->cache, err, sizeof(err));
	if (!ret)
		ret = nodes_open(gw->o->cache_dir, false, &gw->nodes,
				       err, sizeof(err));
	if (ret) {
		fprintf(stderr, "cachegw: %s\n", err);
		return ret;
	}
	nodes_stats(gw->nodes, &ns);
	gw->generation = ns.generation;
	ret = gw_handle_key_load(gw, gw->o->cache_dir, ns.reserved_id);
	if (ret) {
		fprintf(stderr, "cachegw: cache_dir '%s': cannot read or make "
			"handle-key: %s\n", gw->o->cache_dir, strerror(-ret));
		return ret;
	}
	if (ns.skipped_bytes)
		gw_log("node-id table: %llu damaged bytes skipped",
		       (unsigned long long)ns.skipped_bytes);
	/* What was known of the files (kept_md.c): a cache; one that
	 * cannot be opened is logged, and the gateway runs without. */
	gw->md_epoch = gw_md_now_ns();
	ret = nodes_md_open(gw->o->cache_dir, ns.generation, &gw->md, err,
			    sizeof(err));
	if (ret) {
		gw_log("kept metadata: %s: starting without it", err);
		gw->md = NULL;
	} else {
		struct nodes_md_stats ms;

		nodes_md_stats(gw->md, &ms);
		if (ms.started_afresh && ms.dropped_bytes)
			gw_log("kept metadata (md.log) was not this node-id "
			       "table's or was damaged: started afresh");
		else if (ms.dropped_bytes)
			gw_log("kept metadata (md.log): %llu bytes after a "
			       "torn or damaged record dropped",
			       (unsigned long long)ms.dropped_bytes);
		/* A successor's predecessor died, the machine did not:
		 * every record it wrote is there (kept_md.c). */
		if (!ms.clean && !gw->successor)
			gw_md_unclean(gw);
	}
	return 0;
}

int gw_serve(struct gw_opts *o, const int fds[2], int sup_fd, int notify_fd)
{
	struct gw gw = {
		.o = o,
		.ctl_fd = -1,
		.metrics_fd = -1,
		.takeover_fd = -1,
		.handover_fuse_fd = -1,
		.sup_fd = sup_fd,
		.successor = fds[0] >= 0,
		.win_lock = PTHREAD_MUTEX_INITIALIZER,
		.win_cond = PTHREAD_COND_INITIALIZER,
		.fill_lock = PTHREAD_MUTEX_INITIALIZER,
		.fill_cond = PTHREAD_COND_INITIALIZER,
		.fs_lock = PTHREAD_MUTEX_INITIALIZER,
		.owed_lock = PTHREAD_MUTEX_INITIALIZER,
	};
	struct fuse_loop_config *cfg = NULL;
	int ret = EXIT_FAILURE;
	char err[256];
	bool handed = false;

	/* What a successor needs, kept from the start (gw_state.h). */
	if (gw.successor ? gw_state_open(fds[1], err, sizeof(err)) :
			   (snprintf(err, sizeof(err), "cannot make the "
				     "takeover state"), gw_state_create())) {
		fprintf(stderr, "cachegw: %s\n", err);
		if (gw.successor)
			close(fds[1]);
		goto out_cache;
	}
	/* Before any thread: every thread inherits HUP, INT and TERM
	 * blocked, so only drain.c's thread takes them. */
	if (gw_drain_block_signals() || gw_drain_start(&gw)) {
		fprintf(stderr, "cachegw: cannot set up signal handling\n");
		goto out_cache;
	}
	/* 1. the cache, then the origin */
	if (open_cache(&gw))
		goto out_cache;
	if (open_origin(&gw))
		goto out_cache;
	if (gw_gateway_init(&gw)) {
		fprintf(stderr, "cachegw: out of memory\n");
		goto out_nfs;
	}
	/* 2. the FUSE session and the mount */
	if (add_mount_opts(o)) {
		fprintf(stderr, "cachegw: out of memory\n");
		goto out_itable;
	}
	gw.se = fuse_session_new(&o->fuse_args, &gw_oper, sizeof(gw_oper),
				 &gw);
	if (!gw.se) {
		fprintf(stderr, "cachegw: cannot create the FUSE session "
			"(bad mount options?)\n");
		goto out_itable;
	}
	if (gw.successor) {
		char dev[32];

		/* The connection as it is: libfuse takes /dev/fd/N as an open
		 * /dev/fuse and mounts nothing. */
		snprintf(dev, sizeof(dev), "/dev/fd/%d", fds[0]);
		if (fuse_session_mount(gw.se, dev)) {
			fprintf(stderr, "cachegw: cannot serve the FUSE "
				"connection handed over\n");
			close(fds[0]);
			goto out_session;
		}
	} else if (fuse_session_mount(gw.se, o->mountpoint)) {
		fprintf(stderr, "cachegw: cannot mount on '%s' (is /dev/fuse "
			"available and are you allowed to mount?)\n",
			o->mountpoint);
		goto out_session;
	}
	gw_drain_mounted();
	/* 3. service threads, now that no fork follows */
	if (gw_fill_start(&gw)) {
		fprintf(stderr, "cachegw: cannot start the fill thread\n");
		goto out_unmount;
	}
	gw.fill_started = true;
	if (nfsc_start(gw.nfs)) {
		fprintf(stderr, "cachegw: cannot start connection threads\n");
		goto out_unmount;
	}
	/* Before the first request: hidden names of files an earlier run
	 * had open when it died. */
	if (gw_silly_start(&gw, o->cache_dir, gw.successor)) {
		fprintf(stderr, "cachegw: out of memory\n");
		goto out_unmount;
	}
	ret = gw_reclaim_start(&gw);
	if (ret) {
		fprintf(stderr, "cachegw: cannot start the reclaim thread: "
			"%s\n", strerror(-ret));
		ret = EXIT_FAILURE;
		goto out_unmount;
	}
	ret = gw_ctl_start(&gw, o->cache_dir);
	if (ret) {
		fprintf(stderr, "cachegw: cannot serve the control socket in "
			"'%s': %s\n", o->cache_dir, strerror(-ret));
		ret = EXIT_FAILURE;
		goto out_unmount;
	}
	ret = gw_metrics_start(&gw);
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
	ret = gw_takeover_init(&gw, gw.successor);
	if (ret) {
		fprintf(stderr, "cachegw: cannot read the kernel's FUSE INIT: "
			"%s\n", strerror(-ret));
		ret = EXIT_FAILURE;
		fuse_loop_cfg_destroy(cfg);
		goto out_unmount;
	}
	if (gw.successor) {
		size_t left = gw_intent_takeover();

		if (left)
			gw_log("takeover: %zu changes the last process had sent "
			       "to the origin were not answered: each is taken "
			       "as done if it comes again and fails as a "
			       "repeat would", left);
		ret = gw_takeover_adopt(&gw);
		if (ret) {
			fprintf(stderr, "cachegw: cannot adopt the open files "
				"of the connection: %s\n", strerror(-ret));
			ret = EXIT_FAILURE;
			fuse_loop_cfg_destroy(cfg);
			goto out_unmount;
		}
		/* What the last process read and never answered: to the
		 * queue again, for this one. */
		ret = gw_takeover_resend(&gw);
		if (ret)
			gw_log("takeover: the kernel did not take "
			       "FUSE_NOTIFY_RESEND (%s; Linux >= 6.9 has it): "
			       "requests the last process had read stay "
			       "unanswered, their callers wait until killed",
			       strerror(-ret));
		ret = 0;
	} else if (sup_fd >= 0) {
		int both[2] = { fuse_session_fd(gw.se), gw_state_fd() };

		if (gw_send_fds(sup_fd, "fds\n", both, 2))
			gw_log("supervise: cannot pass the connection to the "
			       "supervisor: a crash will not be survived");
	}
	gw_takeover_serving(&gw, gw.successor);
	/* A successor serves: its supervisor counts it as started
	 * (supervise.c: the delay after failed starts). */
	if (gw.successor && sup_fd >= 0 &&
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
	ret = fuse_session_loop_mt(gw.se, cfg);
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
	gw_drain_loop_ended(&gw);
	/* Asked to hand over: the writers' data committed, the connection
	 * kept aside for the successor, the handles only freed below. */
	if (__atomic_load_n(&gw.takeover_fd, __ATOMIC_ACQUIRE) >= 0) {
		gw_takeover_handover_begin(&gw);
		handed = true;
	}
	/* No request runs any more, the origin is still there: what the
	 * kernel never released (an unmount drops queued RELEASEs) is
	 * released now. */
	if (gw_handles_release(&gw) && !handed)
		gw_log("released at exit the files and directories whose "
		       "release never came");
	gw_handles_fini();
	if (__atomic_load_n(&gw.exit_commit_errors, __ATOMIC_RELAXED))
		ret = EXIT_FAILURE;
out_unmount:
	if (gw.successor && !handed)
		gw_drain_detach_if_ours();
	fuse_session_unmount(gw.se);
out_session:
	fuse_session_destroy(gw.se);
out_itable:
	/* The control thread reads counters of both layers, and the
	 * connection threads may still complete calls into inodes: stop
	 * them before freeing what they use. */
	gw_metrics_stop(&gw);
	gw_reclaim_stop(&gw);
	gw_ctl_stop(&gw);
	gw_reclaim_free(&gw);
	nfsc_close(gw.nfs);
	gw.nfs = NULL;
	/* COMMITs still owed are cancelled now (a stop that did not wait
	 * for them: drain.c); their inodes go next. */
	gw_write_owed_stop(&gw);
	if (gw.fill_started)
		gw_fill_stop(&gw);
	gw_itable_free(&gw);
	gw_silly_stop(&gw);
out_nfs:
	nfsc_close(gw.nfs);
out_cache:
	gw_ctl_stop(&gw);
	nodes_md_close(gw.md);
	if (gw.nodes)
		nodes_close(gw.nodes);
	if (gw.cache)
		cache_close(gw.cache);	/* completes the fills holding buffers */
	gw_buf_trim(true);
	if (gw_buf_mapped())
		gw_log("BUG: %llu bytes of data buffers still referenced at exit",
		       (unsigned long long)gw_buf_mapped());
	if (handed) {
		ret = gw_takeover_handover_end(&gw) ? EXIT_FAILURE :
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
	gw_daemon_notify(&notify_fd, (unsigned char)ret);
	gw_log_stop();
	return ret;
}
