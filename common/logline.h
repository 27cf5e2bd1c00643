/* logline.h - one log line on stderr, "cachegw: WHO: message", built in
 * one buffer so that lines of concurrent threads do not interleave (the
 * gateway routes stderr to its log). For the layers below the gateway,
 * which have no logger of their own (cache_log, nodes_warn).
 */
#ifndef CACHEGW_LOGLINE_H
#define CACHEGW_LOGLINE_H

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static inline void log_linev(const char *who, const char *fmt, va_list ap)
{
	char line[512];
	int n = snprintf(line, sizeof(line), "cachegw: %s: ", who);

	vsnprintf(line + n, sizeof(line) - n - 1, fmt, ap);
	n = (int)strlen(line);
	line[n++] = '\n';
	fwrite(line, 1, (size_t)n, stderr);
}

#endif
