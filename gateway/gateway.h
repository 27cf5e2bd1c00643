/* gateway.h - the request path (gateway/) as the process around it
 * (daemon/) drives it.
 *
 * gateway.c: what ties the rooms together at start (the inode table's
 *            evict hook).
 */
#ifndef CACHEGW_GATEWAY_H
#define CACHEGW_GATEWAY_H

struct gw;

/* ---- gateway.c ---- */
/* The inode table with its root (and the root's kept metadata), and what
 * each room lets go with an inode. Before the session starts: 0, or
 * -ENOMEM. */
int gw_gateway_init(struct gw *gw);

#endif
