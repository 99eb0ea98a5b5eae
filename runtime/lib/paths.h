/* paths.h — where a sandbox's files are, below the directories of
 * lcrun.h (lc_lib_dir, lc_run_dir): paths.c.  Not part of the stable API. */
#ifndef LC_PATHS_H
#define LC_PATHS_H

#include "lcrun.h"

/* The state directory of sandbox id (lc_run_dir()/ID) and its sandbox
 * directory (lc_lib_dir()/sandboxes/ID), to be freed. */
char *lc_state_dir(const char *id);
char *lc_sandbox_dir(const char *id);
/* Where the spare sandbox directories wait (lc_lib_dir()/spare, sandbox.c). */
char *lc_spare_dir(void);

#endif
