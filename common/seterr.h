/* seterr.h - the one-line reason every layer's open functions give back
 * with a negative errno (char *err, size_t errlen; NULL or 0: none wanted).
 */
#ifndef CACHEGW_SETERR_H
#define CACHEGW_SETERR_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

static inline void seterr(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static inline void seterr(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

#endif
