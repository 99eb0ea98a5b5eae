/* hostimage.h — the host image's layers: a skeleton of the host's root and an /etc
 * for the spec's user (hostimage.c).  Not part of the stable API. */
#ifndef LC_HOSTIMAGE_H
#define LC_HOSTIMAGE_H

#include <stdbool.h>
#include <sys/types.h>

#include "lcrun.h"

/* The cached skeleton of the host image (dirs, merged-usr links, a copy of
 * the parts of /etc that programs need), owned by uid_base. */
int lc_hostimage_skel(char **dir, bool rootless, lc_error_t **err);
/* The lower layer above the skeleton with passwd and group for the spec's
 * uid and gid (and its home), cached next to skel, owned by owner. */
int lc_hostimage_etc(const char *skel, const lc_spec_t *spec, uid_t owner, gid_t gowner, char **out, lc_error_t **err);

#endif
