/* warm.c - `cachegw-inspect warm`: read files through a live mount so that
 * the gateway caches them.
 *
 * 1. Ask the gateway (control socket) where its mount is; every PATH must
 *    resolve (realpath) to it or below it.
 * 2. Walk the PATHs (no symlinks followed, not across mounts) for regular
 *    files, 16 directories at a time, and ask the gateway for each what
 *    its cache holds (`cached`), 16 at a time: on a far origin the round
 *    trips of the walk and of the questions overlap.
 * 3. --dry-run: list what is missing. Else N threads read every file that
 *    is not complete, through the mount, start to end; a progress line on
 *    a terminal, one line per file otherwise. Run as root over a tree
 *    users write, the tool trusts nothing it walked: a file may have been
 *    replaced meanwhile by a symlink, a FIFO or a directory, or a
 *    directory on its path by a symlink (open_below); such a file is
 *    skipped with a line saying what it became, never followed, waited
 *    on or read.
 * 4. Wait for the gateway's fills (`drain`) and ask again: the difference
 *    is what this run made cached.
 * The tool reads only through the mount and asks only through the control
 * socket: it knows nothing of the gateway's insides.
 *
 * This file: the command line, the mount and the PATHs (1.), the dry
 * run. warm_walk.c walks the directories (2.), warm_files.c keeps the
 * files' list and asks the gateway about them, warm_read.c reads and
 * reports (3.-4.).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "inspect_i.h"

static int cmp_files(const void *a, const void *b)
{
	return strcmp(((const struct wfile *)a)->path,
		      ((const struct wfile *)b)->path);
}

static int usage_warm(const char *msg)
{
	fprintf(stderr, "%s: %s\nusage: %s warm --cache-dir DIR [--dry-run] "
		"[-j N] PATH...\n", prog, msg, prog);
	return EXIT_USAGE;
}

int cmd_warm(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "cache-dir", required_argument, NULL, 'd' },
		{ "dry-run", no_argument, NULL, 'n' },
		{ "jobs", required_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	struct warm w = { .out_lock = PTHREAD_MUTEX_INITIALIZER, .mntfd = -1 };
	struct stat st;
	bool dry = false;
	unsigned jobs = 4;
	size_t files = 0, k;
	uint64_t total = 0, missing = 0;
	char *reply, *end;
	int ch, ret = 0, i;

	optind = 1;
	while ((ch = getopt_long(argc, argv, "+d:nj:h", opts, NULL)) != -1) {
		switch (ch) {
		case 'd': w.dir = optarg; break;
		case 'n': dry = true; break;
		case 'j':
			jobs = (unsigned)strtoul(optarg, &end, 10);
			if (*end || jobs < 1 || jobs > WARM_JOBS_MAX)
				return usage_warm("-j wants 1 to 64");
			break;
		case 'h':
			printf("usage: %s warm --cache-dir DIR [--dry-run] "
			       "[-j N] PATH...\n", prog);
			return 0;
		default:
			return usage_warm("unexpected option");
		}
	}
	if (!w.dir)
		return usage_warm("--cache-dir DIR is required");
	if (optind >= argc)
		return usage_warm("no PATH to warm");
	/* 1. the gateway's mount */
	ret = ctl_ask(w.dir, "mountpoint", &reply);
	if (ret) {
		ctl_perror(w.dir, ret);
		return 1;
	}
	reply[strcspn(reply, "\n")] = 0;
	if (reply[0] != '/') {
		fprintf(stderr, "%s: the gateway on %s gave no mountpoint: %s\n",
			prog, w.dir, reply);
		free(reply);
		return 1;
	}
	w.mnt = reply;
	w.mntlen = strlen(w.mnt);
	w.mntfd = open(w.mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (w.mntfd < 0 || fstat(w.mntfd, &st) < 0) {
		fprintf(stderr, "%s: %s: %s\n", prog, w.mnt, strerror(errno));
		ret = 1;
		goto out;
	}
	w.mntdev = st.st_dev;
	/* 2. the files, and what the cache holds of each */
	for (i = optind; i < argc; i++) {
		char *rp = realpath(argv[i], NULL);

		if (!rp) {
			fprintf(stderr, "%s: %s: %s\n", prog, argv[i],
				strerror(errno));
			w.failed++;
			continue;
		}
		if (strncmp(rp, w.mnt, w.mntlen) ||
		    (rp[w.mntlen] && rp[w.mntlen] != '/')) {
			fprintf(stderr, "%s: %s is not inside %s, the mount of "
				"the gateway on %s\n", prog, argv[i], w.mnt,
				w.dir);
			free(rp);
			ret = EXIT_USAGE;
			goto out;
		}
		if (lstat(rp, &st) < 0) {
			fprintf(stderr, "%s: %s: %s\n", prog, argv[i],
				strerror(errno));
			w.failed++;
		} else if (S_ISREG(st.st_mode)) {
			if (warm_add_file(&w, rp)) {
				free(rp);
				ret = 1;
				goto out;
			}
		} else if (S_ISDIR(st.st_mode) &&
			   (ret = warm_walk_tree(&w, rp)) < 0) {
			fprintf(stderr, "%s: %s: %s\n", prog, argv[i],
				strerror(-ret));
			free(rp);
			ret = 1;
			goto out;
		}
		ret = 0;
		free(rp);
	}
	qsort(w.f, w.n, sizeof(*w.f), cmp_files);
	warm_ask_all(&w);
	for (k = 0; k < w.n; k++) {
		struct wfile *f = &w.f[k];

		if (f->failed)
			continue;
		if (f->complete)
			continue;
		files++;
		total += f->size;
		missing += f->size - (f->before < f->size ? f->before : f->size);
		if (dry)
			printf("missing %" PRIu64 " of %" PRIu64 " bytes: %s\n",
			       f->size - (f->before < f->size ? f->before :
					  f->size), f->size, f->rel);
	}
	if (dry) {
		printf("%zu of %zu files not fully cached, %" PRIu64
		       " bytes missing%s\n", files, w.n - w.failed, missing,
		       w.failed ? " (some could not be checked)" : "");
		ret = w.failed ? 1 : 0;
		goto out;
	}
	/* 3.-4. */
	w.tty = isatty(STDOUT_FILENO);
	if (!w.tty)
		setvbuf(stdout, NULL, _IOLBF, 0);
	ret = warm_read(&w, jobs, files, total);
out:
	if (w.mntfd >= 0)
		close(w.mntfd);
	for (k = 0; k < w.n; k++)
		free(w.f[k].path);
	free(w.f);
	free(w.mnt);
	return ret;
}
