/* oci.h — lcrun-oci, runc's command line on liblcrun: one file per verb. */
#ifndef LC_OCI_H
#define LC_OCI_H

#include <stdbool.h>
#include <sys/types.h>
#include <jansson.h>

#include "container.h"
#include "lcrun.h"

/* Global options (oci_main.c). */
typedef struct oci_globals {
	const char *root;       /* --root: state directory, default /run/lcrun-oci */
	const char *log;        /* --log FILE */
	bool log_json;          /* --log-format json */
	bool debug;
} oci_globals_t;
extern oci_globals_t oci_g;

/* Every failure of lcrun-oci exits 1, as runc's do; the message says why. */
#define OCI_EXIT_FAIL 1

/* Print "lcrun-oci: MSG" on stderr and to --log (text or JSON); returns 1. */
int oci_fail(lc_error_t *err);
int oci_failf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void oci_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A warning: to --log when given (an engine's shim hands create the
 * container's own stderr, which must not get the runtime's words), else
 * "lcrun-oci: warning: MSG" on stderr. */
void oci_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* oci_config.c: config.json → lc_ctr_spec_t.  bundle is a directory;
 * anything the spec defines that lcrun-oci does not do is refused by name. */
lc_ctr_spec_t *oci_config_load(const char *bundle, const char *id, lc_error_t **err);
/* The process object (config's process, or exec --process FILE) on its own. */
int oci_process_parse(json_t *proc, lc_ctr_process_t *p, const char *where, lc_error_t **err);
/* The hooks object into s->hooks (create keeps it in the state for delete). */
int oci_hooks_parse(json_t *hooks, lc_ctr_spec_t *s, lc_error_t **err);
/* Default config.json (oci spec). */
json_t *oci_default_config(bool rootless);
/* Signal by name (KILL, SIGKILL) or number; -1 if unknown. */
int oci_signal_parse(const char *s);

/* oci_container.c: ROOT/ID/state.json and the container's live status. */
typedef struct oci_container {
	char *id;
	char *dir;              /* ROOT/ID */
	json_t *state;          /* what create wrote */
	pid_t pid;
	const char *status;     /* creating, created, running, paused, stopped */
	const char *cgroup;     /* may be NULL */
} oci_container_t;
bool oci_id_valid(const char *id);
char *oci_dir(const char *id);
/* Load an existing container; "container \"ID\" does not exist" otherwise. */
int oci_load(const char *id, oci_container_t *c, lc_error_t **err);
void oci_container_clear(oci_container_t *c);
int oci_state_save(const char *id, json_t *state, lc_error_t **err);
/* The state as `state` prints it (runc's fields). */
json_t *oci_state_public(const oci_container_t *c);
/* Kill (SIGKILL), wait, remove the cgroup, run poststop, remove the state. */
int oci_destroy(oci_container_t *c, lc_error_t **err);
/* Signal the container's process, or (all) every process of its cgroup. */
int oci_signal(const oci_container_t *c, int sig, bool all, lc_error_t **err);
/* Write a pid file atomically. */
int oci_write_pid_file(const char *path, pid_t pid, lc_error_t **err);
/* Connect to --console-socket PATH; -1 with *err. */
int oci_console_connect(const char *path, lc_error_t **err);
/* For run/exec with a terminal and no --console-socket: relay our stdio to
 * the pty master received on sock until pid exits; returns its status. */
int oci_tty_relay(int sock, pid_t pid);
/* Wait for our child pid, forwarding INT/TERM/HUP/QUIT/USR1/USR2 to it. */
int oci_wait_forward(pid_t pid);

/* oci_create.c: create (and run) share this. */
int oci_do_create(const char *id, const char *bundle, const char *pid_file, const char *console_socket,
		  int preserve_fds, bool no_pivot, bool no_new_keyring, int *console_peer, pid_t *pid);

/* oci_start.c: open the exec fifo, run the poststart hooks. */
int oci_start_loaded(oci_container_t *c, lc_error_t **err);

int oci_cmd_create(int argc, char **argv);
int oci_cmd_start(int argc, char **argv);
int oci_cmd_run(int argc, char **argv);
int oci_cmd_state(int argc, char **argv);
int oci_cmd_kill(int argc, char **argv);
int oci_cmd_delete(int argc, char **argv);
int oci_cmd_exec(int argc, char **argv);
int oci_cmd_ps(int argc, char **argv);
int oci_cmd_pause(int argc, char **argv);
int oci_cmd_resume(int argc, char **argv);
int oci_cmd_features(int argc, char **argv);
int oci_cmd_spec(int argc, char **argv);
int oci_cmd_list(int argc, char **argv);

#endif
