/* caps.h — capabilities: the bounding set, the five sets of a command, names
 * (caps.c).  Not part of the stable API. */
#ifndef LC_CAPS_H
#define LC_CAPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

int lc_caps_drop_bounding(uint64_t keep, lc_error_t **err);
int lc_caps_apply(uint64_t keep, bool is_root, lc_error_t **err);
/* OCI's five sets, after the uid change (bounding was dropped before):
 * effective, permitted, inheritable (cap_set_proc), then ambient raised. */
/* "CAP_NET_RAW" for 13; -1 when the kernel's set has no such number. */
int lc_cap_name(int cap, char *buf, size_t len);
int lc_caps_apply_sets(uint64_t effective, uint64_t permitted, uint64_t inheritable, uint64_t ambient,
		       lc_error_t **err);

#endif
