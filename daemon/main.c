/* main.c - cachegw: mount an NFS export through FUSE with a disk cache.
 *
 * The command line and the mount point checked; then, after the fork into
 * the background (background.c: the parent waits for the start-up's
 * verdict), a live gateway on the same cache_dir asked to hand its
 * connection over (takeover/), and one serving process run (serve.c),
 * under a supervisor (supervise.c) or alone.
 */
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache.h"
#include "daemon.h"
#include "takeover_i.h"

#define EXIT_USAGE 2

static int check_mountpoint(struct gw_opts *o)
{
	const char *mnt = o->mountpoint;
	struct stat st;

	if (stat(mnt, &st) < 0) {
		fprintf(stderr, "cachegw: mountpoint '%s': %s\n", mnt,
			strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		fprintf(stderr, "cachegw: mountpoint '%s' is not a directory\n",
			mnt);
		return -1;
	}
	/* Now, while it is not ours: once mounted a stat() of it would ask
	 * ourselves. The control socket tells tools where the mount is. */
	o->mountpoint_real = realpath(mnt, NULL);
	if (!o->mountpoint_real) {
		fprintf(stderr, "cachegw: mountpoint '%s': %s\n", mnt,
			strerror(errno));
		return -1;
	}
	return 0;
}

static int start(struct gw_opts *o)
{
	int fds[2] = { -1, -1 }, notify_fd = -1, live = -ENOENT, ret;
	struct nfsc *origin = NULL;	/* reached before a takeover */
	char err[512];

	if (!o->foreground && gw_daemon_fork(&notify_fd) < 0) {
		perror("cachegw: fork");
		return EXIT_FAILURE;
	}
	if (!o->foreground)
		gw_log_keep_early();
	/* After the fork: the process that asks is the one that serves (or
	 * supervises); its errors still reach the terminal. Nothing in a
	 * cache_dir someone else could write is used, its control socket
	 * least of all (a process that answered there would be handed this
	 * one's mount): the check cache_open makes, made first. */
	ret = cache_dir_check_trust(o->cache_dir, err, sizeof(err));
	if (ret == -EPERM) {
		fprintf(stderr, "cachegw: %s\n", err);
		gw_daemon_notify(&notify_fd, EXIT_FAILURE);
		return EXIT_FAILURE;
	}
	if (ret == 0)
		live = gw_takeover_probe(o->cache_dir);
	if (live >= 0) {
		close(live);
		ret = gw_takeover_ask(o, fds, &origin);
		if (ret) {
			gw_daemon_notify(&notify_fd, (unsigned char)ret);
			return ret;
		}
	}
	if (o->supervise)
		return gw_supervise(o, fds, origin, notify_fd);
	return gw_serve(o, fds, origin, -1, notify_fd);
}

/* Every open file's cache object holds two descriptors; many clients of
 * a re-export open many files at once. */
static void raise_fd_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

int main(int argc, char **argv)
{
	struct gw_opts o;
	int ret;

	/* Read buffers of up to a few MiB come and go all the time: keep
	 * them in the heap instead of a fresh, page-faulting mmap each. */
	mallopt(M_MMAP_THRESHOLD, 32 << 20);
	mallopt(M_TRIM_THRESHOLD, 64 << 20);
	/* Each arena keeps its own high-water mark: few arenas, flat RSS. */
	mallopt(M_ARENA_MAX, 4);
	raise_fd_limit();

	ret = gw_opts_parse(argc, argv, &o);
	if (ret) {
		gw_opts_free(&o);
		return ret > 0 ? EXIT_SUCCESS : EXIT_USAGE;
	}
	if (!o.cache_dir) {
		fprintf(stderr, "cachegw: missing option -o cache_dir=DIR "
			"(where the cache lives, e.g. /var/cache/cachegw)\n");
		gw_opts_free(&o);
		return EXIT_USAGE;
	}
	if (check_mountpoint(&o)) {
		gw_opts_free(&o);
		return EXIT_FAILURE;
	}
	ret = start(&o);
	gw_opts_free(&o);
	return ret;
}
