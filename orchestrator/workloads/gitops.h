/* gitops.h — git as a function runs it, outside the agent's sandbox: a
 * patch (the agent's change, untrusted bytes) committed on a branch from a
 * known commit in a fresh clone, and pushed.  Nothing of the agent's tree
 * (its .git/config, hooks) is ever used: only the patch, through
 * `git apply`, which refuses paths outside the tree and inside .git.
 *
 * Credentials: with a token, git gets it from a credential helper that
 * reads $GITHUB_TOKEN from the environment (user x-access-token), so the
 * token is in no command line, URL or file. */
#ifndef GITOPS_H
#define GITOPS_H

#include <stddef.h>

#include "error.h"

typedef struct gitops_push {
	const char *url;      /* the remote (REPOSITORY) */
	const char *base;     /* the branch the commit is on (fetched) */
	const char *commit;   /* the commit the patch applies to */
	const char *branch;   /* pushed, forced: agent/issue-N */
	const char *patch;    /* git diff --binary output */
	size_t patch_len;
	const char *message;  /* the commit message */
	const char *author;   /* "Name <email>" */
	const char *token_env; /* the environment variable holding the token, or NULL */
} gitops_push_t;

/* Clone, check out commit on branch, apply, commit, push --force.  *sha
 * gets the pushed commit.  Errors carry git's last line of stderr. */
int gitops_push_patch(const gitops_push_t *p, char **sha, lc_error_t **err);

/* Run git with args in dir (NULL: the current directory); *out (optional)
 * gets stdout.  Non-zero exit: an error "git ARGV0…: LAST LINE OF STDERR". */
int gitops_git(const char *dir, const char *const *args, const char *token_env, char **out, lc_error_t **err);

#endif
