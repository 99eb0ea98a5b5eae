/* ghauth.h — how a function authenticates to GitHub: a personal token, or
 * a GitHub App's installation token minted from the App's private key.
 * Only functions (trusted code) hold either; nothing here ever reaches a
 * sandbox that runs the agent's or the repository's code.
 *
 * From the environment (the app's config and the function's secrets):
 *   GITHUB_APP_ID, GITHUB_APP_INSTALLATION_ID   config: the App and its
 *                     installation on the repository's owner
 *   GITHUB_APP_PRIVATE_KEY                      secret: the App's key (PEM)
 *   GITHUB_TOKEN                                secret: a personal token,
 *                     used when GITHUB_APP_ID is not set
 * Neither: anonymous (a public repository read without a token).
 *
 * An App's token: a JWT signed RS256 with the key (iat 60 s back, exp
 * 9 minutes ahead, iss the App's id) is exchanged at POST
 * /app/installations/ID/access_tokens for an installation token restricted
 * to the one repository and the permissions asked; it lasts an hour, and
 * gh_auth_token mints a new one once three quarters of its life are over,
 * so a run that outlasts it still pushes. */
#ifndef GHAUTH_H
#define GHAUTH_H

#include <stddef.h>
#include <time.h>
#include <jansson.h>

#include "error.h"

typedef enum gh_auth_kind {
	GH_AUTH_NONE,  /* anonymous */
	GH_AUTH_TOKEN, /* GITHUB_TOKEN */
	GH_AUTH_APP,   /* a GitHub App's installation tokens */
} gh_auth_kind_t;

typedef struct gh_auth gh_auth_t;

/* api: GITHUB_API_URL; repo: OWNER/REPO the App's tokens are restricted
 * to; permissions ({"contents": "write", …}, borrowed) what they may do
 * (NULL: what the installation has).  A bad or half configuration: one
 * line naming the key. */
int gh_auth_from_env(const char *api, const char *repo, json_t *permissions, gh_auth_t **out, lc_error_t **err);
void gh_auth_free(gh_auth_t *a);

gh_auth_kind_t gh_auth_kind(const gh_auth_t *a);
/* "GITHUB_TOKEN", "GitHub App 123 (installation 45)" or "no credential". */
const char *gh_auth_name(const gh_auth_t *a);

/* A token good for a while yet (*tok stays valid until the next call or
 * gh_auth_free; NULL when anonymous).  An App's is minted on first use and
 * again when it is near its end; a refused exchange is one line with the
 * status and GitHub's message. */
int gh_auth_token(gh_auth_t *a, const char **tok, lc_error_t **err);
/* A REST client (github.h) whose every call carries a current token. */
struct gh;
struct gh *gh_auth_client(gh_auth_t *a, lc_error_t **err);

/* Widen an App's tokens to these repositories of the same account too
 * (OWNER/NAME: a submodule's), from the next token on.  Nothing for a
 * personal token (it reaches what its owner may). */
void gh_auth_add_repo(gh_auth_t *a, const char *repo);

/* How many installation tokens were minted so far (0 for a personal token). */
int gh_auth_minted(const gh_auth_t *a);

/* The pure parts, for the unit tests: base64url without padding, and a
 * JWT {"alg": "RS256"} for app_id signed with the PEM key at time now. */
char *gh_b64url(const unsigned char *data, size_t len);
char *gh_app_jwt(const char *pem, const char *app_id, time_t now, lc_error_t **err);

#endif
