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

/* ---- sandbox description ------------------------------------------------ */

typedef struct lc_mount {
	char *src; /* host path (NULL for tmpfs) */
	char *dst; /* path inside the sandbox */
	bool ro;
	bool tmpfs;
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
} lc_spec_t;

lc_spec_t *lc_spec_new(void);
void lc_spec_free(lc_spec_t *spec);
/* A spec as JSON (kept in state.json so that exec applies the same
 * identity, capabilities and seccomp profile) and back. */
json_t *lc_spec_to_json(const lc_spec_t *spec);
lc_spec_t *lc_spec_from_json(json_t *j);
/* Default capability set (Docker's list) as a bitmask. */
uint64_t lc_caps_default(void);
/* Parse a capability name ("CAP_NET_RAW" or "net_raw"); -1 if unknown. */
int lc_cap_from_name(const char *name);
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
} lc_result_t;

/* Run spec->argv in a new sandbox and wait for it; tears everything down
 * (unless spec->keep).  Returns 0 when the command ran (its status is in
 * res), negative with *err when the sandbox could not be made. */
int lc_run(const lc_spec_t *spec, lc_result_t *res, lc_error_t **err);
/* The result as the JSON object --result writes. */
json_t *lc_result_to_json(const lc_result_t *res);

/* Kill every process of a sandbox (cgroup.kill or its pid namespace). */
int lc_sandbox_kill(const char *id_or_name, lc_error_t **err);

#endif
