/* lc-agents — the coding-agents app's functions (contrib/apps/coding-agents):
 *
 *   lc-agents webhook       a GitHub delivery: issues/labeled with LABEL
 *                           claims issue:OWNER/REPO#N and spawns solve-issue;
 *                           issues/unlabeled cancels that run, frees the claim
 *   lc-agents snapshot      the repo-builder: clone, SETUP_COMMAND, snapshot,
 *                           record {image, commit, branch, created}
 *   lc-agents solve-issue   the agent in a sandbox of the snapshot, the
 *                           tests, the patch; outside it the branch, the
 *                           push and the pull request (or a comment)
 *
 * Each runs as an lcd task: arguments in $LC_TASK_ARGS, the result written
 * to $LC_TASK_RESULT, the app's config and the function's secrets in the
 * environment, lcd reached with $LCD_SOCKET and $LCD_TOKEN.  Errors are one
 * line on stderr, "lc-agents FUNCTION: …", also in the result's "error". */
#define _GNU_SOURCE 1
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "github.h"
#include "gitops.h"
#include "lcclient.h"
#include "util.h"

#define MAP "coding-agents"
#define SNAPSHOT_KEY "snapshot"
#define PATCH_FILE "/tmp/agent-change.patch"
#define PATCH_MAX (16 << 20)
#define BASE_INDEX "/tmp/agent-base.index"
#define AFTER_INDEX "/tmp/agent-after.index"
/* git in the agent's tree, with its hooks, fsmonitor and diff drivers off */
#define GIT_SAFE "g() { git -c core.fsmonitor= -c core.hooksPath=/dev/null -c diff.external= \"$@\"; }; "

static const char *fn_name = "lc-agents";

static const char *cfg(const char *name, const char *dflt)
{
	const char *v = getenv(name);
	return v && *v ? v : dflt;
}

static long cfg_long(const char *name, long dflt, long min, long max, lc_error_t **err)
{
	const char *v = getenv(name);
	if (!v || !*v)
		return dflt;
	char *end;
	errno = 0;
	long n = strtol(v, &end, 10);
	if (errno || *end || n < min || n > max) {
		lc_error_set(err, LC_EXIT_USAGE, 0, "%s=%s: expected a whole number from %ld to %ld", name, v, min, max);
		return -1;
	}
	return n;
}

static char *now_iso(void)
{
	char b[32];
	time_t t = time(NULL);
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(b, sizeof(b), "%Y-%m-%dT%H:%M:%SZ", &tm);
	return strdup(b);
}

static int write_result(json_t *r)
{
	const char *path = cfg("LC_TASK_RESULT", NULL);
	if (!path) {
		_cleanup_free_ char *s = json_dumps(r, JSON_INDENT(2));
		puts(s);
		return 0;
	}
	return json_dump_file(r, path, JSON_INDENT(2));
}

/* The failure of a function: one line on stderr, the error in the result. */
static int fail(json_t *result, lc_error_t *err)
{
	fprintf(stderr, "lc-agents %s: %s\n", fn_name, err->msg);
	json_t *r = result ? result : json_object();
	json_object_set_new(r, "error", json_string(err->msg));
	write_result(r);
	int code = err->exit_code ? err->exit_code : 1;
	lc_error_free(err);
	if (!result)
		json_decref(r);
	return code;
}

static json_t *load_args(lc_error_t **err)
{
	const char *path = cfg("LC_TASK_ARGS", NULL);
	if (!path) {
		lc_error_set(err, LC_EXIT_USAGE, 0, "LC_TASK_ARGS is not set: run me as an lcd task");
		return NULL;
	}
	json_error_t je;
	json_t *a = json_load_file(path, JSON_DECODE_ANY, &je);
	if (!a)
		lc_error_set(err, LC_EXIT_INVALID, 0, "%s: %s", path, je.text);
	return a;
}

/* OWNER/REPO of the configured REPOSITORY (NULL if it has none). */
static char *configured_repo(void)
{
	return gh_repo_from_url(cfg("REPOSITORY", NULL));
}

static char *claim_key(const char *repo, long n)
{
	return lc_strdup_printf("issue:%s#%ld", repo, n);
}

/* ---- webhook ------------------------------------------------------------ */

static json_t *ignored(const char *why)
{
	return json_pack("{s:s, s:s}", "status", "ignored", "reason", why);
}

/* LABEL taken off an issue: the run its claim names is cancelled (queued
 * or running: lcd kills its sandbox, and the agent's sandboxes go with the
 * task), and the claim is freed, so that labeling it again starts afresh.
 * A claim whose spawn is still under way names no task yet: wait for it a
 * little (the labeled delivery's webhook task may run beside this one). */
static int unlabeled(const char *repo, long n)
{
	lc_error_t *err = NULL;
	_cleanup_free_ char *key = claim_key(repo, n);
	lcc_t *c = lcc_new(NULL, NULL, &err);
	if (!c)
		return fail(NULL, err);
	_cleanup_free_ char *held = NULL;
	_cleanup_json_ json_t *claim = NULL;
	const char *task = NULL;
	for (int i = 0; i < 100; i++) {
		free(held);
		held = NULL;
		int got = lcc_map_get(c, NULL, MAP, key, &held, &err);
		if (got < 0) {
			lcc_free(c);
			return fail(NULL, err);
		}
		json_decref(claim);
		claim = got ? json_loads(held, 0, NULL) : NULL;
		task = json_string_value(json_object_get(claim, "task"));
		if (!got || task)
			break;
		usleep(100 * 1000);
	}
	_cleanup_json_ json_t *result = NULL;
	if (!held) {
		lcc_free(c);
		_cleanup_free_ char *why = lc_strdup_printf("no run holds %s", key);
		result = ignored(why);
		write_result(result);
		return 0;
	}
	if (!task) {
		lcc_free(c);
		lc_error_set(&err, LC_EXIT_STATE, 0, "%s names no task after 10 s: nothing cancelled", key);
		return fail(json_pack("{s:s, s:s}", "status", "not-cancelled", "claim", key), err);
	}
	/* A task lcd is starting this moment is cancelled a little later
	 * (lcd says "try again"); one lcd no longer knows has ended. */
	int r;
	for (int i = 0;; i++) {
		r = lcc_task_cancel(c, task, &err);
		if (r >= 0)
			break;
		if (err->exit_code == LC_EXIT_UNKNOWN) {
			lc_error_free(err);
			err = NULL;
			r = 0;
			break;
		}
		if (i >= 20 || !strstr(err->msg, "try again")) {
			lcc_free(c);
			lc_error_wrap(&err, "cannot cancel solve-issue task %s of %s", task, key);
			return fail(json_pack("{s:s, s:s, s:s}", "status", "not-cancelled", "claim", key, "task", task), err);
		}
		lc_error_free(err);
		err = NULL;
		usleep(500 * 1000);
	}
	/* Freed only if it is still this claim: a relabel may have taken it
	 * (one handled after this delivery: the webhook runs one at a time). */
	_cleanup_free_ char *now = NULL;
	lc_error_t *e2 = NULL;
	int got = lcc_map_get(c, NULL, MAP, key, &now, &e2);
	const char *released = "the claim released";
	if (got > 0 && strcmp(now, held) != 0)
		released = "the claim is another run's now: kept";
	else if (got < 0 || (got > 0 && lcc_map_del(c, NULL, MAP, key, &e2) < 0)) {
		fprintf(stderr, "lc-agents webhook: cannot release %s: %s\n", key, e2->msg);
		released = "the claim not released (it expires with its TTL)";
	}
	lc_error_free(e2);
	lcc_free(c);
	result = json_pack("{s:s, s:s, s:s}", "status", r ? "cancelled" : "ended", "claim", key, "task", task);
	write_result(result);
	fprintf(stderr, "lc-agents webhook: %s unlabeled: solve-issue task %s %s, %s\n", key, task,
		r ? "cancelled" : "had ended", released);
	return 0;
}

static int fn_webhook(void)
{
	lc_error_t *err = NULL;
	_cleanup_json_ json_t *args = load_args(&err);
	if (!args)
		return fail(NULL, err);
	const char *event = json_string_value(json_object_get(args, "event"));
	json_t *payload = json_object_get(args, "payload");
	const char *action = json_string_value(json_object_get(payload, "action"));
	const char *label = json_string_value(json_object_get(json_object_get(payload, "label"), "name"));
	const char *want = cfg("LABEL", "agent");
	_cleanup_json_ json_t *result = NULL;
	if (!event || strcmp(event, "issues") != 0) {
		_cleanup_free_ char *why = lc_strdup_printf("event %s is not issues", event ? event : "(none)");
		result = ignored(why);
	} else if (!action || (strcmp(action, "labeled") != 0 && strcmp(action, "unlabeled") != 0)) {
		_cleanup_free_ char *why = lc_strdup_printf("action %s is not labeled or unlabeled", action ? action : "(none)");
		result = ignored(why);
	} else if (!label || strcmp(label, want) != 0) {
		_cleanup_free_ char *why = lc_strdup_printf("label %s is not %s", label ? label : "(none)", want);
		result = ignored(why);
	}
	if (result) {
		write_result(result);
		return 0;
	}
	json_t *issue = json_object_get(payload, "issue");
	const char *repo = json_string_value(json_object_get(json_object_get(payload, "repository"), "full_name"));
	json_int_t n = json_integer_value(json_object_get(issue, "number"));
	if (!repo || n <= 0) {
		lc_error_set(&err, LC_EXIT_INVALID, 0, "the delivery has no repository.full_name or issue.number");
		return fail(NULL, err);
	}
	_cleanup_free_ char *mine = configured_repo();
	if (mine && strcasecmp(mine, repo) != 0) {
		_cleanup_free_ char *why = lc_strdup_printf("repository %s is not REPOSITORY's %s", repo, mine);
		result = ignored(why);
		write_result(result);
		return 0;
	}
	if (json_object_get(issue, "pull_request")) {
		result = ignored("a pull request, not an issue");
		write_result(result);
		return 0;
	}
	if (!strcmp(action, "unlabeled"))
		return unlabeled(repo, (long)n);
	long ttl = cfg_long("CLAIM_TTL_SECONDS", 7200, 1, 30L * 86400, &err);
	if (ttl < 0)
		return fail(NULL, err);
	const char *delivery = json_string_value(json_object_get(args, "delivery"));
	_cleanup_free_ char *key = claim_key(repo, (long)n);
	_cleanup_free_ char *when = now_iso();
	_cleanup_json_ json_t *claim = json_pack("{s:s?, s:s, s:s?}", "delivery", delivery, "claimed_at", when,
						 "webhook_task", getenv("LC_TASK_ID"));
	_cleanup_free_ char *cv = json_dumps(claim, JSON_COMPACT);
	lcc_t *c = lcc_new(NULL, NULL, &err);
	if (!c)
		return fail(NULL, err);
	int won = lcc_map_set(c, NULL, MAP, key, cv, ttl, true, &err);
	if (won < 0) {
		lcc_free(c);
		return fail(NULL, err);
	}
	if (won == 0) {
		_cleanup_free_ char *held = NULL;
		lc_error_t *e2 = NULL;
		if (lcc_map_get(c, NULL, MAP, key, &held, &e2) < 0)
			lc_error_free(e2);
		lcc_free(c);
		json_t *hj = held ? json_loads(held, 0, NULL) : NULL;
		result = json_pack("{s:s, s:s, s:o}", "status", "already-claimed", "claim", key, "held_by",
				   hj ? hj : json_null());
		write_result(result);
		fprintf(stderr, "lc-agents webhook: %s is claimed already: nothing started\n", key);
		return 0;
	}
	const char *title = json_string_value(json_object_get(issue, "title"));
	const char *body = json_string_value(json_object_get(issue, "body"));
	_cleanup_json_ json_t *sargs = json_pack("{s:s, s:I, s:s?, s:s?, s:s?, s:s}", "repo", repo, "issue", n, "title",
						 title, "body", body, "delivery", delivery, "claim", key);
	_cleanup_free_ char *task = NULL;
	if (lcc_spawn(c, NULL, "solve-issue", sargs, &task, &err) < 0) {
		lc_error_t *e2 = NULL;
		if (lcc_map_del(c, NULL, MAP, key, &e2) < 0) {
			fprintf(stderr, "lc-agents webhook: cannot release %s: %s\n", key, e2->msg);
			lc_error_free(e2);
		}
		lcc_free(c);
		lc_error_wrap(&err, "solve-issue for %s was not started (the claim is released)", key);
		result = json_pack("{s:s, s:s}", "status", "refused", "claim", key);
		return fail(json_incref(result), err);
	}
	/* The claim names the task now (same TTL; a lost update only loses the name). */
	json_object_set_new(claim, "task", json_string(task));
	free(cv);
	cv = json_dumps(claim, JSON_COMPACT);
	lc_error_t *e3 = NULL;
	if (lcc_map_set(c, NULL, MAP, key, cv, ttl, false, &e3) < 0)
		lc_error_free(e3);
	lcc_free(c);
	result = json_pack("{s:s, s:s, s:s}", "status", "started", "claim", key, "task", task);
	write_result(result);
	fprintf(stderr, "lc-agents webhook: %s claimed, solve-issue task %s\n", key, task);
	return 0;
}

/* ---- helpers for sandboxes --------------------------------------------- */

/* Run a shell line in a sandbox (user: "UID:GID" or NULL for the image's). */
static int sb_sh(lcc_t *c, const char *id, const char *user, const char *workdir, const char *cmd, json_t *env,
		 int timeout_s, lcc_exec_result_t *res, lc_error_t **err)
{
	_cleanup_json_ json_t *req = json_pack("{s:s, s:i}", "cmd", cmd, "timeout", timeout_s);
	if (user)
		json_object_set_new(req, "user", json_string(user));
	if (workdir)
		json_object_set_new(req, "workdir", json_string(workdir));
	if (env)
		json_object_set(req, "env", env);
	memset(res, 0, sizeof(*res));
	return lcc_sandbox_exec(c, id, req, res, err);
}

/* The last line of a command's stderr (else stdout) for a message. */
static char *last_line(const lcc_exec_result_t *r)
{
	char *t = agent_tail(r->err, r->err_len, 1);
	if (!*t) {
		free(t);
		t = agent_tail(r->out, r->out_len, 1);
	}
	return t;
}

/* The calling function's limits from its app's manifest (NULL if none). */
static json_t *own_limits(lcc_t *c)
{
	const char *app = getenv("LC_TASK_APP"), *fn = getenv("LC_TASK_FUNCTION");
	if (!app || !fn)
		return NULL;
	_cleanup_free_ char *ea = lcc_escape(app);
	_cleanup_free_ char *path = lc_strdup_printf("/apps/%s", ea);
	_cleanup_json_ json_t *a = NULL;
	lc_error_t *err = NULL;
	if (lcc_request(c, "GET", path, NULL, NULL, &a, &err) < 0) {
		lc_error_free(err);
		return NULL;
	}
	json_t *l = json_object_get(json_object_get(json_object_get(json_object_get(a, "manifest"), "functions"), fn),
				    "limits");
	return l ? json_incref(l) : NULL;
}

/* ---- snapshot (the repo-builder) --------------------------------------- */

static int fn_snapshot(void)
{
	lc_error_t *err = NULL;
	const char *url = cfg("REPOSITORY", NULL);
	if (!url) {
		lc_error_set(&err, LC_EXIT_USAGE, 0, "REPOSITORY is not set: deploy with --config REPOSITORY=URL");
		return fail(NULL, err);
	}
	const char *dir = cfg("REPO_DIR", "/workspace/repo");
	if (dir[0] != '/') {
		lc_error_set(&err, LC_EXIT_USAGE, 0, "REPO_DIR=%s: expected an absolute path", dir);
		return fail(NULL, err);
	}
	const char *base = cfg("BASE_BRANCH", NULL);
	const char *setup = cfg("SETUP_COMMAND", NULL);
	const char *user = cfg("AGENT_USER", "1000:1000");
	long setup_to = cfg_long("SETUP_TIMEOUT_SECONDS", 3600, 1, 86400, &err);
	if (setup_to < 0)
		return fail(NULL, err);
	lcc_t *c = lcc_new(NULL, NULL, &err);
	if (!c)
		return fail(NULL, err);
	_cleanup_json_ json_t *limits = own_limits(c);
	_cleanup_json_ json_t *req = json_pack("{s:s, s:s}", "image", cfg("AGENT_IMAGE", "agent-cli"), "net", "open");
	if (limits)
		json_object_set(req, "limits", limits);
	json_object_set_new(req, "labels", json_pack("{s:s}", "coding-agents", "repo-builder"));
	_cleanup_free_ char *id = NULL;
	_cleanup_json_ json_t *result = json_object();
	long long t0 = lc_now_ms();
	if (lcc_sandbox_create(c, req, &id, NULL, &err) < 0) {
		lc_error_wrap(&err, "cannot make the repo-builder's sandbox");
		lcc_free(c);
		return fail(json_incref(result), err);
	}
	json_object_set_new(result, "sandbox_id", json_string(id));
	_cleanup_json_ json_t *env = json_pack("{s:s, s:s}", "REPOSITORY", url, "REPO_DIR", dir);
	if (base)
		json_object_set_new(env, "BASE_BRANCH", json_string(base));
	lcc_exec_result_t r;
	int rc = 0;
	_cleanup_free_ char *commit = NULL, *branch = NULL, *image = NULL, *created = NULL, *rs = NULL;
	_cleanup_json_ json_t *rec = NULL;
	/* REPO_DIR made for the agent user (its parent may be root's), then
	 * the clone as that user: nothing in the tree is root's. */
	if (sb_sh(c, id, NULL, "/", "mkdir -p \"$REPO_DIR\" && chown \"$AGENT_USER\" \"$REPO_DIR\"",
		  json_pack("{s:s, s:s}", "REPO_DIR", dir, "AGENT_USER", user), 60, &r, &err) < 0 ||
	    r.exit_code != 0) {
		if (!err) {
			_cleanup_free_ char *l = last_line(&r);
			lc_error_set(&err, LC_EXIT_RUNTIME, 0, "cannot make %s in the sandbox: %s", dir, l);
		}
		lcc_exec_result_clear(&r);
		goto failed;
	}
	lcc_exec_result_clear(&r);
	if (sb_sh(c, id, user, "/",
		  "exec git -c advice.detachedHead=false clone -q ${BASE_BRANCH:+--branch \"$BASE_BRANCH\"} -- \"$REPOSITORY\" \"$REPO_DIR\"",
		  env, (int)setup_to, &r, &err) < 0)
		goto failed;
	if (r.exit_code != 0) {
		_cleanup_free_ char *l = last_line(&r);
		lc_error_set(&err, LC_EXIT_RUNTIME, 0, "cannot clone %s%s%s: %s", url, base ? " branch " : "", base ? base : "",
			     r.timed_out ? "timed out" : l);
		lcc_exec_result_clear(&r);
		goto failed;
	}
	lcc_exec_result_clear(&r);
	if (setup) {
		if (sb_sh(c, id, user, dir, setup, NULL, (int)setup_to, &r, &err) < 0)
			goto failed;
		json_object_set_new(result, "setup_exit_code", json_integer(r.exit_code));
		if (r.exit_code != 0) {
			_cleanup_free_ char *l = last_line(&r);
			lc_error_set(&err, LC_EXIT_RUNTIME, 0, "SETUP_COMMAND exited %d%s: %s", r.exit_code,
				     r.timed_out ? " (timed out)" : "", l);
			fprintf(stderr, "%s%s", r.out ? r.out : "", r.err ? r.err : "");
			lcc_exec_result_clear(&r);
			goto failed;
		}
		lcc_exec_result_clear(&r);
	}
	if (sb_sh(c, id, user, dir, "git rev-parse HEAD && git symbolic-ref --short -q HEAD", NULL, 60, &r, &err) < 0)
		goto failed;
	if (r.exit_code != 0 || !r.out) {
		_cleanup_free_ char *l = last_line(&r);
		lc_error_set(&err, LC_EXIT_RUNTIME, 0, "cannot read the clone's commit and branch: %s", l);
		lcc_exec_result_clear(&r);
		goto failed;
	}
	commit = strndup(r.out, strcspn(r.out, "\n"));
	const char *nl = strchr(r.out, '\n');
	branch = nl && nl[1] ? strndup(nl + 1, strcspn(nl + 1, "\n")) : strdup(base ? base : "HEAD");
	lcc_exec_result_clear(&r);
	created = now_iso();
	{
		char stamp[32];
		time_t t = time(NULL);
		struct tm tm;
		gmtime_r(&t, &tm);
		strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm);
		char rnd[7];
		lc_random_hex(rnd, 6);
		image = lc_strdup_printf("coding-agents/repo-%.12s-%s-%s", commit, stamp, rnd);
	}
	if (lcc_sandbox_snapshot(c, id, image, NULL, &err) < 0)
		goto failed;
	rec = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "image", image, "commit", commit, "branch",
					       branch, "created", created, "repository", url, "repo_dir", dir);
	rs = json_dumps(rec, JSON_COMPACT);
	if (lcc_map_set(c, NULL, MAP, SNAPSHOT_KEY, rs, 0, false, &err) < 0)
		goto failed;
	json_object_update(result, rec);
	json_object_set_new(result, "duration_ms", json_integer(lc_now_ms() - t0));
	if (lcc_sandbox_delete(c, id, &err) < 0) {
		fprintf(stderr, "lc-agents snapshot: %s\n", err->msg);
		lc_error_free(err);
		err = NULL;
	}
	lcc_free(c);
	write_result(result);
	fprintf(stderr, "lc-agents snapshot: %s at %s (%s) is image %s\n", url, commit, branch, image);
	return 0;
failed:
	rc = fail(json_incref(result), err);
	lc_error_t *e2 = NULL;
	if (lcc_sandbox_delete(c, id, &e2) < 0)
		lc_error_free(e2);
	lcc_free(c);
	return rc;
}

/* ---- solve-issue ------------------------------------------------------- */

static char *build_prompt(const char *repo, long n, const char *title, const char *body, const char *test_cmd)
{
	return lc_strdup_printf(
		"You are working on the repository %s, checked out in the current directory.\n"
		"Resolve GitHub issue #%ld.\n\n"
		"Title: %s\n\n%s\n\n"
		"Instructions:\n"
		"- Change the files in this directory to resolve the issue.\n"
		"- Do not commit, do not create branches, do not push: the change is taken from the working tree.\n"
		"- You have no access to GitHub or the network beyond the model API.\n"
		"%s%s%s"
		"- End with a short summary of what you changed and why; it becomes the pull request's description.\n",
		repo, n, title ? title : "(no title)", body && *body ? body : "(no description)",
		test_cmd ? "- The tests are run afterwards with: " : "", test_cmd ? test_cmd : "", test_cmd ? "\n" : "");
}

static void fmt_money(char *b, size_t n, double usd)
{
	if (usd < 0)
		snprintf(b, n, "not reported");
	else
		snprintf(b, n, "$%.4f", usd);
}

/* The pull request's body, or the comment's. */
static char *report_body(const agent_config_t *ac, const agent_result_t *ar, double spend_usd, const char *test_cmd,
			 int tests_rc, const char *tests_tail, const char *task)
{
	char spend[32], turns[32];
	fmt_money(spend, sizeof(spend), spend_usd);
	if (ar->turns >= 0)
		snprintf(turns, sizeof(turns), "%d", ar->turns);
	else
		snprintf(turns, sizeof(turns), "not reported");
	_cleanup_free_ char *verdict = NULL;
	if (!test_cmd)
		verdict = strdup("**Tests:** not run (no TEST_COMMAND configured)\n");
	else if (tests_rc < 0)
		verdict = strdup("**Tests:** not run\n");
	else
		verdict = lc_strdup_printf("**Tests:** %s — `%s` exited %d\n\n<details><summary>Test output (last lines)</summary>\n\n"
					   "```\n%s\n```\n\n</details>\n",
					   tests_rc == 0 ? "passed" : "failed", test_cmd, tests_rc, tests_tail ? tests_tail : "");
	return lc_strdup_printf("%s\n\n%s\n**Agent:** %s · status %s · %s turns · %s spent · %.1f s%s%s\n\n%s%s",
				ar->summary && *ar->summary ? ar->summary : "(the agent gave no summary)", verdict,
				ac->command ? "AGENT_COMMAND" : ac->agent, agent_status_name(ar->status), turns, spend,
				(double)ar->duration_ms / 1000.0, ar->error ? "\n\n" : "", ar->error ? ar->error : "",
				task ? "lcd task " : "", task ? task : "");
}

/* Overwrite every copy of secret in text (what the agent and the tests
 * printed goes to GitHub). */
static void redact(char *text, const char *secret)
{
	size_t n = secret ? strlen(secret) : 0;
	if (!text || n < 8)
		return;
	for (char *p = text; (p = strstr(p, secret)); p += n)
		memset(p, '*', n);
}

typedef struct solve {
	lcc_t *c;
	gh_t *gh;
	agent_config_t ac;
	json_t *result;
	char *sandbox;
} solve_t;

/* Release the claim when it is this run's (the webhook's delivery). */
static void release_claim(lcc_t *c, const char *key, const char *delivery)
{
	if (!key || !delivery)
		return;
	_cleanup_free_ char *v = NULL;
	lc_error_t *err = NULL;
	if (lcc_map_get(c, NULL, MAP, key, &v, &err) <= 0) {
		if (err)
			lc_error_free(err);
		return;
	}
	_cleanup_json_ json_t *j = json_loads(v, 0, NULL);
	const char *d = json_string_value(json_object_get(j, "delivery"));
	if (d && !strcmp(d, delivery) && lcc_map_del(c, NULL, MAP, key, &err) < 0) {
		fprintf(stderr, "lc-agents solve-issue: cannot release %s: %s\n", key, err->msg);
		lc_error_free(err);
	}
}

static int fn_solve(void)
{
	lc_error_t *err = NULL;
	solve_t s = { 0 };
	int rc = 0;
	_cleanup_json_ json_t *args = load_args(&err);
	if (!args)
		return fail(NULL, err);
	s.result = json_object();
	json_int_t n = json_integer_value(json_object_get(args, "issue"));
	_cleanup_free_ char *repo = NULL;
	if (json_is_string(json_object_get(args, "repo")))
		repo = strdup(json_string_value(json_object_get(args, "repo")));
	else
		repo = configured_repo();
	const char *claim = json_string_value(json_object_get(args, "claim"));
	const char *delivery = json_string_value(json_object_get(args, "delivery"));
	const char *dir = cfg("REPO_DIR", "/workspace/repo");
	const char *test_cmd = cfg("TEST_COMMAND", NULL);
	const char *url = cfg("REPOSITORY", NULL);
	_cleanup_free_ char *branch = lc_strdup_printf("agent/issue-%lld", (long long)n);
	_cleanup_free_ char *title = NULL, *body = NULL, *prompt = NULL, *patch = NULL, *tests_tail = NULL;
	_cleanup_free_ char *snapv = NULL, *sha = NULL, *report = NULL, *pr_url = NULL, *base_tree = NULL;
	_cleanup_json_ json_t *snap = NULL, *limits = NULL, *pr = NULL, *labels = NULL;
	_cleanup_free_ char *msg = NULL, *prtitle = NULL, *prbody = NULL, *lab = NULL;
	size_t patch_len = 0;
	int tests_rc = -1;
	agent_result_t ar = { 0 };
	json_object_set_new(s.result, "issue", json_integer(n));
	json_object_set_new(s.result, "branch", json_string(branch));
	json_object_set_new(s.result, "pr_url", json_null());
	json_object_set_new(s.result, "tests_passed", json_null());
	json_object_set_new(s.result, "turns", json_null());
	json_object_set_new(s.result, "spend_usd", json_null());
	json_object_set_new(s.result, "sandbox_id", json_null());
	if (n <= 0) {
		lc_error_set(&err, LC_EXIT_USAGE, 0, "arguments: expected {\"issue\": N} (and \"repo\": \"OWNER/REPO\")");
		goto failed;
	}
	if (!repo || !url) {
		lc_error_set(&err, LC_EXIT_USAGE, 0, "REPOSITORY is not set (or is not a URL of OWNER/REPO)");
		goto failed;
	}
	json_object_set_new(s.result, "repo", json_string(repo));
	if (agent_config_from_env(&s.ac, &err) < 0)
		goto failed;
	const char *token = getenv("GITHUB_TOKEN");
	s.gh = gh_new(cfg("GITHUB_API_URL", "https://api.github.com"), token, &err);
	if (!s.gh)
		goto failed;
	s.c = lcc_new(NULL, NULL, &err);
	if (!s.c)
		goto failed;
	/* 1. the snapshot */
	int have = lcc_map_get(s.c, NULL, MAP, SNAPSHOT_KEY, &snapv, &err);
	if (have < 0)
		goto failed;
	snap = have ? json_loads(snapv, 0, NULL) : NULL;
	const char *image = json_string_value(json_object_get(snap, "image"));
	const char *commit = json_string_value(json_object_get(snap, "commit"));
	const char *base = json_string_value(json_object_get(snap, "branch"));
	if (!image || !commit || !base) {
		lc_error_set(&err, LC_EXIT_UNKNOWN, 0,
			     "no repository snapshot (map %s, key %s): run `lcctl run coding-agents:snapshot` first", MAP,
			     SNAPSHOT_KEY);
		goto failed;
	}
	json_object_set_new(s.result, "snapshot", json_incref(snap));
	if (json_is_string(json_object_get(args, "title"))) {
		title = strdup(json_string_value(json_object_get(args, "title")));
		const char *b = json_string_value(json_object_get(args, "body"));
		body = strdup(b ? b : "");
	} else {
		_cleanup_json_ json_t *issue = NULL;
		if (gh_issue_get(s.gh, repo, (long)n, &issue, &err) < 0)
			goto failed;
		const char *t = json_string_value(json_object_get(issue, "title"));
		const char *b = json_string_value(json_object_get(issue, "body"));
		title = strdup(t ? t : "");
		body = strdup(b ? b : "");
	}
	/* 2. the agent's sandbox */
	limits = own_limits(s.c);
	lab = lc_strdup_printf("%s#%lld", repo, (long long)n);
	labels = json_pack("{s:s, s:s}", "coding-agents", "solve-issue", "issue", lab);
	agent_sandbox_opts_t so = { .image = image, .workdir = dir, .limits = limits, .labels = labels };
	if (agent_sandbox_create(s.c, &s.ac, &so, &s.sandbox, &err) < 0)
		goto failed;
	json_object_set_new(s.result, "sandbox_id", json_string(s.sandbox));
	fprintf(stderr, "lc-agents solve-issue: %s#%lld in sandbox %s (image %s, commit %.12s)\n", repo, (long long)n,
		s.sandbox, image, commit);
	/* the tree as the snapshot left it (SETUP_COMMAND's files included),
	 * in an index of its own: the change is what the agent adds to it */
	{
		lcc_exec_result_t r;
		if (sb_sh(s.c, s.sandbox, s.ac.user, dir, GIT_SAFE "GIT_INDEX_FILE=" BASE_INDEX " g add -A . && GIT_INDEX_FILE=" BASE_INDEX " g write-tree",
			  NULL, 600, &r, &err) < 0)
			goto failed;
		if (r.exit_code != 0 || !r.out || strlen(r.out) < 40) {
			_cleanup_free_ char *l = last_line(&r);
			lc_error_set(&err, LC_EXIT_RUNTIME, 0, "cannot read the snapshot's tree in %s: %s", dir, l);
			lcc_exec_result_clear(&r);
			goto failed;
		}
		base_tree = strndup(r.out, strcspn(r.out, "\n"));
		lcc_exec_result_clear(&r);
	}
	/* 3. the agent */
	prompt = build_prompt(repo, (long)n, title, body, test_cmd);
	if (agent_run(s.c, s.sandbox, &s.ac, dir, prompt, &ar, &err) < 0)
		goto failed;
	/* the spend: what lcd's gateway metered, else what the agent says */
	double spend = ar.spend_usd;
	if (s.ac.access == AGENT_ACCESS_GATEWAY) {
		agent_gateway_usage_t gu;
		if (agent_gateway_usage(s.c, s.sandbox, &gu, &err) < 0)
			goto failed;
		spend = gu.spend_usd;
		agent_result_gateway_stop(&ar, &gu, s.ac.max_budget_usd);
		json_object_set_new(s.result, "gateway_spend_usd", json_real(gu.spend_usd));
		json_object_set_new(s.result, "gateway_requests", json_integer(gu.requests));
		json_object_set_new(s.result, "gateway_tokens", gu.tokens ? json_incref(gu.tokens) : json_null());
		json_object_set_new(s.result, "budget_exceeded", json_boolean(gu.budget_exceeded));
		agent_gateway_usage_clear(&gu);
	}
	json_object_set_new(s.result, "agent", agent_result_json(&ar));
	json_object_set_new(s.result, "turns", ar.turns >= 0 ? json_integer(ar.turns) : json_null());
	json_object_set_new(s.result, "spend_usd", spend >= 0 ? json_real(spend) : json_null());
	fprintf(stderr, "lc-agents solve-issue: the agent ended: %s (%d turns, $%.4f%s, %.1f s)%s%s\n",
		agent_status_name(ar.status), ar.turns, spend < 0 ? 0 : spend,
		s.ac.access == AGENT_ACCESS_GATEWAY ? " metered by the gateway" : "", ar.duration_ms / 1000.0,
		ar.error ? ": " : "", ar.error ? ar.error : "");
	if (ar.status != AGENT_OK && ar.stderr_tail && *ar.stderr_tail)
		fprintf(stderr, "the agent's stderr (last lines):\n%s\n", ar.stderr_tail);
	if (ar.status == AGENT_OK) {
		/* 4. the change, as a patch against the snapshot's commit (taken
		 * before the tests run, so nothing they build is in it) */
		lcc_exec_result_t r;
		_cleanup_json_ json_t *penv = json_pack("{s:s, s:s}", "BASE_TREE", base_tree, "PATCH_FILE", PATCH_FILE);
		if (sb_sh(s.c, s.sandbox, s.ac.user, dir,
			  GIT_SAFE "export GIT_INDEX_FILE=" AFTER_INDEX "; cp " BASE_INDEX " \"$GIT_INDEX_FILE\" && g add -A . && "
			  "g diff --cached --binary --full-index --no-ext-diff --no-textconv \"$BASE_TREE\" -- > \"$PATCH_FILE\"",
			  penv, 600, &r, &err) < 0)
			goto failed;
		if (r.exit_code != 0) {
			_cleanup_free_ char *l = last_line(&r);
			lc_error_set(&err, LC_EXIT_RUNTIME, 0, "cannot take the change out of the agent's sandbox: %s", l);
			lcc_exec_result_clear(&r);
			goto failed;
		}
		lcc_exec_result_clear(&r);
		if (lcc_sandbox_download(s.c, s.sandbox, PATCH_FILE, &patch, &patch_len, &err) < 0)
			goto failed;
		/* the model key is in the agent's sandbox when MODEL_ACCESS=direct
		 * (and a change that carries it is never pushed, whatever the mode) */
		const char *key = getenv(s.ac.key_secret);
		if (key && strlen(key) >= 8 && memmem(patch, patch_len, key, strlen(key))) {
			lc_error_set(&err, LC_EXIT_PERM, 0, "the agent's change contains the value of %s: not pushed",
				     s.ac.key_secret);
			goto failed;
		}
		if (patch_len > PATCH_MAX) {
			lc_error_set(&err, LC_EXIT_RUNTIME, 0, "the agent's change is %zu bytes, over %d", patch_len, PATCH_MAX);
			goto failed;
		}
		/* 5. the tests, in the same sandbox */
		if (test_cmd && patch_len > 0) {
			long tto = cfg_long("TEST_TIMEOUT_SECONDS", 1800, 1, 86400, &err);
			if (tto < 0)
				goto failed;
			_cleanup_json_ json_t *tenv = json_pack("{s:s}", "TEST_COMMAND", test_cmd);
			if (sb_sh(s.c, s.sandbox, s.ac.user, dir, "exec 2>&1; eval \"$TEST_COMMAND\"", tenv, (int)tto, &r, &err) < 0)
				goto failed;
			tests_rc = r.exit_code;
			tests_tail = agent_tail(r.out, r.out_len, 40);
			json_object_set_new(s.result, "tests_passed", json_boolean(tests_rc == 0));
			json_object_set_new(s.result, "tests_exit_code", json_integer(tests_rc));
			json_object_set_new(s.result, "tests_tail", json_string(tests_tail));
			fprintf(stderr, "lc-agents solve-issue: tests %s (exit %d%s)\n", tests_rc == 0 ? "passed" : "failed",
				tests_rc, r.timed_out ? ", timed out" : "");
			lcc_exec_result_clear(&r);
		}
	}
	/* the agent's sandbox ends here, whatever comes next */
	if (lcc_sandbox_delete(s.c, s.sandbox, &err) < 0) {
		fprintf(stderr, "lc-agents solve-issue: %s\n", err->msg);
		lc_error_free(err);
		err = NULL;
	}
	/* 6. outside the agent's sandbox: push and the pull request, or a comment */
	const char *task = getenv("LC_TASK_ID");
	report = report_body(&s.ac, &ar, spend, test_cmd, tests_rc, tests_tail, task);
	redact(report, getenv(s.ac.key_secret));
	if (ar.status != AGENT_OK || patch_len == 0) {
		bool failed_agent = ar.status != AGENT_OK;
		_cleanup_free_ char *text = lc_strdup_printf("%s\n\n%s", failed_agent
						? "The coding agent did not finish this issue; no pull request was made."
						: "The coding agent made no change for this issue, so there is no pull request.",
						report);
		_cleanup_free_ char *curl = NULL;
		if (gh_issue_comment(s.gh, repo, (long)n, text, &curl, &err) < 0)
			goto failed;
		json_object_set_new(s.result, "outcome", json_string(failed_agent ? "agent-failed" : "no-change"));
		json_object_set_new(s.result, "comment_url", curl ? json_string(curl) : json_null());
		if (failed_agent) {
			lc_error_set(&err, LC_EXIT_RUNTIME, 0, "%s", ar.error ? ar.error : agent_status_name(ar.status));
			goto failed;
		}
		goto done;
	}
	msg = lc_strdup_printf("Fix #%lld: %s\n\n%s\n\nCloses #%lld\n", (long long)n, title,
						    ar.summary ? ar.summary : "", (long long)n);
	gitops_push_t gp = { .url = url, .base = base, .commit = commit, .branch = branch, .patch = patch,
			     .patch_len = patch_len, .message = msg,
			     .author = cfg("GIT_AUTHOR", "coding-agents <coding-agents@users.noreply.github.com>"),
			     .token_env = token ? "GITHUB_TOKEN" : NULL };
	if (gitops_push_patch(&gp, &sha, &err) < 0)
		goto failed;
	json_object_set_new(s.result, "commit", json_string(sha));
	prtitle = lc_strdup_printf("Fix #%lld: %s", (long long)n, title);
	prbody = lc_strdup_printf("%s\n\nCloses #%lld\n", report, (long long)n);
	int found = gh_pr_find_open(s.gh, repo, branch, &pr, &err);
	if (found < 0)
		goto failed;
	if (found) {
		json_int_t num = json_integer_value(json_object_get(pr, "number"));
		json_decref(pr);
		pr = NULL;
		if (gh_pr_update(s.gh, repo, (long)num, prtitle, prbody, &pr, &err) < 0)
			goto failed;
		json_object_set_new(s.result, "outcome", json_string("pull-request-updated"));
	} else {
		if (gh_pr_create(s.gh, repo, prtitle, branch, base, prbody, &pr, &err) < 0)
			goto failed;
		json_object_set_new(s.result, "outcome", json_string("pull-request"));
	}
	const char *u = json_string_value(json_object_get(pr, "html_url"));
	json_object_set_new(s.result, "pr_url", u ? json_string(u) : json_null());
	json_object_set_new(s.result, "pr_number", json_incref(json_object_get(pr, "number")));
	fprintf(stderr, "lc-agents solve-issue: %s: %s (%s)\n", branch, u ? u : "?", json_string_value(json_object_get(s.result, "outcome")));
done:
	release_claim(s.c, claim, delivery);
	write_result(s.result);
	goto out;
failed:
	if (s.c && s.sandbox) {
		lc_error_t *e2 = NULL;
		if (lcc_sandbox_delete(s.c, s.sandbox, &e2) < 0)
			lc_error_free(e2);
	}
	if (s.c)
		release_claim(s.c, claim, delivery);
	rc = fail(json_incref(s.result), err);
out:
	agent_result_clear(&ar);
	agent_config_clear(&s.ac);
	gh_free(s.gh);
	if (s.c)
		lcc_free(s.c);
	free(s.sandbox);
	json_decref(s.result);
	return rc;
}

int main(int argc, char **argv)
{
	const char *base = strrchr(argv[0], '/');
	base = base ? base + 1 : argv[0];
	const char *fn = NULL;
	if (!strncmp(base, "lc-agents-", 10))
		fn = base + 10; /* called through a link: lc-agents-webhook */
	else if (argc == 2)
		fn = argv[1];
	if (!fn || !strcmp(fn, "--help") || !strcmp(fn, "-h")) {
		fprintf(fn ? stdout : stderr, "usage: lc-agents webhook|snapshot|solve-issue\n"
					      "  run by lcd as the coding-agents app's functions (README: The coding-agents app)\n");
		return fn ? 0 : LC_EXIT_USAGE;
	}
	fn_name = fn;
	setvbuf(stderr, NULL, _IOLBF, 0);
	if (!strcmp(fn, "webhook"))
		return fn_webhook();
	if (!strcmp(fn, "snapshot"))
		return fn_snapshot();
	if (!strcmp(fn, "solve-issue"))
		return fn_solve();
	fprintf(stderr, "lc-agents: unknown function '%s' (webhook, snapshot, solve-issue)\n", fn);
	return LC_EXIT_USAGE;
}
