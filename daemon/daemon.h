/* daemon.h - the process around the request path (daemon/): start-up and
 * options, signals and the bounded stop, the control socket, the metrics
 * endpoint, the takeover (takeover/). Above gateway/, whose gateway.h
 * it includes: it holds the request path as an opaque struct gw, beside
 * its own state (struct gw_proc); nothing below includes this.
 *
 * main.c:     the command line; a takeover asked for, or a new mount;
 *             supervised or not.
 * background.c: the fork whose parent waits for the start-up verdict;
 *             the detach once serving.
 * serve.c:    one serving process: start-up, the session loop, the
 *             handover or the stop, teardown.
 * opts.c:     -o option parsing and validation (struct gw_opts:
 *             gateway.h).
 * opts_table.c: every option's row (name, default, range, help) and
 *             --help printed from it.
 * drain.c:    signals (HUP, INT, TERM), detaching, the bounded stop.
 * ctl.c:      the control socket (cachegw-inspect).
 * counters.c: every metric, as `stats` or for Prometheus.
 * ctl_warm.c: control commands for cachegw-inspect warm.
 * metrics.c:  the Prometheus HTTP endpoint (metrics=).
 * origin_root.c: the export's root handle kept for offline starts.
 * pidfile.c:  pidfile=, followed across upgrades.
 * takeover/:  one connection served by one process after another: an
 *             upgrade in place, a successor's start (doc/takeover.md);
 *             its own map and calls in takeover/takeover_i.h.
 * supervise.c: -o supervise: a supervisor that keeps the connection and
 *             starts a successor when the serving process dies.
 */
#ifndef CACHEGW_DAEMON_H
#define CACHEGW_DAEMON_H

#include <pthread.h>

#include "gateway.h"

/* Control-socket threads: each takes the next client, so a slow command
 * (`cached` waiting on the origin, `drain`) does not hold up `stats`. */
#define GW_CTL_THREADS 16

/* One serving process (serve.c makes it): what it opened and hands to
 * the request path (struct gw, which uses them and closes none), and the
 * state of the threads around it. */
struct gw_proc {
	struct gw_opts *o;		/* set at start */
	struct gw *gw;			/* the request path; set at start */
	struct nfsc *nfs;		/* set at start (NULL once closed);
					 * thread-safe */
	struct cache *cache;		/* set at start (NULL: no cache);
					 * thread-safe */
	struct nodes *nodes;		/* persistent node-id table; set at
					 * start; thread-safe */
	struct nodes_md *md;		/* kept metadata; set at start (NULL:
					 * none); thread-safe */
	struct fuse_session *se;	/* set at start */
	bool successor;			/* serves a connection another process
					 * made (gw_state.h); set at start */
	bool fill_started;		/* main thread only */
	/* the takeover (takeover/) */
	int takeover_fd;		/* the successor's connection, once it
					 * asked (atomic; -1: none) */
	int handover_fuse_fd;		/* main thread: the connection, kept
					 * for the successor */
	int sup_fd;			/* to the supervisor (-1: none) */
	int handover_phase;		/* whether the main thread (1) or the
					 * drain thread (2, its commits
					 * unfinished) hands over; atomic */
	/* control socket: set by gw_ctl_start, used by the ctl threads,
	 * torn down by gw_ctl_stop after joining them */
	int ctl_fd;
	int ctl_stop[2];
	struct gw_ctl_thread {
		struct gw_proc *pr;
		pthread_t tid;
		unsigned idx;		/* 0 also does the 5 s housekeeping */
	} ctl_threads[GW_CTL_THREADS];
	unsigned ctl_nthreads;		/* started */
	char *ctl_path;
	/* accept4() failures of the ctl threads, for gw_accept_failed's
	 * rate-limited log line: atomic */
	uint64_t ctl_accept_log, ctl_accept_errs;
	/* metrics= endpoint: set by gw_metrics_start, used by its thread,
	 * torn down by gw_metrics_stop after joining it */
	int metrics_fd;
	int metrics_stop[2];
	pthread_t metrics_thread;
};

/* ---- opts.c ---- */
/* 0, 1 (help or version printed: exit 0), -1 (a one-line reason on
 * stderr). */
int gw_opts_parse(int argc, char **argv, struct gw_opts *o);
void gw_opts_free(struct gw_opts *o);

/* ---- opts_table.c: the options, one row each ---- */
/* The options a row cannot parse by its kind alone (opts.c's opt_proc). */
enum gw_opt_key {
	GW_OPTKEY_HELP, GW_OPTKEY_VERSION, GW_OPTKEY_FG, GW_OPTKEY_DEBUG,
	GW_OPTKEY_ACTIMEO, GW_OPTKEY_METRICS,
	GW_OPTKEY_PASS,			/* a mount flag for the kernel */
	GW_OPTKEY_IGNORE,		/* accepted, no effect */
	GW_OPTKEY_ROW = 1000,		/* + a row's index: parsed by its kind */
};

enum gw_opt_kind {
	GW_OPT_SECTION,			/* a heading of --help, not an option */
	GW_OPT_NUM,			/* a decimal number, min..max */
	GW_OPT_SIZE,			/* bytes, K/M/G/T suffixes, min..max */
	GW_OPT_STR,			/* a string, copied */
	GW_OPT_CHOICE,			/* one of words, stored as its index */
	GW_OPT_FLAG,			/* no value: the field becomes 1 (name)
					 * or 0 (words: the negation) */
	GW_OPT_KEY,			/* parsed by opt_proc's case for key */
};

#define GW_OPTF_POW2	1u		/* a power of two */
#define GW_OPTF_OR_ZERO	2u		/* 0, or min..max */

/* One option: what the parser accepts and sets, the default it starts
 * from, and what --help prints. */
struct gw_opt_row {
	const char *name;
	enum gw_opt_kind kind;
	size_t off, size;		/* its field of struct gw_opts */
	uint64_t def, min, max;
	unsigned flags;			/* GW_OPTF_* */
	const char *words;		/* GW_OPT_CHOICE: "a|b|c"; GW_OPT_FLAG:
					 * the negation (NULL: none) */
	int key;			/* GW_OPT_KEY: a GW_OPTKEY_* */
	const char *arg;		/* the value's name in --help ("N") */
	const char *defword;		/* the default in words, printed
					 * instead of def ("no cap"; NULL:
					 * def, none for STR and KEY) */
	const char *help;		/* --help's line (NULL: not listed) */
};

extern const struct gw_opt_row gw_opt_table[];
extern const size_t gw_opt_rows;
/* --help: the usage, then every row that has a help line. */
void gw_usage(const char *prog);
/* "64K": bytes in the largest unit that divides them. */
void gw_fmt_size(uint64_t v, char *buf, size_t len);
/* The words of a choice ("a|b|c") as "a SEP b LAST c". */
void gw_opt_words(const char *words, const char *sep, const char *last,
		  char *buf, size_t len);

/* ---- drain.c: signals and the stop (see the file's comment) ----
 * Its lock is taken before the handle list's (handles.c), and never by a
 * FUSE request. */
int gw_drain_block_signals(void);	/* before the first thread starts */
int gw_drain_start(struct gw_proc *pr);	/* then: start the signal thread */
void gw_drain_mounted(void);		/* the mount is made */
int gw_drain_serving(void);		/* on the loop's thread, before it */
/* The session loop returned: the commits at exit are timed from now.
 * True if the gateway detached the mount itself; then the connection is
 * ended here, and fuse_session_unmount only closes it. */
bool gw_drain_loop_ended(struct gw_proc *pr);
void gw_drain_stop(int status);		/* the exit path is done */
/* A takeover was asked for (takeover/takeover_ctl.c): stop the loop as a
 * second SIGTERM would, without detaching; -EBUSY unless serving. When
 * the commits after the loop take drain_timeout=, the drain thread calls
 * late(pr) once: it hands the connection over without them, or returns
 * if the main thread got past them meanwhile (then the commits at exit
 * get drain_timeout= once more). */
int gw_drain_takeover(void (*late)(struct gw_proc *pr));
/* A successor's exit path: its session never mounted, so libfuse does not
 * unmount: detach the mount if it is still ours. */
void gw_drain_detach_if_ours(void);


/* ---- pidfile.c ---- */
/* pidfile=: this process's pid, written atomically; removed at exit
 * unless a successor has written its own (after a handover: left to the
 * new process). */
void gw_pidfile_write(const struct gw_opts *o);
void gw_pidfile_remove(const struct gw_opts *o);


/* ---- supervise.c: a crash survived ---- */
/* Runs the gateway in a child and starts a successor when it dies; fds:
 * the connection and state to serve (-1: a new mount); origin: as for
 * gw_serve, the first child's (the supervisor drops its copy). The exit
 * status. */
int gw_supervise(struct gw_opts *o, const int fds[2], struct nfsc *origin,
		 int notify_fd);


/* ---- serve.c ---- */
/* The origin's connection options, from the gateway's; caller: room
 * for the NLM caller name no points to (192 bytes). */
void gw_origin_opts(const struct gw_opts *o, struct nfsc_opts *no,
		    char *caller, size_t clen);
/* One serving process. fds as above; origin: the origin already
 * reached (an upgrade connects and mounts before it asks the serving
 * process to stop, so that its pause holds no round trip of that), now
 * this process's, or NULL; sup_fd: to the supervisor (-1: none);
 * notify_fd: the start-up verdict's pipe (-1: none). The exit status. */
int gw_serve(struct gw_opts *o, const int fds[2], struct nfsc *origin,
	     int sup_fd, int notify_fd);


/* ---- background.c ---- */
/* Fork; the parent waits for the child's verdict (*notify_fd, the pipe's
 * end the child keeps) and exits with it. 0 in the child, or -errno. */
int gw_daemon_fork(int *notify_fd);
/* Tell the parent (once; nothing if *notify_fd is -1). */
void gw_daemon_notify(int *notify_fd, unsigned char status);
/* Standard streams to /dev/null, the log to its file or syslog. */
void gw_daemon_detach(const struct gw_opts *o);


/* ---- origin_root.c ---- */
/* The root handle kept in cache_dir, and where from ("SERVER:EXPORT");
 * -ENOENT if none is kept, -EINVAL if the file is damaged. */
int gw_origin_root_load(const char *cache_dir, char *where, size_t wlen,
			struct nfsc_fh *fh);
/* Keep it (if it is not what is kept already). */
int gw_origin_root_save(const char *cache_dir, const char *server,
			const char *export, const struct nfsc_fh *fh);


/* ---- ctl.c ---- */
int gw_ctl_start(struct gw_proc *pr, const char *dir);
void gw_ctl_stop(struct gw_proc *pr);
/* accept4() on a listening socket failed with err. For the errors that
 * leave the connection pending (EMFILE, ENFILE, ENOMEM, ...: poll() would
 * wake again at once), log at most once per GW_ACCEPT_LOG_S per endpoint
 * (*last_log, *count: that endpoint's state, shared by its threads) and
 * return the milliseconds to wait before the next accept; 0 for the
 * harmless ones (EAGAIN: another thread took it, ECONNABORTED, EINTR). */
#define GW_ACCEPT_PAUSE_MS 100
#define GW_ACCEPT_LOG_S 10
int gw_accept_failed(const char *what, int err, uint64_t *last_log,
		     uint64_t *count);


/* ---- counters.c ---- */
/* Every metric, as `stats` (prometheus false) or in the Prometheus text
 * exposition format (with the histograms): for both endpoints. */
void gw_metrics_print(struct gw_proc *pr, FILE *out, bool prometheus);


/* ---- ctl_warm.c: control commands for cachegw-inspect warm ---- */
/* "mountpoint", "cached REL-PATH", "drain": reply to out; cr: the
 * client's credentials (its LOOKUPs go to the origin as them). */
void gw_ctl_mountpoint(struct gw_proc *pr, FILE *out);
void gw_ctl_cached(struct gw_proc *pr, const struct nfsc_cred *cr,
		   const char *rel, FILE *out);
void gw_ctl_drain(struct gw_proc *pr, FILE *out);


/* ---- metrics.c: GET /metrics over HTTP, on its own thread ---- */
/* Bind o->metrics_addr and start serving; 0 at once if metrics= is unset.
 * -errno (nothing started) if the address cannot be bound. */
int gw_metrics_start(struct gw_proc *pr);
void gw_metrics_stop(struct gw_proc *pr);
/* "127.0.0.1:9100" or "[::1]:9100", for messages. */
void gw_metrics_describe(const struct gw_opts *o, char *buf, size_t len);

#endif
