/* conn.c - the store's connection: connect, one call with retry while the
 * store is away, loss and return logged once each, calls counted.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fleet_i.h"

#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 2000

uint64_t fleet_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t ts_ns(const struct timespec *ts)
{
	return (uint64_t)ts->tv_sec * 1000000000u + (uint64_t)ts->tv_nsec;
}

static void ns_ts(uint64_t ns, struct timespec *ts)
{
	ts->tv_sec = (time_t)(ns / 1000000000u);
	ts->tv_nsec = (long)(ns % 1000000000u);
}

/* libpq's message without its trailing newline. */
static void keep_why(struct fleet *f, const char *msg)
{
	size_t n;

	snprintf(f->why, sizeof(f->why), "%s", msg && *msg ? msg : "?");
	n = strlen(f->why);
	while (n && (f->why[n - 1] == '\n' || f->why[n - 1] == ' '))
		f->why[--n] = '\0';
}

/* The store went away (or never came): drop the connection, log once. */
static void went_away(struct fleet *f)
{
	GW_ASSERT_HELD(&f->lock);
	if (f->pg) {
		keep_why(f, PQerrorMessage(f->pg));
		PQfinish(f->pg);
		f->pg = NULL;
	}
	f->nprepared = 0;
	if (f->up) {
		f->up = false;
		__atomic_fetch_add(&f->losses, 1, __ATOMIC_RELAXED);
		ns_ts(fleet_now_ns(), &f->down_since);
		f->log("fleet store lost (%s): names and handles this gateway "
		       "knows keep working; new ones %s", f->why,
		       f->hard ? "wait for it" : "fail with EIO after the "
		       "timeout");
	}
}

int fleet_connect_locked(struct fleet *f)
{
	/* The gateway's defaults first; the user's string (dbname, expanded)
	 * last, so that what it says wins. A store that stops answering
	 * without closing the connection is noticed by the kernel's
	 * keepalives and the user timeout, not by a hang. */
	static const char *const keys[] = {
		"connect_timeout", "keepalives", "keepalives_idle",
		"keepalives_interval", "keepalives_count", "tcp_user_timeout",
		"application_name", "dbname", NULL
	};
	const char *vals[] = {
		"5", "1", "5", "2", "3", "10000", "cachegw", f->conninfo, NULL
	};
	uint64_t t0, now = fleet_now_ns();
	char err[256];
	int ret;

	GW_ASSERT_HELD(&f->lock);
	if (f->pg)
		return 0;
	if (f->broken)
		return -EIO;
	if (now < ts_ns(&f->next_try))
		return -EAGAIN;
	t0 = now;
	f->attempts++;
	f->nprepared = 0;
	f->pg = PQconnectdbParams(keys, vals, 1);
	if (!f->pg || PQstatus(f->pg) != CONNECTION_OK) {
		__atomic_fetch_add(&f->call[FLEET_CALL_CONNECT].errors, 1,
				   __ATOMIC_RELAXED);
		goto away;
	}
	ret = fleet_setup_locked(f, err, sizeof(err));
	if (ret) {
		if (f->broken)
			f->log("fleet store: %s; new names and node-ids this "
			       "gateway never saw fail with EIO from now on",
			       err);
		if (!f->pg)
			goto away;	/* lost during the set-up */
		keep_why(f, err);
		PQfinish(f->pg);
		f->pg = NULL;
		goto away;
	}
	now = fleet_now_ns();
	lat_hist_add(&f->call[FLEET_CALL_CONNECT].lat, now - t0);
	__atomic_fetch_add(&f->call[FLEET_CALL_CONNECT].calls, 1,
			   __ATOMIC_RELAXED);
	f->backoff_ms = 0;
	if (!f->up) {
		if (f->down_since.tv_sec || f->down_since.tv_nsec)
			f->log("fleet store back after %.1f s",
			       (double)(now - ts_ns(&f->down_since)) / 1e9);
		f->up = true;
	}
	return 0;
away:
	went_away(f);
	f->backoff_ms = f->backoff_ms ? f->backoff_ms * 2 : BACKOFF_MIN_MS;
	if (f->backoff_ms > BACKOFF_MAX_MS)
		f->backoff_ms = BACKOFF_MAX_MS;
	ns_ts(fleet_now_ns() + (uint64_t)f->backoff_ms * 1000000u,
	      &f->next_try);
	return f->broken ? -EIO : -EAGAIN;
}

/* Sleep (lock released) until the next connect attempt is due. */
static void wait_retry_locked(struct fleet *f)
{
	struct timespec until = f->next_try, real;
	uint64_t left, now = fleet_now_ns();

	if (ts_ns(&until) <= now)
		return;
	/* The condition variable runs on CLOCK_REALTIME: turn the
	 * monotonic deadline into a realtime one. */
	left = ts_ns(&until) - now;
	clock_gettime(CLOCK_REALTIME, &real);
	ns_ts(ts_ns(&real) + left, &until);
	pthread_cond_timedwait(&f->hb_cond, &f->lock, &until);
}

/* Soft: a call gives up once the store has been away for the timeout
 * (counted from the loss, so that once it is that long gone a call does
 * not wait the timeout again) and a connect tried since the call began
 * failed too: a call never fails only because the next try was not yet
 * due, so the first call after the store's return reaches it. */
static bool soft_expired(struct fleet *f, uint64_t attempts_at_start)
{
	uint64_t since = ts_ns(&f->down_since);

	if (f->hard || f->attempts == attempts_at_start)
		return false;
	return fleet_now_ns() - since >= (uint64_t)f->timeout_s * 1000000000u;
}

/* SQLSTATE 40001 (serialization_failure), 40P01 (deadlock_detected). */
static bool retryable(const PGresult *r)
{
	const char *st = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;

	return st && (!strcmp(st, "40001") || !strcmp(st, "40P01"));
}

/* Run sql as a statement prepared on this connection (parsed and planned
 * once, not per call): its result, or NULL with the connection's error. */
static PGresult *exec_prepared(struct fleet *f, const char *sql, int n,
			       const char *const *params)
{
	char name[8];
	unsigned i;
	PGresult *r;

	for (i = 0; i < f->nprepared && f->prepared[i] != sql; i++)
		;
	snprintf(name, sizeof(name), "s%u", i);
	if (i == f->nprepared) {
		if (i == sizeof(f->prepared) / sizeof(f->prepared[0]))
			return PQexecParams(f->pg, sql, n, NULL, params, NULL,
					    NULL, 0);
		r = PQprepare(f->pg, name, sql, n, NULL);
		if (!r || PQresultStatus(r) != PGRES_COMMAND_OK)
			return r;
		PQclear(r);
		f->prepared[f->nprepared++] = sql;
	}
	return PQexecPrepared(f->pg, name, n, params, NULL, NULL, 0);
}

PGresult *fleet_call_locked(struct fleet *f, enum fleet_call c,
			    const char *sql, int nparams,
			    const char *const *params, ExecStatusType want,
			    bool wait, int *err)
{
	struct fleet_call_stats *s = &f->call[c];
	uint64_t t0;
	unsigned tries = 0;
	uint64_t attempts_at_start = f->attempts;
	PGresult *r;
	int stop;

	GW_ASSERT_HELD(&f->lock);
	for (;;) {
		if (f->broken || f->stop) {
			*err = -EIO;
			return NULL;
		}
		if (fleet_connect_locked(f)) {
			__atomic_store_n(&f->away, true, __ATOMIC_RELAXED);
			if (f->broken) {
				*err = -EIO;
				return NULL;
			}
			if (!wait) {
				*err = -EAGAIN;
				return NULL;
			}
			if (soft_expired(f, attempts_at_start)) {
				*err = -EIO;
				return NULL;
			}
			stop = f->give_up ? f->give_up(f->give_up_arg) : 0;
			if (stop > 0) {
				*err = -stop;
				return NULL;
			}
			wait_retry_locked(f);
			continue;
		}
		__atomic_store_n(&f->away, false, __ATOMIC_RELAXED);
		t0 = fleet_now_ns();
		r = exec_prepared(f, sql, nparams, params);
		if (r && PQresultStatus(r) == want) {
			lat_hist_add(&s->lat, fleet_now_ns() - t0);
			__atomic_fetch_add(&s->calls, 1, __ATOMIC_RELAXED);
			return r;
		}
		__atomic_fetch_add(&s->errors, 1, __ATOMIC_RELAXED);
		if (retryable(r) && tries++ < 5) {
			/* A deadlock or serialization failure the server
			 * chose us for: nothing was done; again. */
			PQclear(r);
			continue;
		}
		if (PQstatus(f->pg) != CONNECTION_OK) {
			/* The connection broke: every call is safe to send
			 * again (assign finds what an earlier try named). */
			PQclear(r);
			went_away(f);
			continue;
		}
		f->log("fleet store: %s call failed: %s", fleet_call_name(c),
		       r ? PQresultErrorMessage(r) : PQerrorMessage(f->pg));
		PQclear(r);
		*err = -EIO;
		return NULL;
	}
}

const char *fleet_call_name(enum fleet_call c)
{
	static const char *const names[FLEET_NCALLS] = {
		[FLEET_CALL_CONNECT] = "connect",
		[FLEET_CALL_ASSIGN] = "assign",
		[FLEET_CALL_RESOLVE] = "resolve",
		[FLEET_CALL_PARENT] = "parent",
		[FLEET_CALL_HEARTBEAT] = "heartbeat",
		[FLEET_CALL_MEMBERS] = "members",
	};

	return (unsigned)c < FLEET_NCALLS ? names[c] : NULL;
}

void fleet_stats(struct fleet *f, struct fleet_stats *st)
{
	memset(st, 0, sizeof(*st));
	pthread_mutex_lock(&f->lock);
	st->connected = f->pg != NULL;
	pthread_mutex_unlock(&f->lock);
	st->export_id = f->export_id;
	st->losses = __atomic_load_n(&f->losses, __ATOMIC_RELAXED);
	st->names_assigned = __atomic_load_n(&f->names_assigned,
					     __ATOMIC_RELAXED);
	memcpy(st->call, f->call, sizeof(st->call));
}

uint64_t fleet_u64(const PGresult *r, int row, int col)
{
	const char *s = PQgetvalue(r, row, col);
	char *end;
	unsigned long long v;

	if (!s || !*s)
		return 0;
	errno = 0;
	v = strtoull(s, &end, 10);
	return errno || *end ? 0 : (uint64_t)v;
}

void fleet_hex(char *out, const uint8_t *b, size_t n)
{
	static const char d[] = "0123456789abcdef";
	size_t i;

	for (i = 0; i < n; i++) {
		out[2 * i] = d[b[i] >> 4];
		out[2 * i + 1] = d[b[i] & 15];
	}
	out[2 * n] = '\0';
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int fleet_unhex(uint8_t *out, size_t max, const char *hex)
{
	size_t n = strlen(hex), i;

	if (n % 2 || n / 2 > max)
		return -1;
	for (i = 0; i < n / 2; i++) {
		int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return -1;
		out[i] = (uint8_t)(hi << 4 | lo);
	}
	return (int)(n / 2);
}
