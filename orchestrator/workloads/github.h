/* github.h — the slice of GitHub's REST API the workloads call (issues,
 * comments, pull requests), over libcurl with a token.  Runs in a
 * function's sandbox, never in an agent's: the token stays there.
 *
 * Errors name the call and carry GitHub's own message, one line:
 *   GitHub POST /repos/o/r/pulls: 422 Validation Failed: A pull request already exists for o:agent/issue-7.
 */
#ifndef GITHUB_H
#define GITHUB_H

#include <jansson.h>

#include "error.h"

typedef struct gh gh_t;

/* api: the API's base URL (GITHUB_API_URL, https://api.github.com;
 * GitHub Enterprise Server: https://HOST/api/v3); token may be NULL
 * (anonymous calls). */
gh_t *gh_new(const char *api, const char *token, lc_error_t **err);
void gh_free(gh_t *g);
/* Instead of a fixed token: fn(ud, &token, err) asked before each call
 * (a GitHub App's installation token, renewed as it nears its end; NULL
 * token: anonymous). */
typedef int (*gh_token_fn)(void *ud, const char **token, lc_error_t **err);
void gh_set_token_source(gh_t *g, gh_token_fn fn, void *ud);

/* One call: path below the base URL ("/repos/o/r/issues/7").  0 and
 * *answer (optional) on 2xx; else negative with the error (status in
 * *status when it got an answer). */
int gh_request(gh_t *g, const char *method, const char *path, json_t *body, long *status, json_t **answer,
	       lc_error_t **err);

/* "owner/repo" of a clone URL (https://host/o/r(.git), git@host:o/r.git,
 * http://host:port/o/r.git), or NULL. */
char *gh_repo_from_url(const char *url);

int gh_issue_get(gh_t *g, const char *repo, long n, json_t **issue, lc_error_t **err);
/* *url (optional): the comment's html_url. */
int gh_issue_comment(gh_t *g, const char *repo, long n, const char *body, char **url, lc_error_t **err);
/* The open pull request whose head is owner:branch: 1 and *pr, or 0. */
int gh_pr_find_open(gh_t *g, const char *repo, const char *branch, json_t **pr, lc_error_t **err);
int gh_pr_create(gh_t *g, const char *repo, const char *title, const char *head, const char *base, const char *body,
		 json_t **pr, lc_error_t **err);
int gh_pr_update(gh_t *g, const char *repo, long number, const char *title, const char *body, json_t **pr,
		 lc_error_t **err);
int gh_pr_get(gh_t *g, const char *repo, long number, json_t **pr, lc_error_t **err);
/* A user's permission on repo as GET /repos/O/R/collaborators/U/permission
 * says it: "admin", "write", "read" or "none" (*perm, a new string). */
int gh_permission(gh_t *g, const char *repo, const char *user, char **perm, lc_error_t **err);
/* The review comments of pull request number: all of them (review_id 0),
 * or one review's.  *comments: an array. */
int gh_pr_review_comments(gh_t *g, const char *repo, long number, long long review_id, json_t **comments,
			  lc_error_t **err);
/* A reply in the thread of review comment comment_id; *url optional. */
int gh_pr_comment_reply(gh_t *g, const char *repo, long number, long long comment_id, const char *body, char **url,
			lc_error_t **err);

#endif
