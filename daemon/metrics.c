/* metrics.c - the metrics= endpoint: Prometheus text format over HTTP.
 *
 * `GET /metrics` answers what the control socket's `prometheus` command
 * does (gw_metrics_print); any other path is 404, any other method 405.
 * An HTTP/1.0-style responder: one request per connection, the reply
 * carries Content-Length and Connection: close, and the connection is
 * closed after it. One thread serves up to GW_METRICS_CONNS clients at
 * once with poll(): every socket is non-blocking, each client has
 * GW_METRICS_DEADLINE_MS in all (request and reply) and is closed then,
 * and when all slots are taken a new client takes the oldest one's. So
 * idle or slow clients cannot keep a scrape from being answered, and
 * never touch the gateway's other threads. A request head longer than
 * GW_METRICS_REQ_MAX is refused (431). Out of file descriptors, accept
 * pauses (gw_accept_failed) instead of spinning.
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

#include "daemon.h"

#define GW_METRICS_REQ_MAX 4096
#define GW_METRICS_DEADLINE_MS 10000
#define GW_METRICS_CONNS 32

struct mconn {
	int fd;			/* -1: a free slot */
	uint64_t deadline;	/* gw_now_ns() */
	uint64_t seq;		/* accept order: the oldest goes first */
	size_t got;		/* bytes of request head in req */
	char *out;		/* the whole reply; NULL while reading */
	size_t out_len, out_off;
	char req[GW_METRICS_REQ_MAX];
};

#define GW_PROM_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* The whole reply (head, then unless HEAD the body) into c->out. */
static void reply(struct mconn *c, const char *status, const char *extra,
		  const char *type, const char *body, size_t len, bool head)
{
	char *out = NULL;
	size_t outlen = 0;
	FILE *f = open_memstream(&out, &outlen);

	if (!f)
		return;
	fprintf(f, "HTTP/1.0 %s\r\n"
		"Content-Type: %s\r\n"
		"Content-Length: %zu\r\n"
		"%s"
		"Connection: close\r\n\r\n", status, type, len,
		extra ? extra : "");
	if (!head && len)
		fwrite(body, 1, len, f);
	if (fclose(f) != 0) {
		free(out);
		return;
	}
	c->out = out;
	c->out_len = outlen;
	c->out_off = 0;
}

/* An error reply with its status line as the body. */
static void reply_err(struct mconn *c, const char *status, const char *extra,
		      bool head)
{
	char body[128];
	int n = snprintf(body, sizeof(body), "%s (try GET /metrics)\n",
			 status);

	reply(c, status, extra, "text/plain; charset=utf-8", body, (size_t)n,
	      head);
}

/* The request head in c->req is whole: make the reply. */
static void answer(struct gw_proc *pr, struct mconn *c)
{
	char *method, *target, *save, *body = NULL;
	size_t len = 0;
	bool head;
	FILE *out;

	method = strtok_r(c->req, " \t\r\n", &save);
	target = method ? strtok_r(NULL, " \t\r\n", &save) : NULL;
	if (!target) {
		reply_err(c, "400 Bad Request", NULL, false);
		return;
	}
	head = !strcmp(method, "HEAD");
	if (!head && strcmp(method, "GET")) {
		reply_err(c, "405 Method Not Allowed", "Allow: GET, HEAD\r\n",
			  false);
		return;
	}
	/* A query string is ignored, as by other exporters. */
	target[strcspn(target, "?")] = 0;
	if (strcmp(target, "/metrics")) {
		reply_err(c, "404 Not Found", NULL, head);
		return;
	}
	out = open_memstream(&body, &len);
	if (!out) {
		reply_err(c, "500 Internal Server Error", NULL, head);
		return;
	}
	gw_metrics_print(pr, out, true);
	if (fclose(out) != 0)
		reply_err(c, "500 Internal Server Error", NULL, head);
	else
		reply(c, "200 OK", NULL, GW_PROM_TYPE, body, len, head);
	free(body);
}

static void conn_close(struct mconn *c)
{
	close(c->fd);
	c->fd = -1;
	free(c->out);
	c->out = NULL;
}

/* Read what the client sent, answer once the head is whole, send what
 * the socket takes. Returns false when the connection is done (closed
 * by the caller). */
static bool conn_step(struct gw_proc *pr, struct mconn *c)
{
	while (!c->out) {
		ssize_t n = recv(c->fd, c->req + c->got,
				 sizeof(c->req) - 1 - c->got, 0);

		if (n == 0)
			return false;	/* closed before a whole head */
		if (n < 0)
			return errno == EAGAIN || errno == EINTR;
		c->got += (size_t)n;
		c->req[c->got] = 0;
		if (strstr(c->req, "\r\n\r\n") || strstr(c->req, "\n\n"))
			answer(pr, c);
		else if (c->got == sizeof(c->req) - 1)
			reply_err(c, "431 Request Header Fields Too Large",
				  NULL, false);
		else
			continue;
		if (!c->out)
			return false;	/* out of memory: nothing to say */
	}
	while (c->out_off < c->out_len) {
		ssize_t n = send(c->fd, c->out + c->out_off,
				 c->out_len - c->out_off, MSG_NOSIGNAL);

		if (n < 0)
			return errno == EAGAIN || errno == EINTR;
		c->out_off += (size_t)n;
	}
	return false;		/* all sent */
}

/* A slot for a new client: a free one, else the oldest client's. */
static struct mconn *conn_slot(struct mconn *cs)
{
	struct mconn *old = &cs[0];

	for (unsigned i = 0; i < GW_METRICS_CONNS; i++) {
		if (cs[i].fd < 0)
			return &cs[i];
		if (cs[i].seq < old->seq)
			old = &cs[i];
	}
	conn_close(old);
	return old;
}

static void *metrics_thread(void *arg)
{
	struct gw_proc *pr = arg;
	struct mconn *cs = calloc(GW_METRICS_CONNS, sizeof(*cs));
	struct pollfd p[GW_METRICS_CONNS + 2];
	struct mconn *pc[GW_METRICS_CONNS];
	uint64_t seq = 0, pause_until = 0, accept_log = 0, accept_errs = 0;

	if (!cs) {
		gw_log("metrics: out of memory; endpoint stopped");
		return NULL;
	}
	for (unsigned i = 0; i < GW_METRICS_CONNS; i++)
		cs[i].fd = -1;
	for (;;) {
		uint64_t now = gw_now_ns(), next = UINT64_MAX;
		unsigned np = 0, stop_i;
		int n, ms, listen_i;

		/* Clients past their deadline are closed. */
		for (unsigned i = 0; i < GW_METRICS_CONNS; i++) {
			struct mconn *c = &cs[i];

			if (c->fd < 0)
				continue;
			if (now >= c->deadline) {
				conn_close(c);
				continue;
			}
			if (c->deadline < next)
				next = c->deadline;
			pc[np] = c;
			p[np++] = (struct pollfd){ .fd = c->fd,
				.events = c->out ? POLLOUT : POLLIN };
		}
		stop_i = np;
		p[np++] = (struct pollfd){ .fd = pr->metrics_stop[0],
					   .events = POLLIN };
		/* While accept pauses (out of fds), the pending client would
		 * wake poll() at once: the listening socket waits. */
		listen_i = -1;
		if (now >= pause_until) {
			listen_i = (int)np;
			p[np++] = (struct pollfd){ .fd = pr->metrics_fd,
						   .events = POLLIN };
		} else if (pause_until < next) {
			next = pause_until;
		}
		ms = next == UINT64_MAX ? -1 :
		     (int)((next - now) / 1000000 + 1);
		n = poll(p, np, ms);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			gw_log("metrics: poll: %s; endpoint stopped",
			       strerror(errno));
			break;
		}
		/* The stop pipe is never read. */
		if (p[stop_i].revents)
			break;
		for (unsigned i = 0; i < stop_i; i++)
			if (p[i].revents && !conn_step(pr, pc[i]))
				conn_close(pc[i]);
		if (listen_i >= 0 && p[listen_i].revents) {
			struct mconn *c;
			int fd = accept4(pr->metrics_fd, NULL, NULL,
					 SOCK_CLOEXEC | SOCK_NONBLOCK);

			if (fd < 0) {
				int pause = gw_accept_failed("metrics", errno,
							     &accept_log,
							     &accept_errs);

				if (pause)
					pause_until = gw_now_ns() +
						(uint64_t)pause * 1000000;
				continue;
			}
			c = conn_slot(cs);
			c->fd = fd;
			c->seq = seq++;
			c->got = 0;
			c->deadline = gw_now_ns() +
				(uint64_t)GW_METRICS_DEADLINE_MS * 1000000;
			/* The request is usually there already. */
			if (!conn_step(pr, c))
				conn_close(c);
		}
	}
	for (unsigned i = 0; i < GW_METRICS_CONNS; i++)
		if (cs[i].fd >= 0)
			conn_close(&cs[i]);
	free(cs);
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

int gw_metrics_start(struct gw_proc *pr)
{
	const struct gw_opts *o = pr->o;
	int one = 1, ret;

	pr->metrics_fd = -1;
	if (!o->metrics_len)
		return 0;
	pr->metrics_fd = socket(o->metrics_addr.ss_family,
				SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (pr->metrics_fd < 0)
		return -errno;
	/* A restart must not wait out the last scrape's TIME_WAIT. */
	setsockopt(pr->metrics_fd, SOL_SOCKET, SO_REUSEADDR, &one,
		   sizeof(one));
	if (bind(pr->metrics_fd, (const struct sockaddr *)&o->metrics_addr,
		 o->metrics_len) < 0 || listen(pr->metrics_fd, 16) < 0)
		goto out_errno;
	if (pipe2(pr->metrics_stop, O_CLOEXEC) < 0)
		goto out_errno;
	ret = pthread_create(&pr->metrics_thread, NULL, metrics_thread, pr);
	if (ret) {
		close(pr->metrics_stop[0]);
		close(pr->metrics_stop[1]);
		errno = ret;
		goto out_errno;
	}
	return 0;

out_errno:
	ret = -errno;
	close(pr->metrics_fd);
	pr->metrics_fd = -1;
	return ret;
}

void gw_metrics_stop(struct gw_proc *pr)
{
	if (pr->metrics_fd < 0)
		return;
	if (write(pr->metrics_stop[1], "x", 1) != 1)
		gw_log("metrics: stop: %s", strerror(errno));
	pthread_join(pr->metrics_thread, NULL);
	close(pr->metrics_stop[0]);
	close(pr->metrics_stop[1]);
	close(pr->metrics_fd);
	pr->metrics_fd = -1;
}
