/* container.h — a container in the OCI runtime-spec's sense on liblcrun.
 *
 * lcrun's own sandboxes (sandbox.c) build their root from overlays and
 * always make every namespace.  An OCI container is described whole by its
 * bundle: the root is the bundle's directory as it is, the namespaces are
 * the ones listed (new, or joined by path), the mounts, devices and
 * process are the config's.  This is the internal entry point lcrun-oci
 * maps config.json onto; it shares the capability, seccomp, cgroup, mount
 * and console code with the rest of liblcrun.
 *
 * The create/start split: lc_ctr_create() returns once the container's
 * process (pid 1 of its pid namespace when it has one) is set up and
 * blocked opening the exec fifo; lc_ctr_start() opens the fifo's other
 * end, and the process goes on to exec the user's program.  The caller of
 * lc_ctr_create is not the container process's parent for long: it exits,
 * and the process is reaped by the nearest subreaper (conmon, the
 * containerd shim) as runc's is. */
#ifndef LC_CONTAINER_H
#define LC_CONTAINER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <jansson.h>

#include "lcrun.h"

typedef struct lc_ctr_mount {
	char *dst;
	char *type;          /* "bind" for binds, else the filesystem type */
	char *src;
	char *data;          /* options the kernel takes as data (size=…, mode=…) */
	unsigned long flags; /* MS_RDONLY, MS_NOSUID, … */
	unsigned long propagation; /* MS_PRIVATE|MS_REC, …; 0: unchanged */
	unsigned int rec_set;      /* MOUNT_ATTR_* applied recursively (rro, rnosuid, …) */
	bool bind;
	bool rec;            /* rbind */
	bool copyup;         /* tmpcopyup: copy what the new mount hides into it */
} lc_ctr_mount_t;

typedef struct lc_ctr_ns {
	int type;            /* CLONE_NEW* */
	char *path;          /* join this one, or NULL for a new one */
} lc_ctr_ns_t;

typedef struct lc_ctr_device {
	char *path;
	char type;           /* 'c', 'b', 'u' (= c), 'p' */
	unsigned major, minor;
	mode_t mode;         /* permission bits (0666 when not given) */
	uid_t uid;
	gid_t gid;
} lc_ctr_device_t;

/* One linux.resources.devices rule; -1 in major/minor is a wildcard. */
typedef struct lc_ctr_devrule {
	bool allow;
	char type;           /* 'a', 'c', 'b' */
	long long major, minor;
	unsigned access;     /* LC_DEV_READ | LC_DEV_WRITE | LC_DEV_MKNOD */
} lc_ctr_devrule_t;
enum { LC_DEV_MKNOD = 1, LC_DEV_READ = 2, LC_DEV_WRITE = 4 };

typedef struct lc_ctr_hook {
	char *path;
	char **args;
	char **env;
	int timeout;         /* seconds; 0: none */
} lc_ctr_hook_t;

typedef enum {
	LC_HOOK_PRESTART, LC_HOOK_CREATE_RUNTIME, LC_HOOK_CREATE_CONTAINER,
	LC_HOOK_START_CONTAINER, LC_HOOK_POSTSTART, LC_HOOK_POSTSTOP, LC_HOOK_KINDS
} lc_hook_kind_t;

enum { LC_CAP_BOUNDING, LC_CAP_EFFECTIVE, LC_CAP_PERMITTED, LC_CAP_INHERITABLE, LC_CAP_AMBIENT, LC_CAP_SETS };

typedef struct lc_ctr_process {
	char **args;
	char **env;
	char *cwd;
	uid_t uid;
	gid_t gid;
	gid_t *gids;         /* additionalGids */
	size_t n_gids;
	int umask;           /* -1: unchanged */
	bool terminal;
	unsigned short cols, rows; /* consoleSize; 0: unset */
	uint64_t caps[LC_CAP_SETS];
	lc_rlimit_t *rlimits;
	size_t n_rlimits;
	bool no_new_privs;
	bool oom_set;
	int oom_score_adj;
} lc_ctr_process_t;

typedef struct lc_ctr_spec {
	char *id;
	char *bundle;        /* absolute */
	char *rootfs;        /* absolute */
	bool rootfs_ro;
	lc_ctr_process_t proc;
	char *hostname;
	char *domainname;
	lc_ctr_mount_t *mounts;
	size_t n_mounts;
	lc_ctr_ns_t ns[8];
	size_t n_ns;
	char *uid_map;       /* "inside outside count\n…" for /proc/PID/uid_map */
	char *gid_map;
	lc_ctr_device_t *devices;
	size_t n_devices;
	lc_ctr_devrule_t *devrules;
	size_t n_devrules;
	char **sysctl;       /* "key=value" */
	char **masked;       /* maskedPaths */
	char **readonly;     /* readonlyPaths */
	unsigned long rootfs_propagation; /* 0: MS_SLAVE|MS_REC */
	char *cgroup;        /* absolute path of the container's cgroup v2 directory */
	lc_limits_t limits;
	char **unified;      /* "file=value" written to the cgroup */
	char *seccomp;       /* the profile as JSON text, or NULL */
	lc_ctr_hook_t *hooks[LC_HOOK_KINDS];
	size_t n_hooks[LC_HOOK_KINDS];
	json_t *annotations; /* object, for the state hooks receive */

	/* How to create it (from the command line). */
	char *fifo;          /* the exec fifo (made by lc_ctr_create) */
	int console_fd;      /* connected AF_UNIX socket that gets the pty master, or -1 */
	int preserve_fds;    /* fds 3..3+N-1 pass to the process */
	bool no_pivot;
	bool no_new_keyring;
} lc_ctr_spec_t;

lc_ctr_spec_t *lc_ctr_spec_new(void);
void lc_ctr_spec_free(lc_ctr_spec_t *s);
void lc_ctr_process_clear(lc_ctr_process_t *p);

/* The state the runtime spec defines, as hooks receive it on stdin. */
json_t *lc_ctr_state_json(const lc_ctr_spec_t *s, const char *status, pid_t pid);

/* Make the cgroup, the namespaces, the root, and the process waiting on
 * spec->fifo; runs the prestart, createRuntime and createContainer hooks.
 * *pid gets the container process's host pid.  On error nothing is left:
 * no process, cgroup or fifo. */
int lc_ctr_create(const lc_ctr_spec_t *s, pid_t *pid, lc_error_t **err);
/* A container without a mount namespace of its own builds its root in the
 * host's mount table, on top of root.path.  lc_ctr_mount_id: the id of the
 * top mount at path (0: unknown).  lc_ctr_detach_root: detach the root
 * create attached there, with everything mounted under it: the top mount
 * if it is ours (its id after create), or, ours unknown (0), if it is no
 * longer base (the id before create). */
uint64_t lc_ctr_mount_id(const char *path);
int lc_ctr_detach_root(const char *rootfs, uint64_t base, uint64_t ours, lc_error_t **err);
/* Let a created container run: open the fifo for reading (the process is
 * blocked opening it for writing), read its byte, remove the fifo. */
int lc_ctr_start(const char *fifo, lc_error_t **err);
/* Run one kind of hooks in the runtime's namespace with state on stdin;
 * stop at the first failure when must_succeed. */
int lc_ctr_run_hooks(const lc_ctr_spec_t *s, lc_hook_kind_t kind, const json_t *state, lc_error_t **err);

typedef struct lc_ctr_exec_opts {
	const char *cgroup;  /* the container's cgroup, or NULL */
	int console_fd;      /* as lc_ctr_spec_t's, or -1 */
	const char *seccomp; /* profile text, or NULL */
	bool no_new_keyring;
	int preserve_fds;
	bool detach;         /* return once started; *pid gets its host pid */
} lc_ctr_exec_opts_t;
/* Run proc in the running container whose process is pid: its
 * namespaces, cgroup, root.  Without detach, wait and put its exit code
 * (128+N for a signal) in *status. */
int lc_ctr_exec(pid_t pid, const lc_ctr_process_t *proc, const lc_ctr_exec_opts_t *o, pid_t *out_pid,
		int *status, lc_error_t **err);

/* ---- devfilter.c: linux.resources.devices as a cgroup v2 BPF program */
int lc_devfilter_attach(int cgroup_fd, const lc_ctr_devrule_t *rules, size_t n, lc_error_t **err);

/* ---- cgroup helpers the OCI front end needs (cgroup.c) */
/* mkdir -p of an arbitrary cgroup path under the v2 root, with the limits. */
int lc_cgroup_create_path(const char *path, const lc_limits_t *lim, char **unified, lc_error_t **err);
/* The pids in a cgroup (and its children), host pids. */
int lc_cgroup_pids(const char *path, pid_t **pids, size_t *n, lc_error_t **err);

#endif
