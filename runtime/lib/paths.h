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

/* Make $LCRUN_ROOT/sandboxes if it is missing, recording in its
 * .state-dir the state directory whose records say which of its
 * directories are in use (gc.c): gc collects directories without state
 * only for that state directory. */
int lc_sandboxes_parent_make(const char *parent, lc_error_t **err);
/* Before a sandbox is made: refused (LC_EXIT_USAGE) when this state
 * directory is not the one that records the root's sandboxes (a private
 * LCRUN_STATE_DIR over the default root, or a root set apart whose
 * .state-dir names another): gc of the root's own state directory would
 * take the new sandbox's directory for an orphan. */
int lc_sandboxes_pair_check(lc_error_t **err);
/* NULL when this state directory keeps the records of parent's sandbox
 * directories, else the one that does (to be freed; gc.c). */
char *lc_sandboxes_owner(const char *parent);

#endif
