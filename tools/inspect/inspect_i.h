/* inspect_i.h - private to cachegw-inspect, one section per file.
 *
 * inspect.c: the command line and the offline subcommands (ls, show,
 *            verify, evict) and stats.
 * ctl_client.c: the client side of a live gateway's control socket.
 * warm.c:    warm: read files through the mount into the cache; the
 *            command line, the mount and the PATHs, the dry run.
 * warm_files.c: warm's list of files, and what the gateway caches of
 *            each.
 * warm_walk.c: warm's walk of the directories given.
 * warm_read.c: warm's readers and its report.
 * top.c:     top: rates from the gateway's counters, once a second.
 */
#ifndef CACHEGW_INSPECT_I_H
#define CACHEGW_INSPECT_I_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define EXIT_USAGE 2

extern const char *prog;

/* ---- ctl_client.c ----
 * Protocol (served by daemon/ctl.c): connect to DIR/control.sock, send
 * one line, read the reply until the gateway closes the connection. */
/* Send cmd (without newline); *reply gets the whole reply, NUL-ended
 * (free it). 0, -ECONNREFUSED/-ENOENT (no live gateway), -errno. */
int ctl_ask(const char *dir, const char *cmd, char **reply);
/* Print a one-line reason for ctl_ask's ret. */
void ctl_perror(const char *dir, int ret);
/* Counter NAME (without "cachegw_") from a `stats` reply; false if none. */
bool ctl_stat(const char *stats, const char *name, uint64_t *v);

/* ---- warm.c, top.c: argc/argv from the subcommand's name on ---- */
int cmd_warm(int argc, char **argv);
int cmd_top(int argc, char **argv);

/* ---- warm: what it knows of the mount and each file ---- */
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

/* ---- warm_files.c ---- */
/* Add path (absolute, under the mount) to the list; w->out_lock held
 * where threads may add at once. 0 or -ENOMEM. */
int warm_add_file(struct warm *w, const char *path);
/* Ask the gateway what it caches of f. 0, or -1 (f->failed, told). */
int warm_ask_cached(struct warm *w, struct wfile *f, uint64_t *cached,
		    bool *complete);
/* Each file's f->before and f->complete, WARM_META_JOBS questions at
 * once; a file that cannot be asked about is failed (told). */
void warm_ask_all(struct warm *w);

/* ---- warm_walk.c ---- */
/* Walk the directory at path (resolved, below the mount). 0 or -errno. */
int warm_walk_tree(struct warm *w, const char *path);

/* ---- warm_read.c ---- */
/* Read what is missing with jobs threads; report. 0, or 1 on a failure. */
int warm_read(struct warm *w, unsigned jobs, size_t files, uint64_t total);

#endif
