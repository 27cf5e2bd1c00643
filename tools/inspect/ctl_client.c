/* ctl_client.c - the client side of a live gateway's control socket:
 * ask a question, read the whole answer, pick a counter out of it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "cache.h"
#include "inspect_i.h"

static int ctl_connect(const char *dir)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int fd, dirfd, ret;

	ret = cache_ctl_sockaddr(dir, &sun, &dirfd);
	if (ret < 0)
		return ret;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		ret = -errno;
		goto out;
	}
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
		ret = -errno;
		close(fd);
		goto out;
	}
	ret = fd;
out:
	if (dirfd >= 0)
		close(dirfd);
	return ret;
}

int ctl_ask(const char *dir, const char *cmd, char **reply)
{
	size_t len = strlen(cmd), cap = 4096, got = 0;
	char *buf = NULL, *line;
	ssize_t n;
	int fd, ret = 0;

	*reply = NULL;
	fd = ctl_connect(dir);
	if (fd < 0)
		return fd;
	line = malloc(len + 1);
	buf = malloc(cap);
	if (!line || !buf) {
		ret = -ENOMEM;
		goto out;
	}
	memcpy(line, cmd, len);
	line[len] = '\n';
	if (write(fd, line, len + 1) != (ssize_t)(len + 1)) {
		ret = errno ? -errno : -EIO;
		goto out;
	}
	shutdown(fd, SHUT_WR);
	for (;;) {
		if (got + 1 >= cap) {
			char *nb = realloc(buf, cap * 2);

			if (!nb) {
				ret = -ENOMEM;
				goto out;
			}
			buf = nb;
			cap *= 2;
		}
		n = read(fd, buf + got, cap - 1 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			ret = -errno;
			goto out;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	buf[got] = 0;
	*reply = buf;
	buf = NULL;
out:
	free(line);
	free(buf);
	close(fd);
	return ret;
}

void ctl_perror(const char *dir, int ret)
{
	if (ret == -ENOENT || ret == -ECONNREFUSED)
		fprintf(stderr, "%s: no live cachegw on %s\n", prog, dir);
	else
		fprintf(stderr, "%s: control socket of %s: %s\n", prog, dir,
			strerror(-ret));
}

bool ctl_stat(const char *stats, const char *name, uint64_t *v)
{
	size_t nl = strlen(name);
	const char *p = stats;

	while (p && *p) {
		if (!strncmp(p, name, nl) && (p[nl] == ' ' || p[nl] == '\t')) {
			*v = strtoull(p + nl, NULL, 10);
			return true;
		}
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	return false;
}
