/* mounts.h — a sandbox's root: the staged overlay, binds, and pid 1's
 * mounts; paths resolved inside a root (mounts.c).  Not part of the
 * stable API. */
#ifndef LC_MOUNTS_H
#define LC_MOUNTS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "lcrun.h"

typedef struct lc_rootfs_plan {
	char *sbdir;       /* /var/lib/lcrun/sandboxes/ID */
	char *rootfs;      /* sbdir/rootfs: where the merged tree is mounted */
	char **lowers;     /* lower dirs of the root overlay, TOP first */
	bool *lower_idmap; /* per lower: mount it idmapped (host-owned trees) */
	bool usr_overlay;  /* host image: /usr gets an overlay of its own */
	bool volatile_upper; /* the uppers go with the sandbox: overlay's "volatile" */
	char **usr_lowers; /* image layers' usr/ dirs above the host's /usr, TOP first (idmapped) */
	char *upper_dir;   /* spec->upper_dir: where upper/ and work/ are (NULL: ovl/) */
	bool idmap_ok;     /* filled by lc_mounts_stage: idmapping worked */
	bool rootless;
	int idmap_userns_fd;
	int disk_fd;       /* the disk's detached mount (disk.h), moved onto ovl/; -1: none */
	uid_t owner_uid;   /* host ids of the sandbox's root */
	gid_t owner_gid;
	int rootfs_fd;     /* O_PATH fds opened by the staging process */
	int files_fd;
	int *bind_fds;     /* per spec mount: a detached idmapped mount to attach, or -1 */
	size_t n_bind_fds;
} lc_rootfs_plan_t;
/* In the staging process (own mount namespace, host root or rootless). */
int lc_mounts_stage(lc_rootfs_plan_t *plan, lc_error_t **err);
/* In lcrun, before the staging process: the binds to idmap (as
 * spec->mounts[i].idmap and the filesystem decide), as detached mounts in
 * plan->bind_fds.  LC_EXIT_RUNTIME for LC_IDMAP_ON where the filesystem
 * cannot be idmapped. */
int lc_mounts_open_binds(lc_rootfs_plan_t *plan, const lc_spec_t *spec, lc_error_t **err);
void lc_mounts_close_binds(lc_rootfs_plan_t *plan);
/* In the staging process, still host root: the --bind mounts, so that
 * any path root can read can be bound (read-only binds stay locked). */
int lc_mounts_stage_binds(const lc_rootfs_plan_t *plan, const lc_spec_t *spec, lc_error_t **err);
/* Also there, before the binds: the mount points pid 1 needs (proc, dev,
 * etc/hosts…) and the sandbox's /tmp (a tmpfs), so that binds below /tmp
 * stay visible. */
int lc_mounts_stage_targets(const lc_rootfs_plan_t *plan, lc_error_t **err);
/* In the staging process after its last unshare: O_PATH fds of the staged
 * root and files, valid in pid 1's mount namespace. */
int lc_mounts_open_staged(lc_rootfs_plan_t *plan, lc_error_t **err);
/* In pid 1: proc, dev, sys, tmp, binds, masks, pivot_root. */
int lc_mounts_finish(const lc_rootfs_plan_t *plan, const lc_spec_t *spec, lc_error_t **err);

/* Resolving inside a root that is not ours yet (lcrun-oci's containers):
 * open path under rootfd without leaving it; make a mount target (a
 * directory, or a file when is_file); remount a bind read-only keeping
 * its locked flags; mask a path (tmpfs or /dev/null) or make it read-only. */
int lc_open_in_root(int rootfd, const char *path, int flags);
int lc_target_in_root(int rootfd, const char *path, bool is_file, lc_error_t **err);
int lc_remount_ro(const char *target);
int lc_mask_path(int rootfd, const char *path, lc_error_t **err);
int lc_readonly_path(int rootfd, const char *path, lc_error_t **err);

#endif
