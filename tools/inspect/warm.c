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
 */
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "inspect_i.h"

#define WARM_READ_SIZE (1u << 20)
#define WARM_JOBS_MAX 64
/* Directories listed and files asked about at once: the gateway serves
 * 16 control clients at a time. */
#define WARM_META_JOBS 16

struct wfile {
	char *path;		/* absolute, under the mount */
	const char *rel;	/* path below the mount (points into path) */
	uint64_t size;		/* from the gateway's `cached` */
	uint64_t before, after;	/* cached bytes before and after */
	bool complete;		/* every block present before */
	bool failed;		/* could not be asked about or read */
	bool read;		/* read by this run */
	bool skipped;		/* not a regular file any more: not read */
};

struct warm {
	const char *dir;
	char *mnt;		/* the gateway's mountpoint */
	size_t mntlen;
	int mntfd;		/* its root directory, opened once */
	dev_t mntdev;		/* its st_dev: the only filesystem read */
	struct wfile *f;
	size_t n, cap;
	bool tty;
	pthread_mutex_t out_lock;	/* lines on stdout/stderr */
	/* shared by the readers: atomic */
	size_t next;			/* the next file to take */
	uint64_t bytes_done;		/* bytes read */
	size_t files_done;		/* files finished (read or failed) */
	size_t failed;
	size_t skipped;
	size_t readers_left;
};


static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void human(uint64_t b, char *buf, size_t len)
{
	const char *u[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double v = (double)b;
	unsigned i = 0;

	while (v >= 1024 && i < 4) {
		v /= 1024;
		i++;
	}
	snprintf(buf, len, i ? "%.1f %s" : "%.0f %s", v, u[i]);
}

static int add_file(struct warm *w, const char *path)
{
	struct wfile *f;

	/* The control protocol is one line per command. */
	if (strchr(path, '\n')) {
		fprintf(stderr, "%s: skipping a name with a newline: %s\n",
			prog, path);
		return 0;
	}
	if (w->n == w->cap) {
		size_t cap = w->cap ? w->cap * 2 : 256;
		struct wfile *nf = realloc(w->f, cap * sizeof(*nf));

		if (!nf)
			return -ENOMEM;
		w->f = nf;
		w->cap = cap;
	}
	f = &w->f[w->n];
	memset(f, 0, sizeof(*f));
	f->path = strdup(path);
	if (!f->path)
		return -ENOMEM;
	f->rel = f->path[w->mntlen] ? f->path + w->mntlen + 1 : "";
	w->n++;
	return 0;
}

/* ---- 2. the walk: directories listed by WARM_META_JOBS threads ----
 * Each thread takes a directory from the queue, opens it relative to
 * nothing it did not check (O_DIRECTORY | O_NOFOLLOW, on the mount's
 * filesystem only), lists it (the kernel's READDIRPLUS: the entries'
 * types come with it) and queues its subdirectories: a far origin's
 * round trips overlap instead of adding up. Symbolic links are not
 * followed, other filesystems not entered (as nftw's FTW_PHYS |
 * FTW_MOUNT). */
struct wq {
	char *path;
	struct wq *next;
};

struct walk {
	struct warm *w;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct wq *head;	/* directories to list; lock */
	unsigned busy;		/* threads listing one; lock */
	int err;		/* first -errno that stops the walk; lock */
};

static void walk_push(struct walk *k, char *path)
{
	struct wq *q = malloc(sizeof(*q));

	pthread_mutex_lock(&k->lock);
	if (!q) {
		free(path);
		k->err = -ENOMEM;
	} else {
		q->path = path;
		q->next = k->head;
		k->head = q;
		pthread_cond_signal(&k->cond);
	}
	pthread_mutex_unlock(&k->lock);
}

static void walk_failed(struct walk *k, const char *path, int err)
{
	pthread_mutex_lock(&k->w->out_lock);
	fprintf(stderr, "%s: cannot read %s: %s\n", prog, path,
		strerror(err));
	k->w->failed++;
	pthread_mutex_unlock(&k->w->out_lock);
}

static void walk_dir(struct walk *k, const char *path)
{
	struct warm *w = k->w;
	struct dirent *de;
	struct stat st;
	DIR *d;
	int fd;

	fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0) {
		walk_failed(k, path, errno);
		if (fd >= 0)
			close(fd);
		return;
	}
	if (st.st_dev != w->mntdev) {
		close(fd);
		return;	/* another filesystem mounted below: not ours */
	}
	d = fdopendir(fd);
	if (!d) {
		walk_failed(k, path, errno);
		close(fd);
		return;
	}
	while ((de = readdir(d))) {
		unsigned char type = de->d_type;
		char *child;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (type == DT_UNKNOWN) {
			if (fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW))
				continue;	/* gone meanwhile */
			type = S_ISDIR(st.st_mode) ? DT_DIR :
			       S_ISREG(st.st_mode) ? DT_REG : DT_UNKNOWN;
		}
		if (type != DT_DIR && type != DT_REG)
			continue;
		if (asprintf(&child, "%s/%s", path, de->d_name) < 0) {
			pthread_mutex_lock(&k->lock);
			k->err = -ENOMEM;
			pthread_mutex_unlock(&k->lock);
			break;
		}
		if (type == DT_DIR) {
			walk_push(k, child);
			continue;
		}
		pthread_mutex_lock(&w->out_lock);
		if (add_file(w, child)) {
			pthread_mutex_lock(&k->lock);
			k->err = -ENOMEM;
			pthread_mutex_unlock(&k->lock);
		}
		pthread_mutex_unlock(&w->out_lock);
		free(child);
	}
	closedir(d);
}

static void *walker(void *arg)
{
	struct walk *k = arg;
	struct wq *q;

	pthread_mutex_lock(&k->lock);
	for (;;) {
		while (!k->head && k->busy && !k->err)
			pthread_cond_wait(&k->cond, &k->lock);
		if (k->err || !k->head)
			break;	/* an error, or nothing queued or in hand */
		q = k->head;
		k->head = q->next;
		k->busy++;
		pthread_mutex_unlock(&k->lock);
		walk_dir(k, q->path);
		free(q->path);
		free(q);
		pthread_mutex_lock(&k->lock);
		k->busy--;
		if (!k->busy && !k->head)
			pthread_cond_broadcast(&k->cond);
	}
	pthread_cond_broadcast(&k->cond);
	pthread_mutex_unlock(&k->lock);
	return NULL;
}

/* Walk the directory at path (resolved, below the mount). 0 or -errno. */
static int walk_tree(struct warm *w, const char *path)
{
	struct walk k = { .w = w, .lock = PTHREAD_MUTEX_INITIALIZER,
			  .cond = PTHREAD_COND_INITIALIZER };
	pthread_t t[WARM_META_JOBS];
	unsigned n = 0, i;
	char *root = strdup(path);

	if (!root)
		return -ENOMEM;
	walk_push(&k, root);
	for (i = 0; i < WARM_META_JOBS; i++)
		if (pthread_create(&t[n], NULL, walker, &k) == 0)
			n++;
	if (!n)
		walker(&k);
	for (i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	while (k.head) {	/* left by an error */
		struct wq *q = k.head;

		k.head = q->next;
		free(q->path);
		free(q);
	}
	return k.err;
}

static int cmp_files(const void *a, const void *b)
{
	return strcmp(((const struct wfile *)a)->path,
		      ((const struct wfile *)b)->path);
}

/* Ask the gateway what it caches of f. 0, or -1 (f->failed, told). */
static int ask_cached(struct warm *w, struct wfile *f, uint64_t *cached,
		      bool *complete)
{
	unsigned long long size, got;
	char *cmd, *reply;
	int done, ret;

	if (asprintf(&cmd, "cached %s", f->rel) < 0)
		return -1;
	ret = ctl_ask(w->dir, cmd, &reply);
	free(cmd);
	if (ret) {
		ctl_perror(w->dir, ret);
		return -1;
	}
	if (sscanf(reply, "file %llu %llu %d", &size, &got, &done) != 3) {
		reply[strcspn(reply, "\n")] = 0;
		fprintf(stderr, "%s: %s: %s\n", prog, f->path, reply);
		free(reply);
		return -1;
	}
	free(reply);
	f->size = size;
	*cached = got;
	*complete = done != 0;
	return 0;
}

/* Ask about every file, WARM_META_JOBS at once. */
static void *asker(void *arg)
{
	struct warm *w = arg;

	for (;;) {
		size_t i = __atomic_fetch_add(&w->next, 1, __ATOMIC_RELAXED);
		struct wfile *f;

		if (i >= w->n)
			break;
		f = &w->f[i];
		if (ask_cached(w, f, &f->before, &f->complete)) {
			f->failed = true;
			__atomic_fetch_add(&w->failed, 1, __ATOMIC_RELAXED);
		}
	}
	return NULL;
}

static void ask_all(struct warm *w)
{
	pthread_t t[WARM_META_JOBS];
	unsigned n = 0, i;

	w->next = 0;
	for (i = 0; i < WARM_META_JOBS && i < w->n; i++)
		if (pthread_create(&t[n], NULL, asker, w) == 0)
			n++;
	if (!n)
		asker(w);
	for (i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	w->next = 0;
}

static const char *type_name(mode_t m)
{
	static const struct { mode_t fmt; const char *what; } t[] = {
		{ S_IFLNK, "now a symbolic link (not followed)" },
		{ S_IFIFO, "now a fifo" },
		{ S_IFDIR, "now a directory" },
		{ S_IFCHR, "now a character device" },
		{ S_IFBLK, "now a block device" },
		{ S_IFSOCK, "now a socket" },
	};

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if ((m & S_IFMT) == t[i].fmt)
			return t[i].what;
	return "no longer a regular file";
}

/* Open rel (below the mount) for reading without trusting the tree:
 * each directory on the way is opened relative to the one before with
 * O_DIRECTORY | O_NOFOLLOW (a component swapped for a link fails with
 * ELOOP, for anything else with ENOTDIR, and nothing is opened); the last
 * component with O_PATH | O_NOFOLLOW, which opens nothing, not even a
 * link, a FIFO or a device; only if fstat says it is a regular file on
 * the mount's filesystem is it opened for reading, through that very
 * descriptor (/proc/self/fd), so what is read is what was checked.
 * Returns the fd; -1 with *why set when f is to be skipped; or -errno. */
static int open_below(struct warm *w, const char *rel, const char **why)
{
	char *copy = strdup(rel), *comp, *next, proc[64];
	int dfd = w->mntfd, fd = -1, ret;
	struct stat st, st2;

	*why = NULL;
	if (!copy)
		return -ENOMEM;
	for (comp = copy; (next = strchr(comp, '/')); comp = next + 1) {
		int nfd;

		*next = 0;
		if (!*comp)
			continue;
		nfd = openat(dfd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
			     O_CLOEXEC);
		if (nfd < 0) {
			ret = -errno;
			/* O_DIRECTORY | O_NOFOLLOW on a link: ENOTDIR. */
			if ((ret == -ELOOP || ret == -ENOTDIR) &&
			    !fstatat(dfd, comp, &st, AT_SYMLINK_NOFOLLOW))
				*why = S_ISLNK(st.st_mode) ?
				       "a directory on its path is now a "
				       "symbolic link (not followed)" :
				       "a directory on its path is no longer "
				       "a directory";
			goto out;
		}
		if (dfd != w->mntfd)
			close(dfd);
		dfd = nfd;
		if (fstat(dfd, &st) < 0) {
			ret = -errno;
			goto out;
		}
		if (st.st_dev != w->mntdev) {
			*why = "a directory on its path is on another "
			       "filesystem now";
			ret = -EXDEV;
			goto out;
		}
	}
	fd = openat(dfd, comp, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0) {
		ret = -errno;
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		*why = type_name(st.st_mode);
		ret = -EINVAL;
		goto out;
	}
	if (st.st_dev != w->mntdev) {
		*why = "now on another filesystem";
		ret = -EXDEV;
		goto out;
	}
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	ret = open(proc, O_RDONLY | O_NOCTTY | O_CLOEXEC);
	if (ret < 0) {
		ret = -errno;
		goto out;
	}
	/* The same file, still (paranoia: it cannot be another). */
	if (fstat(ret, &st2) < 0 || st2.st_dev != st.st_dev ||
	    st2.st_ino != st.st_ino || !S_ISREG(st2.st_mode)) {
		close(ret);
		*why = "changed while it was opened";
		ret = -ESTALE;
	}
out:
	if (fd >= 0)
		close(fd);
	if (dfd != w->mntfd)
		close(dfd);
	free(copy);
	if (ret < 0 && *why)
		return -1;
	return ret;
}

/* Read f start to end through the mount; 0, 1 (skipped: *why says why)
 * or -errno. *got: bytes read. */
static int read_file(struct warm *w, struct wfile *f, char *buf,
		     uint64_t *got, const char **why)
{
	int fd = open_below(w, f->rel, why), ret = 0;
	ssize_t n;

	*got = 0;
	if (fd == -1 && *why)
		return 1;
	if (fd < 0)
		return fd;
	/* Pages the kernel already holds would be served without asking
	 * the gateway, and never reach its cache. */
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	while ((n = read(fd, buf, WARM_READ_SIZE)) != 0) {
		if (n < 0) {
			if (errno == EINTR)
				continue;
			ret = -errno;
			break;
		}
		__atomic_fetch_add(&w->bytes_done, (uint64_t)n,
				   __ATOMIC_RELAXED);
		*got += (uint64_t)n;
	}
	close(fd);
	return ret;
}

static void *reader(void *arg)
{
	struct warm *w = arg;
	char *buf = malloc(WARM_READ_SIZE);

	for (;;) {
		size_t i = __atomic_fetch_add(&w->next, 1, __ATOMIC_RELAXED);
		struct wfile *f;
		uint64_t got = 0;
		const char *why = NULL;
		int ret;

		if (i >= w->n)
			break;
		f = &w->f[i];
		if (f->failed || f->complete)
			continue;
		ret = buf ? read_file(w, f, buf, &got, &why) : -ENOMEM;
		pthread_mutex_lock(&w->out_lock);
		if (ret == 1) {
			/* Swapped since the walk: not an error of ours. */
			f->skipped = true;
			__atomic_fetch_add(&w->skipped, 1, __ATOMIC_RELAXED);
			fprintf(stderr, "%s%s: %s: skipped: %s\n",
				w->tty ? "\r\033[K" : "", prog, f->path, why);
		} else if (ret) {
			f->failed = true;
			__atomic_fetch_add(&w->failed, 1, __ATOMIC_RELAXED);
			fprintf(stderr, "%s%s: %s: %s\n", w->tty ? "\r\033[K" : "",
				prog, f->path, strerror(-ret));
		} else {
			f->read = true;
			/* The kernel reads up to the size it holds, which its
			 * attribute cache may keep for a while after a change
			 * at the origin. */
			if (got != f->size)
				fprintf(stderr, "%s%s: %s: read %" PRIu64 " of "
					"%" PRIu64 " bytes (changed meanwhile?)\n",
					w->tty ? "\r\033[K" : "", prog,
					f->path, got, f->size);
			if (!w->tty)
				printf("read %" PRIu64 " %s\n", got, f->rel);
		}
		pthread_mutex_unlock(&w->out_lock);
		__atomic_fetch_add(&w->files_done, 1, __ATOMIC_RELAXED);
	}
	free(buf);
	__atomic_fetch_sub(&w->readers_left, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void progress(struct warm *w, size_t files, uint64_t total,
		     double t0)
{
	uint64_t done = __atomic_load_n(&w->bytes_done, __ATOMIC_RELAXED);
	double el = now_s() - t0, rate = el > 0 ? (double)done / el : 0;
	char d[32], t[32], r[32], eta[32] = "-";

	human(done, d, sizeof(d));
	human(total, t, sizeof(t));
	human((uint64_t)rate, r, sizeof(r));
	if (rate > 0 && total >= done)
		snprintf(eta, sizeof(eta), "%.0f s",
			 (double)(total - done) / rate);
	pthread_mutex_lock(&w->out_lock);
	printf("\r\033[Kwarm: %zu/%zu files, %s/%s, %s/s, ETA %s",
	       __atomic_load_n(&w->files_done, __ATOMIC_RELAXED), files, d,
	       t, r, eta);
	fflush(stdout);
	pthread_mutex_unlock(&w->out_lock);
}

/* 3.-4.: read what is missing with jobs threads; report. */
static int warm_read(struct warm *w, unsigned jobs, size_t files,
		     uint64_t total)
{
	pthread_t th[WARM_JOBS_MAX];
	unsigned started = 0, i;
	uint64_t made = 0, read_bytes;
	size_t partial = 0, skipped = 0;
	double t0 = now_s(), el;
	char *reply, nskip[32] = "";
	int ret;

	w->readers_left = jobs;
	for (i = 0; i < jobs; i++) {
		if (pthread_create(&th[i], NULL, reader, w))
			break;
		started++;
	}
	if (!started) {
		fprintf(stderr, "%s: cannot start reader threads\n", prog);
		return 1;
	}
	__atomic_fetch_sub(&w->readers_left, jobs - started, __ATOMIC_RELAXED);
	while (w->tty &&
	       __atomic_load_n(&w->readers_left, __ATOMIC_ACQUIRE)) {
		struct timespec tick = { .tv_nsec = 500 * 1000000 };

		progress(w, files, total, t0);
		nanosleep(&tick, NULL);
	}
	for (i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	if (w->tty) {
		progress(w, files, total, t0);
		printf("\n");
	}
	el = now_s() - t0;
	read_bytes = w->bytes_done;
	/* Fills are written after the reads are answered. */
	ret = ctl_ask(w->dir, "drain", &reply);
	if (ret) {
		ctl_perror(w->dir, ret);
		return 1;
	}
	if (strncmp(reply, "ok", 2))
		fprintf(stderr, "%s: drain: %s", prog, reply);
	free(reply);
	for (size_t k = 0; k < w->n; k++) {
		struct wfile *f = &w->f[k];
		bool complete;

		if (f->complete && !f->failed)
			skipped++;
		if (!f->read)
			continue;
		if (ask_cached(w, f, &f->after, &complete)) {
			w->failed++;
			continue;
		}
		if (f->after > f->before)
			made += f->after - f->before;
		if (!complete)
			partial++;
	}
	if (w->skipped)
		snprintf(nskip, sizeof(nskip), ", %zu skipped", w->skipped);
	printf("warmed %zu files (%zu already cached, %zu failed%s): %" PRIu64
	       " bytes read, %" PRIu64 " bytes made cached, %.1f s, %.1f MB/s\n",
	       files - w->skipped, skipped, w->failed, nskip, read_bytes,
	       made, el, el > 0 ? (double)read_bytes / el / 1e6 : 0.0);
	if (partial)
		printf("%zu files are still not fully cached (cache full, "
		       "below bstop, or changed meanwhile)\n", partial);
	return w->failed ? 1 : 0;
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
			if (add_file(&w, rp)) {
				free(rp);
				ret = 1;
				goto out;
			}
		} else if (S_ISDIR(st.st_mode) &&
			   (ret = walk_tree(&w, rp)) < 0) {
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
	ask_all(&w);
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
