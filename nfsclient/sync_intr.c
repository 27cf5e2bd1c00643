/* sync_intr.c - the synchronous calls a caller can give up on.
 *
 * The idempotent single calls (GETATTR, LOOKUP, ACCESS, READLINK, FSSTAT)
 * can be interrupted (nfsc_intr_*): their waiter and the answer's
 * buffers are on the heap, shared by the caller and the call, so that a
 * caller that gives up (interrupted: the errno of nfsc_intr_fire) leaves the call to finish into memory that
 * is still its own; the answer is copied out only when the caller gets it.
 * Locks: nfsc_intr.lock, then iwait.lock (fire signals the wait it finds
 * under its intr's lock); the waiter takes them one at a time.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "condwait.h"
#include "nfsc_i.h"

/* ---- interrupts ---- */

struct iwait;

struct nfsc_intr {
	pthread_mutex_t lock;
	const void *token;	/* the armed request, NULL if none; lock */
	int fired;		/* fired for token: the errno its waits end
				 * with, 0 if not fired; atomic */
	struct iwait *w;	/* the wait in progress; lock */
};

/* The thread's interrupt state, made at its first arm, freed with it. */
static __thread struct nfsc_intr *thread_intr;
static pthread_key_t intr_key;
static pthread_once_t intr_once = PTHREAD_ONCE_INIT;

static void intr_free(void *p)
{
	struct nfsc_intr *i = p;

	pthread_mutex_destroy(&i->lock);
	free(i);
}

static void intr_key_make(void)
{
	pthread_key_create(&intr_key, intr_free);
}

struct nfsc_intr *nfsc_intr_arm(const void *token)
{
	struct nfsc_intr *i = thread_intr;

	if (!i) {
		pthread_once(&intr_once, intr_key_make);
		i = calloc(1, sizeof(*i));
		if (!i)
			return NULL;	/* not interruptible, still correct */
		pthread_mutex_init(&i->lock, NULL);
		pthread_setspecific(intr_key, i);
		thread_intr = i;
	}
	pthread_mutex_lock(&i->lock);
	i->token = token;
	__atomic_store_n(&i->fired, 0, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&i->lock);
	return i;
}

void nfsc_intr_disarm(void)
{
	struct nfsc_intr *i = thread_intr;

	if (!i)
		return;
	pthread_mutex_lock(&i->lock);
	i->token = NULL;
	__atomic_store_n(&i->fired, 0, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&i->lock);
}

/* An interruptible wait for one call, and the call's answer. */
struct iwait {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int refs;		/* the caller's and the call's; lock */
	bool done;		/* lock */
	int status;		/* lock */
	union {
		struct nfsc_attr attr;
		struct {
			struct nfsc_fh fh;
			struct nfsc_attr attr;
			bool has_attr;
		} lookup;
		struct {
			uint32_t granted;
			struct nfsc_post post;
		} access;
		struct nfsc_fsstat fsstat;
	} out;
	char buf[];		/* READLINK's target */
};

static struct iwait *iwait_new(size_t extra)
{
	struct iwait *w = calloc(1, sizeof(*w) + extra);

	if (!w)
		return NULL;
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->cond, NULL);
	w->refs = 2;
	return w;
}

static void iwait_put_locked(struct iwait *w)
{
	bool last = --w->refs == 0;

	pthread_mutex_unlock(&w->lock);
	if (last) {
		pthread_cond_destroy(&w->cond);
		pthread_mutex_destroy(&w->lock);
		free(w);
	}
}

static void iwait_done(int status, void *priv)
{
	struct iwait *w = priv;

	pthread_mutex_lock(&w->lock);
	w->done = true;
	w->status = status;
	pthread_cond_broadcast(&w->cond);
	iwait_put_locked(w);
}

void nfsc_intr_fire(struct nfsc_intr *i, const void *token, int err)
{
	if (!i || !token || err <= 0)
		return;
	pthread_mutex_lock(&i->lock);
	if (i->token == token) {
		__atomic_store_n(&i->fired, err, __ATOMIC_RELEASE);
		if (i->w) {
			pthread_mutex_lock(&i->w->lock);
			pthread_cond_broadcast(&i->w->cond);
			pthread_mutex_unlock(&i->w->lock);
		}
	}
	pthread_mutex_unlock(&i->lock);
}

/* The errno the armed request's waits end with, 0 if not fired. */
static int intr_fired(const struct nfsc_intr *i)
{
	return i ? __atomic_load_n(&i->fired, __ATOMIC_ACQUIRE) : 0;
}

/* Wait for the call the submit returned (0: queued) or for an interrupt
 * of the thread's armed request. On 0 the answer is in w->out (copy it
 * out, then iwait_end). Interrupted (-err of nfsc_intr_fire): the call
 * goes on without its caller; so does -EHOSTDOWN, when the origin is lost
 * meanwhile (origin.c). */
static int iwait_wait(struct nfsc *n, struct iwait *w, int submit_ret)
{
	struct nfsc_intr *i = thread_intr;
	int ret;

	if (submit_ret)
		iwait_done(submit_ret, w);
	if (i) {
		pthread_mutex_lock(&i->lock);
		i->w = w;
		pthread_mutex_unlock(&i->lock);
	}
	pthread_mutex_lock(&w->lock);
	ret = 0;
	while (!w->done && !intr_fired(i)) {
		if (!n->opts.offline) {
			pthread_cond_wait(&w->cond, &w->lock);
			continue;
		}
		cond_wait_ms(&w->cond, &w->lock, 250);
		if (!w->done && nfsc_origin_lost(n)) {
			ret = -EHOSTDOWN;
			break;
		}
	}
	if (w->done)
		ret = w->status;
	else if (!ret)
		ret = -intr_fired(i);
	pthread_mutex_unlock(&w->lock);
	if (i) {
		pthread_mutex_lock(&i->lock);
		i->w = NULL;
		pthread_mutex_unlock(&i->lock);
	}
	return ret;
}

/* The caller is done with w (after copying the answer out). */
static void iwait_end(struct iwait *w)
{
	pthread_mutex_lock(&w->lock);
	iwait_put_locked(w);
}

int nfsc_getattr(struct nfsc *n, const struct nfsc_cred *cr,
		 const struct nfsc_fh *fh, struct nfsc_attr *attr)
{
	struct iwait *w = iwait_new(0);
	int ret;

	if (!w)
		return -ENOMEM;
	ret = iwait_wait(n, w, nfsc_getattr_async(n, -1, cr, fh, &w->out.attr,
					       iwait_done, w));
	if (!ret)
		*attr = w->out.attr;
	iwait_end(w);
	return ret;
}

int nfsc_lookup(struct nfsc *n, const struct nfsc_cred *cr,
		const struct nfsc_fh *dir, const char *name,
		struct nfsc_fh *out, struct nfsc_attr *attr, bool *has_attr)
{
	struct iwait *w = iwait_new(0);
	int ret;

	if (!w)
		return -ENOMEM;
	ret = iwait_wait(n, w, nfsc_lookup_async(n, -1, cr, dir, name,
					      &w->out.lookup.fh,
					      &w->out.lookup.attr,
					      &w->out.lookup.has_attr,
					      iwait_done, w));
	if (!ret) {
		*out = w->out.lookup.fh;
		if (attr && w->out.lookup.has_attr)
			*attr = w->out.lookup.attr;
	}
	if (has_attr)
		*has_attr = !ret && w->out.lookup.has_attr;
	iwait_end(w);
	return ret;
}

int nfsc_access(struct nfsc *n, const struct nfsc_cred *cr,
		const struct nfsc_fh *fh, uint32_t mask, uint32_t *granted,
		struct nfsc_post *post)
{
	struct iwait *w;
	int ret;

	nfsc_inject_access_delay(n);
	w = iwait_new(0);
	if (!w)
		return -ENOMEM;
	ret = iwait_wait(n, w, nfsc_access_async(n, -1, cr, fh, mask,
					      &w->out.access.granted,
					      &w->out.access.post,
					      iwait_done, w));
	if (!ret) {
		*granted = w->out.access.granted;
		if (post)
			*post = w->out.access.post;
	}
	iwait_end(w);
	return ret;
}

int nfsc_readlink(struct nfsc *n, const struct nfsc_cred *cr,
		  const struct nfsc_fh *fh, char *buf, size_t size)
{
	struct iwait *w = iwait_new(size);
	int ret;

	if (!w)
		return -ENOMEM;
	ret = iwait_wait(n, w, nfsc_readlink_async(n, -1, cr, fh, w->buf, size,
						iwait_done, w));
	if (!ret)
		memcpy(buf, w->buf, size);
	iwait_end(w);
	return ret;
}

int nfsc_fsstat(struct nfsc *n, const struct nfsc_cred *cr,
		const struct nfsc_fh *fh, struct nfsc_fsstat *st)
{
	struct iwait *w = iwait_new(0);
	int ret;

	if (!w)
		return -ENOMEM;
	ret = iwait_wait(n, w, nfsc_fsstat_async(n, -1, cr, fh, &w->out.fsstat,
					      iwait_done, w));
	if (!ret)
		*st = w->out.fsstat;
	iwait_end(w);
	return ret;
}
