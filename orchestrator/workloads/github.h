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

/* api: the API's base URL (GITHUB_API_URL, https://api.github.com);
 * token may be NULL (anonymous calls). */
gh_t *gh_new(const char *api, const char *token, lc_error_t **err);
void gh_free(gh_t *g);

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

#endif
