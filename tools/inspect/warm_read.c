/* warm_read.c - `cachegw-inspect warm`, steps 3 and 4: read every file not
 * yet complete through the mount, N threads at once, each file opened
 * without trusting the tree it was found in (open_below); a progress line
 * on a terminal, a line per file otherwise; then wait for the gateway's
 * fills and report what this run made cached. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "inspect_i.h"

#define WARM_READ_SIZE (1u << 20)

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
int warm_read(struct warm *w, unsigned jobs, size_t files,
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
		if (warm_ask_cached(w, f, &f->after, &complete)) {
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
