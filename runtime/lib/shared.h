/* shared.h — the parts of a batch (lc_run_batch) made once (shared.c).  Not
 * part of the stable API. */
#ifndef LC_SHARED_H
#define LC_SHARED_H

#include <stdbool.h>
#include <sys/types.h>

#include "lcrun.h"
#include "seccomp.h"

struct lc_run_shared {
	lc_seccomp_prog_t prog; /* spec->seccomp with spec->caps */
	int idmap_userns_fd;    /* -1 when rootless */
	char *trash;            /* lc_trash_dir()/batch-RANDOM, flocked through trash_fd */
	int trash_fd;
	pid_t owner;            /* the process that made it (frees and removes) */
	struct lc_image_resolved *img; /* spec->image, resolved, or NULL */
	char *skel, *etc;       /* the host image's layers when the batch runs on it */
	int hold[2];            /* socket pair: [1] takes each sandbox's mount namespace, */
				/* left unread in [0] until the batch's remover closes it */
};
/* The host image's skeleton and /etc layer for spec (lc_hostimage_skel,
 * lc_hostimage_etc), sh's when it holds them. */
int lc_run_shared_host_layers(const lc_run_shared_t *sh, const lc_spec_t *spec, bool rootless, char **skel,
			      char **etc, lc_error_t **err);
/* A copy of the batch's program. */
int lc_run_shared_seccomp(const lc_run_shared_t *sh, lc_seccomp_prog_t *prog);
/* Hand the batch a sandbox's mount namespace (fd stays the caller's): held
 * until the batch's remover starts, so that its teardown (and that of the
 * network namespace its sysfs pins) is not on the batch's time.  -1: not
 * taken (the caller's close tears it down as before). */
int lc_run_shared_hold(const lc_run_shared_t *sh, int fd);
/* Move a sandbox directory into the batch's trash: 0, or -1 (remove it
 * the ordinary way). */
int lc_run_shared_trash(const lc_run_shared_t *sh, const char *sbdir, const char *id);

#endif
