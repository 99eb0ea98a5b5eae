/* gitops.h — git as a function runs it, outside every sandbox that runs
 * the agent's or the repository's code: the repository cloned (with its
 * submodules and Git LFS files) for the repo-builder, a patch (the agent's
 * change, untrusted bytes) committed on a branch in a fresh clone and
 * pushed.  Nothing of the agent's tree (its .git/config, hooks) is ever
 * used: only the patch, through `git apply`, which refuses paths outside
 * the tree and inside .git.
 *
 * Credentials: git asks a credential helper that answers only for the
 * remote's protocol and host (user x-access-token, the token from the
 * helper's environment), so the token is in no command line, URL or file,
 * and a submodule or an LFS server on another host gets nothing.  The
 * token is taken from the gh_auth_t at each git command: an App's is
 * renewed as it nears its end.  Only http and https remotes are allowed
 * (a .gitmodules cannot make git run ext:: or read file:// paths). */
#ifndef GITOPS_H
#define GITOPS_H

#include <stdbool.h>
#include <stddef.h>

#include "error.h"
#include "ghauth.h"

/* How a git command reaches the remote. */
typedef struct gitops_cred {
	gh_auth_t *auth; /* the token's source, or NULL: anonymous */
	const char *url; /* the remote: the token goes to its protocol and host only */
	bool lfs;        /* git-lfs's filters on (smudge LFS files on checkout) */
} gitops_cred_t;

typedef struct gitops_push {
	const char *url;      /* the remote (REPOSITORY) */
	gh_auth_t *auth;      /* its credential, or NULL */
	const char *base;     /* the branch the commit is on (fetched) */
	const char *commit;   /* the commit the patch applies to */
	const char *branch;   /* pushed: agent/issue-N */
	bool follow_up;       /* commit is the branch's head: fetched from the
			       * branch, and the push is a fast-forward (no
			       * force: a branch that moved meanwhile refuses it) */
	const char *patch;    /* git diff --binary output */
	size_t patch_len;
	const char *message;  /* the commit message */
	const char *author;   /* "Name <email>" */
} gitops_push_t;

/* Clone, check out commit on branch, apply, commit, push (forced, or a
 * fast-forward for a follow-up).  *sha gets the pushed commit.  Errors
 * carry git's last line of stderr. */
int gitops_push_patch(const gitops_push_t *p, char **sha, lc_error_t **err);

/* Clone url (branch, or the remote's HEAD) into dir with its submodules
 * (--init --recursive, with the same credential where they live on the
 * remote's host) and, where git-lfs is installed, its LFS files.  Before
 * the submodules are fetched, on_submodule(ud, URL) is called for each of
 * the top level's (relative URLs resolved against url): an App's token can
 * be widened to them. */
int gitops_clone(const char *url, const char *branch, const char *dir, gh_auth_t *auth,
		 void (*on_submodule)(void *ud, const char *url), void *ud, lc_error_t **err);

/* A submodule's URL as git resolves it against the superproject's remote
 * (../lib.git beside https://h/o/r.git is https://h/o/lib.git). */
char *gitops_resolve_url(const char *remote, const char *rel);

/* The branch's change against commit (git diff --binary of the two
 * trees: it applies to commit's tree and gives the branch head's), and
 * the head it was taken at.  base (the branch commit is on) is fetched
 * too, and commit by id if it left it. */
int gitops_branch_diff(const char *url, gh_auth_t *auth, const char *base, const char *commit, const char *branch,
		       char **patch, size_t *len, char **head, lc_error_t **err);

/* Run git with args in dir (NULL: the current directory); *out (optional)
 * gets stdout.  Non-zero exit: an error "git ARGV0…: LAST LINE OF STDERR". */
int gitops_git(const char *dir, const char *const *args, const gitops_cred_t *cred, char **out, lc_error_t **err);

#endif
