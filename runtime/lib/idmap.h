/* idmap.h — user namespaces: for idmapped mounts and a sandbox's own
 * (idmap.c).  Not part of the stable API. */
#ifndef LC_IDMAP_H
#define LC_IDMAP_H

#include <sys/types.h>

#include "error.h"

/* An fd (the caller's to close) of a user namespace mapping count ids from
 * uid_from/gid_from (as files store them) to uid_to/gid_to (as the kernel
 * sees them): what mount_setattr(MOUNT_ATTR_IDMAP) takes.  Cached. */
int lc_idmap_userns(uid_t uid_from, uid_t uid_to, gid_t gid_from, gid_t gid_to, unsigned count, lc_error_t **err);
/* A new user namespace mapping 0..count-1 to base.. (uids and gids), not
 * cached: a sandbox's own (staging_main joins it).  *child: the killed
 * process that made it, for the caller to reap. */
int lc_userns_new(uid_t base, unsigned count, pid_t *child, lc_error_t **err);

#endif
