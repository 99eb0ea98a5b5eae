/* ghauth.c — a personal token or a GitHub App's installation tokens (ghauth.h). */
#define _GNU_SOURCE 1
#include <ctype.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ghauth.h"
#include "github.h"
#include "util.h"

#define JWT_BACK_S 60   /* iat this far back: GitHub's clock may be behind ours */
#define JWT_AHEAD_S 540 /* exp: GitHub takes at most 10 minutes */

struct gh_auth {
	gh_auth_kind_t kind;
	char *name;
	char *api;
	char *repo;
	char **more;  /* other repositories of the same account (submodules) */
	json_t *permissions;
	char *token;  /* the personal token, or the installation token in use */
	char *pem;    /* the App's key */
	char *app_id, *installation;
	time_t got, renew_at, expires_at;
	int minted;
};

static const char *env(const char *name)
{
	const char *v = getenv(name);
	return v && *v ? v : NULL;
}

static char *openssl_reason(void)
{
	unsigned long e = ERR_get_error();
	char b[256] = "unknown reason";
	if (e)
		ERR_error_string_n(e, b, sizeof(b));
	ERR_clear_error();
	return strdup(b);
}

char *gh_b64url(const unsigned char *data, size_t len)
{
	char *out = lc_xmalloc0(4 * ((len + 2) / 3) + 1);
	int n = EVP_EncodeBlock((unsigned char *)out, data, (int)len);
	while (n > 0 && out[n - 1] == '=')
		out[--n] = '\0';
	for (char *p = out; *p; p++)
		*p = *p == '+' ? '-' : *p == '/' ? '_' : *p;
	return out;
}

static bool all_digits(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (!isdigit((unsigned char)*s))
			return false;
	return true;
}

char *gh_app_jwt(const char *pem, const char *app_id, time_t now, lc_error_t **err)
{
	BIO *b = BIO_new_mem_buf(pem, -1);
	EVP_PKEY *k = b ? PEM_read_bio_PrivateKey(b, NULL, NULL, NULL) : NULL;
	BIO_free(b);
	if (!k) {
		_cleanup_free_ char *why = openssl_reason();
		lc_error_set(err, LC_EXIT_USAGE, 0, "GITHUB_APP_PRIVATE_KEY: not a PEM private key (%s)", why);
		return NULL;
	}
	if (EVP_PKEY_base_id(k) != EVP_PKEY_RSA) {
		EVP_PKEY_free(k);
		lc_error_set(err, LC_EXIT_USAGE, 0, "GITHUB_APP_PRIVATE_KEY: not an RSA key (a GitHub App's key is RSA)");
		return NULL;
	}
	/* iss: the App's id (a number), or its client id (a string) */
	_cleanup_json_ json_t *claims = json_pack("{s:I, s:I}", "iat", (json_int_t)(now - JWT_BACK_S), "exp",
						  (json_int_t)(now + JWT_AHEAD_S));
	json_object_set_new(claims, "iss", all_digits(app_id) ? json_integer(strtoll(app_id, NULL, 10)) : json_string(app_id));
	_cleanup_free_ char *cj = json_dumps(claims, JSON_COMPACT | JSON_SORT_KEYS);
	static const char header[] = "{\"alg\":\"RS256\",\"typ\":\"JWT\"}";
	_cleanup_free_ char *h64 = gh_b64url((const unsigned char *)header, strlen(header));
	_cleanup_free_ char *c64 = gh_b64url((const unsigned char *)cj, strlen(cj));
	_cleanup_free_ char *input = lc_strdup_printf("%s.%s", h64, c64);
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	size_t siglen = 0;
	unsigned char *sig = NULL;
	int ok = ctx && EVP_DigestSignInit(ctx, NULL, EVP_sha256(), NULL, k) == 1 &&
		 EVP_DigestSign(ctx, NULL, &siglen, (const unsigned char *)input, strlen(input)) == 1;
	if (ok) {
		sig = lc_xmalloc0(siglen);
		ok = EVP_DigestSign(ctx, sig, &siglen, (const unsigned char *)input, strlen(input)) == 1;
	}
	EVP_MD_CTX_free(ctx);
	EVP_PKEY_free(k);
	if (!ok) {
		free(sig);
		_cleanup_free_ char *why = openssl_reason();
		lc_error_set(err, LC_EXIT_RUNTIME, 0, "cannot sign the GitHub App's JWT: %s", why);
		return NULL;
	}
	_cleanup_free_ char *s64 = gh_b64url(sig, siglen);
	free(sig);
	return lc_strdup_printf("%s.%s", input, s64);
}

int gh_auth_from_env(const char *api, const char *repo, json_t *permissions, gh_auth_t **out, lc_error_t **err)
{
	*out = NULL;
	const char *app = env("GITHUB_APP_ID"), *inst = env("GITHUB_APP_INSTALLATION_ID");
	const char *key = env("GITHUB_APP_PRIVATE_KEY"), *tok = env("GITHUB_TOKEN");
	gh_auth_t *a = lc_xmalloc0(sizeof(*a));
	a->api = strdup(api ? api : "https://api.github.com");
	a->repo = repo ? strdup(repo) : NULL;
	if (app || inst) {
		if (!app || !inst) {
			gh_auth_free(a);
			return lc_error_set(err, LC_EXIT_USAGE, 0,
					    "a GitHub App needs both GITHUB_APP_ID and GITHUB_APP_INSTALLATION_ID (%s is not set)",
					    app ? "GITHUB_APP_INSTALLATION_ID" : "GITHUB_APP_ID");
		}
		if (!all_digits(inst)) {
			lc_error_set(err, LC_EXIT_USAGE, 0, "GITHUB_APP_INSTALLATION_ID=%s: expected a number", inst);
			gh_auth_free(a);
			return -1;
		}
		if (!key) {
			gh_auth_free(a);
			return lc_error_set(err, LC_EXIT_USAGE, 0,
					    "GITHUB_APP_ID is set, but this function has no GITHUB_APP_PRIVATE_KEY: "
					    "lcctl secret set GITHUB_APP_PRIVATE_KEY < the App's .pem");
		}
		if (!repo) {
			gh_auth_free(a);
			return lc_error_set(err, LC_EXIT_USAGE, 0, "a GitHub App's token needs the repository (REPOSITORY)");
		}
		a->kind = GH_AUTH_APP;
		a->pem = strdup(key);
		a->app_id = strdup(app);
		a->installation = strdup(inst);
		a->permissions = permissions ? json_incref(permissions) : NULL;
		a->name = lc_strdup_printf("GitHub App %s (installation %s)", app, inst);
		/* the key is checked now: a wrong file fails before anything runs */
		_cleanup_free_ char *jwt = gh_app_jwt(a->pem, a->app_id, time(NULL), err);
		if (!jwt) {
			gh_auth_free(a);
			return -1;
		}
		explicit_bzero(jwt, strlen(jwt));
	} else if (tok) {
		a->kind = GH_AUTH_TOKEN;
		a->token = strdup(tok);
		a->name = strdup("GITHUB_TOKEN");
	} else {
		a->kind = GH_AUTH_NONE;
		a->name = strdup("no credential");
	}
	*out = a;
	return 0;
}

static void wipe(char **s)
{
	if (*s) {
		explicit_bzero(*s, strlen(*s));
		free(*s);
		*s = NULL;
	}
}

void gh_auth_free(gh_auth_t *a)
{
	if (!a)
		return;
	wipe(&a->token);
	wipe(&a->pem);
	free(a->name);
	free(a->api);
	free(a->repo);
	lc_strv_free(a->more);
	free(a->app_id);
	free(a->installation);
	json_decref(a->permissions);
	free(a);
}

gh_auth_kind_t gh_auth_kind(const gh_auth_t *a)
{
	return a ? a->kind : GH_AUTH_NONE;
}

const char *gh_auth_name(const gh_auth_t *a)
{
	return a ? a->name : "no credential";
}

int gh_auth_minted(const gh_auth_t *a)
{
	return a ? a->minted : 0;
}

/* "2016-07-11T22:14:10Z" as a time, or -1. */
static time_t parse_time(const char *s)
{
	struct tm tm = { 0 };
	const char *end = s ? strptime(s, "%Y-%m-%dT%H:%M:%S", &tm) : NULL;
	if (!end)
		return -1;
	return timegm(&tm);
}

static int mint(gh_auth_t *a, lc_error_t **err)
{
	time_t now = time(NULL);
	_cleanup_free_ char *jwt = gh_app_jwt(a->pem, a->app_id, now, err);
	if (!jwt)
		return -1;
	gh_t *g = gh_new(a->api, jwt, err);
	explicit_bzero(jwt, strlen(jwt));
	if (!g)
		return -1;
	const char *slash = strchr(a->repo, '/');
	_cleanup_json_ json_t *req = json_pack("{s:[s]}", "repositories", slash ? slash + 1 : a->repo);
	for (char **m = a->more; m && *m; m++)
		json_array_append_new(json_object_get(req, "repositories"), json_string(strchr(*m, '/') + 1));
	if (a->permissions)
		json_object_set(req, "permissions", a->permissions);
	_cleanup_free_ char *path = lc_strdup_printf("/app/installations/%s/access_tokens", a->installation);
	_cleanup_json_ json_t *ans = NULL;
	int r = gh_request(g, "POST", path, req, NULL, &ans, err);
	gh_free(g);
	if (r < 0)
		return lc_error_wrap(err, "%s: no installation token for %s", a->name, a->repo);
	const char *tok = json_string_value(json_object_get(ans, "token"));
	const char *exp = json_string_value(json_object_get(ans, "expires_at"));
	time_t e = parse_time(exp);
	now = time(NULL);
	if (!tok || !*tok || e < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, 0, "%s: POST %s answered no token and expires_at", a->name, path);
	if (e <= now)
		return lc_error_set(err, LC_EXIT_RUNTIME, 0,
				    "%s: the installation token expires at %s, which has passed (is this host's clock right?)",
				    a->name, exp);
	wipe(&a->token);
	a->token = strdup(tok);
	a->got = now;
	a->expires_at = e;
	/* renewed once three quarters of its life are over (45 of 60 minutes) */
	a->renew_at = now + (e - now) * 3 / 4;
	a->minted++;
	return 0;
}

int gh_auth_token(gh_auth_t *a, const char **tok, lc_error_t **err)
{
	*tok = NULL;
	if (!a || a->kind == GH_AUTH_NONE)
		return 0;
	if (a->kind == GH_AUTH_APP && (!a->token || time(NULL) >= a->renew_at) && mint(a, err) < 0)
		return -1;
	*tok = a->token;
	return 0;
}

void gh_auth_add_repo(gh_auth_t *a, const char *repo)
{
	if (!a || a->kind != GH_AUTH_APP || !repo || !strchr(repo, '/'))
		return;
	size_t ol = strcspn(a->repo, "/");
	if (strncasecmp(repo, a->repo, ol) != 0 || repo[ol] != '/' || !strcasecmp(repo, a->repo))
		return; /* another account's: no installation token reaches it */
	for (char **m = a->more; m && *m; m++)
		if (!strcasecmp(*m, repo))
			return;
	lc_strv_push(&a->more, repo);
	a->renew_at = 0; /* the next token covers it */
}

static int auth_source(void *ud, const char **tok, lc_error_t **err)
{
	return gh_auth_token(ud, tok, err);
}

gh_t *gh_auth_client(gh_auth_t *a, lc_error_t **err)
{
	gh_t *g = gh_new(a->api, NULL, err);
	if (g)
		gh_set_token_source(g, auth_source, a);
	return g;
}
