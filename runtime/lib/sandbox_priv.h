/* sandbox_priv.h — declarations shared by the files of the runtime core
 * (not part of the stable API in lcrun.h). */
#ifndef LC_SANDBOX_PRIV_H
#define LC_SANDBOX_PRIV_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "lcrun.h"
#include "seccomp.h"

/* ---- caps.c */
int lc_caps_drop_bounding(uint64_t keep, lc_error_t **err);
int lc_caps_apply(uint64_t keep, bool is_root, lc_error_t **err);
/* OCI's five sets, after the uid change (bounding was dropped before):
 * effective, permitted, inheritable (cap_set_proc), then ambient raised. */
/* "CAP_NET_RAW" for 13; -1 when the kernel's set has no such number. */
int lc_cap_name(int cap, char *buf, size_t len);
int lc_caps_apply_sets(uint64_t effective, uint64_t permitted, uint64_t inheritable, uint64_t ambient,
		       lc_error_t **err);

/* ---- config.c */
uid_t lc_uid_base(void);
unsigned lc_uid_count(void);

/* ---- cgroup.c */
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

/* ---- hostimage.c */
/* The cached skeleton of the host image (dirs, merged-usr links, a copy of
 * the parts of /etc that programs need), owned by uid_base. */
int lc_hostimage_skel(char **dir, bool rootless, lc_error_t **err);
/* The lower layer above the skeleton with passwd and group for the spec's
 * uid and gid (and its home), cached next to skel, owned by owner. */
int lc_hostimage_etc(const char *skel, const lc_spec_t *spec, uid_t owner, gid_t gowner, char **out, lc_error_t **err);

/* ---- state.c */
int lc_state_write(const char *id, json_t *state, lc_error_t **err);
json_t *lc_state_read(const char *id, lc_error_t **err);
int lc_state_remove(const char *id);
/* Remove names/NAME if it still names id. */
void lc_name_unlink(const char *id, const char *name);
bool lc_id_valid(const char *id);
/* Resolve an id or a name to an id. */
int lc_state_resolve(const char *id_or_name, char **id, lc_error_t **err);
/* Resolve an id or a name (*id) and read its state. */
json_t *lc_state_open(const char *id_or_name, char **id, lc_error_t **err);
/* Record name for sandbox id ($run/names/NAME -> id): 1 made, 0 it was
 * id's already; LC_EXIT_BUSY when another live sandbox has it. */
int lc_name_link(const char *id, const char *name, lc_error_t **err);

/* ---- sync.c: messages between lcrun, the staging process and pid 1 */
enum {
	LC_MSG_USERNS = 1, /* staging -> parent: user namespace made (write the maps unless joined) */
	LC_MSG_GO,         /* parent -> staging: directory made; maps written; network set up */
	LC_MSG_PID,        /* staging -> parent: host pid of pid 1 in a */
	LC_MSG_READY,      /* pid 1 -> parent: root set up, command starting */
	LC_MSG_ERROR,      /* any -> parent: serialized lc_error_t in text */
	LC_MSG_EXIT,       /* pid 1 -> parent: command ended: a = code, b = signal */
	LC_MSG_STAGING,    /* forked child -> threaded parent: host pid of the staging process */
	LC_MSG_DISK,       /* parent -> staging, before the first GO: the disk's mount (fd) */
			   /* it cloned into the cgroup in a (-1: none, it is the staging process) */
};
typedef struct lc_msg {
	int type;
	int a, b;
	char text[2048];
} lc_msg_t;
int lc_msg_send(int fd, int type, int a, int b, const char *text);
int lc_msg_send_error(int fd, const lc_error_t *e);
/* 1 on a message, 0 on EOF, -1 on error. */
int lc_msg_recv(int fd, lc_msg_t *m);

/* ---- init.c */
struct lc_seccomp_prog;
/* pid 1: fork the command, reap, forward signals, exit with its status.
 * envp is the command's complete environment. */
void lc_init_main(const lc_spec_t *spec, const struct lc_seccomp_prog *prog, char **envp, int sync_fd)
	__attribute__((noreturn));
/* The command's side, after fork: credentials, caps, seccomp, exec. */
void lc_exec_command(const lc_spec_t *spec, char *const *argv, const struct lc_seccomp_prog *prog,
		     char **envp, const char *workdir) __attribute__((noreturn));

/* ---- mounts.c */
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

/* ---- idmap.c */
/* An fd (the caller's to close) of a user namespace mapping count ids from
 * uid_from/gid_from (as files store them) to uid_to/gid_to (as the kernel
 * sees them): what mount_setattr(MOUNT_ATTR_IDMAP) takes.  Cached. */
int lc_idmap_userns(uid_t uid_from, uid_t uid_to, gid_t gid_from, gid_t gid_to, unsigned count, lc_error_t **err);
/* A new user namespace mapping 0..count-1 to base.. (uids and gids), not
 * cached: a sandbox's own (staging_main joins it).  *child: the killed
 * process that made it, for the caller to reap. */
int lc_userns_new(uid_t base, unsigned count, pid_t *child, lc_error_t **err);

/* ---- proctitle.c: what /proc/PID/cmdline and comm show for processes
 * the sandbox can see (pid 1, exec's helper): a fixed title, never the
 * host's command line. */
/* This process shows title: written over its argument strings (and, when
 * they are too short for it, the environment strings after them, once
 * environ points at copies). */
void lc_proc_title(const char *title);
typedef struct lc_proc_args {
	unsigned long start, end; /* the caller's argument strings */
	char *copy;               /* what they held, while the title is there */
} lc_proc_args_t;
/* Around a clone whose child the sandbox sees from its first instant: the
 * caller shows title from begin to end, which puts its own strings back (a
 * lock is held in between; nothing in the caller may read its argv
 * meanwhile, and the child must not use pointers into it).  The child
 * calls lc_proc_title_child with the same saved. */
void lc_proc_title_begin(const char *title, lc_proc_args_t *saved);
void lc_proc_title_end(lc_proc_args_t *saved);
void lc_proc_title_child(const char *title, const lc_proc_args_t *saved);

/* Resolving inside a root that is not ours yet (lcrun-oci's containers):
 * open path under rootfd without leaving it; make a mount target (a
 * directory, or a file when is_file); remount a bind read-only keeping
 * its locked flags; mask a path (tmpfs or /dev/null) or make it read-only. */
int lc_open_in_root(int rootfd, const char *path, int flags);
int lc_target_in_root(int rootfd, const char *path, bool is_file, lc_error_t **err);
int lc_remount_ro(const char *target);
int lc_mask_path(int rootfd, const char *path, lc_error_t **err);
int lc_readonly_path(int rootfd, const char *path, lc_error_t **err);

/* ---- sandbox.c: one sandbox being started, run and torn down */
typedef struct lc_sb {
	const lc_spec_t *spec;
	char start_error[256]; /* pid 1's word after READY: it could not start the command */
	char id[LC_ID_LEN + 1];
	char *sbdir;
	bool rootless;
	bool host_image;
	bool state_written;
	bool state_dir_made; /* this start made the (empty) state directory */
	int claim_fd;        /* that directory, flocked (shared) until the first
				state is written: lcrun gc removes a claim
				without state only when nobody holds it */
	bool name_linked;
	bool net_up;          /* lc_net_prepare() ran (and no attach failed): lc_net_teardown() at the end */
	lc_rootfs_plan_t plan;
	lc_cgroup_t cg;
	lc_seccomp_prog_t prog;
	char **envp;
	bool secrets_noted; /* spec->secret_env and envp (lc_secret_note) */
	int sp[2];
	pid_t staging;
	pid_t userns_child; /* lc_userns_new's, killed, to reap */
	pid_t init;
	int pidfd;
	long long start_ms;
	long long created_ms;
	bool no_command; /* create: pid 1 idles, commands come by exec */
	bool reuse_dir;  /* start: the sandbox directory and state exist (stopped) */
	bool idmapped;   /* the staging process could idmap the lower layers */
	bool throwaway;  /* lc_run without --keep: nothing of it outlives the run */
	bool single_threaded; /* the caller, at lc_sb_init: raw clone3, removers, its own user namespace */
	bool empty_lower;     /* an image of config only: private/ovl/empty is its lower */
	bool joined;          /* lcrun made the user namespace (sent with the GO), staging joins it */
	struct lc_lease *lease; /* the network's, from lc_net_prepare (lc_sb_begin) for lc_net_attach */
	bool prog_later;      /* the seccomp program is made after the staging fork and sent to
			       * pid 1 with its GO (a memfd): joined, no network, no batch */
	bool hold_mntns;      /* the staging process sends its mount namespaces: */
	int held_ns[2];       /* held for the remover (remover_start) or the batch, -1 when none: */
#define LC_HELD_PID1 0        /* pid 1's (sent with PID) */
#define LC_HELD_STAGING 1     /* the staging process's own, left for pid 1's (sent with USERNS) */
	int rm_pipe;     /* socket to the remover forked while the command runs (-1: none) */
	char *rm_dst;    /* where the directory goes in trash/ for it */
	bool rm_locked;  /* the remover holds the directory's flock */
	bool rm_went;    /* it has the directory: the state directory goes to it too */
	struct lc_image_resolved *img; /* spec->image, resolved */
	const struct lc_run_shared *shared; /* made once for a batch (lc_run_batch), or NULL */
	bool got_exit;                      /* pid 1's EXIT came (during lc_sb_start, or after): */
	int exit_code, exit_signal;         /* what it said */
	bool got_pid, got_ready;            /* lc_sb_step: the two words that end the start */
	bool timed_out;                     /* lc_sb_expire killed it */
	const int *foreign_fds;             /* the caller's fds the staging process closes first */
	size_t n_foreign_fds;               /* (a batch's, of its other sandboxes) */
	int stage_ns;                       /* staging, in a batch: its own mount namespace, kept */
					    /* until it exits (pid 1 closes its copy at once) */
} lc_sb_t;
/* "net.KEY=VALUE" as spec->sysctls takes it (LC_EXIT_USAGE otherwise). */
int lc_sysctl_check(const char *kv, lc_error_t **err);
/* The command's environment: PATH, HOME, TERM, LANG, then spec->env. */
char **lc_build_env(const lc_spec_t *spec);

/* ---- shared.c: the parts of a batch (lc_run_batch) made once */
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

/* Fill defaults (before lc_sb_start). */
void lc_sb_init(lc_sb_t *c, const lc_spec_t *spec);
/* Validate, build the root, start pid 1; returns once pid 1 is READY.  The
 * caller becomes pid 1's parent (it must be the process that waits). */
int lc_sb_start(lc_sb_t *c, lc_error_t **err);
/* lc_sb_start in two halves, for a caller that starts many at once: begin
 * (everything up to the staging process's first word), then a step each
 * time c->sp[0] is readable: 0 more to come, 1 started, -1 failed. */
int lc_sb_begin(lc_sb_t *c, lc_error_t **err);
int lc_sb_step(lc_sb_t *c, lc_error_t **err);
/* Wait for the command (or pid 1) to end, honouring spec->timeout and
 * forwarding signals read from sigfd (-1: none). */
void lc_sb_wait(lc_sb_t *c, lc_result_t *res, int sigfd);
/* lc_sb_wait's parts, for a caller that waits for many at once: when
 * spec->timeout ends (-1: never), and what to do then; a signal to pid 1;
 * a word from pid 1 (false: it hung up); has pid 1 exited (without a
 * pidfd); reap it and fill res's status. */
long long lc_sb_deadline(const lc_sb_t *c);
void lc_sb_expire(lc_sb_t *c);
void lc_sb_signal(lc_sb_t *c, int sig);
bool lc_sb_sync_read(lc_sb_t *c);
bool lc_sb_exited(lc_sb_t *c);
void lc_sb_reap(lc_sb_t *c, lc_result_t *res);
/* lc_run's parts around lc_sb_start and lc_sb_wait: set c and res up;
 * once started (res's id, a run's remover, a batch's held namespace);
 * at the end (statistics, teardown, c freed). */
void lc_sb_run_prepare(lc_sb_t *c, const lc_spec_t *spec, const lc_run_shared_t *sh, lc_result_t *res);
void lc_sb_run_started(lc_sb_t *c, lc_result_t *res);
void lc_sb_run_finish(lc_sb_t *c, lc_result_t *res, bool started);
/* Kill what is left; remove cgroup, directories and state unless keep. */
void lc_sb_teardown(lc_sb_t *c, bool keep);
void lc_sb_free(lc_sb_t *c);
json_t *lc_sb_state_json(lc_sb_t *c, const char *status);
int lc_sb_save_state(lc_sb_t *c, const char *status, lc_error_t **err);

#endif
