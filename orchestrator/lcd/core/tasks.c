/* queue.c — tasks: admission, the dispatcher, the worker that runs one
 * task in a fresh sandbox with lc_run(), cancel, and crash recovery.
 *
 * A task's life: queued (row inserted by lcd_spawn) -> running (the
 * dispatcher flips the row and presets the sandbox id in it BEFORE the
 * sandbox exists, so a crash at any moment leaves a row that names the
 * sandbox to kill) -> succeeded | failed | timed-out | cancelled, or back
 * to queued for a retry. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "access.h"
#include "apps.h"
#include "gateway.h"
#include "image.h"
#include "json.h"
#include "lcd.h"
#include "nodes.h"
#include "runner.h"
#include "tasks.h"
#include "util.h"

#define RESULT_MAX (1 << 20) /* result.json larger than this is refused */

bool lcd_state_final(const char *s)
{
	return s && (!strcmp(s, "succeeded") || !strcmp(s, "failed") || !strcmp(s, "timed-out") ||
		     !strcmp(s, "cancelled"));
}

const char *lcd_task_log_path(lcd_t *lcd, const char *id, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s.log", lcd->logs_dir, id);
	return buf;
}

/* Spawns are committed in groups: a spawn joins the queue, and the first
 * spawn to find no commit in progress commits every spawn waiting at
 * that moment in one transaction (lcd_store_task_add), then wakes them.
 * Each caller still returns only once its own rows are committed.  A
 * lone spawn commits at once, in its own thread; under load the database
 * lock is taken once per group instead of once per spawn, so spawns no
 * longer queue one behind the other on it (nor on its hand-overs from
 * thread to thread, which cost a wake-up each on a busy machine). */
struct lcd_spawn_req {
	lcd_task_add_t add;
	bool done;
	struct lcd_spawn_req *next;
};

static void commit_spawns(lcd_t *lcd, struct lcd_spawn_req *batch)
{
	size_t n = 0;
	for (struct lcd_spawn_req *r = batch; r; r = r->next)
		n++;
	lcd_task_add_t **reqs = lc_xmalloc0(n * sizeof(*reqs));
	n = 0;
	for (struct lcd_spawn_req *r = batch; r; r = r->next)
		reqs[n++] = &r->add;
	lcd_store_task_add(lcd->db, reqs, n, lc_wall_ms());
	/* The dispatcher is woken only when one of them can start now: when
	 * its function was at its concurrency, the worker that ends next
	 * wakes it (after this commit, so it finds the new rows). */
	bool start = false, queued = false;
	for (size_t i = 0; i < n; i++) {
		queued |= !reqs[i]->err;
		start |= !reqs[i]->err && reqs[i]->can_start;
	}
	free(reqs);
	if (queued) {
		pthread_mutex_lock(&lcd->lock);
		if (start)
			pthread_cond_broadcast(&lcd->wake);
		pthread_cond_broadcast(&lcd->changed);
		pthread_mutex_unlock(&lcd->lock);
	}
}

int lcd_spawn(lcd_t *lcd, const lcd_app_t *app, const char *function, const char *schedule, json_t *args_list,
	      json_t *ids, lc_error_t **err)
{
	const lcd_function_t *f = lcd_app_function(app, function);
	if (!f)
		return lc_error_set(err, LC_EXIT_UNKNOWN, 0, "app %s has no function '%s'", app->name, function);
	struct lcd_spawn_req me = {
		.add = { .app = app->name, .function = function, .schedule = schedule, .args_list = args_list,
			 .concurrency = f->concurrency, .queue = f->queue, .ids = ids },
	};
	pthread_mutex_lock(&lcd->spawn_lock);
	*lcd->spawn_tail = &me;
	lcd->spawn_tail = &me.next;
	while (!me.done) {
		if (lcd->spawn_committing) {
			pthread_cond_wait(&lcd->spawn_done, &lcd->spawn_lock);
			continue;
		}
		/* No commit in progress: every waiting spawn, this one among
		 * them (a finished group is marked done before the flag drops),
		 * is committed by this thread. */
		struct lcd_spawn_req *batch = lcd->spawn_queue;
		lcd->spawn_queue = NULL;
		lcd->spawn_tail = &lcd->spawn_queue;
		lcd->spawn_committing = true;
		pthread_mutex_unlock(&lcd->spawn_lock);
		commit_spawns(lcd, batch);
		pthread_mutex_lock(&lcd->spawn_lock);
		for (struct lcd_spawn_req *r = batch, *next; r; r = next) {
			next = r->next; /* r is gone once its thread sees done */
			r->done = true;
		}
		lcd->spawn_committing = false;
		pthread_cond_broadcast(&lcd->spawn_done);
	}
	pthread_mutex_unlock(&lcd->spawn_lock);
	if (me.add.err) {
		*err = me.add.err;
		return -1;
	}
	return 0;
}

static lcd_running_t *running_find(lcd_t *lcd, const char *id)
{
	for (lcd_running_t *r = lcd->running; r; r = r->next)
		if (!strcmp(r->id, id))
			return r;
	return NULL;
}

static void kill_sandbox(const char *sandbox_id)
{
	lc_error_t *err = NULL;
	if (lc_sandbox_kill(sandbox_id, &err) < 0) {
		/* Unknown: not made yet, or already gone.  Both are fine here. */
		if (err && err->exit_code != LC_EXIT_UNKNOWN)
			lcd_log("sandbox %s: %s", sandbox_id, err->msg);
		lc_error_free(err);
	}
}

bool lcd_task_runs_here(lcd_t *lcd, const char *id)
{
	pthread_mutex_lock(&lcd->lock);
	bool here = running_find(lcd, id) != NULL;
	pthread_mutex_unlock(&lcd->lock);
	return here;
}

int lcd_cancel(lcd_t *lcd, const char *id, lc_error_t **err)
{
	/* A task the dispatcher has just marked running may not have its
	 * worker yet: wait a little for it to appear rather than fail. */
	for (int tries = 0;; tries++) {
		int r = lcd_store_task_cancel_queued(lcd->db, id, lc_wall_ms(), err);
		if (r < 0)
			return -1;
		char sandbox[LC_ID_LEN + 1] = "";
		pthread_mutex_lock(&lcd->lock);
		lcd_running_t *run = r == 0 ? running_find(lcd, id) : NULL;
		if (run) {
			run->cancel = true;
			snprintf(sandbox, sizeof(sandbox), "%s", run->sandbox_id);
		}
		pthread_cond_broadcast(&lcd->changed);
		pthread_mutex_unlock(&lcd->lock);
		if (r == 1) {
			lcd_log("task %s: cancelled while queued", id);
			return 0;
		}
		if (*sandbox) {
			/* The scheduler tick kills again while the flag is set, which
			 * covers a sandbox that was still being made. */
			kill_sandbox(sandbox);
			lcd_log("task %s: cancel requested, sandbox %s killed", id, sandbox);
			return 0;
		}
		_cleanup_json_ json_t *t = lcd_store_task_get(lcd->db, id, err);
		if (!t)
			return *err ? -1 : lc_error_set(err, LC_EXIT_UNKNOWN, 0, "no task '%s'", id);
		const char *state = lc_json_str(t, "state");
		if (strcmp(state, "running") != 0)
			return lc_error_set(err, LC_EXIT_STATE, 0, "task %s has already ended (%s)", id, state);
		const char *node = lc_json_str(t, "node");
		if (node && strcmp(node, lcd_db_node(lcd->db)))
			return lc_error_set(err, LC_EXIT_STATE, 0, "task %s runs on node %s: it cancels it", id, node);
		if (tries >= 40)
			return lc_error_set(err, LC_EXIT_STATE, 0, "task %s is starting; try again", id);
		usleep(50 * 1000);
	}
}

void lcd_kill_running(lcd_t *lcd, bool only_cancelled)
{
	char (*ids)[LC_ID_LEN + 1] = NULL;
	size_t n = 0;
	pthread_mutex_lock(&lcd->lock);
	for (lcd_running_t *r = lcd->running; r; r = r->next)
		n++;
	ids = lc_xmalloc0((n + 1) * sizeof(*ids));
	n = 0;
	for (lcd_running_t *r = lcd->running; r; r = r->next)
		if (!only_cancelled || r->cancel)
			memcpy(ids[n++], r->sandbox_id, LC_ID_LEN + 1);
	pthread_mutex_unlock(&lcd->lock);
	for (size_t i = 0; i < n; i++)
		kill_sandbox(ids[i]);
	free(ids);
}

void lcd_cancel_app(lcd_t *lcd, const char *app)
{
	_cleanup_json_ json_t *rows = lcd_store_task_list(lcd->db, app, "running", 0, NULL);
	size_t i;
	json_t *t;
	json_array_foreach(rows, i, t) {
		lc_error_t *err = NULL;
		lcd_cancel(lcd, lc_json_str(t, "id"), &err);
		lc_error_free(err);
	}
}

json_t *lcd_task_wait(lcd_t *lcd, const char *id, long long timeout_ms, lc_error_t **err)
{
	long long deadline = lc_now_ms() + (timeout_ms > 0 ? timeout_ms : 0);
	for (;;) {
		json_t *t = lcd_store_task_get(lcd->db, id, err);
		if (!t) {
			if (!*err)
				lc_error_set(err, LC_EXIT_UNKNOWN, 0, "no task '%s'", id);
			return NULL;
		}
		long long left = deadline - lc_now_ms();
		if (lcd_state_final(lc_json_str(t, "state")) || left <= 0)
			return t;
		json_decref(t);
		/* Re-read at least every second: a broadcast can slip between
		 * the read above and the wait below. */
		if (lcd_sleep(lcd, &lcd->changed, left < 1000 ? left : 1000))
			return lcd_store_task_get(lcd->db, id, err);
	}
}

/* ---- running one task ---- */

struct job {
	lcd_t *lcd;
	lcd_app_t *app;
	const lcd_function_t *fn;
	json_t *task;
	char id[LC_ID_LEN + 1];
	char sandbox_id[LC_ID_LEN + 1];
};

/* The task's output goes straight to its log: on a full disk its own
 * writes fail (ENOSPC) and it usually exits non-zero saying so to the
 * log it cannot write.  Whether the log's disk is (nearly) full when it
 * ends is what lcd can tell: less than 1 MiB left to an unprivileged
 * writer (its sandbox's teardown may have given a little back). */
static bool log_disk_full(int logfd)
{
	struct statvfs sv;
	return fstatvfs(logfd, &sv) == 0 && (unsigned long long)sv.f_bavail * sv.f_frsize < (1ULL << 20);
}

static void log_line(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void log_line(int fd, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf, sizeof(buf) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n > sizeof(buf) - 2)
		n = sizeof(buf) - 2;
	buf[n++] = '\n';
	(void)lc_write_all(fd, buf, (size_t)n);
}

static bool strv_has(char *const *v, const char *s)
{
	for (; v && *v; v++)
		if (!strcmp(*v, s))
			return true;
	return false;
}

/* Build the sandbox description.  Secrets go into spec->secret_env only,
 * which liblcrun gives to the command and never writes down. */
static int make_spec(struct job *j, const char *taskdir, int logfd, int nullfd, lc_spec_t **out, lc_error_t **err)
{
	const lcd_function_t *f = j->fn;
	lc_spec_t *spec = lc_spec_new();
	if (!spec)
		return lc_error_set(err, LC_EXIT_RUNTIME, ENOMEM, "cannot make a sandbox spec");
	if (lcd_net_policy(f->name, f->net, &spec->net, err) < 0) {
		lc_spec_free(spec);
		return -1;
	}
	for (size_t i = 0; f->argv[i]; i++)
		lc_strv_push(&spec->argv, f->argv[i]);
	_cleanup_free_ char *e1 = lc_strdup_printf("LC_TASK_ID=%s", j->id);
	lc_strv_push(&spec->env, e1);
	lc_strv_push(&spec->env, "LC_TASK_DIR=/run/task");
	lc_strv_push(&spec->env, "LC_TASK_ARGS=/run/task/args.json");
	lc_strv_push(&spec->env, "LC_TASK_RESULT=/run/task/result.json");
	for (size_t i = 0; j->app->config && j->app->config[i]; i++) /* the manifest's config: not secret */
		lc_strv_push(&spec->env, j->app->config[i]);
	/* through the gateway, the key its model_gateway names stays in lcd */
	const char *gw_secret = f->model_gateway ? lc_json_str(f->model_gateway, "secret") : NULL;
	for (size_t i = 0; f->secrets && f->secrets[i]; i++) {
		if (gw_secret && !strcmp(f->secrets[i], gw_secret))
			continue;
		_cleanup_free_ char *v = lcd_store_secret_get(j->lcd->db, f->secrets[i], err);
		if (!v && !*err && strv_has(f->optional_secrets, f->secrets[i]))
			continue; /* optional, and not set */
		if (!v) {
			lc_spec_free(spec);
			if (*err)
				return -1;
			return lc_error_set(err, LC_EXIT_UNKNOWN, 0, "secret %s (declared by %s) is not set", f->secrets[i],
					    f->name);
		}
		_cleanup_free_ char *kv = lc_strdup_printf("%s=%s", f->secrets[i], v);
		lc_strv_push(&spec->secret_env, kv);
		explicit_bzero(kv, strlen(kv));
		explicit_bzero(v, strlen(v));
	}
	spec->mounts = lc_xmalloc0((1 + f->n_mounts) * sizeof(*spec->mounts));
	spec->mounts[0].src = strdup(taskdir);
	spec->mounts[0].dst = strdup("/run/task");
	spec->n_mounts = 1;
	/* The function's mounts: their sources resolved now, and still under
	 * lcd's bind_roots (the config may have changed since the deploy). */
	for (size_t i = 0; i < f->n_mounts; i++) {
		char *src = NULL;
		if (lcd_bind_source(j->lcd, f->mounts[i].src, true, &src, err) < 0) {
			lc_error_wrap(err, "mounts[%zu]", i);
			lc_spec_free(spec);
			return -1;
		}
		lc_mount_t *m = &spec->mounts[spec->n_mounts++];
		*m = f->mounts[i];
		m->src = src;
		m->dst = strdup(f->mounts[i].dst);
	}
	if (lcd_task_access(j->lcd, j->id, j->app, f, spec, err) < 0) {
		lc_spec_free(spec);
		return -1;
	}
	if (f->image && strcmp(f->image, "host") != 0) {
		spec->image = strdup(f->image);
		/* the image's env, workdir, user and entrypoint, as lcrun run does */
		lc_image_resolved_t *img = NULL;
		if (lc_image_resolve(spec->image, &img, err) < 0 || lc_image_apply_config(spec, img, err) < 0) {
			lc_image_resolved_free(img);
			lc_spec_free(spec);
			return -1;
		}
		lc_image_resolved_free(img);
	}
	long long default_pids = spec->limits.pids;
	spec->limits = f->limits;
	if (spec->limits.pids < 0) /* keep lc_spec_new's default */
		spec->limits.pids = default_pids;
	spec->timeout = f->timeout;
	spec->id = strdup(j->sandbox_id);
	spec->stdio[0] = nullfd;
	spec->stdio[1] = logfd;
	spec->stdio[2] = logfd;
	*out = spec;
	return 0;
}

/* The task's result: result.json when it is valid JSON, else null. */
static char *read_result(const char *taskdir, char **note)
{
	_cleanup_free_ char *path = lc_strdup_printf("%s/result.json", taskdir);
	struct stat st;
	if (lstat(path, &st) < 0)
		return NULL;
	if (!S_ISREG(st.st_mode) || st.st_size > RESULT_MAX) {
		*note = lc_strdup_printf("result.json ignored: not a regular file of at most %d bytes", RESULT_MAX);
		return NULL;
	}
	_cleanup_close_ int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	_cleanup_free_ char *buf = lc_xmalloc0((size_t)st.st_size + 1);
	ssize_t n = lc_read_all(fd, buf, (size_t)st.st_size);
	if (n < 0)
		return NULL;
	json_error_t je;
	_cleanup_json_ json_t *v = json_loadb(buf, (size_t)n, JSON_DECODE_ANY, &je);
	if (!v) {
		*note = lc_strdup_printf("result.json ignored: not valid JSON (%s)", je.text);
		return NULL;
	}
	return json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
}

static void finish(struct job *j, const char *state, const char *result, int exit_code, const char *error)
{
	lcd_t *lcd = j->lcd;
	lc_error_t *err = NULL;
	long long attempts = json_integer_value(json_object_get(j->task, "attempts"));
	bool cancelled = !strcmp(state, "cancelled");
	bool retry = !cancelled && strcmp(state, "succeeded") && attempts <= j->fn->retries;
	int r;
	_cleanup_free_ char *why = NULL;
	if (retry) {
		why = lc_strdup_printf("attempt %lld %s%s%s; retrying", attempts, state, error ? ": " : "", error ? error : "");
		r = lcd_store_task_requeue(lcd->db, j->id, why, &err);
		lcd_log("task %s (%s:%s): %s", j->id, j->app->name, j->fn->name, why);
	} else {
		r = lcd_store_task_finish(lcd->db, j->id, state, result, exit_code, error, lc_wall_ms(), &err);
		lcd_log("task %s (%s:%s): %s, exit %d%s%s", j->id, j->app->name, j->fn->name, state, exit_code,
			error ? ": " : "", error ? error : "");
	}
	/* A store that is away (a restart of the server) is waited for: the
	 * end is recorded once it is back, else the task would stay running.
	 * So is a disk full for lcd.db (ENOSPC), for as long as lcd runs (its
	 * next start marks the task failed otherwise), and the end recorded
	 * then is a failure that says so: not run again, not counted as done
	 * (what it wrote on that disk may be cut short too). */
	_cleanup_free_ char *late = NULL;
	for (int tries = 0; r < 0 && err && (err->exit_code == LC_EXIT_BUSY || err->errnum == ENOSPC) && tries < 600;
	     tries++) {
		if (tries == 0 && !late)
			lcd_log("task %s: cannot record its end yet (%s); trying again each second", j->id, err->msg);
		if (err->errnum == ENOSPC && !late) {
			late = lc_strdup_printf("its end could not be recorded when it came, lcd.db's disk was full (%s): it "
						"had %s%s%s",
						strerror(ENOSPC), state, error ? ": " : "", error ? error : "");
			retry = false;
			state = "failed";
			error = late;
		}
		if (err->errnum == ENOSPC)
			tries = 0; /* as long as lcd runs */
		lc_error_free(err);
		err = NULL;
		sleep(1);
		pthread_mutex_lock(&lcd->lock);
		bool stopping = lcd->stopping;
		pthread_mutex_unlock(&lcd->lock);
		if (stopping && late)
			break;
		r = retry ? lcd_store_task_requeue(lcd->db, j->id, why, &err)
			  : lcd_store_task_finish(lcd->db, j->id, state, result, exit_code, error, lc_wall_ms(), &err);
	}
	if (late && r == 0)
		lcd_log("task %s: its end is recorded: failed: %s", j->id, late);
	if (r < 0) {
		lcd_log("task %s: cannot record its end: %s", j->id, err->msg);
		lc_error_free(err);
	}
}

static void *worker(void *arg)
{
	struct job *j = arg;
	lcd_t *lcd = j->lcd;
	_cleanup_free_ char *taskdir = lc_strdup_printf("%s/%s", lcd->tasks_dir, j->id);
	char logpath[4096];
	lcd_task_log_path(lcd, j->id, logpath, sizeof(logpath));
	_cleanup_close_ int logfd = open(logpath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	_cleanup_close_ int nullfd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	lc_error_t *err = NULL;
	lc_spec_t *spec = NULL;
	lc_result_t res = { 0 };
	char *note = NULL, *result = NULL;
	const char *state = "failed";
	int exit_code = 0;
	bool gateway = false; /* the task's sandbox uses the model gateway */
	_cleanup_free_ char *error = NULL;

	_cleanup_free_ char *args = json_dumps(json_object_get(j->task, "args"), JSON_COMPACT | JSON_ENCODE_ANY);
	_cleanup_free_ char *argspath = lc_strdup_printf("%s/args.json", taskdir);
	lc_rm_rf(taskdir, NULL);
	if (logfd < 0 || nullfd < 0) {
		error = lc_strdup_printf("cannot open %s: %s", logpath, strerror(errno));
		exit_code = LC_EXIT_RUNTIME;
		goto done;
	}
	/* The directory is the sandbox's /run/task, written by its command:
	 * it is the task's own (0700, its user's host uid, below), never
	 * writable by anyone else.  Its parent (tasks_dir) is 0711: it cannot
	 * be listed, and the task id (48 random bits) is not guessable. */
	if (mkdir(taskdir, 0700) < 0 || lc_write_file_atomic(argspath, args, strlen(args), 0644, &err) < 0) {
		error = err ? strdup(err->msg) : lc_strdup_printf("cannot make %s: %s", taskdir, strerror(errno));
		exit_code = LC_EXIT_RUNTIME;
		goto done;
	}
	log_line(logfd, "lcd: task %s attempt %lld: %s:%s in sandbox %s", j->id,
		 (long long)json_integer_value(json_object_get(j->task, "attempts")), j->app->name, j->fn->name,
		 j->sandbox_id);
	if (make_spec(j, taskdir, logfd, nullfd, &spec, &err) < 0)
		goto failed_to_run;
	/* The sandbox's user as the host sees it (an idmapped bind shows the
	 * directory's owner as that user anyway; a plain one needs it). */
	if (chown(taskdir, lc_uid_base() + spec->uid, (gid_t)lc_uid_base() + spec->gid) < 0) {
		lc_error_set(&err, LC_EXIT_RUNTIME, errno, "cannot give %s to the task's sandbox", taskdir);
		goto failed_to_run;
	}
	pthread_mutex_lock(&lcd->lock);
	lcd_running_t *me = running_find(lcd, j->id);
	bool cancelled_early = me && me->cancel;
	pthread_mutex_unlock(&lcd->lock);
	if (cancelled_early)
		goto done; /* cancelled before its sandbox existed */
	if (j->fn->model_gateway) {
		lcd_caller_t who = { .operator = false };
		snprintf(who.task, sizeof(who.task), "%s", j->id);
		snprintf(who.app, sizeof(who.app), "%s", j->app->name);
		snprintf(who.function, sizeof(who.function), "%s", j->fn->name);
		if (lcd_gateway_task_begin(lcd, &who, j->fn, j->sandbox_id, spec, &err) < 0)
			goto failed_to_run;
		gateway = true;
	}
	/* The sandbox is made and watched by a process of the task runner's
	 * (runner.c), task_nice levels below lcd (at most 19).  Tasks are
	 * batch work: on a busy machine the API's answers and the sandboxes
	 * lcd's callers make wait less behind them. */
	LC_FAULT("lcd-task-starting");
	if (lcd_runner_run(lcd, spec, lcd->nice + lcd->task_nice, &res, &err) < 0)
		goto failed_to_run;
	LC_FAULT("lcd-task-exited");

	result = read_result(taskdir, &note);
	exit_code = res.exit_code;
	if (!result) /* no result.json: the exit status is the result */
		result = lc_strdup_printf("%d", res.exit_code);
	if (res.timed_out) {
		state = "timed-out";
		error = lc_strdup_printf("timed out after %d s", j->fn->timeout);
	} else if (res.exit_code == 0) {
		state = "succeeded";
	} else {
		state = "failed";
		if (res.oom_killed)
			error = strdup("killed: out of memory");
		else if (res.start_error[0])
			error = strdup(res.start_error);
		else if (res.signal)
			error = lc_strdup_printf("killed by signal %d", res.signal);
		else
			error = lc_strdup_printf("exited with status %d", res.exit_code);
	}
	if (error && log_disk_full(logfd)) {
		char *e = lc_strdup_printf("%s; its log is cut short: the disk of %s is full (%s)", error, lcd->logs_dir,
					   strerror(ENOSPC));
		free(error);
		error = e;
	}
	if (note)
		log_line(logfd, "lcd: %s", note);
	goto done;

failed_to_run:
	exit_code = err ? err->exit_code : LC_EXIT_RUNTIME;
	error = strdup(err && err->msg ? err->msg : "cannot run the task");
	log_line(logfd, "lcd: %s", error);
done:
	/* Before its end is recorded: whoever waits for the task finds its
	 * token dead and its sandboxes gone. */
	lcd_task_release(lcd, j->id);
	if (gateway)
		lcd_gateway_task_end(lcd, j->sandbox_id);
	pthread_mutex_lock(&lcd->lock);
	lcd_running_t **pp = &lcd->running, *run = NULL;
	while (*pp && strcmp((*pp)->id, j->id))
		pp = &(*pp)->next;
	if (*pp) {
		run = *pp;
		*pp = run->next;
	}
	bool cancelled = run && run->cancel;
	bool stopping = lcd->stopping;
	pthread_mutex_unlock(&lcd->lock);
	if (cancelled) {
		state = "cancelled";
		free(error);
		error = strdup("cancelled");
	} else if (stopping && strcmp(state, "succeeded")) {
		free(error);
		error = strdup("lcd stopped while the task was running");
		state = "failed";
	}
	log_line(logfd, "lcd: task %s %s", j->id, state);
	finish(j, state, result, exit_code, error);
	LC_FAULT("lcd-task-ended");

	if (spec) {
		/* The fds are ours: keep lc_spec_free from closing them. */
		spec->stdio[0] = spec->stdio[1] = spec->stdio[2] = -1;
		for (size_t i = 0; spec->env && spec->env[i]; i++)
			explicit_bzero(spec->env[i], strlen(spec->env[i]));
		lc_spec_free(spec);
	}
	lc_rm_rf(taskdir, NULL);
	free(run);
	free(result);
	free(note);
	lc_error_free(err);
	json_decref(j->task);
	lcd_app_unref(j->app);
	free(j);

	pthread_mutex_lock(&lcd->lock);
	lcd->workers--;
	pthread_cond_broadcast(&lcd->changed);
	pthread_cond_broadcast(&lcd->wake);
	pthread_cond_broadcast(&lcd->idle);
	pthread_mutex_unlock(&lcd->lock);
	return NULL;
}

static void start_worker(lcd_t *lcd, lcd_app_t *app, const lcd_function_t *fn, json_t *task, const char *sandbox)
{
	struct job *j = lc_xmalloc0(sizeof(*j));
	j->lcd = lcd;
	j->app = lcd_app_ref(app);
	j->fn = fn;
	j->task = task;
	snprintf(j->id, sizeof(j->id), "%s", lc_json_str(task, "id"));
	snprintf(j->sandbox_id, sizeof(j->sandbox_id), "%s", sandbox);
	lcd_running_t *run = lc_xmalloc0(sizeof(*run));
	memcpy(run->id, j->id, sizeof(run->id));
	memcpy(run->sandbox_id, j->sandbox_id, sizeof(run->sandbox_id));
	run->started_ms = lc_now_ms();

	pthread_mutex_lock(&lcd->lock);
	run->next = lcd->running;
	lcd->running = run;
	lcd->workers++;
	pthread_cond_broadcast(&lcd->changed);
	pthread_mutex_unlock(&lcd->lock);

	int e = lcd_thread_detached(worker, j);
	if (e != 0) {
		lcd_log("task %s: cannot start a worker thread: %s", j->id, strerror(e));
		pthread_mutex_lock(&lcd->lock);
		lcd_running_t **pp = &lcd->running;
		while (*pp && *pp != run)
			pp = &(*pp)->next;
		if (*pp)
			*pp = run->next;
		lcd->workers--;
		pthread_mutex_unlock(&lcd->lock);
		free(run);
		lcd_store_task_requeue(lcd->db, j->id, "could not start a worker thread", NULL);
		json_decref(j->task);
		lcd_app_unref(j->app);
		free(j);
	}
}

/* Start what can start: for each function with queued tasks, as many as
 * its concurrency allows, oldest first. */
static void dispatch_once(lcd_t *lcd)
{
	lc_error_t *err = NULL;
	_cleanup_json_ json_t *pending = lcd_store_task_pending(lcd->db, &err);
	if (!pending) {
		lcd_log("dispatcher: %s", err ? err->msg : "cannot list queued tasks");
		lc_error_free(err);
		return;
	}
	size_t i;
	json_t *p;
	json_array_foreach(pending, i, p) {
		const char *appname = lc_json_str(p, "app");
		const char *fname = lc_json_str(p, "function");
		lcd_app_t *app = lcd_app_get(lcd, appname);
		if (!app)
			continue; /* being deleted, or its manifest failed to load */
		const lcd_function_t *fn = lcd_app_function(app, fname);
		if (!fn) {
			/* A redeploy removed the function: its queued tasks cannot run. */
			lcd_db_exec(lcd->db, NULL,
				    "UPDATE tasks SET state = 'failed', error = 'the function is no longer in the app', "
				    "finished_at = ? WHERE app = ? AND function = ? AND state = 'queued'",
				    "iss", lc_wall_ms(), appname, fname);
			lcd_app_unref(app);
			continue;
		}
		for (;;) {
			pthread_mutex_lock(&lcd->lock);
			bool stop = lcd->stopping;
			pthread_mutex_unlock(&lcd->lock);
			if (stop)
				break;
			/* the node takes a task only when it has room for it */
			if (!lcd_node_has_room(lcd))
				break;
			char sandbox[LC_ID_LEN + 1];
			lc_random_hex(sandbox, LC_ID_LEN);
			json_t *task = lcd_store_task_start(lcd->db, appname, fname, fn->concurrency, sandbox, lc_wall_ms(), &err);
			if (!task) {
				if (err) {
					lcd_log("dispatcher: %s", err->msg);
					lc_error_free(err);
					err = NULL;
				}
				break;
			}
			LC_FAULT("lcd-task-claimed");
			start_worker(lcd, app, fn, task, sandbox);
		}
		lcd_app_unref(app);
	}
}

void *lcd_dispatcher(void *arg)
{
	lcd_t *lcd = arg;
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	for (;;) {
		dispatch_once(lcd);
		if (lcd_sleep(lcd, &lcd->wake, 1000))
			return NULL;
	}
}

int lcd_recover(lcd_t *lcd, lc_error_t **err)
{
	_cleanup_json_ json_t *rows = lcd_store_task_list(lcd->db, NULL, "running", 0, err);
	if (!rows)
		return -1;
	size_t i;
	json_t *t;
	json_array_foreach(rows, i, t) {
		const char *id = lc_json_str(t, "id");
		const char *sandbox = lc_json_str(t, "sandbox_id");
		const char *appname = lc_json_str(t, "app");
		const char *fname = lc_json_str(t, "function");
		long long attempts = json_integer_value(json_object_get(t, "attempts"));
		const char *node = lc_json_str(t, "node");
		if (node && strcmp(node, lcd_db_node(lcd->db)))
			continue; /* another node's to run */
		if (sandbox)
			kill_sandbox(sandbox);
		lcd_app_t *app = lcd_app_get(lcd, appname);
		const lcd_function_t *fn = app ? lcd_app_function(app, fname) : NULL;
		const char *why = "lcd restarted while the task was running";
		int r;
		if (fn && attempts <= fn->retries) {
			_cleanup_free_ char *msg = lc_strdup_printf("attempt %lld: %s; retrying", attempts, why);
			r = lcd_store_task_requeue(lcd->db, id, msg, err);
			lcd_log("task %s: %s", id, msg);
		} else {
			r = lcd_store_task_finish(lcd->db, id, "failed", NULL, LC_EXIT_RUNTIME, why, lc_wall_ms(), err);
			lcd_log("task %s: %s; marked failed (sandbox %s killed)", id, why, sandbox ? sandbox : "-");
		}
		lcd_app_unref(app);
		if (r < 0)
			return -1;
		char logpath[4096];
		int fd = open(lcd_task_log_path(lcd, id, logpath, sizeof(logpath)), O_WRONLY | O_APPEND | O_CLOEXEC);
		if (fd >= 0) {
			log_line(fd, "lcd: %s", why);
			close(fd);
		}
	}
	/* What this node ran when it was judged dead (nodes.c): the other
	 * nodes ended those tasks; their sandboxes may still run here. */
	_cleanup_json_ json_t *left = lcd_db_query(lcd->db, err, "SELECT sandbox_id, task_id FROM node_leftovers WHERE node = ?",
						   "s", lcd_db_node(lcd->db));
	if (!left)
		return -1;
	json_array_foreach(left, i, t) {
		const char *sb = lc_json_str(t, "sandbox_id");
		kill_sandbox(sb);
		lcd_log("sandbox %s of task %s killed: this node was judged dead while it ran", sb,
			lc_json_str(t, "task_id"));
	}
	lcd_db_exec(lcd->db, NULL, "DELETE FROM node_leftovers WHERE node = ?", "s", lcd_db_node(lcd->db));
	/* Nothing runs yet: every task directory is left over. */
	_cleanup_dir_ DIR *d = opendir(lcd->tasks_dir);
	struct dirent *de;
	while (d && (de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		_cleanup_free_ char *p = lc_strdup_printf("%s/%s", lcd->tasks_dir, de->d_name);
		lc_rm_rf(p, NULL);
	}
	return 0;
}
