/* metrics.c - the metrics= endpoint: Prometheus text format over HTTP.
 *
 * `GET /metrics` answers what the control socket's `prometheus` command
 * does (gw_metrics_print); any other path is 404, any other method 405.
 * An HTTP/1.0-style responder: one request per connection, the reply
 * carries Content-Length and Connection: close, and the connection is
 * closed after it. One thread serves clients one after another, as
 * scrapers are few and a scrape is a few KiB; every socket is
 * non-blocking and each client gets GW_METRICS_DEADLINE_MS in all, so a
 * client that stalls delays the next scrape at most that long and never
 * touches the gateway's other threads. A request head longer than
 * GW_METRICS_REQ_MAX is refused (431).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gw_i.h"

#define GW_METRICS_REQ_MAX 4096
#define GW_METRICS_DEADLINE_MS 2000

/* Milliseconds left until deadline (gw_now_ns), 0 if past. */
static int ms_left(uint64_t deadline)
{
	uint64_t now = gw_now_ns();

	return now >= deadline ? 0 : (int)((deadline - now) / 1000000 + 1);
}

/* Wait for fd to be ready for events, or the stop pipe, or the deadline:
 * 0 when ready, -ETIMEDOUT, -ECANCELED (stopping). */
static int wait_fd(struct gw *gw, int fd, short events, uint64_t deadline)
{
	for (;;) {
		struct pollfd p[2] = {
			{ .fd = fd, .events = events },
			{ .fd = gw->metrics_stop[0], .events = POLLIN },
		};
		int ms = ms_left(deadline), n;

		if (!ms)
			return -ETIMEDOUT;
		n = poll(p, 2, ms);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (p[1].revents)
			return -ECANCELED;
		if (p[0].revents)
			return 0;
	}
}

static int send_all(struct gw *gw, int fd, const char *buf, size_t len,
		    uint64_t deadline)
{
	while (len) {
		ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);
		int ret;

		if (n > 0) {
			buf += n;
			len -= (size_t)n;
			continue;
		}
		if (n < 0 && errno != EAGAIN && errno != EINTR)
			return -errno;
		ret = wait_fd(gw, fd, POLLOUT, deadline);
		if (ret)
			return ret;
	}
	return 0;
}

/* Read the request head (up to the empty line) into buf. 0, -EMSGSIZE
 * (too long), or the error that ends the connection. */
static int read_head(struct gw *gw, int fd, char *buf, size_t size,
		     uint64_t deadline)
{
	size_t got = 0;

	for (;;) {
		ssize_t n = recv(fd, buf + got, size - 1 - got, 0);
		int ret;

		if (n > 0) {
			got += (size_t)n;
			buf[got] = 0;
			if (strstr(buf, "\r\n\r\n") || strstr(buf, "\n\n"))
				return 0;
			if (got == size - 1)
				return -EMSGSIZE;
			continue;
		}
		if (n == 0)
			return -ECONNRESET;	/* closed before a full head */
		if (errno != EAGAIN && errno != EINTR)
			return -errno;
		ret = wait_fd(gw, fd, POLLIN, deadline);
		if (ret)
			return ret;
	}
}

#define GW_PROM_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* Send a whole reply: head, then (unless HEAD) len bytes of body. */
static int reply(struct gw *gw, int fd, const char *status,
		 const char *extra, const char *type, const char *body,
		 size_t len, bool head, uint64_t deadline)
{
	char hdr[512];
	int n, ret;

	n = snprintf(hdr, sizeof(hdr),
		     "HTTP/1.0 %s\r\n"
		     "Content-Type: %s\r\n"
		     "Content-Length: %zu\r\n"
		     "%s"
		     "Connection: close\r\n\r\n", status, type, len,
		     extra ? extra : "");
	ret = send_all(gw, fd, hdr, (size_t)n, deadline);
	if (!ret && !head && len)
		ret = send_all(gw, fd, body, len, deadline);
	return ret;
}

/* An error reply with its status line as the body. */
static void reply_err(struct gw *gw, int fd, const char *status,
		      const char *extra, bool head, uint64_t deadline)
{
	char body[128];
	int n = snprintf(body, sizeof(body), "%s (try GET /metrics)\n",
			 status);

	reply(gw, fd, status, extra, "text/plain; charset=utf-8", body,
	      (size_t)n, head, deadline);
}

static void serve_client(struct gw *gw, int fd)
{
	uint64_t deadline = gw_now_ns() +
			    (uint64_t)GW_METRICS_DEADLINE_MS * 1000000;
	char req[GW_METRICS_REQ_MAX], *method, *target, *save;
	char *body = NULL;
	size_t len = 0;
	bool head;
	FILE *out;
	int ret;

	ret = read_head(gw, fd, req, sizeof(req), deadline);
	if (ret == -EMSGSIZE) {
		reply_err(gw, fd, "431 Request Header Fields Too Large", NULL,
			  false, deadline);
		return;
	}
	if (ret)
		return;		/* timed out, closed, or stopping */
	method = strtok_r(req, " \t\r\n", &save);
	target = method ? strtok_r(NULL, " \t\r\n", &save) : NULL;
	if (!target) {
		reply_err(gw, fd, "400 Bad Request", NULL, false, deadline);
		return;
	}
	head = !strcmp(method, "HEAD");
	if (!head && strcmp(method, "GET")) {
		reply_err(gw, fd, "405 Method Not Allowed",
			  "Allow: GET, HEAD\r\n", false, deadline);
		return;
	}
	/* A query string is ignored, as by other exporters. */
	target[strcspn(target, "?")] = 0;
	if (strcmp(target, "/metrics")) {
		reply_err(gw, fd, "404 Not Found", NULL, head, deadline);
		return;
	}
	out = open_memstream(&body, &len);
	if (!out) {
		reply_err(gw, fd, "500 Internal Server Error", NULL, head,
			  deadline);
		return;
	}
	gw_metrics_print(gw, out, true);
	if (fclose(out) != 0)
		reply_err(gw, fd, "500 Internal Server Error", NULL, head,
			  deadline);
	else
		reply(gw, fd, "200 OK", NULL, GW_PROM_TYPE, body, len, head,
		      deadline);
	free(body);
}

static void *metrics_thread(void *arg)
{
	struct gw *gw = arg;

	for (;;) {
		struct pollfd p[2] = {
			{ .fd = gw->metrics_fd, .events = POLLIN },
			{ .fd = gw->metrics_stop[0], .events = POLLIN },
		};
		int fd, n = poll(p, 2, -1);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			gw_log("metrics: poll: %s; endpoint stopped",
			       strerror(errno));
			break;
		}
		if (p[1].revents)
			break;
		fd = accept4(gw->metrics_fd, NULL, NULL,
			     SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (fd < 0)
			continue;	/* gone already, or out of fds: next */
		serve_client(gw, fd);
		close(fd);
	}
	return NULL;
}

void gw_metrics_describe(const struct gw_opts *o, char *buf, size_t len)
{
	char a[INET6_ADDRSTRLEN] = "?";

	if (o->metrics_addr.ss_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const void *)&o->metrics_addr;

		inet_ntop(AF_INET6, &s6->sin6_addr, a, sizeof(a));
		snprintf(buf, len, "[%s]:%u", a, ntohs(s6->sin6_port));
	} else {
		const struct sockaddr_in *s4 = (const void *)&o->metrics_addr;

		inet_ntop(AF_INET, &s4->sin_addr, a, sizeof(a));
		snprintf(buf, len, "%s:%u", a, ntohs(s4->sin_port));
	}
}

int gw_metrics_start(struct gw *gw)
{
	const struct gw_opts *o = gw->o;
	int one = 1, ret;

	gw->metrics_fd = -1;
	if (!o->metrics_len)
		return 0;
	gw->metrics_fd = socket(o->metrics_addr.ss_family,
				SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (gw->metrics_fd < 0)
		return -errno;
	/* A restart must not wait out the last scrape's TIME_WAIT. */
	setsockopt(gw->metrics_fd, SOL_SOCKET, SO_REUSEADDR, &one,
		   sizeof(one));
	if (bind(gw->metrics_fd, (const struct sockaddr *)&o->metrics_addr,
		 o->metrics_len) < 0 || listen(gw->metrics_fd, 16) < 0)
		goto out_errno;
	if (pipe2(gw->metrics_stop, O_CLOEXEC) < 0)
		goto out_errno;
	ret = pthread_create(&gw->metrics_thread, NULL, metrics_thread, gw);
	if (ret) {
		close(gw->metrics_stop[0]);
		close(gw->metrics_stop[1]);
		errno = ret;
		goto out_errno;
	}
	return 0;

out_errno:
	ret = -errno;
	close(gw->metrics_fd);
	gw->metrics_fd = -1;
	return ret;
}

void gw_metrics_stop(struct gw *gw)
{
	if (gw->metrics_fd < 0)
		return;
	if (write(gw->metrics_stop[1], "x", 1) != 1)
		gw_log("metrics: stop: %s", strerror(errno));
	pthread_join(gw->metrics_thread, NULL);
	close(gw->metrics_stop[0]);
	close(gw->metrics_stop[1]);
	close(gw->metrics_fd);
	gw->metrics_fd = -1;
}
