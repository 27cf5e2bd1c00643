/* intent.c - a change the dead process made, asked again of its successor.
 *
 * After a crash the kernel resends what the dead process had read and not
 * answered (FUSE_NOTIFY_RESEND). For a READ or a WRITE that is harmless;
 * a CREATE with O_EXCL, a MKDIR, a LINK or SYMLINK the origin had already
 * done fails the second time with EEXIST, and an UNLINK, RMDIR or RENAME
 * with ENOENT, where the caller's one call succeeded. The origin has no
 * memory of who asked (NFSv3 has no sessions), so the gateway keeps its
 * own: before it sends such a change it writes a key into the state a
 * successor inherits (gw_state.h), and clears it after the reply. The key
 * is a hash of all that makes the change itself: the operation, the
 * directory's node-id and the name, the LINK's source, the SYMLINK's
 * target, the RENAME's new directory and name, and the caller's pid and
 * uid. A successor takes the keys left behind at its start; for a short
 * while, a change that fails that way and whose key is among them may be
 * the dead process's, done (once per key).
 *
 * May be: a name that exists may be someone else's file, made since.
 * Beside its key a record keeps what tells the file made apart (ops_ns.c
 * checks it): for an O_EXCL create, the verifier of its NFSv3 EXCLUSIVE
 * CREATE (random: the origin answers a repeat with the same verifier as
 * done, and only for the file that verifier made), and for every create,
 * once the origin has answered, a hash of the handle it gave.
 *
 * Only what a dead process left is looked at, only within
 * GW_INTENT_WINDOW_S of the takeover (resent requests come at once), and
 * a key is used once.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <xxhash.h>

#include "gw_state.h"
#include "keep_i.h"

#define GW_INTENT_WINDOW_S 30

static pthread_mutex_t left_lock = PTHREAD_MUTEX_INITIALIZER;
static struct gw_intent_rec *left;	/* left_lock: what a dead process
					 * left */
static size_t nleft;			/* left_lock */
static time_t left_until;		/* left_lock: CLOCK_MONOTONIC s */

static uint64_t mix(uint64_t h, const void *p, size_t n)
{
	const unsigned char *c = p;

	for (size_t i = 0; i < n; i++) {
		h ^= c[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

/* A string with its length first: "ab" then "c" is not "a" then "bc". */
static uint64_t mix_str(uint64_t h, const char *s)
{
	uint32_t len = s ? (uint32_t)strlen(s) + 1 : 0;

	h = mix(h, &len, sizeof(len));
	return s ? mix(h, s, len - 1) : h;
}

uint64_t gw_intent_key(const struct gw_intent *in)
{
	uint64_t h = 0xcbf29ce484222325ull;
	uint32_t who[2] = { in->pid, in->uid };

	h = mix(h, &in->op, sizeof(in->op));
	h = mix(h, &in->dir, sizeof(in->dir));
	h = mix(h, who, sizeof(who));
	h = mix_str(h, in->name);
	h = mix(h, &in->obj, sizeof(in->obj));
	h = mix_str(h, in->name2);
	return h | 1;
}

uint64_t gw_intent_fh_hash(const struct nfsc_fh *fh)
{
	return XXH3_64bits(fh->data, fh->len) | 1;
}

unsigned gw_intent_begin(const struct gw_intent *in, uint8_t verf[8])
{
	struct gw_state *st = gw_state;
	uint64_t key = gw_intent_key(in);

	/* A verifier nobody else can know (nor set on a file of theirs):
	 * from the kernel's random pool; the clock and the key as a last
	 * resort, never zero. */
	if (verf) {
		uint64_t v = 0;

		if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != sizeof(v)) {
			struct timespec now;

			clock_gettime(CLOCK_REALTIME, &now);
			v = mix(key, &now, sizeof(now));
		}
		v |= 1;
		memcpy(verf, &v, 8);
	}
	if (!st)
		return 0;
	for (unsigned i = 0; i < GW_STATE_INTENTS; i++) {
		unsigned slot = (unsigned)((key >> 8) + i) % GW_STATE_INTENTS;
		struct gw_intent_rec *r = &st->intents[slot];
		uint64_t zero = 0;

		if (!__atomic_compare_exchange_n(&r->key, &zero, key, false,
						 __ATOMIC_ACQ_REL,
						 __ATOMIC_RELAXED))
			continue;
		/* Written before the change is sent; read only once this
		 * process is gone. */
		__atomic_store_n(&r->made, 0, __ATOMIC_RELAXED);
		memset(r->verf, 0, sizeof(r->verf));
		if (verf)
			memcpy(r->verf, verf, 8);
		return slot + 1;
	}
	return 0;	/* full: this one is not kept */
}

void gw_intent_made(unsigned slot, const struct nfsc_fh *fh)
{
	if (slot && gw_state)
		__atomic_store_n(&gw_state->intents[slot - 1].made,
				 gw_intent_fh_hash(fh), __ATOMIC_RELAXED);
}

void gw_intent_end(unsigned slot)
{
	if (slot && gw_state)
		__atomic_store_n(&gw_state->intents[slot - 1].key, 0,
				 __ATOMIC_RELEASE);
}

size_t gw_intent_takeover(void)
{
	struct gw_state *st = gw_state;
	struct timespec now;
	size_t n = 0;

	if (!st)
		return 0;
	pthread_mutex_lock(&left_lock);
	free(left);
	left = calloc(GW_STATE_INTENTS, sizeof(*left));
	for (unsigned i = 0; i < GW_STATE_INTENTS; i++) {
		struct gw_intent_rec *r = &st->intents[i];
		uint64_t k = __atomic_exchange_n(&r->key, 0, __ATOMIC_ACQ_REL);

		if (k && left) {
			left[n] = *r;
			left[n++].key = k;
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &now);
	nleft = n;
	left_until = now.tv_sec + GW_INTENT_WINDOW_S;
	pthread_mutex_unlock(&left_lock);
	return n;
}

bool gw_intent_was_done(const struct gw_intent *in, struct gw_intent_rec *rec)
{
	uint64_t key = gw_intent_key(in);
	struct timespec now;
	bool found = false;

	clock_gettime(CLOCK_MONOTONIC, &now);
	pthread_mutex_lock(&left_lock);
	for (size_t i = 0; i < nleft && now.tv_sec < left_until; i++) {
		if (left[i].key == key) {
			if (rec)
				*rec = left[i];
			left[i] = left[--nleft];
			found = true;
			break;
		}
	}
	pthread_mutex_unlock(&left_lock);
	return found;
}

void gw_intent_fini(void)
{
	pthread_mutex_lock(&left_lock);
	free(left);
	left = NULL;
	nleft = 0;
	pthread_mutex_unlock(&left_lock);
}
