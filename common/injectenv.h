/* injectenv.h - the CACHEGW_INJECT_* variables' shared syntax, for the
 * fault-injection hooks of cache/ and nfsclient/ (read once at start-up).
 *
 * "ERRNO[:COUNT]": ERRNO a number or a name (EIO, ENOSPC, ...); COUNT how
 * many calls fail, -1 (every call) when it is missing.
 */
#ifndef CACHEGW_INJECTENV_H
#define CACHEGW_INJECTENV_H

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static inline int inject_parse_errno(const char *s)
{
	static const struct { const char *name; int err; } names[] = {
		{ "EIO", EIO }, { "ENOSPC", ENOSPC }, { "EDQUOT", EDQUOT },
		{ "EROFS", EROFS }, { "ENOMEM", ENOMEM }, { "EFBIG", EFBIG },
		{ "ESTALE", ESTALE },
	};
	char *end;
	long v = strtol(s, &end, 10);

	if (end != s && v > 0 && v < 4096)
		return (int)v;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strncmp(s, names[i].name, strlen(names[i].name)))
			return names[i].err;
	return EIO;
}

/* The value of var (NULL if unset or empty) and the COUNT after its ':'. */
static inline const char *inject_getenv(const char *var, int *count)
{
	const char *v = getenv(var), *colon;

	*count = 0;
	if (!v || !*v)
		return NULL;
	colon = strchr(v, ':');
	*count = colon ? atoi(colon + 1) : -1;
	return v;
}

#endif
