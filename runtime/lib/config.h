/* config.h — site settings (/etc/lcrun/lcrun.json): the host ids lcrun
 * maps sandboxes to (config.c).  Not part of the stable API. */
#ifndef LC_CONFIG_H
#define LC_CONFIG_H

#include <sys/types.h>

uid_t lc_uid_base(void);
unsigned lc_uid_count(void);

#endif
