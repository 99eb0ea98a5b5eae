/* lc-eval — the coding-agents app's nightly eval and best-of-N
 * (contrib/apps/coding-agents, docs/guides/coding-agents.md):
 *
 *   lc-eval eval               one eval-task per task under EVAL_DIR
 *                              (spawn_map), every outcome collected, a
 *                              SWE-bench-shaped report (JSON and Markdown)
 *                              posted on EVAL_REPORT_ISSUE or kept in the
 *                              map under eval:DATE
 *   lc-eval eval-task          one task: its repository in an eval sandbox
 *                              (the model API only, EVAL_CPUS, EVAL_MEMORY),
 *                              the agent, the task's check, the sandbox
 *                              removed
 *   lc-eval best-of-n          N attempts at one prompt on forks of the
 *                              repository snapshot (spawn_map of
 *                              best-of-n-attempt, so the attempts run within
 *                              that function's concurrency); the winner is
 *                              the first to pass, ties going to the smallest
 *                              diff
 *   lc-eval best-of-n-attempt  one attempt: the agent and TEST_COMMAND in a
 *                              sandbox of the snapshot, its diff, the sandbox
 *                              removed
 *
 * The agent runs through agent.[ch] (the same sandbox, command and reading
 * of its result as solve-issue). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "agent.h"
#include "ghauth.h"
#include "github.h"
#include "lcclient.h"
#include "util.h"
#include "workload.h"

#define MAP "coding-agents"
#define SNAPSHOT_KEY "snapshot"
#define DEFAULT_EVAL_DIR "/run/lcd/apps/coding-agents/eval"
#define CHECK_PATH "/tmp/eval-check"
#define PATCH_FILE "/tmp/attempt.patch"
#define PATCH_MAX (16 << 20)
#define OUTPUT_TAIL 4096
#define TASKS_MAX 500
#define REPO_MAX_FILES 2000
#define REPO_MAX_BYTES (8 << 20)

static bool name_ok(const char *s)
{
	if (!s || !*s || strlen(s) > 100 || s[0] == '.')
		return false;
	for (const char *p = s; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-' || *p == '_' || *p == '.'))
			return false;
	return true;
}

/* Now in UTC: the date (YYYY-MM-DD), or with time the ISO 8601 moment. */
static char *utc_now(bool time_too)
{
	char b[64];
	time_t t = time(NULL);
	struct tm tm;
	gmtime_r(&t, &tm);
	if (time_too)
		strftime(b, sizeof(b), "%Y-%m-%dT%H:%M:%SZ", &tm);
	else
		strftime(b, sizeof(b), "%Y-%m-%d", &tm);
	return strdup(b);
}

static double round6(double v)
{
	return round(v * 1e6) / 1e6;
}

/* ---- one attempt: an agent in a sandbox, its diff, a verdict ---- */

typedef struct attempt {
	const char *image;
	const char *repo_dir;
	json_t *files;       /* the repository to put in first (eval), or NULL (it is in the image) */
	const char *base;    /* the commit to diff against, or NULL: the one made from files */
	const char *prompt;
	const char *check;   /* a script uploaded after the agent ran (eval), or NULL */
	const char *test_command; /* else this shell line (best-of-N) */
	long check_timeout_s;
	json_t *limits;
	json_t *labels;
} attempt_t;

static int sh_ok(lcc_t *c, const char *id, const char *user, const char *dir, const char *cmd, json_t *env,
		 const char *what, lc_error_t **err)
{
	lcc_exec_result_t r;
	if (wl_sh(c, id, user, dir, cmd, env, 600, &r, err) < 0)
		return -1;
	int rc = r.exit_code;
	_cleanup_free_ char *tail = wl_tail(r.err, r.err_len, 300);
	lcc_exec_result_clear(&r);
	if (rc != 0)
		return lc_error_set(err, WL_EXIT_LCD, 0, "%s: exit %d: %s", what, rc, tail);
	return 0;
}

/* The sandbox's change against base (git add -A, git diff --cached): into
 * *patch, whatever the agent did to the index or HEAD. */
static int take_diff(lcc_t *c, const char *id, const char *user, const char *dir, const char *base, char **patch,
		     size_t *len, lc_error_t **err)
{
	_cleanup_json_ json_t *env = json_pack("{s:s, s:s}", "BASE_COMMIT", base, "PATCH_FILE", PATCH_FILE);
	if (sh_ok(c, id, user, dir,
		  "g() { git -c core.fsmonitor= -c core.hooksPath=/dev/null -c diff.external= \"$@\"; }; "
		  "g add -A . && g diff --cached --binary --full-index --no-ext-diff --no-textconv \"$BASE_COMMIT\" -- "
		  "> \"$PATCH_FILE\"",
		  env, "cannot take the change out of the sandbox", err) < 0)
		return -1;
	if (lcc_sandbox_download(c, id, PATCH_FILE, patch, len, err) < 0)
		return -1;
	if (*len > PATCH_MAX)
		return lc_error_set(err, WL_EXIT_LCD, 0, "the change is %zu bytes, over %d", *len, PATCH_MAX);
	return 0;
}

/* Lines added and removed in a unified diff. */
static long diff_lines(const char *p, size_t len)
{
	long n = 0;
	const char *e = p + len;
	for (const char *l = p; l < e;) {
		const char *nl = memchr(l, '\n', (size_t)(e - l));
		size_t k = nl ? (size_t)(nl - l) : (size_t)(e - l);
		if ((k >= 1 && (l[0] == '+' || l[0] == '-')) && !(k >= 3 && (!strncmp(l, "+++", 3) || !strncmp(l, "---", 3))))
			n++;
		l += k + 1;
	}
	return n;
}

/* The verdict: the task's check (put in only now, out of the agent's
 * sight), or the test command; into out. */
static int run_check(lcc_t *c, const char *id, const char *user, const attempt_t *a, json_t *out, lc_error_t **err)
{
	const char *cmd = a->test_command;
	if (a->check) {
		if (lcc_sandbox_upload(c, id, CHECK_PATH, a->check, strlen(a->check), 0755, err) < 0)
			return -1;
		cmd = CHECK_PATH;
	}
	_cleanup_json_ json_t *env = json_pack("{s:s}", "CHECK_COMMAND", cmd);
	lcc_exec_result_t cr;
	if (wl_sh(c, id, user, a->repo_dir, "exec 2>&1; eval \"$CHECK_COMMAND\"", env, a->check_timeout_s, &cr, err) < 0)
		return -1;
	_cleanup_free_ char *tail = wl_tail(cr.out, cr.out_len, OUTPUT_TAIL);
	json_object_set_new(out, "check_exit_code", json_integer(cr.exit_code));
	json_object_set_new(out, "check_timed_out", json_boolean(cr.timed_out));
	json_object_set_new(out, "check_output", json_string(tail));
	json_object_set_new(out, "passed", json_boolean(cr.exit_code == 0 && !cr.timed_out));
	lcc_exec_result_clear(&cr);
	return 0;
}

/* Run the attempt; out gets what happened.  Returns 0 when a verdict was
 * reached (passed or not, the agent's failure included), negative when
 * lcd could not run it. */
static int run_attempt(const attempt_t *a, json_t *out, lc_error_t **err)
{
	agent_config_t ac;
	if (agent_config_from_env(&ac, err) < 0)
		return -1;
	lcc_t *c = lcc_new(NULL, NULL, err);
	if (!c) {
		agent_config_clear(&ac);
		return -1;
	}
	long long t0 = lc_now_ms();
	int r = -1;
	_cleanup_free_ char *id = NULL, *patch = NULL, *base = a->base ? strdup(a->base) : NULL;
	size_t patch_len = 0;
	agent_result_t ar = { 0 };
	bool agent_ran = false;
	json_object_set_new(out, "model", ac.model ? json_string(ac.model) : json_null());
	json_object_set_new(out, "agent_name", json_string(ac.command ? "AGENT_COMMAND" : ac.agent));
	agent_sandbox_opts_t so = { .image = a->image, .workdir = a->files ? NULL : a->repo_dir, .limits = a->limits,
				    .labels = a->labels };
	if (agent_sandbox_create(c, &ac, &so, &id, err) < 0)
		goto out;
	json_object_set_new(out, "sandbox_id", json_string(id));
	fprintf(stderr, "%s: sandbox %s (image %s)\n", wl_name(), id, a->image);
	if (a->files) {
		/* the task's repository, committed: the agent works on a git tree
		 * and its change is the diff against that commit */
		if (wl_tree_upload(c, id, a->repo_dir, ac.user, a->files, err) < 0 ||
		    sh_ok(c, id, ac.user, a->repo_dir,
			  "git init -q && git add -A && git -c user.name=eval -c user.email=eval@localhost.invalid "
			  "commit -q -m 'the eval task' && git rev-parse HEAD > /tmp/eval-base",
			  NULL, "cannot commit the task's repository", err) < 0)
			goto out;
		size_t bl = 0;
		if (lcc_sandbox_download(c, id, "/tmp/eval-base", &base, &bl, err) < 0)
			goto out;
		base[strcspn(base, "\n")] = '\0';
	}
	if (agent_run(c, id, &ac, a->repo_dir, a->prompt, &ar, err) < 0)
		goto out;
	agent_ran = true;
	fprintf(stderr, "%s: the agent ended: %s%s%s\n", wl_name(), agent_status_name(ar.status), ar.error ? ": " : "",
		ar.error ? ar.error : "");
	json_object_set_new(out, "agent", agent_result_json(&ar));
	json_object_set_new(out, "turns", ar.turns >= 0 ? json_integer(ar.turns) : json_null());
	json_object_set_new(out, "spend_usd", ar.spend_usd >= 0 ? json_real(round6(ar.spend_usd)) : json_null());
	/* the diff before the check: nothing the check builds is in it */
	if (take_diff(c, id, ac.user, a->repo_dir, base, &patch, &patch_len, err) < 0)
		goto out;
	json_object_set_new(out, "diff_bytes", json_integer((json_int_t)patch_len));
	json_object_set_new(out, "diff_lines", json_integer(diff_lines(patch, patch_len)));
	json_t *dv = json_stringn(patch, patch_len); /* NULL when it is not UTF-8 */
	json_object_set_new(out, "diff", dv ? dv : json_string("(not UTF-8 text: not shown)"));
	if (run_check(c, id, ac.user, a, out, err) < 0)
		goto out;
	r = 0;
out:
	if (id) {
		lc_error_t *e = NULL;
		if (lcc_sandbox_delete(c, id, &e) < 0) {
			if (r == 0)
				r = lc_error_set(err, WL_EXIT_LCD, 0, "cannot remove sandbox %s: %s", id, e->msg);
			lc_error_free(e);
		} else {
			fprintf(stderr, "%s: sandbox %s removed\n", wl_name(), id);
		}
	}
	json_object_set_new(out, "wall_time_s", json_real(round((double)(lc_now_ms() - t0) / 100.0) / 10.0));
	json_object_set_new(out, "agent_status", json_string(agent_ran ? agent_status_name(ar.status) : "not-run"));
	if (ar.status != AGENT_OK && ar.error)
		json_object_set_new(out, "agent_error", json_string(ar.error));
	agent_result_clear(&ar);
	agent_config_clear(&ac);
	lcc_free(c);
	return r;
}

/* The attempt's limits: EVAL_CPUS and EVAL_MEMORY (best effort where the
 * host lacks the controllers only when EVAL_LIMITS_BEST_EFFORT=true). */
static json_t *eval_limits(lc_error_t **err)
{
	const char *cpus = wl_config("EVAL_CPUS", "0.5"), *mem = wl_config("EVAL_MEMORY", "1G");
	char *end = NULL;
	errno = 0;
	double cv = strtod(cpus, &end);
	if (errno || *end || !(cv > 0) || cv > 1024) {
		lc_error_set(err, WL_EXIT_USAGE, 0, "config EVAL_CPUS: expected a number of CPUs, not '%s'", cpus);
		return NULL;
	}
	const char *be = wl_config("EVAL_LIMITS_BEST_EFFORT", "false");
	if (strcmp(be, "true") && strcmp(be, "false")) {
		lc_error_set(err, WL_EXIT_USAGE, 0, "config EVAL_LIMITS_BEST_EFFORT: expected true or false, not '%s'", be);
		return NULL;
	}
	return json_pack("{s:f, s:s, s:b}", "cpus", cv, "memory", mem, "best_effort", !strcmp(be, "true"));
}

/* ---- eval-task ---- */

static char *read_text(const char *path, size_t max, lc_error_t **err)
{
	char *s = NULL;
	size_t len = 0;
	if (lc_read_file(path, &s, &len, err) < 0)
		return NULL;
	if (len > max || strlen(s) != len) {
		free(s);
		lc_error_set(err, WL_EXIT_USAGE, 0, "%s: not a text file of at most %zu bytes", path, max);
		return NULL;
	}
	return s;
}

static int fn_eval_task(void)
{
	lc_error_t *err = NULL;
	_cleanup_json_ json_t *args = wl_args(&err);
	if (!args)
		return wl_fail_err(WL_EXIT_USAGE, NULL, err);
	const char *task = json_string_value(json_object_get(args, "task"));
	if (!name_ok(task))
		return wl_fail(WL_EXIT_USAGE, NULL, "args.task: expected the name of a task under EVAL_DIR");
	const char *model = json_string_value(json_object_get(args, "model"));
	if (model && *model)
		setenv("AGENT_MODEL", model, 1); /* this run's model, whatever the config says */
	const char *edir = wl_config("EVAL_DIR", DEFAULT_EVAL_DIR);
	_cleanup_free_ char *dir = lc_strdup_printf("%s/%s", edir, task);
	_cleanup_free_ char *ppath = lc_strdup_printf("%s/prompt.md", dir), *cpath = lc_strdup_printf("%s/check", dir);
	_cleanup_free_ char *rpath = lc_strdup_printf("%s/repo", dir);
	_cleanup_json_ json_t *out = json_pack("{s:s, s:b, s:s}", "task", task, "passed", 0, "status", "error");
	_cleanup_free_ char *prompt_md = read_text(ppath, 64 * 1024, &err);
	_cleanup_free_ char *check = prompt_md ? read_text(cpath, 256 * 1024, &err) : NULL;
	_cleanup_json_ json_t *files = check ? wl_tree_read(rpath, REPO_MAX_FILES, REPO_MAX_BYTES, &err) : NULL;
	_cleanup_json_ json_t *limits = files ? eval_limits(&err) : NULL;
	long long cto = limits ? wl_config_int("EVAL_CHECK_TIMEOUT_SECONDS", 600, 1, 86400, &err) : -1;
	if (cto < 0)
		return wl_fail_err(WL_EXIT_USAGE, json_incref(out), err);
	_cleanup_free_ char *prompt = lc_strdup_printf(
		"%s\n\n---\nThe repository is in the current directory (a git repository). Change its files to do the "
		"task above. Do not commit. Your work is checked afterwards by a test you cannot see.\n",
		prompt_md);
	_cleanup_json_ json_t *labels = json_pack("{s:s, s:s}", "coding-agents", "eval", "eval_task", task);
	attempt_t a = { .image = wl_config("EVAL_IMAGE", wl_config("AGENT_IMAGE", "agent-cli")),
			.repo_dir = wl_config("REPO_DIR", "/workspace/repo"), .files = files, .prompt = prompt,
			.check = check, .check_timeout_s = cto, .limits = limits, .labels = labels };
	json_object_set_new(out, "limits", json_incref(limits));
	if (run_attempt(&a, out, &err) < 0)
		return wl_fail_err(err->exit_code == WL_EXIT_USAGE ? WL_EXIT_USAGE : WL_EXIT_LCD, json_incref(out), err);
	/* SWE-bench's terms: resolved when the check passes; an agent that
	 * failed (crashed, timed out, reported an error) without passing is an
	 * error; no change at all is an empty patch (and unresolved) */
	const char *status;
	if (json_is_true(json_object_get(out, "passed")))
		status = "resolved";
	else if (strcmp(json_string_value(json_object_get(out, "agent_status")), "ok"))
		status = "error";
	else if (json_integer_value(json_object_get(out, "diff_bytes")) == 0)
		status = "empty_patch";
	else
		status = "unresolved";
	json_object_set_new(out, "status", json_string(status));
	if (!strcmp(status, "error"))
		json_object_set(out, "error", json_object_get(out, "agent_error"));
	json_object_del(out, "diff"); /* the report keeps sizes; a patch can be big */
	return wl_result(out) < 0 ? WL_EXIT_LCD : 0;
}

/* ---- spawning tasks and collecting every outcome ---- */

/* One task of fn per element of args (spawn_map: all or none), each
 * waited for; returns [{task_id, state, exit_code, result, error}] in
 * args' order.  A task that failed, timed out or was cancelled is there
 * with its state: nothing is lost. */
static json_t *spawn_all(lcc_t *c, const char *fn, json_t *args, lc_error_t **err)
{
	_cleanup_json_ json_t *ids = NULL;
	if (lcc_spawn_map(c, wl_config("LC_TASK_APP", MAP), fn, args, &ids, err) < 0) {
		lc_error_wrap(err, "cannot start %zu %s task(s)", json_array_size(args), fn);
		return NULL;
	}
	fprintf(stderr, "%s: %zu %s task(s) started\n", wl_name(), json_array_size(ids), fn);
	json_t *all = json_array();
	size_t i;
	json_t *idv;
	json_array_foreach(ids, i, idv) {
		const char *id = json_string_value(idv);
		json_t *t = NULL;
		lc_error_t *e = NULL;
		json_t *entry;
		if (lcc_task_wait(c, id, 0, &t, &e) < 0) {
			entry = json_pack("{s:s, s:s, s:n, s:n, s:s}", "task_id", id, "state", "unknown", "exit_code", "result",
					  "error", e->msg);
			lc_error_free(e);
		} else {
			entry = json_pack("{s:s, s:O, s:O, s:O, s:O}", "task_id", id, "state", json_object_get(t, "state"),
					  "exit_code", json_object_get(t, "exit_code") ?: json_null(), "result",
					  json_object_get(t, "result") ?: json_null(), "error",
					  json_object_get(t, "error") ?: json_null());
			json_decref(t);
		}
		json_array_append_new(all, entry);
	}
	return all;
}

/* What went wrong with a task that did not succeed, in one line. */
static const char *task_error(json_t *e)
{
	const char *why = json_string_value(json_object_get(json_object_get(e, "result"), "error"));
	if (!why)
		why = json_string_value(json_object_get(e, "error"));
	return why ? why : "no reason given";
}

/* ---- eval ---- */

static json_t *eval_task_names(json_t *only, lc_error_t **err)
{
	const char *edir = wl_config("EVAL_DIR", DEFAULT_EVAL_DIR);
	_cleanup_dir_ DIR *d = opendir(edir);
	if (!d) {
		lc_error_set(err, WL_EXIT_USAGE, errno, "the eval tasks %s (config EVAL_DIR)", edir);
		return NULL;
	}
	_cleanup_strv_ char **names = NULL;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (!name_ok(e->d_name))
			continue;
		_cleanup_free_ char *p = lc_strdup_printf("%s/%s/prompt.md", edir, e->d_name);
		_cleanup_free_ char *c = lc_strdup_printf("%s/%s/check", edir, e->d_name);
		if (access(p, R_OK) == 0 && access(c, R_OK) == 0)
			lc_strv_push(&names, e->d_name);
	}
	lc_strv_sort(names);
	size_t n = lc_strv_len(names);
	json_t *out = json_array();
	if (only) {
		size_t i;
		json_t *v;
		json_array_foreach(only, i, v) {
			const char *want = json_string_value(v);
			bool found = false;
			for (size_t k = 0; k < n && !found; k++)
				found = want && !strcmp(names[k], want);
			if (!found) {
				json_decref(out);
				lc_error_set(err, WL_EXIT_USAGE, 0, "args.tasks[%zu]: no eval task '%s' in %s", i, want ? want : "?",
					     edir);
				return NULL;
			}
			json_array_append_new(out, json_string(want));
		}
	} else {
		for (size_t k = 0; k < n; k++)
			json_array_append_new(out, json_string(names[k]));
	}
	if (json_array_size(out) == 0 || json_array_size(out) > TASKS_MAX) {
		json_decref(out);
		lc_error_set(err, WL_EXIT_USAGE, 0, "%s: expected 1 to %d tasks (directories with prompt.md and check)", edir,
			     TASKS_MAX);
		return NULL;
	}
	return out;
}

static const char *md_money(char *b, size_t n, json_t *v)
{
	if (json_is_number(v))
		snprintf(b, n, "$%.4f", json_number_value(v));
	else
		snprintf(b, n, "-");
	return b;
}

/* One line of Markdown table text: no newline, no '|'. */
static char *md_cell(const char *s)
{
	_cleanup_free_ char *p = wl_printable(s ? s : "", s ? strlen(s) : 0, 160);
	for (char *q = p; *q; q++)
		if (*q == '|')
			*q = '/';
	return lc_steal(p);
}

static char *report_markdown(json_t *rep)
{
	char total[32];
	long long n = json_integer_value(json_object_get(rep, "total_instances"));
	long long ok = json_integer_value(json_object_get(rep, "resolved_instances"));
	const char *model = json_string_value(json_object_get(rep, "model"));
	_cleanup_free_ char *md = lc_strdup_printf(
		"## Nightly eval, %s\n\nModel `%s` (%s) · pass rate **%lld/%lld (%.0f%%)** · spend %s · %.1f s\n\n"
		"| task | result | turns | spend | wall time | sandbox |\n|---|---|---|---|---|---|\n",
		json_string_value(json_object_get(rep, "date")), model ? model : "the agent's default",
		json_string_value(json_object_get(rep, "agent")), ok, n, n ? 100.0 * (double)ok / (double)n : 0.0,
		md_money(total, sizeof(total), json_object_get(rep, "total_spend_usd")),
		json_number_value(json_object_get(rep, "wall_time_s")));
	size_t i;
	json_t *t;
	json_array_foreach(json_object_get(rep, "tasks"), i, t) {
		char spend[32], turns[32] = "-";
		json_t *tv = json_object_get(t, "turns");
		if (json_is_integer(tv))
			snprintf(turns, sizeof(turns), "%lld", (long long)json_integer_value(tv));
		const char *st = json_string_value(json_object_get(t, "status"));
		_cleanup_free_ char *why = md_cell(json_string_value(json_object_get(t, "error")));
		_cleanup_free_ char *what = !strcmp(st, "resolved") ? strdup("✅ resolved")
					     : !strcmp(st, "error")  ? lc_strdup_printf("❌ error: %s", why)
								     : lc_strdup_printf("❌ %s", st);
		const char *sb = json_string_value(json_object_get(t, "sandbox_id"));
		char *line = lc_strdup_printf("%s| %s | %s | %s | %s | %.1f s | %s%s%s |\n", md,
					      json_string_value(json_object_get(t, "id")), what, turns,
					      md_money(spend, sizeof(spend), json_object_get(t, "spend_usd")),
					      json_number_value(json_object_get(t, "wall_time_s")), sb ? "`" : "", sb ? sb : "-",
					      sb ? "`" : "");
		free(md);
		md = line;
	}
	return lc_steal(md);
}

/* Post the report on the issue EVAL_REPORT_ISSUE names ("N" of
 * REPOSITORY's repository, or "OWNER/REPO#N"); *url the comment's. */
static int post_report(const char *where, const char *md, char **url, lc_error_t **err)
{
	_cleanup_free_ char *repo = NULL;
	const char *hash = strrchr(where, '#');
	const char *num = hash ? hash + 1 : where;
	char *end = NULL;
	long n = strtol(num, &end, 10);
	if (end == num || *end || n <= 0)
		return lc_error_set(err, WL_EXIT_USAGE, 0, "config EVAL_REPORT_ISSUE: expected N or OWNER/REPO#N, not '%s'", where);
	repo = hash ? strndup(where, (size_t)(hash - where)) : gh_repo_from_url(wl_config("REPOSITORY", NULL));
	if (!repo || !*repo || !strchr(repo, '/'))
		return lc_error_set(err, WL_EXIT_USAGE, 0,
				    "config EVAL_REPORT_ISSUE=%s: no repository (give OWNER/REPO#N, or set REPOSITORY)", where);
	/* GITHUB_TOKEN, or the GitHub App's token for the repository (issues: write) */
	_cleanup_json_ json_t *perms = json_pack("{s:s}", "issues", "write");
	gh_auth_t *auth = NULL;
	if (gh_auth_from_env(wl_config("GITHUB_API_URL", "https://api.github.com"), repo, perms, &auth, err) < 0)
		return -1;
	gh_t *gh = gh_auth_client(auth, err);
	int r = gh ? gh_issue_comment(gh, repo, n, md, url, err) : -1;
	gh_free(gh);
	gh_auth_free(auth);
	return r;
}

/* Keep the report under eval:DATE (eval:DATE.2, … for later runs that
 * day): the first free key, claimed atomically. */
static int keep_report(lcc_t *c, const char *date, json_t *rep, char **key, lc_error_t **err)
{
	_cleanup_free_ char *text = json_dumps(rep, JSON_COMPACT | JSON_SORT_KEYS);
	for (int k = 1; k <= 1000; k++) {
		_cleanup_free_ char *name = k == 1 ? lc_strdup_printf("eval:%s", date) : lc_strdup_printf("eval:%s.%d", date, k);
		int r = lcc_map_set(c, NULL, MAP, name, text, 0, true, err);
		if (r < 0)
			return -1;
		if (r == 1) {
			*key = lc_steal(name);
			return 0;
		}
	}
	return lc_error_set(err, WL_EXIT_LCD, 0, "more than 1000 eval reports for %s", date);
}

static int fn_eval(void)
{
	lc_error_t *err = NULL;
	_cleanup_json_ json_t *args = wl_args(&err);
	if (!args)
		return wl_fail_err(WL_EXIT_USAGE, NULL, err);
	json_t *only = json_object_get(args, "tasks");
	json_t *mv = json_object_get(args, "model");
	if ((only && !json_is_array(only)) || (mv && !json_is_string(mv)))
		return wl_fail(WL_EXIT_USAGE, NULL, "args: expected {\"model\": \"…\", \"tasks\": [\"name\", …]} (both optional)");
	const char *model = mv ? json_string_value(mv) : wl_config("AGENT_MODEL", NULL);
	_cleanup_json_ json_t *names = eval_task_names(only, &err);
	if (!names)
		return wl_fail_err(WL_EXIT_USAGE, NULL, err);
	_cleanup_free_ char *date = utc_now(false), *started = utc_now(true);
	long long t0 = lc_now_ms();
	lcc_t *c = lcc_new(NULL, NULL, &err);
	if (!c)
		return wl_fail_err(WL_EXIT_LCD, NULL, err);
	_cleanup_json_ json_t *targs = json_array();
	size_t i;
	json_t *nv;
	json_array_foreach(names, i, nv) {
		json_t *a = json_pack("{s:O}", "task", nv);
		if (model && *model)
			json_object_set_new(a, "model", json_string(model));
		json_array_append_new(targs, a);
	}
	_cleanup_json_ json_t *outcomes = spawn_all(c, "eval-task", targs, &err);
	if (!outcomes) {
		lcc_free(c);
		return wl_fail_err(WL_EXIT_LCD, NULL, err);
	}

	/* The report: SWE-bench's fields, and ours. */
	json_t *resolved = json_array(), *unresolved = json_array(), *errors = json_array(), *empty = json_array(),
	       *completed = json_array(), *tasks = json_array();
	double spend = 0;
	bool any_spend = false;
	json_t *o;
	json_array_foreach(outcomes, i, o) {
		const char *name = json_string_value(json_array_get(names, i));
		json_t *res = json_object_get(o, "result");
		bool ran = !strcmp(json_string_value(json_object_get(o, "state")) ?: "", "succeeded") && json_is_object(res);
		const char *status = ran ? json_string_value(json_object_get(res, "status")) : "error";
		json_t *t = json_pack("{s:s, s:s, s:b, s:s}", "id", name, "status", status, "passed",
				      !strcmp(status, "resolved"), "task_id", json_string_value(json_object_get(o, "task_id")));
		static const char *const copy[] = { "turns", "spend_usd", "wall_time_s", "sandbox_id", "check_exit_code",
						    "agent_status", "diff_lines" };
		for (size_t k = 0; k < sizeof(copy) / sizeof(copy[0]); k++) {
			json_t *v = json_object_get(res, copy[k]);
			json_object_set(t, copy[k], v && json_is_object(res) ? v : json_null());
		}
		if (!json_is_number(json_object_get(t, "wall_time_s")))
			json_object_set_new(t, "wall_time_s", json_real(0));
		if (!ran) {
			_cleanup_free_ char *why = lc_strdup_printf("the eval-task %s %s: %s",
								   json_string_value(json_object_get(o, "task_id")),
								   json_string_value(json_object_get(o, "state")), task_error(o));
			json_object_set_new(t, "error", json_string(why));
		} else if (json_object_get(res, "error")) {
			json_object_set(t, "error", json_object_get(res, "error"));
		} else {
			json_object_set_new(t, "error", json_null());
		}
		if (json_is_number(json_object_get(t, "spend_usd"))) {
			spend += json_number_value(json_object_get(t, "spend_usd"));
			any_spend = true;
		}
		if (ran)
			json_array_append_new(completed, json_string(name));
		if (!strcmp(status, "resolved"))
			json_array_append_new(resolved, json_string(name));
		else if (!strcmp(status, "error"))
			json_array_append_new(errors, json_string(name));
		else {
			json_array_append_new(unresolved, json_string(name));
			if (!strcmp(status, "empty_patch"))
				json_array_append_new(empty, json_string(name));
		}
		json_array_append_new(tasks, t);
	}
	size_t n = json_array_size(names);
	agent_config_t ac = { 0 };
	lc_error_t *cerr = NULL;
	const char *agent = "?";
	if (agent_config_from_env(&ac, &cerr) == 0)
		agent = ac.command ? "AGENT_COMMAND" : ac.agent;
	lc_error_free(cerr);
	_cleanup_free_ char *finished = utc_now(true);
	_cleanup_json_ json_t *rep = json_pack(
		"{s:s, s:s, s:s, s:s, s:s?, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:o, s:o, s:o, s:o, s:o, s:O, s:o, s:f, s:o, s:f, s:o, s:i}",
		"date", date, "started", started, "finished", finished, "run_task_id", wl_config("LC_TASK_ID", "-"), "model",
		model && *model ? model : NULL, "agent", agent, "total_instances", (json_int_t)n, "submitted_instances",
		(json_int_t)n, "completed_instances", (json_int_t)json_array_size(completed), "resolved_instances",
		(json_int_t)json_array_size(resolved), "unresolved_instances", (json_int_t)json_array_size(unresolved),
		"empty_patch_instances", (json_int_t)json_array_size(empty), "error_instances",
		(json_int_t)json_array_size(errors), "resolved_ids", resolved, "unresolved_ids", unresolved, "error_ids",
		errors, "empty_patch_ids", empty, "completed_ids", completed, "submitted_ids", names, "incomplete_ids",
		json_array(), "pass_rate", n ? round6((double)json_array_size(resolved) / (double)n) : 0.0, "total_spend_usd",
		any_spend ? json_real(round6(spend)) : json_null(), "wall_time_s",
		round((double)(lc_now_ms() - t0) / 100.0) / 10.0, "tasks", tasks, "schema_version", 2);
	agent_config_clear(&ac);
	_cleanup_free_ char *md = report_markdown(rep);

	/* Where it goes: a comment on the issue, else the map.  A report
	 * that cannot be posted is kept in the map, and the task fails. */
	const char *issue = wl_config("EVAL_REPORT_ISSUE", NULL);
	_cleanup_free_ char *url = NULL, *key = NULL;
	lc_error_t *post_err = NULL;
	if (issue && post_report(issue, md, &url, &post_err) == 0) {
		json_object_set_new(rep, "comment_url", url ? json_string(url) : json_null());
	} else {
		if (keep_report(c, date, rep, &key, &err) < 0) {
			lcc_free(c);
			lc_error_free(post_err);
			json_object_set_new(rep, "markdown", json_string(md));
			return wl_fail_err(WL_EXIT_LCD, json_incref(rep), err);
		}
		json_object_set_new(rep, "map_key", json_string(key));
	}
	lcc_free(c);
	json_object_set_new(rep, "markdown", json_string(md));
	fprintf(stderr, "eval: %lld/%zu resolved%s%s%s%s\n", (long long)json_array_size(resolved), n,
		url ? ", posted at " : "", url ? url : "", key ? ", kept in the map under " : "", key ? key : "");
	if (post_err) {
		_cleanup_free_ char *m = lc_strdup_printf("the report could not be posted on %s (it is kept under %s): %s",
							  issue, key, post_err->msg);
		lc_error_free(post_err);
		return wl_fail(WL_EXIT_LCD, json_incref(rep), "%s", m);
	}
	return wl_result(rep) < 0 ? WL_EXIT_LCD : 0;
}

/* ---- best-of-N ---- */

static int fn_attempt(void)
{
	lc_error_t *err = NULL;
	_cleanup_json_ json_t *args = wl_args(&err);
	if (!args)
		return wl_fail_err(WL_EXIT_USAGE, NULL, err);
	const char *prompt = json_string_value(json_object_get(args, "prompt"));
	const char *image = json_string_value(json_object_get(args, "image"));
	const char *commit = json_string_value(json_object_get(args, "commit"));
	json_int_t k = json_integer_value(json_object_get(args, "attempt"));
	const char *test = wl_config("TEST_COMMAND", NULL);
	if (!prompt || !image || !commit || k < 1)
		return wl_fail(WL_EXIT_USAGE, NULL, "args: expected {prompt, image, commit, attempt} (best-of-n makes them)");
	if (!test)
		return wl_fail(WL_EXIT_USAGE, NULL, "config TEST_COMMAND is not set: best-of-N needs a test to pick a winner");
	long long tto = wl_config_int("TEST_TIMEOUT_SECONDS", 1800, 1, 86400, &err);
	if (tto < 0)
		return wl_fail_err(WL_EXIT_USAGE, NULL, err);
	_cleanup_free_ char *kv = lc_strdup_printf("%lld", (long long)k);
	_cleanup_json_ json_t *labels = json_pack("{s:s, s:s, s:s?}", "coding-agents", "best-of-n", "attempt", kv,
						  "best_of_n_task", getenv("LC_TASK_ID"));
	_cleanup_json_ json_t *out = json_pack("{s:I, s:b}", "attempt", k, "passed", 0);
	attempt_t a = { .image = image, .repo_dir = wl_config("REPO_DIR", "/workspace/repo"), .base = commit,
			.prompt = prompt, .test_command = test, .check_timeout_s = tto, .labels = labels };
	if (run_attempt(&a, out, &err) < 0)
		return wl_fail_err(err->exit_code == WL_EXIT_USAGE ? WL_EXIT_USAGE : WL_EXIT_LCD, json_incref(out), err);
	json_object_set_new(out, "finished_ms", json_integer(lc_wall_ms()));
	return wl_result(out) < 0 ? WL_EXIT_LCD : 0;
}

static int fn_best_of_n(void)
{
	lc_error_t *err = NULL;
	_cleanup_json_ json_t *args = wl_args(&err);
	if (!args)
		return wl_fail_err(WL_EXIT_USAGE, NULL, err);
	json_t *pv = json_object_get(args, "prompt"), *nv = json_object_get(args, "n");
	if (!json_is_string(pv) || !json_string_length(pv) || json_string_length(pv) > 65536)
		return wl_fail(WL_EXIT_USAGE, NULL, "args.prompt: expected a non-empty string of at most 65536 bytes");
	json_int_t n = nv ? json_integer_value(nv) : 4;
	if ((nv && !json_is_integer(nv)) || n < 1 || n > 16)
		return wl_fail(WL_EXIT_USAGE, NULL, "args.n: expected a number from 1 to 16");
	long long tie_ms = wl_config_int("BEST_OF_N_TIE_MS", 1000, 0, 3600000, &err);
	if (tie_ms < 0)
		return wl_fail_err(WL_EXIT_USAGE, NULL, err);
	if (!wl_config("TEST_COMMAND", NULL))
		return wl_fail(WL_EXIT_USAGE, NULL, "config TEST_COMMAND is not set: best-of-N needs a test to pick a winner");
	lcc_t *c = lcc_new(NULL, NULL, &err);
	if (!c)
		return wl_fail_err(WL_EXIT_LCD, NULL, err);
	_cleanup_free_ char *snapv = NULL;
	int have = lcc_map_get(c, NULL, MAP, SNAPSHOT_KEY, &snapv, &err);
	_cleanup_json_ json_t *snap = have > 0 ? json_loads(snapv, 0, NULL) : NULL;
	const char *image = json_string_value(json_object_get(snap, "image"));
	const char *commit = json_string_value(json_object_get(snap, "commit"));
	if (!image || !commit) {
		lcc_free(c);
		if (have < 0)
			return wl_fail_err(WL_EXIT_LCD, NULL, err);
		return wl_fail(WL_EXIT_USAGE, NULL, "no repository snapshot (map %s, key %s): run `lcctl run coding-agents:snapshot` first",
			       MAP, SNAPSHOT_KEY);
	}
	/* Each attempt knows which one it is: the prompts differ by that line
	 * only (and a deterministic agent would otherwise try one thing N times). */
	_cleanup_json_ json_t *targs = json_array();
	for (json_int_t k = 1; k <= n; k++) {
		_cleanup_free_ char *p = lc_strdup_printf("%s\n\n(This is attempt %lld of %lld at this task; the attempts run "
							  "independently and the first whose tests pass is kept.)\n",
							  json_string_value(pv), (long long)k, (long long)n);
		json_array_append_new(targs, json_pack("{s:s, s:s, s:s, s:I}", "prompt", p, "image", image, "commit", commit,
						       "attempt", k));
	}
	long long t0 = lc_now_ms();
	_cleanup_json_ json_t *outcomes = spawn_all(c, "best-of-n-attempt", targs, &err);
	lcc_free(c);
	if (!outcomes)
		return wl_fail_err(WL_EXIT_LCD, NULL, err);

	/* The winner: the first to pass; attempts that passed within
	 * BEST_OF_N_TIE_MS of it tie, and the smallest diff among them wins. */
	_cleanup_json_ json_t *attempts = json_array();
	long long first = -1;
	double spend = 0;
	size_t i;
	json_t *o;
	json_array_foreach(outcomes, i, o) {
		json_t *res = json_object_get(o, "result");
		bool ran = !strcmp(json_string_value(json_object_get(o, "state")) ?: "", "succeeded") && json_is_object(res);
		json_t *a = ran ? json_deep_copy(res) : json_pack("{s:I, s:b}", "attempt", (json_int_t)(i + 1), "passed", 0);
		if (!ran) {
			if (json_is_object(res))
				json_object_update_missing(a, res);
			_cleanup_free_ char *why = lc_strdup_printf("the attempt's task %s: %s",
								   json_string_value(json_object_get(o, "state")), task_error(o));
			json_object_set_new(a, "error", json_string(why));
			json_object_set_new(a, "passed", json_false());
		}
		json_object_set(a, "task_id", json_object_get(o, "task_id"));
		if (json_is_number(json_object_get(a, "spend_usd")))
			spend += json_number_value(json_object_get(a, "spend_usd"));
		long long fin = json_integer_value(json_object_get(a, "finished_ms"));
		if (json_is_true(json_object_get(a, "passed")) && (first < 0 || fin < first))
			first = fin;
		json_array_append_new(attempts, a);
	}
	json_t *winner = NULL;
	json_array_foreach(attempts, i, o) {
		if (!json_is_true(json_object_get(o, "passed")) ||
		    json_integer_value(json_object_get(o, "finished_ms")) > first + tie_ms)
			continue;
		if (!winner)
			winner = o;
		else {
			long long dl = json_integer_value(json_object_get(o, "diff_lines")),
				  wl = json_integer_value(json_object_get(winner, "diff_lines"));
			long long db = json_integer_value(json_object_get(o, "diff_bytes")),
				  wb = json_integer_value(json_object_get(winner, "diff_bytes"));
			if (dl < wl || (dl == wl && db < wb) ||
			    (dl == wl && db == wb &&
			     json_integer_value(json_object_get(o, "finished_ms")) <
				     json_integer_value(json_object_get(winner, "finished_ms"))))
				winner = o;
		}
	}
	_cleanup_json_ json_t *out = json_pack("{s:O, s:I, s:{s:s, s:s}, s:o, s:o, s:f, s:f}", "prompt", pv, "n", n,
					       "snapshot", "image", image, "commit", commit, "winner",
					       winner ? json_incref(json_object_get(winner, "attempt")) : json_null(),
					       "winning_diff",
					       winner && json_object_get(winner, "diff") ? json_incref(json_object_get(winner, "diff"))
											  : json_null(),
					       "total_spend_usd", round6(spend), "wall_time_s",
					       round((double)(lc_now_ms() - t0) / 100.0) / 10.0);
	/* every attempt, in order, without its diff (the winner's is above) */
	json_array_foreach(attempts, i, o)
		json_object_del(o, "diff");
	json_object_set(out, "attempts", attempts);
	fprintf(stderr, "best-of-n: %lld attempt(s), winner %s\n", (long long)n,
		winner ? json_string_value(json_object_get(winner, "task_id")) : "none");
	if (wl_result(out) < 0)
		return WL_EXIT_LCD;
	return winner ? 0 : WL_EXIT_FAILED;
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		int (*fn)(void);
	} fns[] = { { "eval", fn_eval },
		    { "eval-task", fn_eval_task },
		    { "best-of-n", fn_best_of_n },
		    { "best-of-n-attempt", fn_attempt } };
	setvbuf(stderr, NULL, _IOLBF, 0);
	if (argc == 2)
		for (size_t i = 0; i < sizeof(fns) / sizeof(fns[0]); i++)
			if (!strcmp(argv[1], fns[i].name)) {
				wl_set_name(fns[i].name);
				return fns[i].fn();
			}
	fprintf(stderr, "usage: lc-eval eval|eval-task|best-of-n|best-of-n-attempt (run by lcd as the coding-agents "
			"app's functions: docs/guides/coding-agents.md)\n");
	return WL_EXIT_USAGE;
}
