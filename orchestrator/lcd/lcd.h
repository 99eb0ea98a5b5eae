/* lcd.h — lcd_t, the service's shared state, and the helpers every layer
 * of lcd may call (lcd.c): the log, the clock, waits and threads.  Each
 * part of lcd declares its own API in a header beside its .c (core/tasks.h,
 * http/api.h, …); lcd's layers, and the way calls run between them
 * (main.c -> http/ -> core/ -> model/), are in docs/hacking.md. */
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
	/* http/exec.c's lcd_sessions_drop, set when the API starts (no session
	 * exists before): core/ ends a removed sandbox's sessions through it */
	void (*sessions_drop)(struct lcd *lcd, const char *sandbox);
	struct gw *gateway;           /* gateway.c: the model gateway, or NULL */
	struct lcd_devboxes *devboxes; /* devbox.c: sessions, keep_warm */
	struct lcd_pool *pool;        /* pool.c: sandboxes made ahead, or NULL */
	struct lcd_node *node;        /* nodes.c: this lcd as a node of its store */
	struct lcd_procs *procs;      /* procs.c: the E2B listener's commands, or NULL */

	/* tasks.c: spawns waiting to be committed as one group */
	pthread_mutex_t spawn_lock;
	pthread_cond_t spawn_done;
	struct lcd_spawn_req *spawn_queue, **spawn_tail;
	bool spawn_committing;
} lcd_t;

/* Its locks and conditions made, everything else zero; lcd_fini closes
 * the store and frees what main set. */
void lcd_init(lcd_t *lcd);
void lcd_fini(lcd_t *lcd);
void lcd_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The scheduler's clock: the clock file's time when one is set (a test
 * hook: the file holds epoch seconds or YYYY-MM-DDTHH:MM[:SS]Z), else now. */
long long lcd_now_s(lcd_t *lcd);
/* Wait on cond (with lcd->lock) for at most ms unless lcd is stopping;
 * returns true when it is stopping. */
bool lcd_sleep(lcd_t *lcd, pthread_cond_t *cond, long long ms);
/* CLOCK_REALTIME now + ms, for pthread_cond_timedwait. */
void lcd_deadline(struct timespec *ts, long long ms);

/* The signals lcd's main thread waits for (TERM, INT, HUP) and every
 * other thread, the runner too, blocks. */
void lcd_stop_signals(sigset_t *set);

/* Start fn(arg) in a detached thread; 0 or pthread_create's error. */
int lcd_thread_detached(void *(*fn)(void *), void *arg);

#endif
