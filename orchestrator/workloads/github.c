/* github.c — GitHub's REST API over libcurl (github.h). */
#include <curl/curl.h>
#include <stdlib.h>
#include <string.h>

#include "github.h"
#include "util.h"

#define GH_MAX_ANSWER (32 << 20)

struct gh {
	CURL *curl;
	char *api;
	char *auth; /* "Authorization: Bearer TOKEN", or NULL */
	gh_token_fn src;
	void *src_ud;
};

void gh_set_token_source(gh_t *g, gh_token_fn fn, void *ud)
{
	g->src = fn;
	g->src_ud = ud;
}

gh_t *gh_new(const char *api, const char *token, lc_error_t **err)
{
	if (!api || (strncmp(api, "https://", 8) && strncmp(api, "http://", 7))) {
		lc_error_set(err, LC_EXIT_USAGE, 0, "GITHUB_API_URL=%s: expected an http(s) URL", api ? api : "");
		return NULL;
	}
	gh_t *g = calloc(1, sizeof(*g));
	curl_global_init(CURL_GLOBAL_DEFAULT);
	g->curl = curl_easy_init();
	g->api = strdup(api);
	size_t n = strlen(g->api);
	while (n > 0 && g->api[n - 1] == '/')
		g->api[--n] = '\0';
	if (token && *token)
		g->auth = lc_strdup_printf("Authorization: Bearer %s", token);
	if (!g->curl) {
		gh_free(g);
		lc_error_set(err, LC_EXIT_RUNTIME, 0, "libcurl: cannot make a handle");
		return NULL;
	}
	return g;
}

void gh_free(gh_t *g)
{
	if (!g)
		return;
	if (g->curl)
		curl_easy_cleanup(g->curl);
	if (g->auth)
		explicit_bzero(g->auth, strlen(g->auth));
	free(g->auth);
	free(g->api);
	free(g);
}

typedef struct buf {
	char *p;
	size_t n;
	bool too_big;
} buf_t;

static size_t on_data(char *data, size_t size, size_t nmemb, void *ud)
{
	buf_t *b = ud;
	size_t n = size * nmemb;
	if (b->n + n > GH_MAX_ANSWER) {
		b->too_big = true;
		return 0;
	}
	char *p = realloc(b->p, b->n + n + 1);
	if (!p)
		return 0;
	memcpy(p + b->n, data, n);
	b->n += n;
	p[b->n] = '\0';
	b->p = p;
	return n;
}

/* GitHub's error body: {"message", "errors": [{"message"} or {"field", "code"}]}. */
static char *error_text(json_t *a)
{
	const char *m = json_string_value(json_object_get(a, "message"));
	json_t *errs = json_object_get(a, "errors");
	json_t *e0 = json_array_get(errs, 0);
	const char *d = json_string_value(json_object_get(e0, "message"));
	if (!d)
		d = json_string_value(json_object_get(e0, "code"));
	return lc_strdup_printf("%s%s%s", m ? m : "(no message)", d ? ": " : "", d ? d : "");
}

int gh_request(gh_t *g, const char *method, const char *path, json_t *body, long *status, json_t **answer,
	       lc_error_t **err)
{
	if (g->src) {
		const char *tok = NULL;
		if (g->src(g->src_ud, &tok, err) < 0)
			return -1;
		if (g->auth)
			explicit_bzero(g->auth, strlen(g->auth));
		free(g->auth);
		g->auth = tok ? lc_strdup_printf("Authorization: Bearer %s", tok) : NULL;
	}
	_cleanup_free_ char *url = lc_strdup_printf("%s%s", g->api, path);
	_cleanup_free_ char *data = body ? json_dumps(body, JSON_COMPACT) : NULL;
	CURL *c = g->curl;
	curl_easy_reset(c);
	struct curl_slist *h = NULL;
	h = curl_slist_append(h, "Accept: application/vnd.github+json");
	h = curl_slist_append(h, "X-GitHub-Api-Version: 2022-11-28");
	h = curl_slist_append(h, "User-Agent: lcrun-coding-agents");
	if (g->auth)
		h = curl_slist_append(h, g->auth);
	if (data)
		h = curl_slist_append(h, "Content-Type: application/json");
	buf_t b = { 0 };
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 20L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 120L);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	if (data) {
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, data);
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)strlen(data));
	}
	CURLcode rc = curl_easy_perform(c);
	curl_slist_free_all(h);
	_cleanup_free_ char *text = b.p;
	long st = 0;
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &st);
	if (status)
		*status = st;
	if (rc != CURLE_OK)
		return lc_error_set(err, LC_EXIT_RUNTIME, 0, "GitHub %s %s: %s", method, path,
				    b.too_big ? "answer too large" : curl_easy_strerror(rc));
	_cleanup_json_ json_t *a = text && b.n ? json_loadb(text, b.n, 0, NULL) : NULL;
	if (st < 200 || st > 299) {
		_cleanup_free_ char *why = error_text(a);
		return lc_error_set(err, st == 404 ? LC_EXIT_UNKNOWN : st == 401 || st == 403 ? LC_EXIT_PERM : LC_EXIT_RUNTIME,
				    0, "GitHub %s %s: %ld %s", method, path, st, why);
	}
	if (answer) {
		if (!a && b.n)
			return lc_error_set(err, LC_EXIT_RUNTIME, 0, "GitHub %s %s: the answer is not JSON", method, path);
		*answer = a ? json_incref(a) : json_null();
	}
	return 0;
}

char *gh_repo_from_url(const char *url)
{
	if (!url || !*url)
		return NULL;
	const char *p = strstr(url, "://");
	if (p) {
		p = strchr(p + 3, '/'); /* past the host */
	} else {
		p = strchr(url, ':'); /* git@host:o/r.git */
	}
	if (!p)
		return NULL;
	p++;
	_cleanup_free_ char *s = strdup(p);
	size_t n = strlen(s);
	while (n > 0 && s[n - 1] == '/')
		s[--n] = '\0';
	if (n > 4 && !strcmp(s + n - 4, ".git"))
		s[n -= 4] = '\0';
	/* the last two components */
	char *slash = strrchr(s, '/');
	if (!slash || slash == s || !slash[1])
		return NULL;
	char *start = slash - 1;
	while (start > s && start[-1] != '/')
		start--;
	return strdup(start);
}

static char *esc_path(gh_t *g, const char *s)
{
	char *e = curl_easy_escape(g->curl, s, 0);
	char *r = strdup(e);
	curl_free(e);
	return r;
}

int gh_issue_get(gh_t *g, const char *repo, long n, json_t **issue, lc_error_t **err)
{
	_cleanup_free_ char *path = lc_strdup_printf("/repos/%s/issues/%ld", repo, n);
	return gh_request(g, "GET", path, NULL, NULL, issue, err);
}

int gh_issue_comment(gh_t *g, const char *repo, long n, const char *body, char **url, lc_error_t **err)
{
	_cleanup_free_ char *path = lc_strdup_printf("/repos/%s/issues/%ld/comments", repo, n);
	_cleanup_json_ json_t *req = json_pack("{s:s}", "body", body), *a = NULL;
	if (gh_request(g, "POST", path, req, NULL, &a, err) < 0)
		return -1;
	if (url) {
		const char *u = json_string_value(json_object_get(a, "html_url"));
		*url = u ? strdup(u) : NULL;
	}
	return 0;
}

int gh_pr_find_open(gh_t *g, const char *repo, const char *branch, json_t **pr, lc_error_t **err)
{
	_cleanup_free_ char *owner = strndup(repo, strcspn(repo, "/"));
	_cleanup_free_ char *head = lc_strdup_printf("%s:%s", owner, branch);
	_cleanup_free_ char *eh = esc_path(g, head);
	_cleanup_free_ char *path = lc_strdup_printf("/repos/%s/pulls?state=open&head=%s", repo, eh);
	_cleanup_json_ json_t *a = NULL;
	if (gh_request(g, "GET", path, NULL, NULL, &a, err) < 0)
		return -1;
	size_t i;
	json_t *p;
	json_array_foreach(a, i, p) {
		const char *ref = json_string_value(json_object_get(json_object_get(p, "head"), "ref"));
		if (ref && !strcmp(ref, branch)) {
			*pr = json_incref(p);
			return 1;
		}
	}
	return 0;
}

int gh_pr_create(gh_t *g, const char *repo, const char *title, const char *head, const char *base, const char *body,
		 json_t **pr, lc_error_t **err)
{
	_cleanup_free_ char *path = lc_strdup_printf("/repos/%s/pulls", repo);
	_cleanup_json_ json_t *req =
		json_pack("{s:s, s:s, s:s, s:s}", "title", title, "head", head, "base", base, "body", body);
	return gh_request(g, "POST", path, req, NULL, pr, err);
}

int gh_pr_update(gh_t *g, const char *repo, long number, const char *title, const char *body, json_t **pr,
		 lc_error_t **err)
{
	_cleanup_free_ char *path = lc_strdup_printf("/repos/%s/pulls/%ld", repo, number);
	_cleanup_json_ json_t *req = json_pack("{s:s, s:s}", "title", title, "body", body);
	return gh_request(g, "PATCH", path, req, NULL, pr, err);
}

int gh_pr_get(gh_t *g, const char *repo, long number, json_t **pr, lc_error_t **err)
{
	_cleanup_free_ char *path = lc_strdup_printf("/repos/%s/pulls/%ld", repo, number);
	return gh_request(g, "GET", path, NULL, NULL, pr, err);
}

int gh_permission(gh_t *g, const char *repo, const char *user, char **perm, lc_error_t **err)
{
	_cleanup_free_ char *eu = esc_path(g, user);
	_cleanup_free_ char *path = lc_strdup_printf("/repos/%s/collaborators/%s/permission", repo, eu);
	_cleanup_json_ json_t *a = NULL;
	long st = 0;
	if (gh_request(g, "GET", path, NULL, &st, &a, err) < 0) {
		if (st != 404)
			return -1;
		/* not a user GitHub knows: no permission */
		lc_error_free(*err);
		*err = NULL;
		*perm = strdup("none");
		return 0;
	}
	const char *p = json_string_value(json_object_get(a, "permission"));
	*perm = strdup(p ? p : "none");
	return 0;
}

int gh_pr_review_comments(gh_t *g, const char *repo, long number, long long review_id, json_t **comments,
			  lc_error_t **err)
{
	_cleanup_free_ char *path = review_id > 0
		? lc_strdup_printf("/repos/%s/pulls/%ld/reviews/%lld/comments?per_page=100", repo, number, review_id)
		: lc_strdup_printf("/repos/%s/pulls/%ld/comments?per_page=100", repo, number);
	if (gh_request(g, "GET", path, NULL, NULL, comments, err) < 0)
		return -1;
	if (!json_is_array(*comments)) {
		json_decref(*comments);
		*comments = NULL;
		return lc_error_set(err, LC_EXIT_RUNTIME, 0, "GitHub GET %s: the answer is not a list", path);
	}
	return 0;
}

int gh_pr_comment_reply(gh_t *g, const char *repo, long number, long long comment_id, const char *body, char **url,
			lc_error_t **err)
{
	_cleanup_free_ char *path = lc_strdup_printf("/repos/%s/pulls/%ld/comments/%lld/replies", repo, number, comment_id);
	_cleanup_json_ json_t *req = json_pack("{s:s}", "body", body), *a = NULL;
	if (gh_request(g, "POST", path, req, NULL, &a, err) < 0)
		return -1;
	if (url) {
		const char *u = json_string_value(json_object_get(a, "html_url"));
		*url = u ? strdup(u) : NULL;
	}
	return 0;
}
