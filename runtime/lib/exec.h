/* exec.h — what cp asks of exec.c.  Not part of the stable API. */
#ifndef LC_EXEC_H
#define LC_EXEC_H

#include "error.h"

/* Enter a sandbox's user and mount namespaces (and become its root) in the
 * calling, single-threaded process.  Used by exec and cp children. */
int lc_enter_sandbox(int pidfd, int nstypes, lc_error_t **err);

#endif
