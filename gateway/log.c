/* log.c - one-line log messages.
 *
 * In the foreground they go to stderr. Once the daemon detaches, stderr is
 * a pipe read by a thread that forwards each line to syslog (or appends it
 * to logfile=), so that lower layers may simply write to stderr.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "gw_i.h"

static pthread_t log_thread;
static bool log_thread_running;
static int log_pipe_rd = -1;

void gw_log(const char *fmt, ...)
{
	char line[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	fprintf(stderr, "cachegw: %s\n", line);
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

int gw_log_detach(const char *logfile)
{
	int p[2];

	if (logfile) {
		int fd = open(logfile, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC,
			      0600);

		if (fd < 0)
			return -errno;
		dup2(fd, STDERR_FILENO);
		close(fd);
		return 0;
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
	return 0;
}

void gw_log_stop(void)
{
	int fd;

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
