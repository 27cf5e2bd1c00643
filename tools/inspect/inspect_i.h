/* inspect_i.h - private to cachegw-inspect, one section per file.
 *
 * inspect.c: the command line and the offline subcommands (ls, show,
 *            verify, evict) and stats.
 * ctl.c:     the client side of a live gateway's control socket.
 * warm.c:    warm: read files through the mount into the cache.
 * top.c:     top: rates from the gateway's counters, once a second.
 */
#ifndef CACHEGW_INSPECT_I_H
#define CACHEGW_INSPECT_I_H

#include <stdbool.h>
#include <stdint.h>

#define EXIT_USAGE 2

extern const char *prog;

/* ---- ctl.c ----
 * Protocol (served by daemon/ctl.c): connect to DIR/control.sock, send
 * one line, read the reply until the gateway closes the connection. */
/* Send cmd (without newline); *reply gets the whole reply, NUL-ended
 * (free it). 0, -ECONNREFUSED/-ENOENT (no live gateway), -errno. */
int ctl_ask(const char *dir, const char *cmd, char **reply);
/* Print a one-line reason for ctl_ask's ret. */
void ctl_perror(const char *dir, int ret);
/* Counter NAME (without "cachegw_") from a `stats` reply; false if none. */
bool ctl_stat(const char *stats, const char *name, uint64_t *v);

/* ---- warm.c, top.c: argc/argv from the subcommand's name on ---- */
int cmd_warm(int argc, char **argv);
int cmd_top(int argc, char **argv);

#endif
