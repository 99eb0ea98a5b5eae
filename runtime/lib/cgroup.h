/* cgroup.h — a sandbox's cgroup: limits, freezing, statistics, removal
 * (cgroup.c).  Not part of the stable API. */
#ifndef LC_CGROUP_H
#define LC_CGROUP_H

#include <stdbool.h>

#include "lcrun.h"

typedef enum { LC_CG_NONE, LC_CG_UNIFIED, LC_CG_HYBRID } lc_cg_mode_t;
typedef struct lc_cgroup {
	char *path;  /* absolute path of the sandbox's cgroup directory */
	int dirfd;   /* O_PATH|O_DIRECTORY fd for CLONE_INTO_CGROUP */
	char *not_applied; /* limits skipped under best-effort (comma list) or NULL */
} lc_cgroup_t;
/* The v2 mount point (from /proc/self/mountinfo) or NULL, and the mode. */
const char *lc_cgroup_root(lc_cg_mode_t *mode);
const char *lc_cgroup_mode_name(lc_cg_mode_t mode);
bool lc_cgroup_has_controller(const char *name);
/* Check that every requested limit can be enforced (before anything starts). */
int lc_cgroup_check_limits(const lc_limits_t *lim, lc_error_t **err);
int lc_cgroup_create(const char *id, const lc_limits_t *lim, lc_cgroup_t *cg, lc_error_t **err);
/* Write lim into the existing cgroup at path (a claimed sandbox of the
 * pool); *skipped (allocated) lists what best-effort left out. */
int lc_cgroup_set_limits(const char *path, const lc_limits_t *lim, char **skipped, lc_error_t **err);
int lc_cgroup_kill(const char *path);
int lc_cgroup_freeze(const char *path, bool frozen, lc_error_t **err);
/* Kill, wait until empty, rmdir.  Safe on a missing cgroup. */
int lc_cgroup_destroy(const char *path, lc_error_t **err);
void lc_cgroup_stats(const char *path, lc_result_t *res);
/* A number from a cgroup file: the line "KEY N" (or the whole file when key
 * is NULL); -1 when absent. */
long long lc_cgroup_read_key(const char *path, const char *file, const char *key);
void lc_cgroup_clear(lc_cgroup_t *cg);
char *lc_cgroup_path_for(const char *id);
/* Whose sandbox cgroup (lcrun/ID) at path is: 1 this state directory's,
 * 0 another's or nobody's mark (an older lcrun's, or one between its
 * mkdir and its mark), -1 where cgroups take no marks. */
int lc_cgroup_owner(const char *path);

#endif
