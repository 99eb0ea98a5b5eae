/* lcrun.h — the stable API of liblcrun.
 *
 * The lcrun CLI and the lcd service are both written against this header
 * only.  Every function that can fail returns a negative int and fills an
 * lc_error_t (see error.h); on success it returns 0 (or a count). */
#ifndef LCRUN_H
#define LCRUN_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <jansson.h>

#include "error.h"

#define LC_ID_LEN 12 /* hex chars of a sandbox id */

/* Where lcrun keeps things (overridable for tests with LCRUN_ROOT /
 * LCRUN_STATE_DIR environment variables, see paths.c). */
const char *lc_lib_dir(void);   /* /var/lib/lcrun */
const char *lc_run_dir(void);   /* /run/lcrun */
const char *lc_policy_dir(void);/* $(datadir)/lcrun/policies, or the source tree's */
/* lc_lib_dir / lc_run_dir made if missing (0700 / 0711) and held to this
 * user alone: a default one that others can reach is made private again;
 * one set with LCRUN_ROOT / LCRUN_STATE_DIR that others can reach, or that
 * belongs to another user, is refused (LC_EXIT_PERM, the message says what
 * to do).  Checked once per process; callers before anything is written
 * there. */
int lc_lib_dir_hold(lc_error_t **err);
int lc_run_dir_hold(lc_error_t **err);
/* lc_run_dir() as realpath gives it (as given when it cannot). */
const char *lc_run_dir_real(void);

/* ---- sandbox description ------------------------------------------------ */

/* lc_mount_t.idmap: whether a bind is an idmapped mount, so that its
 * source's host owner is the sandbox's user inside (uid and gid: root, or
 * spec->uid/gid) and what the sandbox creates there belongs to that owner
 * on the host.  Other ids in the tree show as the overflow id (nobody). */
enum {
	LC_IDMAP_AUTO = 0, /* a root caller's read-write bind, where the filesystem can be idmapped */
	LC_IDMAP_ON,       /* always; LC_EXIT_RUNTIME where the filesystem cannot (9p, overlay) */
	LC_IDMAP_OFF,      /* never: host ids outside the sandbox's range show as nobody */
};

typedef struct lc_mount {
	char *src; /* host path (NULL for tmpfs) */
	char *dst; /* path inside the sandbox */
	bool ro;
	bool tmpfs;
	int idmap; /* LC_IDMAP_* (binds only) */
} lc_mount_t;

typedef struct lc_rlimit {
	int resource; /* RLIMIT_* */
	rlim_t soft, hard;
} lc_rlimit_t;

typedef enum { LC_NET_NONE = 0, LC_NET_ALLOW, LC_NET_OPEN } lc_net_mode_t;

typedef struct lc_net_rule {
	int family;              /* AF_INET or AF_INET6 */
	unsigned char addr[16];  /* network address, host bits zero */
	int prefix;              /* 0..32 or 0..128 */
	unsigned short ports[32];
	size_t n_ports;          /* 0: every port */
} lc_net_rule_t;

typedef struct lc_host_entry {
	char *name;
	char *ip;
} lc_host_entry_t;

typedef struct lc_net_spec {
	lc_net_mode_t mode;
	lc_net_rule_t *allow;
	size_t n_allow;
	lc_host_entry_t *hosts; /* pinned in the sandbox's /etc/hosts */
	size_t n_hosts;
	char *dns;              /* resolver address written to resolv.conf, or NULL */
	char *policy;           /* name of the policy it came from, or NULL */
} lc_net_spec_t;

typedef struct lc_limits {
	long long memory;      /* bytes; -1: no limit */
	long long memory_swap; /* bytes; -1: 0 when memory is set */
	long long pids;        /* -1: no limit (default 4096 is set by lc_spec_new) */
	double cpus;           /* 0: no limit; 0.5 = half a CPU */
	int cpu_weight;        /* 0: unset, else 1..10000 */
	int io_weight;         /* 0: unset, else 1..10000 */
	bool best_effort;      /* skip limits the host cannot enforce, and say so */
	long long disk;        /* bytes: the upper layer on a filesystem of this size
				  of its own (disk.h), ENOSPC past it; 0: none (the
				  upper shares LCRUN_ROOT's filesystem).  Root only */
} lc_limits_t;

typedef struct lc_spec {
	char *id;        /* preset id (LC_ID_LEN hex chars) or NULL to draw one */
	char *name;      /* optional unique name */
	char **argv;     /* command to run (NULL-terminated); NULL for create */
	char **env;      /* K=V entries on top of the clean environment */
	char **secret_env; /* K=V given to the command but never written down:
			      not in state.json, logs, images or snapshots */
	char *workdir;   /* default "/" (or the image's) */
	char *hostname;  /* default "lcrun" */
	uid_t uid;       /* inside the sandbox; default 0 */
	gid_t gid;
	bool user_set;
	char *rootfs;    /* lower layer directory, or NULL */
	char *image;     /* image name, or NULL; neither: the host image */
	lc_mount_t *mounts;
	size_t n_mounts;
	uint64_t caps;   /* capability bitmask kept in the sandbox */
	lc_rlimit_t *rlimits;
	size_t n_rlimits;
	char *seccomp;   /* profile path, "unconfined", or NULL for default.json */
	lc_limits_t limits;
	lc_net_spec_t net;
	int timeout;     /* seconds; 0: none */
	bool keep;       /* keep the upper layer and state after the run */
	int ttl;         /* seconds (create) */
	int idle_timeout;/* seconds (create) */
	int stdio[3];    /* fds for the command; -1: inherit lcrun's own */
	bool forward_signals; /* lc_run forwards INT/TERM/HUP/QUIT/USR1/USR2/WINCH
				 it receives to the command (the CLI sets it) */
	char *upper_dir; /* an existing directory (e.g. a mounted disk) that holds
			    the overlay upper and work directories (upper/, work/,
			    and usr-upper/, usr-work/ on the host image), so they
			    outlive the sandbox; NULL: its own directory */
	bool new_privs;  /* do not set no_new_privs: setuid binaries (sudo) and
			    file capabilities work inside, bounded by the user
			    namespace and the capability bounding set; the
			    seccomp filter stays */
	char **sysctls;  /* "net.KEY=VALUE": written in the sandbox's own network
			    namespace before anything runs in it */
} lc_spec_t;

lc_spec_t *lc_spec_new(void);
void lc_spec_free(lc_spec_t *spec);
/* A spec as JSON (kept in state.json so that exec applies the same
 * identity, capabilities and seccomp profile) and back. */
json_t *lc_spec_to_json(const lc_spec_t *spec);
lc_spec_t *lc_spec_from_json(json_t *j);
/* All of it but the stdio fds, for another process of the same build to
 * run (lc_spec_from_json reads it back), secret_env included: the text
 * is as secret as the spec.  Strings must be UTF-8 (JSON's); lcd's all
 * come from JSON. */
json_t *lc_spec_to_wire(const lc_spec_t *spec);
/* Default capability set (Docker's list) as a bitmask. */
uint64_t lc_caps_default(void);
/* Parse a capability name ("CAP_NET_RAW" or "net_raw"); -1 if unknown. */
int lc_cap_from_name(const char *name);
/* "SRC:DST[:OPT,...]" as --bind takes it; OPT: ro, rw, idmap, noidmap.
 * ro_default: --ro-bind.  SRC is taken as given (not resolved). */
int lc_bind_parse(const char *arg, bool ro_default, lc_mount_t *out, lc_error_t **err);
/* "RLIMIT=soft[:hard]" as --ulimit takes it (nofile=1024:2048). */
int lc_rlimit_parse(const char *s, lc_rlimit_t *out, lc_error_t **err);

/* Apply the named limit set from policies/limits.json ("best-effort" only
 * sets best_effort). */
int lc_limits_load(const char *name, lc_limits_t *lim, lc_error_t **err);

/* ---- running ------------------------------------------------------------ */

typedef struct lc_result {
	char id[LC_ID_LEN + 1];
	int exit_code;      /* as lcrun exits: status, 128+N, 124, 126, 127 */
	int signal;         /* signal that ended the command, 0 if it exited */
	bool timed_out;
	bool oom_killed;
	long long wall_us;
	long long cpu_user_us, cpu_system_us; /* -1 when unknown */
	long long memory_peak;              /* bytes, -1 when unknown */
	long long pids_peak;                /* -1 when unknown */
	char limits_not_applied[128];       /* --limits best-effort: what was skipped */
	char start_error[256];              /* pid 1 could not start the command: why ("" if it did) */
} lc_result_t;

/* Run spec->argv in a new sandbox and wait for it; tears everything down
 * (unless spec->keep).  Returns 0 when the command ran (its status is in
 * res), negative with *err when the sandbox could not be made. */
int lc_run(const lc_spec_t *spec, lc_result_t *res, lc_error_t **err);
/* The result as the JSON object --result writes. */
json_t *lc_result_to_json(const lc_result_t *res);

/* ---- many sandboxes from one spec (shared.c, batch.c) -------------------
 *
 * What N sandboxes started from one spec may prepare once, before the
 * caller starts them (lc_run_batch): the seccomp program, the map-only
 * user namespace lower layers are idmapped with, and a trash directory
 * their directories are moved into at teardown (instead of a remover per
 * sandbox).  lc_run_shared_free, in the process that made it and after
 * every sandbox has ended, starts one background removal of that
 * directory.  Each sandbox is otherwise made as lc_run makes it. */
typedef struct lc_run_shared lc_run_shared_t;
int lc_run_shared_new(const lc_spec_t *spec, lc_run_shared_t **out, lc_error_t **err);
void lc_run_shared_free(lc_run_shared_t *sh);
/* count sandboxes of spec (sh made from it), all started, watched and
 * torn down by the calling process (single-threaded), which becomes
 * every pid 1's parent; with a network, each by a process of its own
 * forked from it.  done(i, result, ud) as sandbox i (0-based) ends, in
 * any order: lc_result_to_json's object, or {"error", "exit_code"}
 * for one that could not be made (the caller owns it).  Signals read from
 * sigfd (-1: none) go to every sandbox, as lc_run forwards them, except
 * those the kernel sent (a terminal's reach the sandboxes themselves);
 * a sandbox still starting gets them once it runs. */
typedef void (*lc_batch_done_fn)(long i, json_t *result, void *ud);
void lc_run_batch(const lc_spec_t *spec, const lc_run_shared_t *sh, long count, int sigfd, lc_batch_done_fn done,
		  void *ud);

/* Kill every process of a sandbox (cgroup.kill or its pid namespace). */
int lc_sandbox_kill(const char *id_or_name, lc_error_t **err);

/* ---- long-lived sandboxes (lifecycle.c, exec.c, copy.c, gc.c) ----------
 *
 * A created sandbox runs its pid 1 with no command under a monitor process
 * of its own (it outlives the caller).  State: lc_run_dir()/ID/state.json;
 * "status" is one of creating, running, paused, stopped, removing (plus
 * "dead" as reported when its processes vanished without a stop, and
 * "exited" for a `run --keep`).  Every function takes an id, a unique id
 * prefix (4+ chars) or a name.  Errors: LC_EXIT_UNKNOWN (no such sandbox),
 * LC_EXIT_STATE (wrong state), LC_EXIT_BUSY (name taken, another command
 * is changing the sandbox). */

/* Start spec (no argv; spec->ttl, spec->idle_timeout, spec->name apply)
 * and return once its pid 1 is up; id receives its id. */
int lc_sandbox_create(const lc_spec_t *spec, char id[LC_ID_LEN + 1], lc_error_t **err);
/* Give a running sandbox made by lc_sandbox_create without a name, that
 * nothing has run in yet (lcd's pool), what a create sets without making
 * a namespace, mount or cgroup: spec's name, env, ttl and idle_timeout.
 * Its "created" becomes now and the ttl counts from then.  Nothing else
 * of spec is looked at.  LC_EXIT_BUSY: the name is taken. */
int lc_sandbox_claim(const char *id, const lc_spec_t *spec, lc_error_t **err);
/* When a running or paused sandbox is removed: at expires_ms (wall clock,
 * ms since the epoch; earlier than now: at once), or never (0).  Its ttl
 * becomes the time from its "created" to then, so that a stop and a start
 * keep the same end.  LC_EXIT_STATE for a stopped one, or one without a
 * monitor. */
int lc_sandbox_set_expiry(const char *id_or_name, long long expires_ms, lc_error_t **err);
/* Start a stopped sandbox again on its kept upper layer. */
int lc_sandbox_start(const char *id_or_name, lc_error_t **err);
/* Kill its processes, keep its files (upper layer) and state. */
int lc_sandbox_stop(const char *id_or_name, lc_error_t **err);
/* Remove a stopped sandbox (force: a running one too). */
int lc_sandbox_remove(const char *id_or_name, bool force, lc_error_t **err);
/* Freeze / thaw every process (cgroup.freeze; memory is kept). */
int lc_sandbox_pause(const char *id_or_name, lc_error_t **err);
int lc_sandbox_resume(const char *id_or_name, lc_error_t **err);
/* The state JSON, with "status" as it is now. */
json_t *lc_sandbox_inspect(const char *id_or_name, lc_error_t **err);
/* One object per sandbox: id, name, image, state, created (ms since the
 * epoch), net, address, cpu_usec, memory_bytes (null when unknown). */
json_t *lc_sandbox_list(lc_error_t **err);
json_t *lc_sandbox_info(const char *id, json_t *state);
/* The state JSON of a sandbox by its id, as written: "status" not checked
 * against its processes (lc_sandbox_info does, once), for a listing that
 * has its ids.  NULL with LC_EXIT_UNKNOWN when there is no such sandbox. */
json_t *lc_sandbox_state(const char *id, lc_error_t **err);
/* An fd of a running sandbox's network namespace (setns(fd, CLONE_NEWNET)
 * in a thread of the caller's, to connect to a service inside: lcd's
 * devbox proxy).  LC_EXIT_STATE when it does not run. */
int lc_sandbox_netns(const char *id_or_name, lc_error_t **err);
/* Copy the log of detached execs to fd out (follow: until the sandbox is
 * removed or the reader goes away). */
int lc_sandbox_logs(const char *id_or_name, int out, bool follow, lc_error_t **err);

typedef struct lc_exec_opts {
	char **argv;         /* command (NULL-terminated) */
	char **env;          /* K=V on top of the sandbox's environment */
	const char *workdir; /* NULL: the sandbox's */
	bool user_set;       /* run as uid:gid instead of the sandbox's user */
	uid_t uid;
	gid_t gid;
	bool interactive;    /* the command reads stdin (else /dev/null) */
	bool tty;            /* a pty in the sandbox, relayed to stdio[0]/[1];
				a terminal on stdio[0] goes raw meanwhile */
	bool detach;         /* output to the sandbox's exec log; return once started */
	int timeout;         /* seconds; 0: none (exit code 124 when it expires) */
	int stdio[3];        /* fds for the command; -1: the caller's own 0/1/2 */
	bool forward_signals;/* INT/TERM/HUP/QUIT/USR1/USR2 go to the command */
	int cancel_fd;       /* > 0: once readable (or hung up) the command is
				killed (exit 137); 0 or -1: none.  For a caller
				that runs exec in a thread and must end it early. */
	int signal_fd;       /* > 0: each byte read from it is a signal number
				sent to the command (SIGWINCH: with tty, the
				sandbox's pty takes the window size of stdio[0]
				again); 0 or -1: none */
	bool new_pgroup;     /* the command leads a process group of its own, so
				that a timeout or a cancel kills its children too
				(not with tty; not for a command that reads the
				caller's terminal) */
} lc_exec_opts_t;
/* Run a command in a running sandbox and wait for it (unless detach);
 * res->exit_code as lc_run's.  LC_EXIT_STATE when stopped or paused. */
int lc_sandbox_exec(const char *id_or_name, const lc_exec_opts_t *opts, lc_result_t *res, lc_error_t **err);

/* Copy between the host and a running sandbox: src and dst are host
 * paths, "ID:/path" (id or name), or "-" for a tar stream on stdin/stdout.
 * Paths in the sandbox resolve in its own root: its symlinks cannot reach
 * host files. */
int lc_sandbox_copy(const char *src, const char *dst, lc_error_t **err);

/* The file API of lcd (the sandbox side of PUT/GET …/files).  Both work on
 * a running or paused sandbox, in a process that joined its user and mount
 * namespaces as its root, so paths (and symlinks) resolve in its own root.
 *
 * lc_sandbox_open_file: open path and return the fd (the caller reads or
 * writes it).  flags O_RDONLY: a regular file (a directory is
 * LC_EXIT_USAGE, anything else LC_EXIT_INVALID); O_WRONLY: created with
 * mode (or truncated) and given to the sandbox's user.  st (optional) gets
 * its stat.  A missing path or parent is LC_EXIT_NOENT. */
struct stat;
int lc_sandbox_open_file(const char *id_or_name, const char *path, int flags, mode_t mode, struct stat *st,
			 lc_error_t **err);
/* The same without a process of its own: the calling process joins the
 * sandbox's user and mount namespaces, for good (one made for this call,
 * single-threaded: lcd's runner makes one per request). */
int lc_sandbox_open_file_here(const char *id_or_name, const char *path, int flags, mode_t mode, struct stat *st,
			      lc_error_t **err);
/* Join a running or paused sandbox's user and mount namespaces in the
 * calling process, for good, as the sandbox's root: paths (and symlinks)
 * then resolve in its own root.  For a process made for this, single-
 * threaded (lcd's runner makes one per request).  *spec (optional) gets
 * the sandbox's spec (lc_spec_free it): its user's ids, its workdir. */
int lc_sandbox_join_here(const char *id_or_name, lc_spec_t **spec, lc_error_t **err);
/* A tar stream into the directory path (in) or of path out of the sandbox:
 * returns once the sandbox side has checked path, with *fd the caller's end
 * of the stream (write the tar to it, or read it), which the caller closes
 * before lc_sandbox_tar_finish (abort: kill the copy).  Extraction gives
 * everything to the sandbox's user and refuses absolute paths, .. and
 * writing through symlinks. */
typedef struct lc_tar_job lc_tar_job_t;
int lc_sandbox_tar_start(const char *id_or_name, const char *path, bool in, int *fd, lc_tar_job_t **job,
			 lc_error_t **err);
int lc_sandbox_tar_finish(lc_tar_job_t *job, bool abort, lc_error_t **err);
/* The host side of the same streams, for clients (lcctl): a tar of path to
 * fd; a tar from fd extracted into the existing directory dir (no owners,
 * no setuid bits, no hard links, nothing outside dir).  Both change the
 * process's working directory. */
int lc_tar_from_host(const char *path, int fd, lc_error_t **err);
int lc_tar_to_host(int fd, const char *dir, lc_error_t **err);

/* Remove what crashed or killed lcrun processes left behind: cgroups,
 * sandbox dirs, state dirs, names of sandboxes that are not alive.  Never
 * touches a live sandbox.  removed (optional) gets one string per item. */
int lc_gc(json_t **removed, lc_error_t **err);
/* Let go what runs keep ready for the next ones (the spare network
 * namespaces' holder, lc_lib_dir()/spare); removed gets a line for each. */
int lc_gc_spares(json_t *removed, lc_error_t **err);
/* Wait for the background removals that runs leave for a moment (the
 * network remainders of lc_net_teardown_exited, the sandbox directories
 * lcrun-rm removes) to finish, at most timeout_ms (then LC_EXIT_BUSY).
 * Removes nothing itself: lc_gc() after it collects what a dead helper
 * left. */
int lc_gc_wait(int timeout_ms, lc_error_t **err);

#endif
