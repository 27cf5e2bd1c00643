/* intent.c - a change the dead process made, asked again of its successor.
 *
 * After a crash the kernel resends what the dead process had read and not
 * answered (FUSE_NOTIFY_RESEND). For a READ or a WRITE that is harmless;
 * a CREATE with O_EXCL, a MKDIR, a LINK or SYMLINK the origin had already
 * done fails the second time with EEXIST, and an UNLINK, RMDIR or RENAME
 * with ENOENT, where the caller's one call succeeded. The origin has no
 * memory of who asked (NFSv3 has no sessions), so the gateway keeps its
 * own: before it sends such a change it writes a key (the operation, the
 * directory's node-id, the name, the caller's pid and uid) into the state
 * a successor inherits (takeover.h), and clears it after the reply. A
 * successor takes the keys left behind at its start; for a short while,
 * a change that fails that way and whose key is among them was the dead
 * process's, done: it is answered as done (once per key).
 *
 * Only what a dead process left is looked at, only within
 * GW_INTENT_WINDOW_S of the takeover (resent requests come at once), and
 * a key is used once: an O_EXCL create that really finds someone else's
 * file fails as it must, unless the same process asked for the same name
 * the moment the gateway died.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gw_i.h"
#include "takeover.h"

#define GW_INTENT_WINDOW_S 30

static pthread_mutex_t left_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t *left;			/* left_lock: keys a dead process left */
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

static uint64_t intent_key(fuse_req_t req, unsigned op, uint64_t dir,
			   const char *name)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	uint64_t h = 0xcbf29ce484222325ull;
	uint32_t who[2] = { (uint32_t)ctx->pid, (uint32_t)ctx->uid };

	h = mix(h, &op, sizeof(op));
	h = mix(h, &dir, sizeof(dir));
	h = mix(h, who, sizeof(who));
	h = mix(h, name, strlen(name));
	return h | 1;
}

unsigned gw_intent_begin(fuse_req_t req, unsigned op, uint64_t dir,
			 const char *name)
{
	struct gw_state *st = gw_state;
	uint64_t key;

	if (!st)
		return 0;
	key = intent_key(req, op, dir, name);
	for (unsigned i = 0; i < GW_STATE_INTENTS; i++) {
		unsigned slot = (unsigned)((key >> 8) + i) % GW_STATE_INTENTS;
		uint64_t zero = 0;

		if (__atomic_compare_exchange_n(&st->intents[slot], &zero, key,
						false, __ATOMIC_RELEASE,
						__ATOMIC_RELAXED))
			return slot + 1;
	}
	return 0;	/* full: this one is not kept */
}

void gw_intent_end(unsigned slot)
{
	if (slot && gw_state)
		__atomic_store_n(&gw_state->intents[slot - 1], 0,
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
		uint64_t k = __atomic_exchange_n(&st->intents[i], 0,
						 __ATOMIC_ACQ_REL);

		if (k && left)
			left[n++] = k;
	}
	clock_gettime(CLOCK_MONOTONIC, &now);
	nleft = n;
	left_until = now.tv_sec + GW_INTENT_WINDOW_S;
	pthread_mutex_unlock(&left_lock);
	return n;
}

bool gw_intent_was_done(fuse_req_t req, unsigned op, uint64_t dir,
			const char *name)
{
	struct timespec now;
	uint64_t key;
	bool found = false;

	key = intent_key(req, op, dir, name);
	clock_gettime(CLOCK_MONOTONIC, &now);
	pthread_mutex_lock(&left_lock);
	for (size_t i = 0; i < nleft && now.tv_sec < left_until; i++) {
		if (left[i] == key) {
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
