/* background.c - a daemon's start: the process forks first (unless -f)
 * and the parent waits on a pipe until the child has reached the origin,
 * opened the cache and mounted, so every failure is printed on the user's
 * terminal and reflected in the exit status, and no thread is lost to a
 * fork after it was started; once it serves, its standard streams go to
 * /dev/null and its log to logfile= or syslog.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "daemon.h"

int gw_daemon_fork(int *notify_fd)
{
	int p[2];
	pid_t pid;
	unsigned char status;

	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid > 0) {
		close(p[1]);
		if (read(p[0], &status, 1) != 1)
			status = EXIT_FAILURE;	/* died before saying */
		_exit(status);
	}
	close(p[0]);
	setsid();
	/* A daemon keeps nothing it inherited but the standard streams
	 * (daemon(7)): a descriptor of a file on the mount it is about to
	 * serve (an upgrade run from a shell holding one) would be closed
	 * only when the process exits, by a FLUSH that waits for an answer
	 * from the process itself: its exit would never end, and no
	 * successor could start (seen with a supervisor, test 96). */
	if (p[1] > 3)
		close_range(3, (unsigned)p[1] - 1, 0);
	close_range((unsigned)p[1] + 1, ~0U, 0);
	*notify_fd = p[1];
	return 0;
}

void gw_daemon_notify(int *notify_fd, unsigned char status)
{
	if (*notify_fd < 0)
		return;
	if (write(*notify_fd, &status, 1) != 1)
		perror("cachegw: notify parent");
	close(*notify_fd);
	*notify_fd = -1;
}

void gw_daemon_detach(const struct gw_opts *o)
{
	int fd = open("/dev/null", O_RDWR);

	if (chdir("/") < 0)
		perror("cachegw: chdir /");
	if (fd >= 0) {
		dup2(fd, STDIN_FILENO);
		dup2(fd, STDOUT_FILENO);
		close(fd);
	}
	if (gw_log_detach(o->logfile) < 0)
		fprintf(stderr, "cachegw: cannot set up logging\n");
}
