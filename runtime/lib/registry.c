/* registry.c — push and pull over the OCI distribution spec (registry.h).
 *
 * Push: each blob the registry lacks (HEAD) goes up in one monolithic
 * upload (POST, then PUT …?digest=), then the manifest, byte for byte as
 * the store has it (so its digest stays).  Pull: the manifest (an index:
 * this platform's), checked against the digest asked for or, by tag,
 * recorded; the config and the layers the store lacks, each checked as it
 * arrives; then imported as lcrun image import takes an OCI layout. */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "curllib.h"
#include "image.h"
#include "lcrun.h"
#include "registry.h"
#include "util.h"

#define MT_MANIFEST "application/vnd.oci.image.manifest.v1+json"
#define MT_INDEX "application/vnd.oci.image.index.v1+json"
#define MT_DOCKER_MANIFEST "application/vnd.docker.distribution.manifest.v2+json"
#define MT_DOCKER_LIST "application/vnd.docker.distribution.manifest.list.v2+json"
#define MANIFEST_MAX (4 << 20)

static bool loopback(const char *host)
{
	if (!strcasecmp(host, "localhost") || !strcmp(host, "[::1]"))
		return true;
	struct in_addr a;
	return inet_pton(AF_INET, host, &a) == 1 && (ntohl(a.s_addr) >> 24) == 127;
}

int lc_registry_ref(const char *ref, char **base, char **repo, char **tag, lc_error_t **err)
{
	const char *scheme = NULL, *p = ref;
	if (!strncmp(p, "http://", 7))
		scheme = "http", p += 7;
	else if (!strncmp(p, "https://", 8))
		scheme = "https", p += 8;
	const char *slash = strchr(p, '/');
	if (!slash || slash == p || !slash[1])
		return lc_error_set(err, LC_EXIT_USAGE, 0,
				    "registry reference '%s': expected REGISTRY/REPOSITORY[:TAG|@sha256:HEX]", ref);
	_cleanup_free_ char *host = strndup(p, (size_t)(slash - p));
	_cleanup_free_ char *hostname = strdup(host);
	if (hostname[0] == '[') {
		char *e = strchr(hostname, ']');
		if (e)
			e[1] = '\0';
	} else {
		hostname[strcspn(hostname, ":")] = '\0';
	}
	_cleanup_free_ char *rest = strdup(slash + 1);
	char *at = strchr(rest, '@');
	char *t = NULL;
	if (at) {
		*at = '\0';
		t = at + 1;
		if (strncmp(t, "sha256:", 7) || strlen(t) != 7 + LC_HEX_LEN)
			return lc_error_set(err, LC_EXIT_USAGE, 0, "registry reference '%s': a digest is sha256:HEX", ref);
	} else {
		char *colon = strrchr(rest, ':');
		if (colon && !strchr(colon, '/')) {
			*colon = '\0';
			t = colon + 1;
		}
	}
	for (const char *c = rest; *c; c++)
		if (!islower((unsigned char)*c) && !isdigit((unsigned char)*c) && !strchr("._-/", *c))
			return lc_error_set(err, LC_EXIT_USAGE, 0,
					    "registry reference '%s': a repository is lowercase letters, digits and ._-/", ref);
	if (!*rest || (t && !*t))
		return lc_error_set(err, LC_EXIT_USAGE, 0, "registry reference '%s': empty repository or tag", ref);
	if (!scheme)
		scheme = loopback(hostname) ? "http" : "https";
	*base = lc_strdup_printf("%s://%s", scheme, host);
	*repo = strdup(rest);
	*tag = strdup(t ? t : "latest");
	return 0;
}

/* ---- one request ---- */

struct buf {
	char *data;
	size_t len, max;
	bool too_big;
};

static size_t to_buf(char *ptr, size_t size, size_t n, void *ud)
{
	struct buf *b = ud;
	size_t len = size * n;
	if (b->len + len > b->max) {
		b->too_big = true;
		return 0;
	}
	char *p = realloc(b->data, b->len + len + 1);
	if (!p)
		return 0;
	b->data = p;
	memcpy(b->data + b->len, ptr, len);
	b->len += len;
	b->data[b->len] = '\0';
	return len;
}

struct hdrs {
	char *location;
	char *content_type;
	char *digest;
	bool auth;
};

static char *header_value(const char *line, size_t len, const char *name)
{
	size_t n = strlen(name);
	if (len <= n + 1 || strncasecmp(line, name, n) || line[n] != ':')
		return NULL;
	const char *v = line + n + 1;
	while (*v == ' ')
		v++;
	size_t vl = len - (size_t)(v - line);
	while (vl && (v[vl - 1] == '\r' || v[vl - 1] == '\n'))
		vl--;
	return strndup(v, vl);
}

static size_t on_header(char *line, size_t size, size_t n, void *ud)
{
	struct hdrs *h = ud;
	size_t len = size * n;
	char *v;
	if ((v = header_value(line, len, "Location"))) {
		free(h->location);
		h->location = v;
	} else if ((v = header_value(line, len, "Content-Type"))) {
		free(h->content_type);
		h->content_type = v;
	} else if ((v = header_value(line, len, "Docker-Content-Digest"))) {
		free(h->digest);
		h->digest = v;
	} else if ((v = header_value(line, len, "WWW-Authenticate"))) {
		h->auth = true;
		free(v);
	}
	return len;
}

static void hdrs_clear(struct hdrs *h)
{
	free(h->location);
	free(h->content_type);
	free(h->digest);
	memset(h, 0, sizeof(*h));
}

/* A blob written to a file as it comes, hashed. */
struct sink {
	int fd;
	lc_sha256_t *sha;
	bool failed;
};

static size_t to_file(char *ptr, size_t size, size_t n, void *ud)
{
	struct sink *s = ud;
	size_t len = size * n;
	if (lc_write_all(s->fd, ptr, len) < 0) {
		s->failed = true;
		return 0;
	}
	lc_sha256_update(s->sha, ptr, len);
	return len;
}

typedef struct call {
	const char *method;
	const char *url;
	struct curl_slist *headers;
	const char *body; /* with body_len */
	size_t body_len;
	int upload_fd;    /* a file as the body */
	curl_off_t upload_len;
	struct buf *out;  /* the answer's body, or: */
	struct sink *sink;
	struct hdrs h;
	long status;
} call_t;

static int perform(call_t *c, const char *what, lc_error_t **err)
{
	CURL *e = curl_easy_init();
	if (!e)
		return lc_error_set(err, LC_EXIT_RUNTIME, 0, "%s: cannot start libcurl", what);
	FILE *in = NULL;
	curl_easy_setopt(e, CURLOPT_URL, c->url);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT, 30L);
#if LIBCURL_VERSION_NUM >= 0x075500
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
#endif
	curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 1L); /* blobs are often served from elsewhere */
	curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(e, CURLOPT_HEADERDATA, &c->h);
	curl_easy_setopt(e, CURLOPT_USERAGENT, "lcrun/" PACKAGE_VERSION);
	if (c->headers)
		curl_easy_setopt(e, CURLOPT_HTTPHEADER, c->headers);
	if (!strcmp(c->method, "HEAD")) {
		curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
	} else if (!strcmp(c->method, "PUT") && c->upload_fd >= 0) {
		in = fdopen(dup(c->upload_fd), "rb");
		curl_easy_setopt(e, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(e, CURLOPT_READDATA, in);
		curl_easy_setopt(e, CURLOPT_INFILESIZE_LARGE, c->upload_len);
	} else if (strcmp(c->method, "GET")) {
		curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, c->method);
		curl_easy_setopt(e, CURLOPT_POSTFIELDS, c->body ? c->body : "");
		curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(c->body ? c->body_len : 0));
	}
	if (c->sink) {
		curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, to_file);
		curl_easy_setopt(e, CURLOPT_WRITEDATA, c->sink);
	} else if (c->out) {
		curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, to_buf);
		curl_easy_setopt(e, CURLOPT_WRITEDATA, c->out);
	}
	char ebuf[CURL_ERROR_SIZE] = "";
	curl_easy_setopt(e, CURLOPT_ERRORBUFFER, ebuf);
	CURLcode rc = curl_easy_perform(e);
	curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &c->status);
	curl_easy_cleanup(e);
	if (in)
		fclose(in);
	if (rc != CURLE_OK) {
		if (c->out && c->out->too_big)
			return lc_error_set(err, LC_EXIT_INVALID, 0, "%s: the answer is larger than %zu bytes", what,
					    c->out->max);
		return lc_error_set(err, LC_EXIT_RUNTIME, 0, "%s: %s", what, ebuf[0] ? ebuf : curl_easy_strerror(rc));
	}
	if (c->status == 401 || c->status == 403)
		return lc_error_set(err, LC_EXIT_PERM, 0, "%s: the registry %s (credentials are not supported)", what,
				    c->h.auth ? "asks for credentials" : "refuses it");
	return 0;
}

static char *url(const char *base, const char *repo, const char *kind, const char *what)
{
	return lc_strdup_printf("%s/v2/%s/%s/%s", base, repo, kind, what);
}

/* ---- push ---- */

static int push_blob(const char *base, const char *repo, const char *digest, lc_registry_stats_t *st,
		     lc_error_t **err)
{
	_cleanup_free_ char *u = url(base, repo, "blobs", digest);
	_cleanup_free_ char *what = lc_strdup_printf("push %s/%s: blob %s", base, repo, digest);
	call_t head = { .method = "HEAD", .url = u, .upload_fd = -1 };
	int r = perform(&head, what, err);
	hdrs_clear(&head.h);
	if (r < 0)
		return -1;
	st->blobs++;
	if (head.status == 200)
		return 0; /* it has it */
	_cleanup_free_ char *path = lc_image_blob_path(digest + 7);
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat sb;
	if (fd < 0 || fstat(fd, &sb) < 0)
		return lc_error_set(err, LC_EXIT_INVALID, errno, "%s: not in the store", what);
	_cleanup_free_ char *start = url(base, repo, "blobs", "uploads/");
	call_t post = { .method = "POST", .url = start, .upload_fd = -1 };
	if (perform(&post, what, err) < 0) {
		hdrs_clear(&post.h);
		return -1;
	}
	if (post.status != 202 || !post.h.location) {
		hdrs_clear(&post.h);
		return lc_error_set(err, LC_EXIT_RUNTIME, 0, "%s: the registry did not start an upload (HTTP %ld)", what,
				    post.status);
	}
	/* Location may be relative to the registry, and may hold a query */
	_cleanup_free_ char *put = lc_strdup_printf("%s%s%sdigest=%s", post.h.location[0] == '/' ? base : "",
						    post.h.location, strchr(post.h.location, '?') ? "&" : "?", digest);
	hdrs_clear(&post.h);
	struct curl_slist *hl = curl_slist_append(NULL, "Content-Type: application/octet-stream");
	call_t up = { .method = "PUT", .url = put, .headers = hl, .upload_fd = fd, .upload_len = (curl_off_t)sb.st_size };
	r = perform(&up, what, err);
	curl_slist_free_all(hl);
	hdrs_clear(&up.h);
	if (r < 0)
		return -1;
	if (up.status != 201)
		return lc_error_set(err, LC_EXIT_RUNTIME, 0, "%s: the registry refused the upload (HTTP %ld)", what,
				    up.status);
	st->moved++;
	return 0;
}

int lc_image_push(const char *name, const char *ref, lc_registry_stats_t *st, lc_error_t **err)
{
	memset(st, 0, sizeof(*st));
	_cleanup_free_ char *base = NULL, *repo = NULL, *tag = NULL;
	if (lc_registry_ref(ref, &base, &repo, &tag, err) < 0)
		return -1;
	if (!strncmp(tag, "sha256:", 7))
		return lc_error_set(err, LC_EXIT_USAGE, 0, "push %s: give a tag, not a digest (the manifest names its digest)",
				    ref);
	_cleanup_close_ int gc = lc_image_store_hold(err);
	if (gc < 0 || lc_curllib_load(err) < 0)
		return -1;
	char mhex[LC_HEX_LEN + 1];
	_cleanup_json_ json_t *manifest = NULL;
	if (lc_image_manifest(name, mhex, &manifest, err) < 0)
		return -1;
	json_t *blobs = json_array();
	json_array_append(blobs, json_object_get(manifest, "config"));
	size_t i;
	json_t *l;
	json_array_foreach(json_object_get(manifest, "layers"), i, l)
		json_array_append(blobs, l);
	json_t *d;
	int r = 0;
	json_array_foreach(blobs, i, d) {
		const char *digest = json_string_value(json_object_get(d, "digest"));
		if (!digest || strncmp(digest, "sha256:", 7) || strlen(digest) != 7 + LC_HEX_LEN) {
			r = lc_error_set(err, LC_EXIT_INVALID, 0, "push %s: image %s has a blob without a sha256 digest", ref,
					 name);
			break;
		}
		if ((r = push_blob(base, repo, digest, st, err)) < 0)
			break;
	}
	json_decref(blobs);
	if (r < 0)
		return -1;
	/* the manifest as the store has it: its bytes are its digest */
	_cleanup_free_ char *mpath = lc_image_blob_path(mhex);
	_cleanup_free_ char *mtext = NULL;
	size_t mlen = 0;
	if (lc_read_file(mpath, &mtext, &mlen, err) < 0)
		return -1;
	const char *mt = json_string_value(json_object_get(manifest, "mediaType"));
	_cleanup_free_ char *ct = lc_strdup_printf("Content-Type: %s", mt ? mt : MT_MANIFEST);
	struct curl_slist *hl = curl_slist_append(NULL, ct);
	_cleanup_free_ char *u = url(base, repo, "manifests", tag);
	_cleanup_free_ char *what = lc_strdup_printf("push %s: manifest", ref);
	call_t put = { .method = "PUT", .url = u, .headers = hl, .body = mtext, .body_len = mlen, .upload_fd = -1 };
	r = perform(&put, what, err);
	curl_slist_free_all(hl);
	hdrs_clear(&put.h);
	if (r < 0)
		return -1;
	if (put.status != 201)
		return lc_error_set(err, LC_EXIT_RUNTIME, 0, "%s: the registry refused it (HTTP %ld)", what, put.status);
	snprintf(st->digest, sizeof(st->digest), "sha256:%s", mhex);
	return 0;
}

/* ---- pull ---- */

static int write_blob(const char *layout, const char *hex, const char *data, size_t len, lc_error_t **err)
{
	_cleanup_free_ char *p = lc_strdup_printf("%s/blobs/sha256/%s", layout, hex);
	return lc_write_file_atomic(p, data, len, 0644, err);
}

/* GET a manifest (or index): its bytes checked against want (a digest)
 * when given; *hex their sha256. */
static int get_manifest(const char *base, const char *repo, const char *what_ref, const char *want, char **text,
			size_t *len, char *hex, char **type, lc_error_t **err)
{
	_cleanup_free_ char *u = url(base, repo, "manifests", what_ref);
	_cleanup_free_ char *what = lc_strdup_printf("pull %s/%s: manifest %s", base, repo, what_ref);
	struct curl_slist *hl = curl_slist_append(NULL, "Accept: " MT_MANIFEST ", " MT_INDEX ", " MT_DOCKER_MANIFEST
						  ", " MT_DOCKER_LIST);
	struct buf b = { .max = MANIFEST_MAX };
	call_t c = { .method = "GET", .url = u, .headers = hl, .out = &b, .upload_fd = -1 };
	int r = perform(&c, what, err);
	curl_slist_free_all(hl);
	if (r == 0 && c.status == 404)
		r = lc_error_set(err, LC_EXIT_UNKNOWN, 0, "%s: the registry has no such image", what);
	else if (r == 0 && c.status != 200)
		r = lc_error_set(err, LC_EXIT_RUNTIME, 0, "%s: HTTP %ld", what, c.status);
	if (r == 0) {
		lc_sha256_buf(b.data ? b.data : "", b.len, hex);
		if (want && strcmp(want + 7, hex))
			r = lc_error_set(err, LC_EXIT_INVALID, 0, "%s: its bytes are not %s (sha256:%s)", what, want, hex);
	}
	if (r == 0) {
		*text = b.data ? b.data : strdup("");
		*len = b.len;
		*type = c.h.content_type ? strdup(c.h.content_type) : NULL;
		b.data = NULL;
	}
	free(b.data);
	hdrs_clear(&c.h);
	return r;
}

static json_t *this_platform(json_t *index)
{
	size_t i;
	json_t *d;
	json_array_foreach(json_object_get(index, "manifests"), i, d) {
		json_t *p = json_object_get(d, "platform");
		const char *os = json_string_value(json_object_get(p, "os"));
		const char *arch = json_string_value(json_object_get(p, "architecture"));
#if defined(__x86_64__)
		const char *mine = "amd64";
#elif defined(__aarch64__)
		const char *mine = "arm64";
#else
		const char *mine = "";
#endif
		if ((!os || !strcmp(os, "linux")) && (!arch || !strcmp(arch, mine)))
			return d;
	}
	return NULL;
}

/* A blob into the layout: from the store when it has it, else fetched
 * and checked as it comes. */
static int fetch_blob(const char *base, const char *repo, const char *layout, const char *digest, bool need_copy,
		      lc_registry_stats_t *st, lc_error_t **err)
{
	if (!digest || strncmp(digest, "sha256:", 7) || strlen(digest) != 7 + LC_HEX_LEN)
		return lc_error_set(err, LC_EXIT_INVALID, 0, "pull %s/%s: a blob without a sha256 digest", base, repo);
	const char *hex = digest + 7;
	for (const char *c = hex; *c; c++)
		if (!isxdigit((unsigned char)*c))
			return lc_error_set(err, LC_EXIT_INVALID, 0, "pull %s/%s: bad digest %s", base, repo, digest);
	st->blobs++;
	_cleanup_free_ char *here = lc_image_blob_path(hex);
	_cleanup_free_ char *dst = lc_strdup_printf("%s/blobs/sha256/%s", layout, hex);
	if (access(here, F_OK) == 0) {
		/* the store has it: the import takes it from there (a layer), or
		 * reads it from the layout (the config) */
		if (!need_copy)
			return 0;
		if (link(here, dst) == 0)
			return 0;
		_cleanup_free_ char *data = NULL;
		size_t len;
		if (lc_read_file(here, &data, &len, err) < 0)
			return -1;
		return lc_write_file_atomic(dst, data, len, 0644, err);
	}
	_cleanup_free_ char *tmp = lc_strdup_printf("%s.part", dst);
	_cleanup_close_ int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot create %s", tmp);
	struct sink s = { .fd = fd, .sha = lc_sha256_new() };
	_cleanup_free_ char *u = url(base, repo, "blobs", digest);
	_cleanup_free_ char *what = lc_strdup_printf("pull %s/%s: blob %s", base, repo, digest);
	call_t c = { .method = "GET", .url = u, .sink = &s, .upload_fd = -1 };
	struct curl_slist *hl = curl_slist_append(NULL, "Accept: */*");
	c.headers = hl;
	int r = perform(&c, what, err);
	curl_slist_free_all(hl);
	hdrs_clear(&c.h);
	unsigned char md[32];
	lc_sha256_final(s.sha, md);
	char got[LC_HEX_LEN + 1];
	lc_sha256_hex(md, got);
	if (r == 0 && c.status != 200)
		r = lc_error_set(err, LC_EXIT_RUNTIME, 0, "%s: HTTP %ld", what, c.status);
	if (r == 0 && s.failed)
		r = lc_error_set(err, LC_EXIT_RUNTIME, errno, "%s: cannot write it", what);
	if (r == 0 && strcmp(got, hex))
		r = lc_error_set(err, LC_EXIT_INVALID, 0, "%s: what came is sha256:%s, not the blob asked for", what, got);
	if (r == 0 && rename(tmp, dst) < 0)
		r = lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot rename %s", tmp);
	if (r < 0) {
		unlink(tmp);
		return -1;
	}
	st->moved++;
	return 0;
}

int lc_image_pull(const char *name, const char *ref, unsigned flags, lc_registry_stats_t *st, lc_error_t **err)
{
	memset(st, 0, sizeof(*st));
	_cleanup_free_ char *base = NULL, *repo = NULL, *tag = NULL;
	if (lc_registry_ref(ref, &base, &repo, &tag, err) < 0)
		return -1;
	if (!lc_image_name_valid(name))
		return lc_error_set(err, LC_EXIT_USAGE, 0, "invalid image name '%s'", name);
	int have = lc_image_exists(name, err);
	if (have < 0)
		return -1;
	if (have)
		return lc_error_set(err, LC_EXIT_BUSY, 0, "image %s exists already (remove it first)", name);
	_cleanup_close_ int gc = lc_image_store_hold(err);
	if (gc < 0 || lc_curllib_load(err) < 0)
		return -1;
	_cleanup_free_ char *layout = lc_strdup_printf("%s/tmp/pull-XXXXXX", lc_lib_dir());
	_cleanup_free_ char *tmpd = lc_strdup_printf("%s/tmp", lc_lib_dir());
	if (lc_mkdir_p(tmpd, 0700, err) < 0)
		return -1;
	if (!mkdtemp(layout))
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot create %s", layout);
	_cleanup_free_ char *blobs = lc_strdup_printf("%s/blobs/sha256", layout);
	int r = lc_mkdir_p(blobs, 0755, err);
	_cleanup_free_ char *text = NULL, *type = NULL;
	_cleanup_json_ json_t *manifest = NULL, *desc = NULL;
	size_t len = 0;
	char hex[LC_HEX_LEN + 1];
	if (r == 0)
		r = get_manifest(base, repo, tag, !strncmp(tag, "sha256:", 7) ? tag : NULL, &text, &len, hex, &type, err);
	if (r == 0)
		r = write_blob(layout, hex, text, len, err);
	if (r == 0 && !(manifest = json_loadb(text, len, 0, NULL)))
		r = lc_error_set(err, LC_EXIT_INVALID, 0, "pull %s: the manifest is not JSON", ref);
	const char *mt = manifest ? json_string_value(json_object_get(manifest, "mediaType")) : NULL;
	if (!mt)
		mt = type;
	desc = json_pack("{s:s, s:s+, s:I}", "mediaType", mt ? mt : MT_MANIFEST, "digest", "sha256:", hex, "size",
			 (json_int_t)len);
	if (r == 0 && mt && (!strcmp(mt, MT_INDEX) || !strcmp(mt, MT_DOCKER_LIST))) {
		/* an index: this platform's manifest */
		json_t *d = this_platform(manifest);
		const char *digest = d ? json_string_value(json_object_get(d, "digest")) : NULL;
		free(text);
		text = NULL;
		free(type);
		type = NULL;
		char mhex[LC_HEX_LEN + 1];
		if (!digest)
			r = lc_error_set(err, LC_EXIT_INVALID, 0, "pull %s: no manifest for this platform in its index", ref);
		else
			r = get_manifest(base, repo, digest, digest, &text, &len, mhex, &type, err);
		if (r == 0)
			r = write_blob(layout, mhex, text, len, err);
		json_decref(manifest);
		manifest = r == 0 ? json_loadb(text, len, 0, NULL) : NULL;
		if (r == 0 && !manifest)
			r = lc_error_set(err, LC_EXIT_INVALID, 0, "pull %s: the manifest is not JSON", ref);
	}
	if (r == 0)
		snprintf(st->digest, sizeof(st->digest), "sha256:%s", hex);
	if (r == 0)
		r = fetch_blob(base, repo, layout, json_string_value(json_object_get(json_object_get(manifest, "config"),
										   "digest")),
			       true, st, err);
	size_t i;
	json_t *l;
	json_array_foreach(json_object_get(manifest, "layers"), i, l) {
		if (r < 0)
			break;
		r = fetch_blob(base, repo, layout, json_string_value(json_object_get(l, "digest")), false, st, err);
	}
	if (r == 0)
		r = lc_image_import_layout(layout, desc, name, flags, err);
	if (r < 0)
		lc_error_wrap(err, "pull %s", ref);
	lc_rm_rf(layout, NULL);
	return r;
}
