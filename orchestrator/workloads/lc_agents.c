/* lc-agents — the coding-agents app's functions (contrib/apps/coding-agents):
 *
 *   lc-agents webhook       a GitHub delivery: issues/labeled with LABEL,
 *                           or a COMMAND_PREFIX comment of a writer, claims
 *                           issue:OWNER/REPO#N and spawns solve-issue; a
 *                           review (comment) or a command on the app's pull
 *                           request spawns a follow-up under that claim;
 *                           issues/unlabeled and closed cancel the run
 *   lc-agents snapshot      the repo-builder: the clone here (with the
 *                           credential), the tree into a sandbox without
 *                           it, SETUP_COMMAND, snapshot, record {image,
 *                           commit, branch, created}
 *   lc-agents solve-issue   the agent in a sandbox of the snapshot (a
 *                           follow-up: with the branch's commits), the
 *                           tests, the patch; outside it the push and the
 *                           pull request, a reply on the review (or a comment)
 *
 * GitHub is reached with GITHUB_TOKEN or a GitHub App's installation
 * tokens (ghauth.h), by these functions only: no sandbox that runs the
 * agent's or the repository's code ever holds either.
 *
 * Each runs as an lcd task: arguments in $LC_TASK_ARGS, the result written
 * to $LC_TASK_RESULT, the app's config and the function's secrets in the
 * environment, lcd reached with $LCD_SOCKET and $LCD_TOKEN.  Errors are one
 * line on stderr, "lc-agents FUNCTION: …", also in the result's "error". */
#define _GNU_SOURCE 1
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent.h"
#include "ghauth.h"
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

/* LABEL taken off an issue, or the issue closed (why: "unlabeled",
 * "closed"): the run its claim names is cancelled (queued or running: lcd
 * kills its sandbox, and the agent's sandboxes go with the task), and the
 * claim is freed, so that labeling it again starts afresh.  A claim whose
 * spawn is still under way names no task yet: wait for it a little (the
 * labeled delivery's webhook task may run beside this one). */
static int cancel_run(const char *repo, long n, const char *why_word)
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
	fprintf(stderr, "lc-agents webhook: %s %s: solve-issue task %s %s, %s\n", key, why_word, task,
		r ? "cancelled" : "had ended", released);
	return 0;
}

/* The GitHub credential of this function for repo (GITHUB_TOKEN or the
 * App's), with the permissions an App's token asks for; and a check that
 * REPOSITORY and GITHUB_API_URL name one GitHub. */
static int github_auth(const char *repo, json_t *perms, gh_auth_t **auth, lc_error_t **err)
{
	const char *api = cfg("GITHUB_API_URL", "https://api.github.com");
	const char *url = cfg("REPOSITORY", "");
	const char *h = strstr(url, "://");
	if (strstr(api, "://api.github.com") && h && strncmp(h + 3, "github.com/", 11) != 0) {
		_cleanup_free_ char *host = strndup(h + 3, strcspn(h + 3, "/"));
		return lc_error_set(err, LC_EXIT_USAGE, 0,
				    "REPOSITORY is on %s but GITHUB_API_URL is %s: for GitHub Enterprise Server deploy with "
				    "GITHUB_API_URL=https://%s/api/v3", host, api, host);
	}
	return gh_auth_from_env(api, repo, perms, auth, err);
}

/* What every comment and reply of the app ends with: the webhook passes
 * over what carries it (its own words never start a run). */
#define OWN_MARK "<!-- lcrun coding-agents -->"

/* The text after COMMAND_PREFIX when body starts with it (leading blanks
 * passed over; the prefix a word of its own), else NULL. */
static const char *command_text(const char *body)
{
	const char *prefix = cfg("COMMAND_PREFIX", "/agent");
	if (!body)
		return NULL;
	while (*body == ' ' || *body == '\t' || *body == '\r' || *body == '\n')
		body++;
	size_t n = strlen(prefix);
	if (strncmp(body, prefix, n) != 0 || (body[n] && !strchr(" \t\r\n", body[n])))
		return NULL;
	body += n;
	while (*body == ' ' || *body == '\t' || *body == '\r' || *body == '\n')
		body++;
	return body;
}

/* Whether user may start runs: write (or admin) permission on repo, as
 * GitHub's REST API says (never what the delivery says).  1 yes, 0 no
 * (*why says so), -1 error. */
static int may_command(const char *repo, const char *user, char **why, lc_error_t **err)
{
	_cleanup_json_ json_t *perms = json_pack("{s:s, s:s}", "metadata", "read", "pull_requests", "read");
	gh_auth_t *auth = NULL;
	if (github_auth(repo, perms, &auth, err) < 0)
		return -1;
	if (gh_auth_kind(auth) == GH_AUTH_NONE) {
		gh_auth_free(auth);
		*why = lc_strdup_printf("no GitHub credential to check %s's permission with (GITHUB_TOKEN or a GitHub App)", user);
		return 0;
	}
	gh_t *g = gh_auth_client(auth, err);
	_cleanup_free_ char *perm = NULL;
	int r = g ? gh_permission(g, repo, user, &perm, err) : -1;
	gh_free(g);
	gh_auth_free(auth);
	if (r < 0)
		return lc_error_wrap(err, "cannot check %s's permission on %s", user, repo);
	if (!strcmp(perm, "admin") || !strcmp(perm, "write") || !strcmp(perm, "maintain"))
		return 1;
	*why = lc_strdup_printf("%s has %s permission on %s: a command needs write", user, perm, repo);
	return 0;
}

/* Claim issue:REPO#N and spawn solve-issue with sargs (the claim and the
 * delivery added): the result "started", "already-claimed" or "refused". */
static int claim_and_spawn(const char *repo, long n, json_t *sargs, const char *delivery, const char *what)
{
	lc_error_t *err = NULL;
	_cleanup_json_ json_t *result = NULL;
	long ttl = cfg_long("CLAIM_TTL_SECONDS", 7200, 1, 30L * 86400, &err);
	if (ttl < 0)
		return fail(NULL, err);
	_cleanup_free_ char *key = claim_key(repo, n);
	_cleanup_free_ char *when = now_iso();
	_cleanup_json_ json_t *claim = json_pack("{s:s?, s:s, s:s?, s:s}", "delivery", delivery, "claimed_at", when,
						 "webhook_task", getenv("LC_TASK_ID"), "for", what);
	json_t *pr = json_object_get(sargs, "pr");
	if (pr)
		json_object_set(claim, "pr", pr);
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
		fprintf(stderr, "lc-agents webhook: %s is claimed already: nothing started for %s\n", key, what);
		return 0;
	}
	json_object_set_new(sargs, "delivery", delivery ? json_string(delivery) : json_null());
	json_object_set_new(sargs, "claim", json_string(key));
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
	result = json_pack("{s:s, s:s, s:s, s:s}", "status", "started", "claim", key, "task", task, "for", what);
	write_result(result);
	fprintf(stderr, "lc-agents webhook: %s claimed, solve-issue task %s (%s)\n", key, task, what);
	return 0;
}

static int ignore(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int ignore(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	_cleanup_free_ char *why = NULL;
	if (vasprintf(&why, fmt, ap) < 0)
		why = NULL;
	va_end(ap);
	_cleanup_json_ json_t *result = ignored(why ? why : "ignored");
	write_result(result);
	return 0;
}

/* The issue number N of a pull request from agent/issue-N in repo itself
 * (the app's own), else 0. */
static long agent_pr_issue(json_t *pr, const char *repo)
{
	json_t *head = json_object_get(pr, "head");
	const char *ref = json_string_value(json_object_get(head, "ref"));
	const char *hrepo = json_string_value(json_object_get(json_object_get(head, "repo"), "full_name"));
	if (!ref || strncmp(ref, "agent/issue-", 12) != 0 || (hrepo && strcasecmp(hrepo, repo) != 0))
		return 0;
	char *end = NULL;
	long n = strtol(ref + 12, &end, 10);
	return end && !*end && n > 0 ? n : 0;
}

/* A comment or review of someone with write access, on a pull request the
 * app opened: a follow-up run on its branch (trigger: what started it). */
static int follow_up(const char *repo, json_t *pr, long pr_number, const char *user, json_t *trigger,
		     const char *delivery)
{
	lc_error_t *err = NULL;
	_cleanup_json_ json_t *prj = NULL;
	if (!pr) {
		/* an issue_comment carries no head: ask the API */
		_cleanup_json_ json_t *perms = json_pack("{s:s, s:s}", "metadata", "read", "pull_requests", "read");
		gh_auth_t *auth = NULL;
		if (github_auth(repo, perms, &auth, &err) < 0)
			return fail(NULL, err);
		gh_t *g = gh_auth_client(auth, &err);
		int r = g ? gh_pr_get(g, repo, pr_number, &prj, &err) : -1;
		gh_free(g);
		gh_auth_free(auth);
		if (r < 0)
			return fail(NULL, err);
		pr = prj;
	}
	long n = agent_pr_issue(pr, repo);
	if (!n)
		return ignore("pull request #%ld is not from an agent/issue-N branch of %s", pr_number, repo);
	const char *state = json_string_value(json_object_get(pr, "state"));
	if (state && strcmp(state, "open") != 0)
		return ignore("pull request #%ld is %s", pr_number, state);
	_cleanup_free_ char *why = NULL;
	int ok = may_command(repo, user, &why, &err);
	if (ok < 0)
		return fail(NULL, err);
	if (!ok) {
		fprintf(stderr, "lc-agents webhook: refused: %s\n", why);
		_cleanup_json_ json_t *result = json_pack("{s:s, s:s, s:s}", "status", "refused", "reason", why, "user", user);
		write_result(result);
		return 0;
	}
	_cleanup_json_ json_t *sargs = json_pack("{s:s, s:I, s:I, s:O}", "repo", repo, "issue", (json_int_t)n, "pr",
						 (json_int_t)pr_number, "trigger", trigger);
	_cleanup_free_ char *what = lc_strdup_printf("follow-up on pull request #%ld", pr_number);
	return claim_and_spawn(repo, n, sargs, delivery, what);
}

static bool own_words(json_t *comment)
{
	const char *body = json_string_value(json_object_get(comment, "body"));
	const char *type = json_string_value(json_object_get(json_object_get(comment, "user"), "type"));
	return (body && strstr(body, OWN_MARK)) || (type && !strcmp(type, "Bot"));
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
	const char *delivery = json_string_value(json_object_get(args, "delivery"));
	const char *want = cfg("LABEL", "agent");
	const char *repo = json_string_value(json_object_get(json_object_get(payload, "repository"), "full_name"));
	if (!event)
		event = "(none)";
	if (!action)
		action = "(none)";
	bool issues = !strcmp(event, "issues"), comment = !strcmp(event, "issue_comment");
	bool review = !strcmp(event, "pull_request_review"), rcomment = !strcmp(event, "pull_request_review_comment");
	if (!issues && !comment && !review && !rcomment)
		return ignore("event %s is not issues, issue_comment, pull_request_review or pull_request_review_comment", event);
	if (!repo) {
		lc_error_set(&err, LC_EXIT_INVALID, 0, "the delivery has no repository.full_name");
		return fail(NULL, err);
	}
	_cleanup_free_ char *mine = configured_repo();
	if (mine && strcasecmp(mine, repo) != 0)
		return ignore("repository %s is not REPOSITORY's %s", repo, mine);
	json_t *issue = json_object_get(payload, "issue");
	json_int_t n = json_integer_value(json_object_get(issue, "number"));
	if (issues) {
		const char *label = json_string_value(json_object_get(json_object_get(payload, "label"), "name"));
		bool closed = !strcmp(action, "closed");
		if (!closed && strcmp(action, "labeled") != 0 && strcmp(action, "unlabeled") != 0)
			return ignore("action %s is not labeled, unlabeled or closed", action);
		if (!closed && (!label || strcmp(label, want) != 0))
			return ignore("label %s is not %s", label ? label : "(none)", want);
		if (n <= 0) {
			lc_error_set(&err, LC_EXIT_INVALID, 0, "the delivery has no issue.number");
			return fail(NULL, err);
		}
		if (json_object_get(issue, "pull_request"))
			return ignore("a pull request, not an issue");
		if (closed || !strcmp(action, "unlabeled"))
			return cancel_run(repo, (long)n, action);
		const char *title = json_string_value(json_object_get(issue, "title"));
		const char *body = json_string_value(json_object_get(issue, "body"));
		_cleanup_json_ json_t *sargs = json_pack("{s:s, s:I, s:s?, s:s?}", "repo", repo, "issue", n, "title", title,
							 "body", body);
		return claim_and_spawn(repo, (long)n, sargs, delivery, "the label");
	}
	if (comment) {
		json_t *cm = json_object_get(payload, "comment");
		const char *body = json_string_value(json_object_get(cm, "body"));
		const char *user = json_string_value(json_object_get(json_object_get(cm, "user"), "login"));
		if (strcmp(action, "created") != 0)
			return ignore("action %s is not created", action);
		const char *text = command_text(body);
		if (!text || own_words(cm))
			return ignore("the comment does not start with %s", cfg("COMMAND_PREFIX", "/agent"));
		if (n <= 0 || !user) {
			lc_error_set(&err, LC_EXIT_INVALID, 0, "the delivery has no issue.number or comment.user.login");
			return fail(NULL, err);
		}
		if (json_object_get(issue, "pull_request")) {
			_cleanup_json_ json_t *trigger = json_pack("{s:s, s:O?, s:s, s:s}", "kind", "comment", "comment_id",
								   json_object_get(cm, "id"), "user", user, "body", text);
			return follow_up(repo, NULL, (long)n, user, trigger, delivery);
		}
		if (json_is_string(json_object_get(issue, "state")) &&
		    strcmp(json_string_value(json_object_get(issue, "state")), "open") != 0)
			return ignore("issue #%lld is closed", (long long)n);
		_cleanup_free_ char *why = NULL;
		int ok = may_command(repo, user, &why, &err);
		if (ok < 0)
			return fail(NULL, err);
		if (!ok) {
			fprintf(stderr, "lc-agents webhook: refused: %s\n", why);
			_cleanup_json_ json_t *result = json_pack("{s:s, s:s, s:s}", "status", "refused", "reason", why, "user", user);
			write_result(result);
			return 0;
		}
		const char *title = json_string_value(json_object_get(issue, "title"));
		const char *ibody = json_string_value(json_object_get(issue, "body"));
		_cleanup_json_ json_t *sargs = json_pack("{s:s, s:I, s:s?, s:s?, s:s, s:s}", "repo", repo, "issue", n, "title",
							 title, "body", ibody, "instructions", text, "requested_by", user);
		_cleanup_free_ char *what = lc_strdup_printf("%s's comment", user);
		return claim_and_spawn(repo, (long)n, sargs, delivery, what);
	}
	/* a review, or a comment of one, on a pull request */
	json_t *pr = json_object_get(payload, "pull_request");
	long prn = (long)json_integer_value(json_object_get(pr, "number"));
	if (prn <= 0) {
		lc_error_set(&err, LC_EXIT_INVALID, 0, "the delivery has no pull_request.number");
		return fail(NULL, err);
	}
	if (review) {
		json_t *rv = json_object_get(payload, "review");
		const char *st = json_string_value(json_object_get(rv, "state"));
		const char *user = json_string_value(json_object_get(json_object_get(rv, "user"), "login"));
		if (strcmp(action, "submitted") != 0)
			return ignore("action %s is not submitted", action);
		/* a review's comments come as review comments too: those start
		 * the run, and it takes the whole review */
		if (!st || strcasecmp(st, "changes_requested") != 0)
			return ignore("review state %s is not changes_requested", st ? st : "(none)");
		if (own_words(rv) || !user)
			return ignore("the app's own review");
		_cleanup_json_ json_t *trigger = json_pack("{s:s, s:O?, s:s}", "kind", "review", "review_id",
							   json_object_get(rv, "id"), "user", user);
		return follow_up(repo, pr, prn, user, trigger, delivery);
	}
	json_t *cm = json_object_get(payload, "comment");
	const char *user = json_string_value(json_object_get(json_object_get(cm, "user"), "login"));
	if (strcmp(action, "created") != 0)
		return ignore("action %s is not created", action);
	if (own_words(cm) || !user)
		return ignore("the app's own comment");
	_cleanup_json_ json_t *trigger = json_pack("{s:s, s:O?, s:O?, s:s}", "kind", "review_comment", "comment_id",
						   json_object_get(cm, "id"), "review_id",
						   json_object_get(cm, "pull_request_review_id"), "user", user);
	return follow_up(repo, pr, prn, user, trigger, delivery);
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

/* The tree at src (this function's own files) as a tar stream into the
 * directory dst of sandbox id, where it belongs to the sandbox's user. */
static int upload_tree(lcc_t *c, const char *id, const char *src, const char *dst, lc_error_t **err)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "pipe");
	pid_t pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "fork");
	}
	if (pid == 0) {
		int null = open("/dev/null", O_RDONLY);
		dup2(null, 0);
		dup2(p[1], 1);
		execlp("tar", "tar", "--numeric-owner", "-C", src, "-cf", "-", ".", (char *)NULL);
		fprintf(stderr, "cannot run tar: %s\n", strerror(errno));
		_exit(127);
	}
	close(p[1]);
	int r = lcc_sandbox_upload_fd(c, id, dst, p[0], true, 0, err);
	close(p[0]);
	int st = 0;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (r < 0)
		return lc_error_wrap(err, "cannot copy the clone into the repo-builder's sandbox");
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, 0, "tar of the clone failed (status %d)", st);
	return 0;
}

/* The credential can read repo: GET /repos/O/R (a bad, expired or revoked
 * token, or an App not installed on the repository, is one line here,
 * before anything else is done).  *info (optional) the repository. */
static int check_access(gh_auth_t *auth, const char *repo, json_t **info, lc_error_t **err)
{
	if (gh_auth_kind(auth) == GH_AUTH_NONE)
		return 0;
	const char *tok = NULL;
	if (gh_auth_token(auth, &tok, err) < 0) /* an App's exchange says why itself */
		return -1;
	gh_t *g = gh_auth_client(auth, err);
	if (!g)
		return -1;
	_cleanup_free_ char *path = lc_strdup_printf("/repos/%s", repo);
	int r = gh_request(g, "GET", path, NULL, NULL, info, err);
	gh_free(g);
	if (r < 0)
		return lc_error_wrap(err, "%s cannot read %s", gh_auth_name(auth), repo);
	return 0;
}

/* A submodule on REPOSITORY's host, of the same account: an App's token
 * is widened to it (a personal token reaches what its owner may). */
static void submodule_seen(void *ud, const char *url)
{
	const char *mine = cfg("REPOSITORY", "");
	const char *a = strstr(mine, "://"), *b = strstr(url, "://");
	if (!a || !b)
		return;
	size_t ha = strcspn(a + 3, "/"), hb = strcspn(b + 3, "/");
	if (ha != hb || strncasecmp(a + 3, b + 3, ha) != 0)
		return;
	_cleanup_free_ char *repo = gh_repo_from_url(url);
	if (repo) {
		fprintf(stderr, "lc-agents snapshot: submodule %s\n", repo);
		gh_auth_add_repo(ud, repo);
	}
}

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
	_cleanup_free_ char *repo = configured_repo();
	_cleanup_json_ json_t *result = json_object();
	_cleanup_json_ json_t *perms = json_pack("{s:s}", "contents", "read");
	gh_auth_t *auth = NULL;
	if (github_auth(repo, perms, &auth, &err) < 0)
		return fail(NULL, err);
	json_object_set_new(result, "credential", json_string(gh_auth_name(auth)));
	lcc_t *c = NULL;
	char tmpl[] = "/tmp/lc-agents-clone.XXXXXX";
	bool have_tmp = false;
	_cleanup_free_ char *clone = NULL, *id = NULL;
	_cleanup_free_ char *commit = NULL, *branch = NULL, *image = NULL, *created = NULL, *rs = NULL;
	_cleanup_json_ json_t *rec = NULL, *limits = NULL, *req = NULL;
	lcc_exec_result_t r = { 0 };
	int rc = 0;
	long long t0 = lc_now_ms();
	/* 1. the clone, here: this function holds the credential, no sandbox
	 * that runs the repository's code ever does */
	if (repo && check_access(auth, repo, NULL, &err) < 0)
		goto failed;
	if (!mkdtemp(tmpl)) {
		lc_error_set(&err, LC_EXIT_RUNTIME, errno, "cannot make a directory for the clone");
		goto failed;
	}
	have_tmp = true;
	clone = lc_strdup_printf("%s/repo", tmpl);
	if (gitops_clone(url, base, clone, auth, submodule_seen, auth, &err) < 0) {
		lc_error_wrap(&err, "cannot clone %s%s%s", url, base ? " branch " : "", base ? base : "");
		goto failed;
	}
	{
		const char *rp[] = { "rev-parse", "HEAD", NULL }, *sr[] = { "symbolic-ref", "--short", "-q", "HEAD", NULL };
		if (gitops_git(clone, rp, NULL, &commit, &err) < 0)
			goto failed;
		commit[strcspn(commit, "\n")] = '\0';
		lc_error_t *e2 = NULL;
		if (gitops_git(clone, sr, NULL, &branch, &e2) < 0 || !*branch) {
			lc_error_free(e2);
			free(branch);
			branch = strdup(base ? base : "HEAD");
		}
		branch[strcspn(branch, "\n")] = '\0';
	}
	fprintf(stderr, "lc-agents snapshot: cloned %s at %.12s (%s) with %s\n", url, commit, branch, gh_auth_name(auth));
	/* 2. the repo-builder's sandbox, as the agent user: the tree is the
	 * agent's; nothing of the credential is in it */
	c = lcc_new(NULL, NULL, &err);
	if (!c)
		goto failed;
	limits = own_limits(c);
	req = json_pack("{s:s, s:s, s:s}", "image", cfg("AGENT_IMAGE", "agent-cli"), "net", "open", "user", user);
	if (limits)
		json_object_set(req, "limits", limits);
	json_object_set_new(req, "labels", json_pack("{s:s}", "coding-agents", "repo-builder"));
	if (lcc_sandbox_create(c, req, &id, NULL, &err) < 0) {
		lc_error_wrap(&err, "cannot make the repo-builder's sandbox");
		goto failed;
	}
	json_object_set_new(result, "sandbox_id", json_string(id));
	{
		/* REPO_DIR made for the agent user (its parent may be root's) */
		_cleanup_json_ json_t *env = json_pack("{s:s, s:s}", "REPO_DIR", dir, "AGENT_USER", user);
		if (sb_sh(c, id, "0:0", "/", "mkdir -p \"$REPO_DIR\" && chown \"$AGENT_USER\" \"$REPO_DIR\"", env, 60, &r,
			  &err) < 0)
			goto failed;
		if (r.exit_code != 0) {
			_cleanup_free_ char *l = last_line(&r);
			lc_error_set(&err, LC_EXIT_RUNTIME, 0, "cannot make %s in the sandbox: %s", dir, l);
			goto failed;
		}
		lcc_exec_result_clear(&r);
	}
	if (upload_tree(c, id, clone, dir, &err) < 0)
		goto failed;
	{
		lc_error_t *e2 = NULL;
		if (lc_rm_rf(tmpl, &e2) < 0)
			lc_error_free(e2);
		have_tmp = false;
	}
	/* 3. SETUP_COMMAND: the repository's own code, open network, no credential */
	if (setup) {
		if (sb_sh(c, id, user, dir, setup, NULL, (int)setup_to, &r, &err) < 0)
			goto failed;
		json_object_set_new(result, "setup_exit_code", json_integer(r.exit_code));
		if (r.exit_code != 0) {
			_cleanup_free_ char *l = last_line(&r);
			lc_error_set(&err, LC_EXIT_RUNTIME, 0, "SETUP_COMMAND exited %d%s: %s", r.exit_code,
				     r.timed_out ? " (timed out)" : "", l);
			fprintf(stderr, "%s%s", r.out ? r.out : "", r.err ? r.err : "");
			goto failed;
		}
		lcc_exec_result_clear(&r);
	}
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
	gh_auth_free(auth);
	write_result(result);
	fprintf(stderr, "lc-agents snapshot: %s at %s (%s) is image %s\n", url, commit, branch, image);
	return 0;
failed:
	lcc_exec_result_clear(&r);
	rc = fail(json_incref(result), err);
	if (c && id) {
		lc_error_t *e2 = NULL;
		if (lcc_sandbox_delete(c, id, &e2) < 0)
			lc_error_free(e2);
	}
	if (have_tmp) {
		lc_error_t *e2 = NULL;
		if (lc_rm_rf(tmpl, &e2) < 0)
			lc_error_free(e2);
	}
	if (c)
		lcc_free(c);
	gh_auth_free(auth);
	return rc;
}

/* ---- solve-issue ------------------------------------------------------- */

#define BRANCH_PATCH "/tmp/agent-branch.patch"
#define FEEDBACK_MAX (64 << 10)

/* What a follow-up run knows besides the issue. */
typedef struct follow {
	long pr;
	char *head;        /* the branch's head the agent starts from */
	char *prev;        /* the summary so far */
	char *feedback;    /* the review's words, as the prompt gives them */
	char *asked_by;
	long long reply_to; /* the review comment whose thread gets the reply (0: a comment on the PR) */
	int runs;           /* runs before this one, and their totals */
	int turns;
	double spend;
} follow_t;

static void follow_clear(follow_t *f)
{
	free(f->head);
	free(f->prev);
	free(f->feedback);
	free(f->asked_by);
	memset(f, 0, sizeof(*f));
}

static char *build_prompt(const char *repo, long n, const char *title, const char *body, const char *test_cmd,
			  const char *instructions, const char *requested_by, const follow_t *fu)
{
	_cleanup_free_ char *req = instructions && *instructions
		? lc_strdup_printf("The request%s%s: %s\n\n", requested_by ? " from " : "", requested_by ? requested_by : "",
				   instructions)
		: strdup("");
	_cleanup_free_ char *task = NULL;
	if (fu)
		task = lc_strdup_printf(
			"Your earlier work on GitHub issue #%ld is pull request #%ld (branch agent/issue-%ld); its commits "
			"are applied to this working tree.  A reviewer (%s) asked for changes: address them.\n\n"
			"The issue — Title: %s\n\n%s\n\n"
			"What was done so far (the summary of the earlier runs):\n%s\n\n"
			"The review:\n%s\n\n",
			n, fu->pr, n, fu->asked_by ? fu->asked_by : "a reviewer", title ? title : "(no title)",
			body && *body ? body : "(no description)", fu->prev && *fu->prev ? fu->prev : "(none recorded)",
			fu->feedback);
	else
		task = lc_strdup_printf("Resolve GitHub issue #%ld.\n\nTitle: %s\n\n%s\n\n", n, title ? title : "(no title)",
					body && *body ? body : "(no description)");
	return lc_strdup_printf(
		"You are working on the repository %s, checked out in the current directory.\n"
		"%s%s"
		"Instructions:\n"
		"- Change the files in this directory to %s.\n"
		"- Do not commit, do not create branches, do not push: the change is taken from the working tree.\n"
		"- You have no access to GitHub or the network beyond the model API.\n"
		"%s%s%s"
		"- End with a short summary of what you changed and why; it becomes %s.\n",
		repo, task, req, fu ? "address the review" : "resolve the issue",
		test_cmd ? "- The tests are run afterwards with: " : "", test_cmd ? test_cmd : "", test_cmd ? "\n" : "",
		fu ? "the reply to the review" : "the pull request's description");
}

static void fmt_money(char *b, size_t n, double usd)
{
	if (usd < 0)
		snprintf(b, n, "not reported");
	else
		snprintf(b, n, "$%.4f", usd);
}

/* The verdict and the agent's line (turns and spend: totals over runs
 * when runs > 1). */
static char *report_tail(const agent_config_t *ac, const agent_result_t *ar, int turns_total, double spend_usd, int runs,
			 const char *test_cmd, int tests_rc, const char *tests_tail, const char *task)
{
	char spend[32], turns[32], nruns[32] = "";
	fmt_money(spend, sizeof(spend), spend_usd);
	if (turns_total >= 0)
		snprintf(turns, sizeof(turns), "%d", turns_total);
	else
		snprintf(turns, sizeof(turns), "not reported");
	if (runs > 1)
		snprintf(nruns, sizeof(nruns), " · %d runs", runs);
	_cleanup_free_ char *verdict = NULL;
	if (!test_cmd)
		verdict = strdup("**Tests:** not run (no TEST_COMMAND configured)\n");
	else if (tests_rc < 0)
		verdict = strdup("**Tests:** not run\n");
	else
		verdict = lc_strdup_printf("**Tests:** %s — `%s` exited %d\n\n<details><summary>Test output (last lines)</summary>\n\n"
					   "```\n%s\n```\n\n</details>\n",
					   tests_rc == 0 ? "passed" : "failed", test_cmd, tests_rc, tests_tail ? tests_tail : "");
	return lc_strdup_printf("%s\n**Agent:** %s · status %s · %s turns · %s spent%s · %.1f s%s%s\n\n%s%s", verdict,
				ac->command ? "AGENT_COMMAND" : ac->agent, agent_status_name(ar->status), turns, spend, nruns,
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
	gh_auth_t *auth;
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

/* The record of a pull request's runs: pr:OWNER/REPO#P in the map. */
static char *pr_key(const char *repo, long pr)
{
	return lc_strdup_printf("pr:%s#%ld", repo, pr);
}

static void pr_record_put(lcc_t *c, const char *repo, long pr, long issue, int runs, int turns, double spend,
			  const char *summary)
{
	_cleanup_free_ char *key = pr_key(repo, pr);
	_cleanup_json_ json_t *rec = json_pack("{s:I, s:i, s:i, s:f, s:s}", "issue", (json_int_t)issue, "runs", runs,
					       "turns", turns, "spend_usd", spend, "summary", summary ? summary : "");
	_cleanup_free_ char *v = json_dumps(rec, JSON_COMPACT);
	lc_error_t *err = NULL;
	if (lcc_map_set(c, NULL, MAP, key, v, 0, false, &err) < 0) {
		fprintf(stderr, "lc-agents solve-issue: cannot record %s: %s\n", key, err->msg);
		lc_error_free(err);
	}
}

/* A line of the review for the prompt: who, where (file and line when
 * GitHub gives them), what. */
static void feedback_line(char **text, json_t *cm)
{
	const char *body = json_string_value(json_object_get(cm, "body"));
	const char *who = json_string_value(json_object_get(json_object_get(cm, "user"), "login"));
	const char *path = json_string_value(json_object_get(cm, "path"));
	json_t *line = json_object_get(cm, "line");
	if (!json_is_integer(line))
		line = json_object_get(cm, "original_line");
	json_t *start = json_object_get(cm, "start_line");
	if (!body || strstr(body, OWN_MARK) || strlen(*text) > FEEDBACK_MAX)
		return;
	char where[64] = "";
	if (json_is_integer(start) && json_is_integer(line) && json_integer_value(start) != json_integer_value(line))
		snprintf(where, sizeof(where), " lines %lld-%lld", (long long)json_integer_value(start),
			 (long long)json_integer_value(line));
	else if (json_is_integer(line))
		snprintf(where, sizeof(where), " line %lld", (long long)json_integer_value(line));
	char *n = lc_strdup_printf("%s- %s%s%s%s%s: %s\n", *text, who ? who : "someone", path ? " on `" : "", path ? path : "",
				   path ? "`" : "", where, body);
	free(*text);
	*text = n;
}

/* The review that started a follow-up, from the API: a review's body and
 * its comments, or a comment's review, or the PR comment's words. */
static int gather_feedback(solve_t *s, const char *repo, json_t *trigger, follow_t *fu, lc_error_t **err)
{
	const char *kind = json_string_value(json_object_get(trigger, "kind"));
	const char *user = json_string_value(json_object_get(trigger, "user"));
	json_int_t review_id = json_integer_value(json_object_get(trigger, "review_id"));
	json_int_t comment_id = json_integer_value(json_object_get(trigger, "comment_id"));
	fu->asked_by = user ? strdup(user) : NULL;
	fu->feedback = strdup("");
	if (!kind || !strcmp(kind, "comment")) {
		const char *b = json_string_value(json_object_get(trigger, "body"));
		_cleanup_json_ json_t *cm = json_pack("{s:s, s:{s:s?}}", "body", b && *b ? b : "(the command alone: look at the "
							"review comments and the issue again)", "user", "login", user);
		feedback_line(&fu->feedback, cm);
		return 0;
	}
	if (review_id > 0) {
		_cleanup_free_ char *path = lc_strdup_printf("/repos/%s/pulls/%ld/reviews/%lld", repo, fu->pr, (long long)review_id);
		_cleanup_json_ json_t *rv = NULL;
		lc_error_t *e2 = NULL;
		if (gh_request(s->gh, "GET", path, NULL, NULL, &rv, &e2) < 0) {
			/* its comments still say what it asks */
			fprintf(stderr, "lc-agents solve-issue: the review's own words are missing: %s\n", e2->msg);
			lc_error_free(e2);
		}
		const char *b = json_string_value(json_object_get(rv, "body"));
		if (b && *b)
			feedback_line(&fu->feedback, rv);
	}
	_cleanup_json_ json_t *comments = NULL;
	if (review_id > 0) {
		if (gh_pr_review_comments(s->gh, repo, fu->pr, review_id, &comments, err) < 0)
			return -1;
	} else if (comment_id > 0) {
		_cleanup_free_ char *path = lc_strdup_printf("/repos/%s/pulls/comments/%lld", repo, (long long)comment_id);
		json_t *one = NULL;
		if (gh_request(s->gh, "GET", path, NULL, NULL, &one, err) < 0)
			return -1;
		comments = json_pack("[o]", one);
	}
	size_t i;
	json_t *cm;
	json_array_foreach(comments, i, cm) {
		feedback_line(&fu->feedback, cm);
		/* the reply goes to the thread of the comment that started it
		 * (its top: replies to replies are not a thing), else the first */
		json_int_t id = json_integer_value(json_object_get(cm, "id"));
		json_int_t top = json_integer_value(json_object_get(cm, "in_reply_to_id"));
		if (id == comment_id || (!fu->reply_to && !comment_id))
			fu->reply_to = top > 0 ? top : id;
	}
	if (!*fu->feedback) {
		free(fu->feedback);
		fu->feedback = strdup("- (the review has no words: look at the pull request again)\n");
	}
	return 0;
}

/* Put the branch's commits (a diff against the snapshot's commit) into the
 * agent's working tree, as the agent user. */
static int apply_branch(solve_t *s, const char *dir, const char *patch, size_t len, lc_error_t **err)
{
	if (!len)
		return 0;
	if (lcc_sandbox_upload(s->c, s->sandbox, BRANCH_PATCH, patch, len, 0644, err) < 0)
		return lc_error_wrap(err, "cannot put the branch's change into the agent's sandbox");
	lcc_exec_result_t r;
	if (sb_sh(s->c, s->sandbox, s->ac.user, dir,
		  GIT_SAFE "g apply --whitespace=nowarn " BRANCH_PATCH " && rm -f " BRANCH_PATCH, NULL, 600, &r, err) < 0)
		return -1;
	if (r.exit_code != 0) {
		_cleanup_free_ char *l = last_line(&r);
		lcc_exec_result_clear(&r);
		return lc_error_set(err, LC_EXIT_RUNTIME, 0, "the branch's commits do not apply to the snapshot: %s", l);
	}
	lcc_exec_result_clear(&r);
	return 0;
}

static int fn_solve(void)
{
	lc_error_t *err = NULL;
	solve_t s = { 0 };
	follow_t fu = { 0 };
	int rc = 0;
	_cleanup_json_ json_t *args = load_args(&err);
	if (!args)
		return fail(NULL, err);
	s.result = json_object();
	json_int_t n = json_integer_value(json_object_get(args, "issue"));
	json_int_t prn = json_integer_value(json_object_get(args, "pr"));
	bool follow = prn > 0;
	fu.pr = (long)prn;
	_cleanup_free_ char *repo = NULL;
	if (json_is_string(json_object_get(args, "repo")))
		repo = strdup(json_string_value(json_object_get(args, "repo")));
	else
		repo = configured_repo();
	const char *claim = json_string_value(json_object_get(args, "claim"));
	const char *delivery = json_string_value(json_object_get(args, "delivery"));
	const char *instructions = json_string_value(json_object_get(args, "instructions"));
	const char *requested_by = json_string_value(json_object_get(args, "requested_by"));
	const char *dir = cfg("REPO_DIR", "/workspace/repo");
	const char *test_cmd = cfg("TEST_COMMAND", NULL);
	const char *url = cfg("REPOSITORY", NULL);
	_cleanup_free_ char *branch = lc_strdup_printf("agent/issue-%lld", (long long)n);
	_cleanup_free_ char *title = NULL, *body = NULL, *prompt = NULL, *patch = NULL, *tests_tail = NULL;
	_cleanup_free_ char *snapv = NULL, *sha = NULL, *report = NULL, *pr_url = NULL, *base_tree = NULL;
	_cleanup_free_ char *bpatch = NULL, *summary_all = NULL, *prv = NULL, *replied = NULL, *tail = NULL;
	_cleanup_json_ json_t *snap = NULL, *limits = NULL, *pr = NULL, *labels = NULL, *perms = NULL;
	_cleanup_free_ char *msg = NULL, *prtitle = NULL, *prbody = NULL, *lab = NULL;
	size_t patch_len = 0, bpatch_len = 0;
	int tests_rc = -1;
	agent_result_t ar = { 0 };
	json_object_set_new(s.result, "issue", json_integer(n));
	json_object_set_new(s.result, "branch", json_string(branch));
	json_object_set_new(s.result, "pr_url", json_null());
	json_object_set_new(s.result, "tests_passed", json_null());
	json_object_set_new(s.result, "turns", json_null());
	json_object_set_new(s.result, "spend_usd", json_null());
	json_object_set_new(s.result, "sandbox_id", json_null());
	if (follow)
		json_object_set_new(s.result, "pr_number", json_integer(prn));
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
	perms = json_pack("{s:s, s:s, s:s}", "contents", "write", "issues", "write", "pull_requests", "write");
	if (github_auth(repo, perms, &s.auth, &err) < 0)
		goto failed;
	s.gh = gh_auth_client(s.auth, &err);
	if (!s.gh)
		goto failed;
	s.c = lcc_new(NULL, NULL, &err);
	if (!s.c)
		goto failed;
	/* the credential works (a bad one fails here, before the agent spends) */
	if (check_access(s.auth, repo, NULL, &err) < 0)
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
	if (follow) {
		/* 1b. the pull request, the review, the branch as it is now */
		if (gh_pr_get(s.gh, repo, fu.pr, &pr, &err) < 0)
			goto failed;
		const char *ref = json_string_value(json_object_get(json_object_get(pr, "head"), "ref"));
		const char *st = json_string_value(json_object_get(pr, "state"));
		if (!ref || strcmp(ref, branch) != 0 || !st || strcmp(st, "open") != 0) {
			lc_error_set(&err, LC_EXIT_STATE, 0, "pull request #%ld is not an open pull request from %s", fu.pr, branch);
			goto failed;
		}
		if (gather_feedback(&s, repo, json_object_get(args, "trigger"), &fu, &err) < 0)
			goto failed;
		_cleanup_free_ char *key = pr_key(repo, fu.pr);
		lc_error_t *e2 = NULL;
		if (lcc_map_get(s.c, NULL, MAP, key, &prv, &e2) > 0) {
			_cleanup_json_ json_t *rec = json_loads(prv, 0, NULL);
			fu.runs = (int)json_integer_value(json_object_get(rec, "runs"));
			fu.turns = (int)json_integer_value(json_object_get(rec, "turns"));
			fu.spend = json_number_value(json_object_get(rec, "spend_usd"));
			const char *sm = json_string_value(json_object_get(rec, "summary"));
			fu.prev = sm ? strdup(sm) : NULL;
		}
		lc_error_free(e2);
		if (!fu.prev) {
			/* no record of the runs (a pull request from before): its description */
			const char *pb = json_string_value(json_object_get(pr, "body"));
			fu.prev = pb ? strndup(pb, 8192) : NULL;
		}
		json_decref(pr);
		pr = NULL;
		if (gitops_branch_diff(url, s.auth, base, commit, branch, &bpatch, &bpatch_len, &fu.head, &err) < 0) {
			lc_error_wrap(&err, "cannot read %s", branch);
			goto failed;
		}
		json_object_set_new(s.result, "branch_head", json_string(fu.head));
	}
	/* 2. the agent's sandbox */
	limits = own_limits(s.c);
	lab = lc_strdup_printf("%s#%lld", repo, (long long)n);
	labels = json_pack("{s:s, s:s}", "coding-agents", "solve-issue", "issue", lab);
	agent_sandbox_opts_t so = { .image = image, .workdir = dir, .limits = limits, .labels = labels };
	if (agent_sandbox_create(s.c, &s.ac, &so, &s.sandbox, &err) < 0)
		goto failed;
	json_object_set_new(s.result, "sandbox_id", json_string(s.sandbox));
	fprintf(stderr, "lc-agents solve-issue: %s#%lld%s%s in sandbox %s (image %s, commit %.12s)\n", repo, (long long)n,
		follow ? " review of " : "", follow ? branch : "", s.sandbox, image, follow ? fu.head : commit);
	if (follow && apply_branch(&s, dir, bpatch, bpatch_len, &err) < 0)
		goto failed;
	/* the tree as the snapshot left it (SETUP_COMMAND's files included;
	 * a follow-up's with the branch's commits), in an index of its own:
	 * the change is what the agent adds to it */
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
	prompt = build_prompt(repo, (long)n, title, body, test_cmd, instructions, requested_by, follow ? &fu : NULL);
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
		/* 4. the change, as a patch against the tree it started from
		 * (taken before the tests run, so nothing they build is in it) */
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
	int runs = follow ? fu.runs + 1 : 1;
	int turns_total = ar.turns >= 0 ? ar.turns + (follow ? fu.turns : 0) : follow ? fu.turns : -1;
	double spend_total = (spend >= 0 ? spend : 0) + (follow ? fu.spend : 0);
	if (!follow && spend < 0)
		spend_total = -1;
	tail = report_tail(&s.ac, &ar, turns_total, spend_total, runs, test_cmd, tests_rc, tests_tail, task);
	const char *summary = ar.summary && *ar.summary ? ar.summary : "(the agent gave no summary)";
	report = lc_strdup_printf("%s\n\n%s", summary, tail);
	redact(report, getenv(s.ac.key_secret));
	if (follow) {
		json_object_set_new(s.result, "turns_total", turns_total >= 0 ? json_integer(turns_total) : json_null());
		json_object_set_new(s.result, "spend_usd_total", json_real(spend_total));
		json_object_set_new(s.result, "runs", json_integer(runs));
		summary_all = lc_strdup_printf("%s\n\n**After review (run %d):** %s", fu.prev && *fu.prev ? fu.prev : "", runs,
					       summary);
		redact(summary_all, getenv(s.ac.key_secret));
	}
	if (ar.status != AGENT_OK || patch_len == 0) {
		bool failed_agent = ar.status != AGENT_OK;
		_cleanup_free_ char *text = lc_strdup_printf("%s\n\n%s\n\n%s", failed_agent
						? follow ? "The coding agent did not finish this review; nothing was pushed."
							 : "The coding agent did not finish this issue; no pull request was made."
						: follow ? "The coding agent made no change for this review."
							 : "The coding agent made no change for this issue, so there is no pull request.",
						report, OWN_MARK);
		_cleanup_free_ char *curl = NULL;
		if (follow && fu.reply_to > 0) {
			if (gh_pr_comment_reply(s.gh, repo, fu.pr, fu.reply_to, text, &curl, &err) < 0)
				goto failed;
		} else if (gh_issue_comment(s.gh, repo, follow ? fu.pr : (long)n, text, &curl, &err) < 0) {
			goto failed;
		}
		if (follow)
			pr_record_put(s.c, repo, fu.pr, (long)n, runs, turns_total < 0 ? 0 : turns_total, spend_total,
				      fu.prev ? fu.prev : "");
		json_object_set_new(s.result, "outcome", json_string(failed_agent ? "agent-failed" : "no-change"));
		json_object_set_new(s.result, "comment_url", curl ? json_string(curl) : json_null());
		if (failed_agent) {
			lc_error_set(&err, LC_EXIT_RUNTIME, 0, "%s", ar.error ? ar.error : agent_status_name(ar.status));
			goto failed;
		}
		goto done;
	}
	if (follow)
		msg = lc_strdup_printf("Review of #%ld on #%lld: %s\n\n%s\n", fu.pr, (long long)n, title, summary);
	else
		msg = lc_strdup_printf("Fix #%lld: %s\n\n%s\n\nCloses #%lld\n", (long long)n, title,
				       ar.summary ? ar.summary : "", (long long)n);
	gitops_push_t gp = { .url = url, .auth = s.auth, .base = base, .commit = follow ? fu.head : commit,
			     .branch = branch, .follow_up = follow, .patch = patch, .patch_len = patch_len, .message = msg,
			     .author = cfg("GIT_AUTHOR", "coding-agents <coding-agents@users.noreply.github.com>") };
	if (gitops_push_patch(&gp, &sha, &err) < 0)
		goto failed;
	json_object_set_new(s.result, "commit", json_string(sha));
	fprintf(stderr, "lc-agents solve-issue: pushed %.12s to %s (%s)\n", sha, branch, gh_auth_name(s.auth));
	prtitle = lc_strdup_printf("Fix #%lld: %s", (long long)n, title);
	if (follow) {
		/* the reply on the review's thread, then the description with the totals */
		_cleanup_free_ char *text = lc_strdup_printf("%s\n\nPushed %.12s to `%s`.\n\n%s\n\n%s", summary, sha, branch,
							      tail, OWN_MARK);
		redact(text, getenv(s.ac.key_secret));
		if (fu.reply_to > 0) {
			if (gh_pr_comment_reply(s.gh, repo, fu.pr, fu.reply_to, text, &replied, &err) < 0)
				goto failed;
		} else if (gh_issue_comment(s.gh, repo, fu.pr, text, &replied, &err) < 0) {
			goto failed;
		}
		json_object_set_new(s.result, "reply_url", replied ? json_string(replied) : json_null());
		prbody = lc_strdup_printf("%s\n\n%s\n\nCloses #%lld\n", summary_all, tail, (long long)n);
		if (gh_pr_update(s.gh, repo, fu.pr, prtitle, prbody, &pr, &err) < 0)
			goto failed;
		pr_record_put(s.c, repo, fu.pr, (long)n, runs, turns_total < 0 ? 0 : turns_total, spend_total, summary_all);
		json_object_set_new(s.result, "outcome", json_string("follow-up"));
	} else {
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
		pr_record_put(s.c, repo, (long)json_integer_value(json_object_get(pr, "number")), (long)n, 1,
			      ar.turns >= 0 ? ar.turns : 0, spend >= 0 ? spend : 0, summary);
	}
	const char *u = json_string_value(json_object_get(pr, "html_url"));
	json_object_set_new(s.result, "pr_url", u ? json_string(u) : json_null());
	json_object_set_new(s.result, "pr_number", json_incref(json_object_get(pr, "number")));
	fprintf(stderr, "lc-agents solve-issue: %s: %s (%s)\n", branch, u ? u : "?", json_string_value(json_object_get(s.result, "outcome")));
done:
	if (gh_auth_kind(s.auth) == GH_AUTH_APP)
		json_object_set_new(s.result, "installation_tokens", json_integer(gh_auth_minted(s.auth)));
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
	follow_clear(&fu);
	gh_free(s.gh);
	gh_auth_free(s.auth);
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
					      "  run by lcd as the coding-agents app's functions (docs/guides/coding-agents.md)\n");
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
