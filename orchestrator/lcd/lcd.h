/* lcd.h — the orchestrator service's shared state and its parts:
 * apps (app.c), the task queue and runner (queue.c), the scheduler
 * (sched.c), the HTTP API (api.c) and the entry point (lcd.c). */
#ifndef LCD_H
#define LCD_H

#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <stdbool.h>
#include <sys/types.h>
#include <jansson.h>

#include "db.h"
#include "lcrun.h"
#include "manifest.h"
#include "store.h"

typedef struct lcd_running {
	char id[LC_ID_LEN + 1];
	char sandbox_id[LC_ID_LEN + 1];
	bool cancel;
	long long started_ms;
	struct lcd_running *next;
} lcd_running_t;

struct lcd_session;

typedef struct lcd {
	lcd_db_t *db;
	/* http/api.c: a task's own API socket, bound into its sandbox at
	 * /run/lcd.sock (lcd_task_access), and its end (lcd_task_release) */
	struct lcd_api *api;
	int (*task_socket_open)(struct lcd *lcd, const char *task, char **path, lc_error_t **err);
	void (*task_socket_close)(struct lcd *lcd, const char *task);
	char *python_dir;  /* the Python client's directory bound there, or NULL */
	char *workloads_dir; /* the workload programs, bound read-only at /run/lcd/bin, or NULL */
	char *apps_dir;    /* the shipped apps' files (seeds, eval tasks), at /run/lcd/apps, or NULL */
	char *state_dir;  /* lc_lib_dir()/lcd */
	char *tasks_dir;  /* per-task directories, bound at /run/task */
	char *logs_dir;   /* ID.log: the task's stdout and stderr */
	char *clock_file; /* test hook: the scheduler's "now" (see lcd_now_s) */
	size_t max_body;
	unsigned long long max_upload; /* bytes of one upload through the files API */
	long long exec_memory_max;     /* bytes of exec output lcd holds for all execs at once */
	long long exec_memory;         /* ... held now (atomic; http/exec.c) */
	long long fork_image_ttl;     /* s a fork's image is kept (images.c) */
	char *registry;               /* REGISTRY/REPOSITORY images go through between nodes, or NULL */
	long long snapshot_image_ttl; /* s a snapshot's image is kept; 0: until removed */
	long long task_disk;          /* bytes of a task-made sandbox's upper layer (its default and ceiling,
					 unless its app's grant names one); 0: unbounded */
	int catchup_max;
	int nice;	   /* lcd's own nice value, read at start: the API raises its threads from it, tasks go below it */
	int task_nice;	   /* lcd.json "task_nice": tasks run this many levels below lcd */
	char **bind_roots; /* lcd.json "bind_roots": where functions' mounts may come from */
	int runner_fd;	   /* runner.c: the task runner's socket, -1 when there is none */
	pid_t runner_pid;
	bool runner_gone;  /* it ended: lcd makes the calls itself */
	bool runner_stalled; /* it took no request in RUNNER_ACK_MS: so until it reads its queue again */

	pthread_mutex_t lock;    /* guards everything below */
	pthread_cond_t wake;     /* dispatcher: something to start */
	pthread_cond_t changed;  /* a task changed state */
	pthread_cond_t idle;     /* a worker ended */
	pthread_cond_t tick;     /* scheduler: stop sleeping */
	lcd_app_t **apps;
	size_t n_apps;
	lcd_running_t *running;
	int workers;
	bool stopping;
	struct lcd_session *sessions; /* http/exec.c: sessions, each a shell's state between runs */
	struct gw *gateway;           /* gateway.c: the model gateway, or NULL */
	struct lcd_devboxes *devboxes; /* devbox.c: sessions, keep_warm */
	struct lcd_pool *pool;        /* pool.c: sandboxes made ahead, or NULL */
	struct lcd_node *node;        /* nodes.c: this lcd as a node of its store */
	struct lcd_procs *procs;      /* procs.c: the E2B listener's commands, or NULL */

	/* queue.c: spawns waiting to be committed as one group */
	pthread_mutex_t spawn_lock;
	pthread_cond_t spawn_done;
	struct lcd_spawn_req *spawn_queue, **spawn_tail;
	bool spawn_committing;
} lcd_t;

#include "net.h"

/* Fill spec with the named policy ("none": nothing to do). */
int lcd_net_policy(const char *function, const char *policy, lc_net_spec_t *spec, lc_error_t **err);

/* The signals lcd's main thread waits for (TERM, INT, HUP) and every
 * other thread, the runner too, blocks. */
void lcd_stop_signals(sigset_t *set);

/* ---- runner.c ---- */
/* Fork the task runner: before the database, the sockets and any thread. */
int lcd_runner_start(lcd_t *lcd, lc_error_t **err);
/* lc_run(spec) at nice value nice, in a child of the task runner (in lcd
 * itself if the runner is gone); spec's stdio fds stay the caller's. */
int lcd_runner_run(lcd_t *lcd, const lc_spec_t *spec, int nice, lc_result_t *res, lc_error_t **err);
/* lc_sandbox_create(spec), its monitor forked in a child of the runner. */
int lcd_runner_create(lcd_t *lcd, const lc_spec_t *spec, char id[LC_ID_LEN + 1], lc_error_t **err);
/* lc_sandbox_exec(id, opts), its helper forked in a child of the runner. */
int lcd_runner_exec(lcd_t *lcd, const char *id, const lc_exec_opts_t *opts, lc_result_t *res, lc_error_t **err);
/* lc_sandbox_start(id), its monitor forked in a child of the runner. */
int lcd_runner_start_sandbox(lcd_t *lcd, const char *id, lc_error_t **err);
/* lc_sandbox_open_file(id, …), in a child of the runner: the fd comes
 * back to the caller. */
struct stat;
int lcd_runner_open_file(lcd_t *lcd, const char *id, const char *path, int flags, mode_t mode, struct stat *st,
			 lc_error_t **err);
/* lc_sandbox_tar_start and _finish (the same contract), in a child of the
 * runner that holds the stream's job until lcd finishes it. */
typedef struct lcd_tar lcd_tar_t;
int lcd_runner_tar_start(lcd_t *lcd, const char *id, const char *path, bool in, int *fd, lcd_tar_t **job,
			 lc_error_t **err);
int lcd_runner_tar_finish(lcd_tar_t *job, bool abort, lc_error_t **err);
/* An upload's file: *fd to write path's new content to, made under a
 * temporary name beside it in the sandbox; lcd_runner_tar_finish then
 * puts it in place whole (abort false: synced, renamed over path) or
 * removes it.  Until then path keeps what it had. */
int lcd_runner_upload_start(lcd_t *lcd, const char *id, const char *path, mode_t mode, int *fd, lcd_tar_t **job,
			    lc_error_t **err);
/* An operation on a sandbox's files (sbfs.h says which: op's "op"), in a
 * child of the runner that joins the sandbox for it; its result in *out,
 * the file of "read" and "write" in *fd (NULL: closed).  Errors keep the
 * errno that says what failed in errnum. */
int lcd_runner_fs(lcd_t *lcd, const char *id, json_t *op, json_t **out, int *fd, lc_error_t **err);
/* lcd_runner_fs of a "write": its file is made beside path and put in place
 * whole by lcd_runner_tar_finish(*job, false) (abort true: removed); until
 * then path keeps what it had. */
int lcd_runner_fs_write(lcd_t *lcd, const char *id, json_t *op, json_t **out, int *fd, lcd_tar_t **job,
			lc_error_t **err);
/* A watch of a directory (op: {path, recursive}), by such a child, which
 * writes its events to *fd, a JSON text a line, until lcd closes it. */
int lcd_runner_watch(lcd_t *lcd, const char *id, json_t *op, int *fd, lc_error_t **err);

/* ---- app.c ---- */
int lcd_apps_load(lcd_t *lcd, lc_error_t **err);
/* The channel on which a deploy or a delete is told to the other nodes,
 * and what they do then: take the apps as the store has them now. */
#define LCD_APPS_CHANNEL "lcd_apps"
void lcd_apps_sync(lcd_t *lcd);
void lcd_apps_free(lcd_t *lcd);
/* A counted reference (lcd_app_unref it) or NULL. */
lcd_app_t *lcd_app_get(lcd_t *lcd, const char *name);
/* All apps, each referenced; free with lcd_apps_release. */
lcd_app_t **lcd_apps_snapshot(lcd_t *lcd, size_t *n);
void lcd_apps_release(lcd_app_t **apps, size_t n);
int lcd_deploy(lcd_t *lcd, json_t *manifest, bool *replaced, lcd_app_t **out, lc_error_t **err);
/* A function's mount source, checked against lcd->bind_roots (LC_EXIT_PERM
 * outside them).  resolve: follow symlinks (the source must exist; *out
 * gets the resolved path) -- when a task starts; at deploy the path as
 * written must lie under a root. */
int lcd_bind_source(const lcd_t *lcd, const char *source, bool resolve, char **out, lc_error_t **err);
int lcd_app_remove(lcd_t *lcd, const char *name, lc_error_t **err);

/* ---- queue.c ---- */
/* Queue tasks (one per element of args_list) for app:function; all or
 * nothing, LC_EXIT_BUSY when the function's queue is full. */
int lcd_spawn(lcd_t *lcd, const lcd_app_t *app, const char *function, const char *schedule, json_t *args_list,
	      json_t *ids, lc_error_t **err);
int lcd_cancel(lcd_t *lcd, const char *id, lc_error_t **err);
/* Wait until the task has ended or timeout_ms passed; returns the task. */
json_t *lcd_task_wait(lcd_t *lcd, const char *id, long long timeout_ms, lc_error_t **err);
bool lcd_state_final(const char *state);
/* Does a worker of this lcd run the task now? */
bool lcd_task_runs_here(lcd_t *lcd, const char *id);
/* Wait on cond (with lcd->lock) for at most ms unless lcd is stopping;
 * returns true when it is stopping. */
bool lcd_sleep(lcd_t *lcd, pthread_cond_t *cond, long long ms);
/* CLOCK_REALTIME now + ms, for pthread_cond_timedwait. */
void lcd_deadline(struct timespec *ts, long long ms);
/* At start: tasks left running by a crash are failed or queued again
 * (per retries), their sandboxes killed, their directories removed. */
int lcd_recover(lcd_t *lcd, lc_error_t **err);
void *lcd_dispatcher(void *arg);
/* Start fn(arg) in a detached thread; 0 or pthread_create's error. */
int lcd_thread_detached(void *(*fn)(void *), void *arg);
/* Kill every running task's sandbox (cancel flags stay as they are). */
void lcd_kill_running(lcd_t *lcd, bool only_cancelled);
/* Kill running tasks of one app and mark them cancelled. */
void lcd_cancel_app(lcd_t *lcd, const char *app);
const char *lcd_task_log_path(lcd_t *lcd, const char *id, char *buf, size_t len);

/* ---- sched.c ---- */
/* The scheduler's clock: the clock file's time when one is set (a test
 * hook: the file holds epoch seconds or YYYY-MM-DDTHH:MM[:SS]Z), else now. */
long long lcd_now_s(lcd_t *lcd);
void *lcd_scheduler(void *arg);
/* Fire a schedule now (lcctl run APP:SCHEDULE). */
int lcd_schedule_fire(lcd_t *lcd, const lcd_app_t *app, const lcd_schedule_t *s, json_t *ids, lc_error_t **err);
/* [{app, name, cron, function, paused, last_slot, next}] */
json_t *lcd_schedules_json(lcd_t *lcd, lc_error_t **err);

/* ---- tokens.c: who calls, and what a task may reach ---- */
/* The caller of one request: the operator (the operator socket, or the TCP
 * listener's bearer token), or a task through its own token, which reaches
 * only its app (maps, functions, tasks) and the sandboxes it made. */
typedef struct lcd_caller {
	bool operator;
	char task[LC_ID_LEN + 1];
	char app[64];
	char function[64];
} lcd_caller_t;
#define LCD_TOKEN_LEN 64
/* Find a live task token (stored as its SHA-256 only). */
/* The SHA-256 of a token, in hex: what lcd.db keeps of it. */
void lcd_token_hash(const char *token, char hex[65]);
bool lcd_token_check(lcd_t *lcd, const char *token, lcd_caller_t *who);
/* Give a task's sandbox its access to the API: a fresh token (LCD_TOKEN,
 * through spec->secret_env, never written down), the task socket bound at
 * /run/lcd.sock (LCD_SOCKET), the Python client on PYTHONPATH, the
 * workload programs read-only at /run/lcd/bin, the apps' files read-only
 * at /run/lcd/apps, LC_TASK_APP and LC_TASK_FUNCTION. */
int lcd_task_access(lcd_t *lcd, const char *task, const lcd_app_t *app, const lcd_function_t *fn, lc_spec_t *spec,
		    lc_error_t **err);
/* An attempt of the task ended (however): its token dies and the sandboxes
 * it made are removed.  Idempotent. */
void lcd_task_release(lcd_t *lcd, const char *task);

/* ---- sandboxes.c: the sandbox API's records and lifecycle ---- */
/* Parts of a request shared by create, exec and sessions; errors name
 * path.  env: {"K": "V"} or ["K=V"], appended to *out.  user: "UID[:GID]"
 * or a number, inside the sandbox's id range. */
int lcd_env_parse(json_t *v, const char *path, char ***out, lc_error_t **err);
int lcd_user_parse(json_t *v, const char *path, uid_t *uid, gid_t *gid, lc_error_t **err);
/* May who hand the secret name to a sandbox (a task: only a secret its
 * function declares), and is it set?  Errors name path. */
int lcd_secret_usable(lcd_t *lcd, const lcd_caller_t *who, const char *name, const char *path, lc_error_t **err);
/* An absolute path without ".." components. */
bool lcd_sandbox_path_ok(const char *p);
/* Make n sandboxes from a create request for who, all or none; their ids
 * are appended to ids.  image (optional) replaces the request's image (a
 * fork).  The one place lcd makes sandboxes. */
int lcd_sandbox_make(lcd_t *lcd, const lcd_caller_t *who, json_t *req, int n, const char *image, json_t *ids,
		     lc_error_t **err);
/* The same, with tune(spec, id, ud, err) run on each sandbox's spec right
 * before it is made (its id set): what a request cannot say (a devbox's
 * disk as its upper layer, no_new_privs off), and a caller that must
 * record the id before the sandbox exists. */
typedef int (*lcd_sandbox_tune_t)(lc_spec_t *spec, const char *id, void *ud, lc_error_t **err);
int lcd_sandbox_make_tuned(lcd_t *lcd, const lcd_caller_t *who, json_t *req, int n, const char *image, json_t *ids,
			   lcd_sandbox_tune_t tune, void *ud, lc_error_t **err);
/* The record of a sandbox who may see, by id or name; LC_EXIT_UNKNOWN
 * otherwise. */
json_t *lcd_sandbox_find(lcd_t *lcd, const lcd_caller_t *who, const char *ref, lc_error_t **err);
/* The API's view of a record: state, usage, owner, labels …; NULL when
 * the sandbox is gone (its ttl expired): the record is dropped then. */
json_t *lcd_sandbox_view(lcd_t *lcd, json_t *row);
/* The sandboxes who may see, filtered (each filter may be NULL; labels:
 * "K=V" strings). */
json_t *lcd_sandbox_list(lcd_t *lcd, const lcd_caller_t *who, const char *app, const char *state, char **labels,
			 lc_error_t **err);
/* Terminate and remove (idempotent). */
int lcd_sandbox_delete(lcd_t *lcd, const char *id, lc_error_t **err);
/* The app's sandboxes, live and ended (kept 30 days), newest first, at
 * most limit: [{id, name, app, task, function, image, labels, state
 * ("running", …, "terminated"), created, terminated, end_reason}].  app
 * NULL: every app (the operator); a task sees its own app only. */
json_t *lcd_sandbox_history(lcd_t *lcd, const lcd_caller_t *who, const char *app, long long limit, lc_error_t **err);
/* The environment entries (K=V) of the secrets a sandbox was given, read
 * from the store for each exec: they are never written elsewhere. */
int lcd_sandbox_secret_env(lcd_t *lcd, json_t *row, char ***env, lc_error_t **err);
int lcd_sandbox_snapshot(lcd_t *lcd, const lcd_caller_t *who, json_t *row, const char *name, json_t **out,
			 lc_error_t **err);
int lcd_sandbox_fork(lcd_t *lcd, const lcd_caller_t *who, json_t *row, int n, json_t **out, lc_error_t **err);
/* At start: tokens are dropped, sandboxes of tasks (none runs now) and
 * half-made ones are removed, records of vanished ones forgotten. */
int lcd_sandboxes_recover(lcd_t *lcd, lc_error_t **err);
/* A node removes what another marked for removal on it (a task of that
 * node ended, lcd_sandbox_delete there): told on this channel, and at
 * each heartbeat. */
#define LCD_SANDBOXES_CHANNEL "lcd_sandboxes"
void lcd_sandboxes_sweep(lcd_t *lcd);

/* ---- sbexec.c: sessions (persistent shells) ---- */
/* End the sessions of a sandbox (it is being removed). */
void lcd_sessions_drop(lcd_t *lcd, const char *sandbox);

/* ---- api.c ---- */
typedef struct lcd_api lcd_api_t;
/* The API's listeners: the TCP one ("HOST:PORT", NULL: none) with its
 * bearer token, how long a connection may sit idle or half-sent (s) and
 * how many connections one address may hold; the unix sockets' idle
 * time, and the connections one task, one local uid may hold there. */
typedef struct lcd_api_cfg {
	const char *addr;
	const char *token;
	unsigned idle_timeout, per_ip;
	unsigned unix_idle_timeout;
	int task_connections, operator_connections;
	const char *cluster_token; /* the other nodes' (forward.h): the operator's on TCP too */
} lcd_api_cfg_t;
#define LCD_TCP_IDLE_TIMEOUT_S 60
#define LCD_TCP_PER_IP 64
#define LCD_UNIX_IDLE_TIMEOUT_S 30
#define LCD_TASK_CONNECTIONS 32
#define LCD_OPERATOR_CONNECTIONS 256
/* Serve the operator on an already listening unix socket fd, each task on
 * a socket of its own (lcd->task_socket_open; a token of that task is
 * needed there), and on cfg->addr (if set) requiring a bearer token. */
int lcd_api_start(lcd_t *lcd, int unix_fd, const lcd_api_cfg_t *cfg, lcd_api_t **out, lc_error_t **err);
void lcd_api_stop(lcd_api_t *api);
/* Add a piece of a request body (libmicrohttpd's upload, *n bytes; *n is
 * set to 0).  Past max bytes the body stops growing and *too_big is set. */
void lcd_body_append(char **body, size_t *len, bool *too_big, const char *piece, size_t *n, size_t max);
struct addrinfo;
/* A listener's "HOST:PORT" (or "[V6]:PORT"), numeric: freeaddrinfo() the
 * result; errors name `what` and the address. */
struct addrinfo *lcd_listen_addr(const char *addr, const char *what, lc_error_t **err);

/* ---- webhook.c ---- */
/* The webhook listener, never the API's: POST /hooks/APP/NAME. */
typedef struct lcd_webhook_srv lcd_webhook_srv_t;
typedef struct lcd_webhook_cfg {
	const char *listen;   /* HOST:PORT */
	const char *tls_cert; /* PEM files: TLS when both are set */
	const char *tls_key;
	size_t max_body;
} lcd_webhook_cfg_t;
int lcd_webhook_start(lcd_t *lcd, const lcd_webhook_cfg_t *cfg, lcd_webhook_srv_t **out, lc_error_t **err);
/* Stop listening and wait for deliveries being handed on. */
void lcd_webhook_stop(lcd_webhook_srv_t *srv);

void lcd_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
