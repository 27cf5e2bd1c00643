/* logging.c - one-line log messages.
 *
 * In the foreground they go to stderr. Once the daemon detaches, stderr is
 * a pipe read by a thread that forwards each line to syslog, so that lower
 * layers may simply write to stderr. With logfile= (in the foreground too,
 * once mounted), stderr is that file, opened for appending; SIGHUP reopens
 * it (gw_log_reopen), as logrotate expects.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <syslog.h>
#include <unistd.h>

#include "gw_i.h"

static pthread_t log_thread;
static bool log_thread_running;
static int log_pipe_rd = -1;
/* logfile=, and reopening it: the main thread sets it, the signal thread
 * (drain.c) reopens it. A leaf lock. */
static pthread_mutex_t log_path_lock = PTHREAD_MUTEX_INITIALIZER;
static char *log_path;		/* log_path_lock */

/* A daemon's lines from before it detached (gw_log_keep_early): they go
 * to the terminal of the command that started it, and again to the log
 * once it has one (an upgrade's "serving the connection of pid N" is said
 * before the new process detaches). */
#define EARLY_MAX 65536
static pthread_mutex_t early_lock = PTHREAD_MUTEX_INITIALIZER;
static bool early_keep;			/* early_lock */
static char *early;			/* early_lock */
static size_t early_len;		/* early_lock */

void gw_log_keep_early(void)
{
	pthread_mutex_lock(&early_lock);
	free(early);
	early = NULL;
	early_len = 0;
	early_keep = true;
	pthread_mutex_unlock(&early_lock);
}

static void early_add(const char *line)
{
	/* "cachegw: " LINE "\n", and snprintf's NUL */
	size_t n = strlen("cachegw: ") + strlen(line) + 2;

	pthread_mutex_lock(&early_lock);
	if (early_keep && early_len + n <= EARLY_MAX) {
		char *e = realloc(early, early_len + n);

		if (e) {
			early = e;
			early_len += (size_t)snprintf(early + early_len, n,
						      "cachegw: %s\n", line);
		}
	}
	pthread_mutex_unlock(&early_lock);
}

/* Into the log just set up: what was said before it. */
static void early_replay(void)
{
	pthread_mutex_lock(&early_lock);
	if (early_len)
		fwrite(early, 1, early_len, stderr);
	fflush(stderr);
	free(early);
	early = NULL;
	early_len = 0;
	early_keep = false;
	pthread_mutex_unlock(&early_lock);
}

void gw_log(const char *fmt, ...)
{
	char line[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	fprintf(stderr, "cachegw: %s\n", line);
	early_add(line);
}

static void *log_forward(void *arg)
{
	FILE *in = fdopen(log_pipe_rd, "r");
	char line[2048];

	(void)arg;
	if (!in)
		return NULL;
	openlog("cachegw", LOG_PID, LOG_DAEMON);
	while (fgets(line, sizeof(line), in)) {
		line[strcspn(line, "\n")] = 0;
		syslog(LOG_NOTICE, "%s", line);
	}
	closelog();
	fclose(in);
	return NULL;
}

/* Open path for appending; a file made here gets mode (not the umask's). */
static int log_open(const char *path, mode_t mode)
{
	int fd;

	for (;;) {
		fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
		if (fd >= 0 || errno != ENOENT)
			return fd < 0 ? -errno : fd;
		fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC | O_CREAT |
			  O_EXCL, mode);
		if (fd >= 0) {
			/* past the umask; if it fails, the umask's mode */
			fchmod(fd, mode);
			return fd;
		}
		if (errno != EEXIST)
			return -errno;
		/* made by someone else (logrotate's create) meanwhile */
	}
}

int gw_log_to_file(const char *logfile)
{
	char *path = strdup(logfile);
	int fd;

	if (!path)
		return -ENOMEM;
	fd = log_open(logfile, 0600);
	if (fd < 0) {
		free(path);
		return fd;
	}
	pthread_mutex_lock(&log_path_lock);
	free(log_path);
	log_path = path;
	dup2(fd, STDERR_FILENO);
	pthread_mutex_unlock(&log_path_lock);
	close(fd);
	return 0;
}

int gw_log_reopen(char *path, size_t len)
{
	struct stat st;
	mode_t mode = 0600;
	int fd = -ENOENT;

	pthread_mutex_lock(&log_path_lock);
	if (!log_path)
		goto out;
	snprintf(path, len, "%s", log_path);
	/* The file we write to may have been renamed (log -> log.1): a new
	 * one gets its mode. */
	if (fstat(STDERR_FILENO, &st) == 0 && S_ISREG(st.st_mode))
		mode = st.st_mode & 07777;
	fd = log_open(log_path, mode);
	if (fd < 0)
		goto out;
	/* Lines written before this went to the old file; dup2 swaps the
	 * descriptor atomically, so every later write goes to the new. */
	fflush(stderr);
	dup2(fd, STDERR_FILENO);
	close(fd);
	fd = 0;
out:
	pthread_mutex_unlock(&log_path_lock);
	return fd;
}

int gw_log_detach(const char *logfile)
{
	int p[2], ret;

	if (logfile) {
		ret = gw_log_to_file(logfile);
		if (!ret)
			early_replay();
		return ret;
	}
	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	log_pipe_rd = p[0];
	dup2(p[1], STDERR_FILENO);
	close(p[1]);
	setvbuf(stderr, NULL, _IOLBF, 0);
	if (pthread_create(&log_thread, NULL, log_forward, NULL) != 0) {
		close(log_pipe_rd);
		log_pipe_rd = -1;
		return -EAGAIN;
	}
	log_thread_running = true;
	early_replay();
	return 0;
}

void gw_log_stop(void)
{
	int fd;

	pthread_mutex_lock(&log_path_lock);
	free(log_path);
	log_path = NULL;
	pthread_mutex_unlock(&log_path_lock);
	if (!log_thread_running)
		return;
	/* Closing the write end ends the forwarder's read loop. */
	fflush(stderr);
	fd = open("/dev/null", O_WRONLY);
	if (fd >= 0) {
		dup2(fd, STDERR_FILENO);
		close(fd);
	}
	pthread_join(log_thread, NULL);
	log_thread_running = false;
}
