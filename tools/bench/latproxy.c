/* latproxy.c - cachegw-latproxy: a TCP proxy on 127.0.0.1 that delays each
 * direction by half a round-trip time, to put a far origin (10-50 ms away)
 * in front of a near test origin. This kernel has no netem; the bench
 * (`cachegw-bench far`) and the tests use this instead.
 *
 *   cachegw-latproxy --rtt MS [--addr A] LISTEN:UPSTREAM [LISTEN:UPSTREAM...]
 *
 * Every byte read from one side is written to the other RTT/2 after it was
 * read, in order; reading goes on meanwhile, so the delay does not limit
 * the throughput (a pipe of RTT x bandwidth bytes, at most QUEUE_MAX per
 * direction). Each connection has a thread per direction reading and one
 * writing. Prints "ready" on stdout once every port listens; SIGTERM or
 * SIGINT ends it. Errors: a message on stderr, exit 1 (2 for usage).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "worker.h"

#define CHUNK_MAX (256 * 1024)
#define QUEUE_MAX (64u << 20)
#define PORTS_MAX 8

struct chunk {
	struct chunk *next;
	uint64_t due_ns;	/* when it may be written */
	size_t len;		/* 0: end of stream */
	char data[];
};

/* One direction: from -> to, through a queue. */
struct dir {
	int from, to;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct chunk *head, *tail;
	size_t queued;
	bool dead;		/* the writer gave up: the reader stops */
	struct conn *conn;
};

struct conn {
	struct dir d[2];
	int live;		/* threads not finished (4); under lock */
	pthread_mutex_t lock;
};

static uint64_t half_rtt_ns;
static const char *addr = "127.0.0.1";

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void sleep_until(uint64_t due)
{
	struct timespec ts = { .tv_sec = (time_t)(due / 1000000000u),
			       .tv_nsec = (long)(due % 1000000000u) };

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) ==
	       EINTR)
		;
}

static void put(struct dir *d, struct chunk *c)
{
	pthread_mutex_lock(&d->lock);
	while (d->queued > QUEUE_MAX && !d->dead)
		pthread_cond_wait(&d->cond, &d->lock);
	QUEUE_PUSH(d->head, d->tail, c, next);
	d->queued += c->len;
	pthread_cond_broadcast(&d->cond);
	pthread_mutex_unlock(&d->lock);
}

static struct chunk *take(struct dir *d)
{
	struct chunk *c;

	pthread_mutex_lock(&d->lock);
	while (!d->head)
		pthread_cond_wait(&d->cond, &d->lock);
	c = d->head;
	d->head = c->next;
	if (!d->head)
		d->tail = NULL;
	d->queued -= c->len;
	pthread_cond_broadcast(&d->cond);
	pthread_mutex_unlock(&d->lock);
	return c;
}

static void conn_put(struct conn *c)
{
	int live;

	pthread_mutex_lock(&c->lock);
	live = --c->live;
	pthread_mutex_unlock(&c->lock);
	if (live)
		return;
	close(c->d[0].from);
	close(c->d[1].from);
	for (int i = 0; i < 2; i++) {
		pthread_mutex_destroy(&c->d[i].lock);
		pthread_cond_destroy(&c->d[i].cond);
	}
	pthread_mutex_destroy(&c->lock);
	free(c);
}

static void *reader(void *arg)
{
	struct dir *d = arg;

	for (;;) {
		struct chunk *c = malloc(sizeof(*c) + CHUNK_MAX);
		ssize_t n;

		if (!c)
			n = -1;
		else
			n = read(d->from, c->data, CHUNK_MAX);
		if (n < 0 && errno == EINTR) {
			free(c);
			continue;
		}
		if (!c) {
			c = malloc(sizeof(*c));
			if (!c)
				abort();
		}
		c->len = n > 0 ? (size_t)n : 0;
		c->due_ns = now_ns() + half_rtt_ns;
		put(d, c);
		if (n <= 0)
			break;
		pthread_mutex_lock(&d->lock);
		n = d->dead;
		pthread_mutex_unlock(&d->lock);
		if (n) {
			shutdown(d->from, SHUT_RD);
			c = malloc(sizeof(*c));
			if (!c)
				abort();
			c->len = 0;
			c->due_ns = 0;
			put(d, c);
			break;
		}
	}
	conn_put(d->conn);
	return NULL;
}

static void *writer(void *arg)
{
	struct dir *d = arg;
	bool ok = true;

	for (;;) {
		struct chunk *c = take(d);
		size_t off = 0;

		if (!c->len) {
			free(c);
			break;
		}
		sleep_until(c->due_ns);
		while (ok && off < c->len) {
			ssize_t n = send(d->to, c->data + off, c->len - off,
					 MSG_NOSIGNAL);

			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0) {
				ok = false;
				pthread_mutex_lock(&d->lock);
				d->dead = true;
				pthread_cond_broadcast(&d->cond);
				pthread_mutex_unlock(&d->lock);
				/* Wake the reader: the peer is gone. */
				shutdown(d->from, SHUT_RD);
				break;
			}
			off += (size_t)n;
		}
		free(c);
	}
	shutdown(d->to, SHUT_WR);
	conn_put(d->conn);
	return NULL;
}

static int start_thread(void *(*fn)(void *), void *arg)
{
	pthread_t t;
	pthread_attr_t a;
	int ret;

	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&a, 64 * 1024);
	ret = pthread_create(&t, &a, fn, arg);
	pthread_attr_destroy(&a);
	return ret;
}

static int connect_upstream(int port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons((uint16_t)port) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	if (fd < 0)
		return -1;
	inet_pton(AF_INET, addr, &sa.sin_addr);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static void serve(int cfd, int upstream)
{
	int ufd = connect_upstream(upstream), one = 1;
	struct conn *c;

	if (ufd < 0) {
		fprintf(stderr, "cachegw-latproxy: connect to %s:%d: %s\n",
			addr, upstream, strerror(errno));
		close(cfd);
		return;
	}
	setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	c = calloc(1, sizeof(*c));
	if (!c)
		abort();
	pthread_mutex_init(&c->lock, NULL);
	c->live = 4;
	c->d[0].from = cfd;
	c->d[0].to = ufd;
	c->d[1].from = ufd;
	c->d[1].to = cfd;
	for (int i = 0; i < 2; i++) {
		pthread_mutex_init(&c->d[i].lock, NULL);
		pthread_cond_init(&c->d[i].cond, NULL);
		c->d[i].conn = c;
	}
	for (int i = 0; i < 2; i++)
		if (start_thread(reader, &c->d[i]) ||
		    start_thread(writer, &c->d[i]))
			abort();
}

static int listen_on(int port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons((uint16_t)port) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1) {
		errno = EINVAL;
		close(fd);
		return -1;
	}
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    listen(fd, 64) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static int usage(const char *msg)
{
	fprintf(stderr, "cachegw-latproxy: %s\nusage: cachegw-latproxy --rtt MS "
		"[--addr IPv4] LISTEN_PORT:UPSTREAM_PORT...\n", msg);
	return 2;
}

static bool parse_port(const char *s, char **end, int *port)
{
	long v = strtol(s, end, 10);

	if (*end == s || v < 1 || v > 65535)
		return false;
	*port = (int)v;
	return true;
}

int main(int argc, char **argv)
{
	struct pollfd pfd[PORTS_MAX];
	int up[PORTS_MAX], n = 0, i;
	double rtt = -1;
	sigset_t ss;

	for (i = 1; i < argc; i++) {
		char *end;

		if (!strcmp(argv[i], "--rtt") && i + 1 < argc) {
			rtt = strtod(argv[++i], &end);
			if (*end || !(rtt >= 0 && rtt <= 10000))
				return usage("--rtt wants 0 to 10000 (ms)");
		} else if (!strcmp(argv[i], "--addr") && i + 1 < argc) {
			addr = argv[++i];
		} else if (argv[i][0] != '-' && n < PORTS_MAX) {
			int lp;

			if (!parse_port(argv[i], &end, &lp) || *end != ':' ||
			    !parse_port(end + 1, &end, &up[n]) || *end)
				return usage("want LISTEN_PORT:UPSTREAM_PORT");
			pfd[n].fd = listen_on(lp);
			if (pfd[n].fd < 0) {
				fprintf(stderr, "cachegw-latproxy: listen on "
					"%s:%d: %s\n", addr, lp,
					strerror(errno));
				return 1;
			}
			pfd[n++].events = POLLIN;
		} else {
			return usage(n < PORTS_MAX ? "unexpected argument" :
				     "too many ports");
		}
	}
	if (rtt < 0 || !n)
		return usage("--rtt and at least one port pair are required");
	half_rtt_ns = (uint64_t)(rtt * 1e6 / 2);
	/* SIGTERM/SIGINT end the process by default; SIGPIPE is not used. */
	sigemptyset(&ss);
	sigaddset(&ss, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &ss, NULL);
	printf("ready\n");
	fflush(stdout);
	for (;;) {
		if (poll(pfd, (nfds_t)n, -1) < 0) {
			if (errno == EINTR)
				continue;
			perror("cachegw-latproxy: poll");
			return 1;
		}
		for (i = 0; i < n; i++) {
			int cfd;

			if (!(pfd[i].revents & POLLIN))
				continue;
			cfd = accept4(pfd[i].fd, NULL, NULL, SOCK_CLOEXEC);
			if (cfd < 0) {
				/* Out of descriptors: do not spin. */
				if (errno == EMFILE || errno == ENFILE)
					usleep(100000);
				continue;
			}
			serve(cfd, up[i]);
		}
	}
}
