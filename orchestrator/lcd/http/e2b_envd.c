/* e2b_envd.c — envd, as lcd serves it for the E2B SDKs (E2B_SANDBOX_URL):
 * GET /health, GET and POST /files, and the Connect protocol (JSON) for
 * process.Process and filesystem.Filesystem.  Every call names its
 * sandbox in E2b-Sandbox-Id and carries the sandbox's access token
 * (X-Access-Token); a file URL may carry the SDK's signature instead.  A
 * sandbox that does not run (gone, paused) answers 502, as E2B's proxy
 * does, which the SDK reads as "not running".
 *
 * Nothing runs in the sandbox for envd: commands run through lcd's runner
 * (procs.c), files are read and written by a child of the runner that has
 * joined the sandbox (sbfs.c).  The user an envd call names (Basic auth,
 * or the files' username) is looked up in the sandbox's /etc/passwd; none:
 * the sandbox's own user.  A relative path is taken from the sandbox's
 * working directory, where commands start.
 *
 * Streams (Start, Connect, WatchDir) are Connect server streams: each
 * message a 5-byte envelope and its JSON, the last one the end of the
 * stream ({} or its error); a keepalive goes out when nothing else did for
 * the interval the client asks (Keepalive-Ping-Interval); Connect-Timeout-Ms
 * ends the stream (deadline_exceeded), and for Start it kills the command
 * too, as envd does.  A client that goes away detaches: the command runs
 * on, until it ends or is killed. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <openssl/evp.h>

#include "access.h"
#include "api.h"
#include "e2b.h"
#include "json.h"
#include "procs.h"
#include "reply.h"
#include "runner.h"
#include "sandboxes.h"
#include "util.h"

#define RPC_PREFIX_PROC "/process.Process/"
#define RPC_PREFIX_FS "/filesystem.Filesystem/"
#define WAIT_STEP_MS 1000 /* a stream looks at lcd's state this often */
#define DEADLINE_SLACK_MS 500 /* a client gone this close to the stream's timeout went for it */

bool lcd_envd_path(const char *url)
{
	return !strcmp(url, "/health") || !strcmp(url, "/files") || !strcmp(url, "/envs") ||
	       !strncmp(url, RPC_PREFIX_PROC, strlen(RPC_PREFIX_PROC)) ||
	       !strncmp(url, RPC_PREFIX_FS, strlen(RPC_PREFIX_FS));
}

static bool is_rpc(const char *url)
{
	return !strncmp(url, RPC_PREFIX_PROC, strlen(RPC_PREFIX_PROC)) || !strncmp(url, RPC_PREFIX_FS, strlen(RPC_PREFIX_FS));
}

static const char *header(struct MHD_Connection *c, const char *k)
{
	return MHD_lookup_connection_value(c, MHD_HEADER_KIND, k);
}

static const char *qarg(struct MHD_Connection *c, const char *k)
{
	return MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, k);
}

/* ---- Connect replies ---- */

static enum MHD_Result rpc_reply(struct MHD_Connection *c, json_t *msg)
{
	return api_send(c, 200, api_json_response(msg ? msg : json_object(), JSON_COMPACT, false));
}

static enum MHD_Result rpc_fail(struct MHD_Connection *c, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static enum MHD_Result rpc_fail(struct MHD_Connection *c, const char *code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	json_t *msg = api_vtext(code, fmt, ap);
	va_end(ap);
	json_t *b = json_pack("{s:s, s:o}", "code", code, "message", msg);
	return api_send(c, lcd_connect_http_status(code), api_json_response(b, JSON_COMPACT, false));
}

/* The Connect code of an lcd error: from its errno where it has one
 * (sbfs.c keeps it), else from its exit code. */
static const char *code_of(const lc_error_t *err)
{
	int e = err ? err->errnum : 0;
	switch (e) {
	case ENOENT:
		return "not_found";
	case EEXIST:
		return "already_exists";
	case ENOTDIR:
	case EISDIR:
	case EINVAL:
	case ELOOP:
	case ENAMETOOLONG:
		return "invalid_argument";
	case EACCES:
	case EPERM:
	case EROFS:
		return "permission_denied";
	case ENOSPC:
	case EDQUOT:
		return "resource_exhausted";
	default:
		break;
	}
	switch (err ? err->exit_code : LC_EXIT_RUNTIME) {
	case LC_EXIT_UNKNOWN:
	case LC_EXIT_NOENT:
		return "not_found";
	case LC_EXIT_INVALID:
	case LC_EXIT_USAGE:
		return "invalid_argument";
	case LC_EXIT_PERM:
		return "permission_denied";
	case LC_EXIT_STATE:
		return "failed_precondition";
	case LC_EXIT_BUSY:
		return "resource_exhausted";
	default:
		return "internal";
	}
}

static enum MHD_Result rpc_fail_err(struct MHD_Connection *c, lc_error_t *err)
{
	enum MHD_Result r = rpc_fail(c, code_of(err), "%s", err && err->msg ? err->msg : "internal error");
	lc_error_free(err);
	return r;
}

/* The HTTP status of a failed /files call (envd's: 404, 400, 401, 507). */
static unsigned files_status(const lc_error_t *err)
{
	if (err && err->errnum == EFBIG)
		return 413;
	const char *code = code_of(err);
	if (!strcmp(code, "not_found"))
		return 404;
	if (!strcmp(code, "invalid_argument"))
		return 400;
	if (!strcmp(code, "permission_denied"))
		return 401;
	if (!strcmp(code, "resource_exhausted"))
		return 507;
	return 500;
}

static enum MHD_Result files_fail_err(struct MHD_Connection *c, lc_error_t *err)
{
	enum MHD_Result r = e2b_fail(c, files_status(err), "%s", err && err->msg ? err->msg : "internal error");
	lc_error_free(err);
	return r;
}

/* The sandbox is not there to serve (gone, paused): 502, as E2B's proxy
 * answers, which the SDK takes for "not running". */
static enum MHD_Result not_running(struct MHD_Connection *c, const char *url, const char *id, const char *why)
{
	if (is_rpc(url))
		return rpc_fail(c, "unavailable", "sandbox %s %s", id, why);
	json_t *b = json_pack("{s:i, s:s, s:o}", "code", 502, "sandboxId", id, "message",
			      json_sprintf("sandbox %s %s", id, why));
	return e2b_reply(c, 502, b);
}

/* A request envd refuses (InvalidArgument, 400). */
static int invalid(lc_error_t **err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int invalid(lc_error_t **err, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	lc_error_set(err, LC_EXIT_INVALID, 0, "%s", msg);
	if (err && *err)
		(*err)->errnum = EINVAL;
	return -1;
}

/* ---- the sandbox, the user, paths ---- */

/* The state of a sandbox lcd has a record of: NULL (answered) when it
 * does not run. */
static json_t *running_state(struct MHD_Connection *c, const char *url, const char *id, enum MHD_Result *r)
{
	lc_error_t *err = NULL;
	json_t *st = lc_sandbox_inspect(id, &err);
	const char *s = st ? lc_json_str(st, "status") : NULL;
	if (!s || strcmp(s, "running")) {
		*r = not_running(c, url, id, !s ? "was not found (its timeout may have ended it)"
					   : !strcmp(s, "paused") || !strcmp(s, "stopped") ? "is paused (connect to it to resume it)"
											  : "is not running");
		json_decref(st);
		lc_error_free(err);
		return NULL;
	}
	lc_error_free(err);
	return st;
}

/* "Basic base64(user:)" -> user (malloc'd), NULL when there is none. */
static char *basic_user(const char *h)
{
	if (!h || strncmp(h, "Basic ", 6))
		return NULL;
	const char *b = h + 6;
	size_t n = strlen(b);
	if (!n || n % 4 || n > 1024)
		return NULL;
	unsigned char *out = lc_xmalloc0(n / 4 * 3 + 1);
	int len = EVP_DecodeBlock(out, (const unsigned char *)b, (int)n);
	if (len < 0) {
		free(out);
		return NULL;
	}
	out[len] = '\0';
	char *colon = strchr((char *)out, ':');
	if (colon)
		*colon = '\0';
	if (!out[0]) {
		free(out);
		return NULL;
	}
	return (char *)out;
}

typedef struct who {
	bool set;   /* a user was named */
	uid_t uid;
	gid_t gid;
} who_t;

/* The named user's ids in the sandbox ("root" is 0:0 everywhere). */
static int user_ids(lcd_t *lcd, const char *id, const char *name, who_t *w, lc_error_t **err)
{
	memset(w, 0, sizeof(*w));
	if (!name || !*name)
		return 0;
	w->set = true;
	if (!strcmp(name, "root"))
		return 0;
	_cleanup_json_ json_t *op = json_pack("{s:s, s:s}", "op", "user", "name", name);
	_cleanup_json_ json_t *out = NULL;
	if (lcd_runner_fs(lcd, id, op, &out, NULL, err) < 0)
		return -1;
	w->uid = (uid_t)json_integer_value(json_object_get(out, "uid"));
	w->gid = (gid_t)json_integer_value(json_object_get(out, "gid"));
	return 0;
}

/* path in the sandbox: absolute as given, relative from its workdir. */
static char *sandbox_path(json_t *st, const char *path)
{
	if (!path || !*path)
		return NULL;
	if (path[0] == '/')
		return strdup(path);
	const char *wd = lc_json_str(json_object_get(st, "spec"), "workdir");
	if (!wd || wd[0] != '/')
		wd = "/";
	size_t n = strlen(wd);
	return lc_strdup_printf("%s%s%s", wd, wd[n - 1] == '/' ? "" : "/", path);
}

/* ---- auth ---- */

static bool id_ok(const char *id)
{
	if (!id || strlen(id) != LC_ID_LEN)
		return false;
	for (const char *p = id; *p; p++)
		if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
			return false;
	return true;
}

/* A file URL's signature: good for sandbox id's token? */
static bool signature_for(struct lcd_e2b *srv, struct MHD_Connection *c, const char *method, const char *id)
{
	const char *sig = qarg(c, "signature");
	if (!sig)
		return false;
	char tok[LCD_E2B_TOKEN_LEN + 1];
	lcd_e2b_token(srv->key, id, tok);
	const char *path = qarg(c, "path");
	bool ok = lcd_e2b_signature_ok(sig, qarg(c, "signature_expiration"), path ? path : "",
				       !strcmp(method, "GET") ? "read" : "write", qarg(c, "username"), tok,
				       lc_wall_ms() / 1000);
	explicit_bzero(tok, sizeof(tok));
	return ok;
}

/* A signed file URL without E2b-Sandbox-Id (a download link handed on):
 * the sandbox whose token signed it. */
static bool sandbox_by_signature(struct lcd_e2b *srv, struct MHD_Connection *c, const char *method, char *id)
{
	static const lcd_caller_t op = { .operator = true };
	_cleanup_json_ json_t *rows = lcd_sandbox_list(srv->lcd, &op, NULL, NULL, NULL, NULL);
	size_t i;
	json_t *v;
	json_array_foreach(rows, i, v) {
		const char *cand = lc_json_str(v, "id");
		if (cand && signature_for(srv, c, method, cand)) {
			snprintf(id, LC_ID_LEN + 1, "%s", cand);
			return true;
		}
	}
	return false;
}

static enum MHD_Result unauthorized(struct MHD_Connection *c, const char *url, const char *why)
{
	if (is_rpc(url))
		return rpc_fail(c, "unauthenticated", "%s", why);
	return e2b_fail(c, 401, "%s", why);
}

/* ---- uploads (POST /files) ---- */

struct envd_upload {
	lcd_t *lcd;
	char id[LC_ID_LEN + 1];
	json_t *st;              /* the sandbox's state (workdir) */
	who_t who;
	char *query_path;        /* ?path= */
	struct MHD_PostProcessor *pp;
	int fd;                  /* the file being written */
	bool part_open;
	unsigned long long part_bytes;
	char *part_name;         /* the part's filename */
	json_t *written;         /* [{name, type, path, metadata}] */
	json_t *metadata;        /* X-Metadata-KEY headers: every file's */
	lc_error_t *err;         /* the first failure: the rest is dropped */
	unsigned long long bytes;
};

static void upload_close_part(envd_upload_t *u)
{
	if (u->fd >= 0)
		close(u->fd);
	u->fd = -1;
	u->part_open = false;
	free(u->part_name);
	u->part_name = NULL;
}

/* The next file: opened (made, its parents too) in the sandbox.  With
 * ?path= (a single write, and what a signed URL signs) the file goes there
 * whatever the part calls it, and one file only; without it, each part's
 * file name is its path (the SDK's multi-file write). */
static int upload_open(envd_upload_t *u, const char *name)
{
	if (u->query_path && json_array_size(u->written))
		return invalid(&u->err, "one file per upload with ?path= (name each part's path instead)");
	_cleanup_free_ char *path = sandbox_path(u->st, u->query_path ? u->query_path : name);
	if (!path)
		return invalid(&u->err, "no path for the file: give ?path= or a file name");
	_cleanup_json_ json_t *op = json_pack("{s:s, s:s}", "op", "write", "path", path);
	if (!op)
		return invalid(&u->err, "the path is not UTF-8");
	if (u->who.set) {
		json_object_set_new(op, "uid", json_integer(u->who.uid));
		json_object_set_new(op, "gid", json_integer(u->who.gid));
	}
	json_object_set(op, "metadata", u->metadata);
	_cleanup_json_ json_t *out = NULL;
	if (lcd_runner_fs(u->lcd, u->id, op, &out, &u->fd, &u->err) < 0)
		return -1;
	json_t *w = json_pack("{s:O, s:s, s:O}", "name", json_object_get(out, "name"), "type", "file", "path",
			      json_object_get(out, "path"));
	if (json_object_size(json_object_get(out, "metadata")))
		json_object_set(w, "metadata", json_object_get(out, "metadata"));
	json_array_append_new(u->written, w);
	u->part_open = true;
	u->part_bytes = 0;
	u->part_name = strdup(name ? name : "");
	return 0;
}

static void upload_write(envd_upload_t *u, const char *data, size_t n)
{
	if (u->err || !n)
		return;
	if (u->bytes + n > u->lcd->max_upload) { /* a body of unsaid length, past max_upload */
		lc_error_set(&u->err, LC_EXIT_INVALID, 0, "upload to sandbox %s: more than lcd takes in one (max_upload %llu)",
			     u->id, u->lcd->max_upload);
		if (u->err)
			u->err->errnum = EFBIG;
		return;
	}
	if (lc_write_all(u->fd, data, n) < 0) {
		int e = errno;
		lc_error_set(&u->err, LC_EXIT_RUNTIME, 0, "writing a file in sandbox %s: %s", u->id, strerror(e));
		if (u->err)
			u->err->errnum = e; /* ENOSPC: 507 */
	}
	u->part_bytes += n;
	u->bytes += n;
}

static enum MHD_Result upload_iter(void *cls, enum MHD_ValueKind kind, const char *key, const char *filename,
				   const char *content_type, const char *transfer_encoding, const char *data,
				   uint64_t off, size_t size)
{
	(void)kind;
	(void)content_type;
	(void)transfer_encoding;
	envd_upload_t *u = cls;
	if (u->err)
		return MHD_YES;
	if (!key || strcmp(key, "file"))
		return MHD_YES; /* other fields: not ours */
	/* a new part: offset 0, unless it continues an empty start of the same one */
	bool same = u->part_open && !u->part_bytes && !strcmp(u->part_name ? u->part_name : "", filename ? filename : "");
	if (off == 0 && !same) {
		upload_close_part(u);
		if (upload_open(u, filename) < 0)
			return MHD_YES;
	}
	upload_write(u, data, size);
	return MHD_YES;
}

static void upload_free(envd_upload_t *u)
{
	if (!u)
		return;
	if (u->pp)
		MHD_destroy_post_processor(u->pp);
	upload_close_part(u);
	json_decref(u->st);
	json_decref(u->written);
	json_decref(u->metadata);
	lc_error_free(u->err);
	free(u->query_path);
	free(u);
}

#define META_HEADER "X-Metadata-"
#define META_KEY_MAX 246   /* the xattr name limit less "user.e2b." */
#define META_TOTAL_MAX 4096

struct meta_scan {
	json_t *meta;
	size_t total;
	char *bad; /* the first header refused, and why */
};

static bool printable(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e)
			return false;
	return true;
}

/* X-Metadata-KEY: VALUE headers: the file's metadata, keys lowercased, the
 * first of a key's headers kept, as envd does. */
static enum MHD_Result meta_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	(void)kind;
	struct meta_scan *m = cls;
	size_t pl = strlen(META_HEADER);
	if (m->bad || !key || strncasecmp(key, META_HEADER, pl))
		return MHD_YES;
	const char *k = key + pl;
	size_t n = strlen(k);
	if (!n || n > META_KEY_MAX || !printable(k) || strchr(k, ' ') || !value || !printable(value)) {
		m->bad = lc_strdup_printf("%s: a metadata key is 1 to %d token characters, its value printable ASCII",
					  key, META_KEY_MAX);
		return MHD_YES;
	}
	_cleanup_free_ char *lower = strdup(k);
	for (char *p = lower; *p; p++)
		*p = (char)tolower((unsigned char)*p);
	if (json_object_get(m->meta, lower))
		return MHD_YES;
	m->total += strlen("user.e2b.") + n + strlen(value);
	if (m->total > META_TOTAL_MAX) {
		m->bad = lc_strdup_printf("metadata: at most %d bytes in all (keys, values, user.e2b. per key)",
					  META_TOTAL_MAX);
		return MHD_YES;
	}
	json_object_set_new(m->meta, lower, json_string(value));
	return MHD_YES;
}

static bool upload_begin(struct lcd_e2b *srv, struct MHD_Connection *c, e2b_req_t *rq, json_t *st, const who_t *w,
			 enum MHD_Result *r)
{
	const char *ct = header(c, "Content-Type");
	const char *enc = header(c, "Content-Encoding");
	const char *cl = header(c, MHD_HTTP_HEADER_CONTENT_LENGTH);
	if (cl && strtoull(cl, NULL, 10) > srv->lcd->max_upload) {
		*r = e2b_fail(c, 413, "upload of %s bytes: more than lcd takes in one (max_upload %llu)", cl,
			      srv->lcd->max_upload);
		return false;
	}
	if (enc && strcmp(enc, "identity")) {
		*r = e2b_fail(c, 400, "Content-Encoding %s: lcd's envd takes uploads uncompressed (no gzip)", enc);
		return false;
	}
	envd_upload_t *u = lc_xmalloc0(sizeof(*u));
	u->lcd = srv->lcd;
	snprintf(u->id, sizeof(u->id), "%s", rq->sandbox);
	u->st = json_incref(st);
	u->who = *w;
	u->fd = -1;
	u->written = json_array();
	struct meta_scan ms = { .meta = json_object() };
	MHD_get_connection_values(c, MHD_HEADER_KIND, meta_header, &ms);
	u->metadata = ms.meta;
	if (ms.bad) {
		rq->upload = u;
		*r = e2b_fail(c, 400, "%s", ms.bad);
		free(ms.bad);
		return false;
	}
	const char *qp = qarg(c, "path");
	u->query_path = qp ? strdup(qp) : NULL;
	rq->upload = u;
	if (ct && !strncmp(ct, "multipart/form-data", 19)) {
		u->pp = MHD_create_post_processor(c, 64 * 1024, upload_iter, u);
		if (!u->pp) {
			*r = e2b_fail(c, 400, "a multipart upload without a boundary");
			return false;
		}
		return true;
	}
	if (ct && strncmp(ct, "application/octet-stream", 24)) {
		*r = e2b_fail(c, 400, "Content-Type %s: expected multipart/form-data or application/octet-stream", ct);
		return false;
	}
	if (!u->query_path) {
		*r = e2b_fail(c, 400, "an octet-stream upload needs ?path=");
		return false;
	}
	if (upload_open(u, NULL) < 0) {
		lc_error_t *e = lc_steal(u->err);
		*r = files_fail_err(c, e);
		return false;
	}
	return true;
}

void lcd_envd_upload_data(e2b_req_t *rq, const char *data, size_t n)
{
	envd_upload_t *u = rq->upload;
	if (u->pp) {
		if (!u->err && MHD_post_process(u->pp, data, n) != MHD_YES)
			invalid(&u->err, "the multipart upload is malformed");
	} else {
		upload_write(u, data, n);
	}
}

static enum MHD_Result upload_end(struct MHD_Connection *c, envd_upload_t *u)
{
	if (u->pp) { /* what it still holds goes to the last file first */
		MHD_destroy_post_processor(u->pp);
		u->pp = NULL;
	}
	upload_close_part(u);
	if (u->err) {
		lc_error_t *e = lc_steal(u->err);
		return files_fail_err(c, e);
	}
	if (!json_array_size(u->written))
		return e2b_fail(c, 400, "the upload has no file in it (a part named \"file\")");
	lcd_log("e2b: sandbox %s: %llu bytes written to %zu file(s)", u->id, u->bytes, json_array_size(u->written));
	return e2b_reply(c, 200, json_incref(u->written));
}

void lcd_envd_req_free(e2b_req_t *rq)
{
	upload_free(rq->upload);
	rq->upload = NULL;
}

/* ---- the headers ---- */

bool lcd_envd_begin(struct lcd_e2b *srv, struct MHD_Connection *c, const char *method, const char *url,
		    e2b_req_t *rq, enum MHD_Result *r)
{
	const char *port = header(c, "E2b-Sandbox-Port");
	const char *id = header(c, "E2b-Sandbox-Id");
	if (port && strcmp(port, LCD_ENVD_PORT)) {
		*r = not_running(c, url, id ? id : "?", "has no service lcd can reach on that port: lcd serves envd ("
						       LCD_ENVD_PORT ") only");
		return false;
	}
	bool files = !strcmp(url, "/files");
	if (!id && files && sandbox_by_signature(srv, c, method, rq->sandbox)) {
		id = rq->sandbox;
	} else if (!id_ok(id)) {
		*r = unauthorized(c, url, "no sandbox named (E2b-Sandbox-Id), or not a sandbox id");
		return false;
	} else {
		snprintf(rq->sandbox, sizeof(rq->sandbox), "%s", id);
		char tok[LCD_E2B_TOKEN_LEN + 1];
		lcd_e2b_token(srv->key, id, tok);
		bool ok = lcd_e2b_same(header(c, "X-Access-Token"), tok);
		explicit_bzero(tok, sizeof(tok));
		if (!ok && !(files && signature_for(srv, c, method, id))) {
			*r = unauthorized(c, url, "wrong or missing access token (X-Access-Token) for the sandbox");
			return false;
		}
	}
	if (!files || strcmp(method, "POST"))
		return true;
	/* an upload: its file is opened now, and written as the body comes */
	_cleanup_json_ json_t *st = running_state(c, url, rq->sandbox, r);
	if (!st)
		return false;
	_cleanup_free_ char *uname = qarg(c, "username") ? strdup(qarg(c, "username")) : NULL;
	who_t w;
	lc_error_t *err = NULL;
	if (user_ids(srv->lcd, rq->sandbox, uname, &w, &err) < 0) {
		*r = e2b_fail(c, 401, "%s", err->msg);
		lc_error_free(err);
		return false;
	}
	return upload_begin(srv, c, rq, st, &w, r);
}

/* ---- GET /files ---- */

static enum MHD_Result h_download(struct lcd_e2b *srv, struct MHD_Connection *c, const char *url, e2b_req_t *rq)
{
	enum MHD_Result r;
	_cleanup_json_ json_t *st = running_state(c, url, rq->sandbox, &r);
	if (!st)
		return r;
	_cleanup_free_ char *path = sandbox_path(st, qarg(c, "path"));
	if (!path)
		return e2b_fail(c, 400, "path: the query must name the file (?path=)");
	_cleanup_json_ json_t *op = json_pack("{s:s, s:s}", "op", "read", "path", path);
	if (!op)
		return e2b_fail(c, 400, "path: not UTF-8");
	_cleanup_json_ json_t *out = NULL;
	lc_error_t *err = NULL;
	int fd = -1;
	if (lcd_runner_fs(srv->lcd, rq->sandbox, op, &out, &fd, &err) < 0)
		return files_fail_err(c, err);
	json_int_t size = json_integer_value(json_object_get(out, "size"));
	struct MHD_Response *resp = MHD_create_response_from_fd((uint64_t)size, fd);
	if (!resp) {
		close(fd);
		return e2b_fail(c, 500, "cannot send %s", path);
	}
	MHD_add_response_header(resp, "Content-Type", "application/octet-stream");
	enum MHD_Result ret = MHD_queue_response(c, 200, resp);
	MHD_destroy_response(resp);
	return ret;
}

/* ---- JSON of protobuf messages ---- */

/* A field by its JSON name or its proto name. */
static json_t *field(json_t *o, const char *json_name, const char *proto_name)
{
	json_t *v = json_object_get(o, json_name);
	return v ? v : proto_name ? json_object_get(o, proto_name) : NULL;
}

static const char *fstr(json_t *o, const char *json_name, const char *proto_name)
{
	return json_string_value(field(o, json_name, proto_name));
}

/* An integer field: a number or a string of one; dflt when absent. */
static long long fint(json_t *o, const char *json_name, const char *proto_name, long long dflt)
{
	json_t *v = field(o, json_name, proto_name);
	if (json_is_integer(v))
		return json_integer_value(v);
	if (json_is_string(v))
		return strtoll(json_string_value(v), NULL, 10);
	return dflt;
}

static unsigned char *b64_decode(const char *s, size_t *len)
{
	size_t n = strlen(s);
	_cleanup_free_ char *padded = lc_xmalloc0(n + 4);
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		padded[k++] = s[i] == '-' ? '+' : s[i] == '_' ? '/' : s[i];
	while (k % 4)
		padded[k++] = '=';
	unsigned char *out = lc_xmalloc0(k / 4 * 3 + 1);
	int r = k ? EVP_DecodeBlock(out, (const unsigned char *)padded, (int)k) : 0;
	if (r < 0) {
		free(out);
		return NULL;
	}
	size_t pad = 0;
	while (pad < 2 && k > pad && padded[k - 1 - pad] == '=')
		pad++;
	*len = (size_t)r - pad;
	return out;
}

static json_t *b64_json(const unsigned char *d, size_t n)
{
	char *out = lc_xmalloc0(4 * ((n + 2) / 3) + 1);
	int len = EVP_EncodeBlock((unsigned char *)out, d, (int)n);
	json_t *j = json_stringn(out, len > 0 ? (size_t)len : 0);
	free(out);
	return j;
}

/* sbfs's entry as filesystem.EntryInfo. */
static json_t *entry_info(json_t *e)
{
	const char *t = lc_json_str(e, "type");
	const char *type = !t ? "FILE_TYPE_UNSPECIFIED" : !strcmp(t, "file") ? "FILE_TYPE_FILE"
			   : !strcmp(t, "dir") ? "FILE_TYPE_DIRECTORY" : !strcmp(t, "symlink") ? "FILE_TYPE_SYMLINK"
			   : "FILE_TYPE_UNSPECIFIED";
	char mtime[40];
	lcd_e2b_time_ns(json_integer_value(json_object_get(e, "mtime_ns")), mtime);
	json_t *o = json_pack("{s:O, s:s, s:O, s:o, s:O, s:O, s:O, s:O, s:s}", "name", json_object_get(e, "name"), "type",
			      type, "path", json_object_get(e, "path"), "size",
			      json_sprintf("%lld", (long long)json_integer_value(json_object_get(e, "size"))), "mode",
			      json_object_get(e, "mode"), "permissions", json_object_get(e, "permissions"), "owner",
			      json_object_get(e, "owner"), "group", json_object_get(e, "group"), "modifiedTime", mtime);
	json_t *target = json_object_get(e, "symlink_target");
	if (target)
		json_object_set(o, "symlinkTarget", target);
	json_t *meta = json_object_get(e, "metadata");
	if (json_object_size(meta))
		json_object_set(o, "metadata", meta);
	return o;
}

/* ---- streams ---- */

enum { S_PROC, S_WATCH };

typedef struct estream {
	lcd_t *lcd;
	int kind;
	int conn;
	lcd_proc_sub_t *sub;  /* S_PROC */
	int watch;            /* S_WATCH: the watcher's socket */
	char *wbuf;           /* its partial line */
	size_t wlen;
	bool watch_eof;
	long long deadline;   /* ms (monotonic), 0: none */
	long long keepalive;  /* ms between keepalives, 0: none */
	long long last_sent;
	char *pending;        /* an envelope not yet handed to MHD */
	size_t plen, poff;
	bool finished;        /* the end of the stream is pending or sent */
	bool owns;            /* Start's: the command dies at the stream's timeout */
} estream_t;

static void stream_put(estream_t *s, uint8_t flags, json_t *msg)
{
	size_t len;
	char *env = lcd_connect_envelope(flags, msg, &len);
	json_decref(msg);
	size_t left = s->pending ? s->plen - s->poff : 0;
	char *buf = lc_xmalloc0(left + len);
	if (left)
		memcpy(buf, s->pending + s->poff, left);
	memcpy(buf + left, env, len);
	free(env);
	free(s->pending);
	s->pending = buf;
	s->plen = left + len;
	s->poff = 0;
	s->last_sent = lc_now_ms();
}

static void stream_end(estream_t *s, const char *code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void stream_end(estream_t *s, const char *code, const char *fmt, ...)
{
	char *msg = NULL;
	if (fmt) {
		va_list ap;
		va_start(ap, fmt);
		if (vasprintf(&msg, fmt, ap) < 0)
			msg = NULL;
		va_end(ap);
	}
	stream_put(s, LCD_CONNECT_END, lcd_connect_end(code, msg));
	free(msg);
	s->finished = true;
}

/* Go's name of a signal, as envd's status says it ("signal: killed"). */
static char *signal_status(int sig)
{
	const char *d = strsignal(sig);
	char *s = lc_strdup_printf("signal: %s", d ? d : "unknown");
	if (s[8] >= 'A' && s[8] <= 'Z')
		s[8] = (char)(s[8] - 'A' + 'a');
	return s;
}

static json_t *proc_event_json(const lcd_proc_ev_t *e)
{
	json_t *ev = NULL;
	switch (e->kind) {
	case LCD_PROC_START:
		ev = json_pack("{s:{s:I}}", "start", "pid", (json_int_t)e->pid);
		break;
	case LCD_PROC_STDOUT:
	case LCD_PROC_STDERR:
	case LCD_PROC_PTY:
		ev = json_pack("{s:{s:o}}", "data", e->kind == LCD_PROC_STDOUT ? "stdout" : e->kind == LCD_PROC_STDERR ? "stderr" : "pty",
			       b64_json(e->data, e->len));
		break;
	default: {
		json_t *end;
		if (e->error) {
			end = json_pack("{s:i, s:b, s:s, s:s}", "exitCode", -1, "exited", 0, "status", "error", "error", e->error);
		} else if (e->signal) {
			_cleanup_free_ char *st = signal_status(e->signal);
			end = json_pack("{s:i, s:b, s:s, s:s}", "exitCode", -1, "exited", 0, "status", st, "error", st);
		} else {
			_cleanup_free_ char *st = lc_strdup_printf("exit status %d", e->exit_code);
			end = json_pack("{s:i, s:b, s:s}", "exitCode", e->exit_code, "exited", 1, "status", st);
			if (e->exit_code)
				json_object_set_new(end, "error", json_string(st));
		}
		ev = json_pack("{s:o}", "end", end);
	}
	}
	return json_pack("{s:o}", "event", ev);
}

/* What the watcher wrote: each whole line an event. */
static void watch_lines(estream_t *s)
{
	char buf[16384];
	ssize_t n;
	while ((n = read(s->watch, buf, sizeof(buf))) > 0) {
		s->wbuf = realloc(s->wbuf, s->wlen + (size_t)n + 1);
		memcpy(s->wbuf + s->wlen, buf, (size_t)n);
		s->wlen += (size_t)n;
	}
	if (n == 0)
		s->watch_eof = true;
	char *nl;
	while (s->wlen && (nl = memchr(s->wbuf, '\n', s->wlen))) {
		size_t line = (size_t)(nl - s->wbuf);
		json_t *e = json_loadb(s->wbuf, line, 0, NULL);
		memmove(s->wbuf, nl + 1, s->wlen - line - 1);
		s->wlen -= line + 1;
		if (!e)
			continue;
		const char *t = lc_json_str(e, "type");
		const char *type = !t ? NULL : !strcmp(t, "create") ? "EVENT_TYPE_CREATE" : !strcmp(t, "write") ? "EVENT_TYPE_WRITE"
				   : !strcmp(t, "remove") ? "EVENT_TYPE_REMOVE" : !strcmp(t, "rename") ? "EVENT_TYPE_RENAME"
				   : !strcmp(t, "chmod") ? "EVENT_TYPE_CHMOD" : NULL;
		if (type) {
			json_t *ev = json_pack("{s:O, s:s}", "name", json_object_get(e, "name"), "type", type);
			if (json_object_get(e, "entry"))
				json_object_set_new(ev, "entry", entry_info(json_object_get(e, "entry")));
			stream_put(s, 0, json_pack("{s:o}", "filesystem", ev));
		}
		json_decref(e);
	}
}

static bool lcd_stopping(lcd_t *lcd)
{
	pthread_mutex_lock(&lcd->lock);
	bool stop = lcd->stopping;
	pthread_mutex_unlock(&lcd->lock);
	return stop;
}

/* Fill s->pending: the next messages, waiting for them as long as needed. */
static bool stream_fill(estream_t *s)
{
	while (!s->pending || s->poff >= s->plen) {
		if (s->finished)
			return false;
		if (s->kind == S_PROC) {
			lcd_proc_ev_t *e = lcd_proc_sub_next(s->sub);
			if (e) {
				stream_put(s, 0, proc_event_json(e));
				if (e->kind == LCD_PROC_END)
					stream_end(s, NULL, NULL);
				lcd_proc_ev_free(e);
				continue;
			}
			if (lcd_proc_sub_overflowed(s->sub)) {
				stream_end(s, "resource_exhausted", "the client read the output too slowly: output was lost");
				continue;
			}
		} else {
			watch_lines(s);
			if (s->pending && s->poff < s->plen)
				continue;
			if (s->watch_eof) {
				stream_end(s, NULL, NULL); /* the directory is gone */
				continue;
			}
		}
		long long now = lc_now_ms();
		if (s->deadline && now >= s->deadline) {
			if (s->owns && s->sub)
				lcd_proc_sub_kill(s->sub); /* before the client hears of it */
			stream_end(s, "deadline_exceeded", "the stream ran for its timeout (Connect-Timeout-Ms)");
			continue;
		}
		if (s->keepalive && now - s->last_sent >= s->keepalive) {
			stream_put(s, 0, s->kind == S_PROC ? json_pack("{s:{s:{}}}", "event", "keepalive")
							   : json_pack("{s:{}}", "keepalive"));
			continue;
		}
		if (lcd_stopping(s->lcd)) {
			stream_end(s, "unavailable", "lcd is stopping");
			continue;
		}
		long long wait = WAIT_STEP_MS;
		if (s->deadline && s->deadline - now < wait)
			wait = s->deadline - now;
		if (s->keepalive && s->last_sent + s->keepalive - now < wait)
			wait = s->last_sent + s->keepalive - now;
		struct pollfd p[2] = { { s->kind == S_PROC ? lcd_proc_sub_fd(s->sub) : s->watch, POLLIN, 0 },
				       { s->conn, POLLRDHUP, 0 } };
		if (poll(p, 2, wait < 0 ? 0 : (int)wait) < 0 && errno != EINTR)
			return false;
		if (p[1].revents & (POLLRDHUP | POLLHUP | POLLERR)) {
			/* the client went away: detach.  At the stream's timeout, it
			 * went because of it (its clock runs a little ahead of ours):
			 * the command started with that timeout dies now, not a
			 * moment after the client has heard that it did. */
			if (s->owns && s->sub && s->deadline && lc_now_ms() >= s->deadline - DEADLINE_SLACK_MS)
				lcd_proc_sub_kill(s->sub);
			return false;
		}
	}
	return true;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	(void)pos;
	estream_t *s = cls;
	if (!stream_fill(s))
		return s->finished ? MHD_CONTENT_READER_END_OF_STREAM : MHD_CONTENT_READER_END_WITH_ERROR;
	size_t n = s->plen - s->poff < max ? s->plen - s->poff : max;
	memcpy(buf, s->pending + s->poff, n);
	s->poff += n;
	return (ssize_t)n;
}

static void stream_free(void *cls)
{
	estream_t *s = cls;
	lcd_proc_sub_free(s->sub);
	if (s->watch >= 0)
		close(s->watch);
	free(s->wbuf);
	free(s->pending);
	free(s);
}

static int conn_fd(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
	return ci ? ci->connect_fd : -1;
}

static estream_t *stream_new(lcd_t *lcd, struct MHD_Connection *c, int kind)
{
	estream_t *s = lc_xmalloc0(sizeof(*s));
	s->lcd = lcd;
	s->kind = kind;
	s->conn = conn_fd(c);
	s->watch = -1;
	s->last_sent = lc_now_ms();
	const char *to = header(c, "Connect-Timeout-Ms"), *ka = header(c, "Keepalive-Ping-Interval");
	long long t = to ? strtoll(to, NULL, 10) : 0, k = ka ? strtoll(ka, NULL, 10) : 0;
	if (t > 0)
		s->deadline = s->last_sent + t;
	if (k > 0)
		s->keepalive = k * 1000;
	return s;
}

static enum MHD_Result stream_reply(struct MHD_Connection *c, estream_t *s)
{
	struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 64 * 1024, stream_read, s, stream_free);
	MHD_add_response_header(r, "Content-Type", "application/connect+json");
	enum MHD_Result ret = MHD_queue_response(c, 200, r);
	MHD_destroy_response(r);
	return ret;
}

/* A stream that fails before its first message: 200, and its end. */
static enum MHD_Result stream_fail(lcd_t *lcd, struct MHD_Connection *c, lc_error_t *err)
{
	estream_t *s = stream_new(lcd, c, S_PROC);
	stream_end(s, code_of(err), "%s", err && err->msg ? err->msg : "internal error");
	lc_error_free(err);
	return stream_reply(c, s);
}

/* ---- process.Process ---- */

typedef struct rpc {
	struct lcd_e2b *srv;
	struct MHD_Connection *c;
	const char *url;
	const char *id;
	json_t *msg;
	json_t *st; /* the sandbox's state */
} rpc_t;

/* The Basic auth user of a call, looked up: false (answered) on failure. */
static bool call_user(rpc_t *r, who_t *w, enum MHD_Result *ret, bool stream)
{
	_cleanup_free_ char *name = basic_user(header(r->c, "Authorization"));
	lc_error_t *err = NULL;
	if (user_ids(r->srv->lcd, r->id, name, w, &err) == 0)
		return true;
	lc_error_t *e = NULL;
	lc_error_set(&e, LC_EXIT_PERM, 0, "invalid user %s: %s", name, err->msg);
	lc_error_free(err);
	if (stream) {
		estream_t *s = stream_new(r->srv->lcd, r->c, S_PROC);
		stream_end(s, "unauthenticated", "%s", e->msg);
		lc_error_free(e);
		*ret = stream_reply(r->c, s);
	} else {
		*ret = rpc_fail(r->c, "unauthenticated", "%s", e->msg);
		lc_error_free(e);
	}
	return false;
}

static bool selector(json_t *msg, lcd_proc_sel_t *sel)
{
	json_t *p = json_object_get(msg, "process");
	json_t *tag = json_object_get(p, "tag");
	memset(sel, 0, sizeof(*sel));
	if (json_is_string(tag)) {
		sel->tag = json_string_value(tag);
		return true;
	}
	long long pid = fint(p, "pid", NULL, -1);
	if (pid < 0)
		return false;
	sel->pid = (unsigned)pid;
	return true;
}

/* Has the sandbox /bin/bash?  The host image has when the host has;
 * another image's sandbox is asked once (a stat through the runner) and
 * remembered, by its id, in a small table. */
static bool has_bash(struct lcd_e2b *srv, const char *id, json_t *st)
{
	if (!lc_json_str(st, "image") && !lc_json_str(st, "rootfs"))
		return srv->host_bash;
	size_t slot = 0;
	for (const char *p = id; *p; p++)
		slot = slot * 31 + (unsigned char)*p;
	slot %= LCD_E2B_BASH_CACHE;
	pthread_mutex_lock(&srv->bash_lock);
	bool known = !strcmp(srv->bash[slot].id, id), yes = srv->bash[slot].yes;
	pthread_mutex_unlock(&srv->bash_lock);
	if (known)
		return yes;
	_cleanup_json_ json_t *op = json_pack("{s:s, s:s, s:b}", "op", "stat", "path", "/bin/bash", "follow", 1);
	_cleanup_json_ json_t *out = NULL;
	lc_error_t *err = NULL;
	if (lcd_runner_fs(srv->lcd, id, op, &out, NULL, &err) < 0) {
		bool absent = err && err->errnum == ENOENT;
		lc_error_free(err);
		if (!absent)
			return false; /* not known: the shell's test decides, this once */
		yes = false;
	} else {
		json_t *e = json_object_get(out, "entry");
		yes = !strcmp(lc_json_str(e, "type") ?: "", "file") &&
		      (json_integer_value(json_object_get(e, "mode")) & 0111);
	}
	pthread_mutex_lock(&srv->bash_lock);
	snprintf(srv->bash[slot].id, sizeof(srv->bash[slot].id), "%s", id);
	srv->bash[slot].yes = yes;
	pthread_mutex_unlock(&srv->bash_lock);
	return yes;
}

/* The command of a Start: cmd and args as given, but /bin/bash through
 * /bin/sh when the image has no bash (the SDK runs every command with
 * /bin/bash -l -c): the shell's test then picks one or the other. */
static char **start_argv(json_t *proc, bool bash)
{
	const char *cmd = fstr(proc, "cmd", NULL);
	char **argv = NULL;
	if (!strcmp(cmd, "/bin/bash") && !bash) {
		lc_strv_push(&argv, "/bin/sh");
		lc_strv_push(&argv, "-c");
		lc_strv_push(&argv, "if [ -x /bin/bash ]; then exec /bin/bash \"$@\"; fi; exec /bin/sh \"$@\"");
	}
	lc_strv_push(&argv, cmd);
	size_t i;
	json_t *a;
	json_array_foreach(json_object_get(proc, "args"), i, a)
		if (json_is_string(a))
			lc_strv_push(&argv, json_string_value(a));
	return argv;
}

static enum MHD_Result p_start(rpc_t *r)
{
	lcd_t *lcd = r->srv->lcd;
	enum MHD_Result ret;
	json_t *proc = json_object_get(r->msg, "process");
	const char *cmd = fstr(proc, "cmd", NULL);
	json_t *envs = json_object_get(proc, "envs"), *args = json_object_get(proc, "args");
	lc_error_t *err = NULL;
	if (!cmd || !*cmd || strlen(cmd) != json_string_length(json_object_get(proc, "cmd"))) {
		invalid(&err, "process.cmd: expected the command to run");
		return stream_fail(lcd, r->c, err);
	}
	if ((args && !json_is_array(args)) || (envs && !json_is_object(envs))) {
		invalid(&err, "process: args must be an array, envs an object");
		return stream_fail(lcd, r->c, err);
	}
	who_t w;
	if (!call_user(r, &w, &ret, true))
		return ret;
	/* its environment: the sandbox's secrets, then the request's */
	_cleanup_strv_ char **env = NULL;
	_cleanup_json_ json_t *row = NULL;
	static const lcd_caller_t op = { .operator = true };
	if (!(row = lcd_sandbox_find(lcd, &op, r->id, &err)) || lcd_sandbox_secret_env(lcd, row, &env, &err) < 0)
		return stream_fail(lcd, r->c, err);
	const char *k;
	json_t *v;
	json_object_foreach(envs, k, v) {
		if (!*k || strchr(k, '=') || !json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v)) {
			invalid(&err, "process.envs.%s: expected a name and a string", k);
			return stream_fail(lcd, r->c, err);
		}
		_cleanup_free_ char *kv = lc_strdup_printf("%s=%s", k, json_string_value(v));
		lc_strv_push(&env, kv);
	}
	/* its working directory must be there, as envd checks */
	_cleanup_free_ char *cwd = sandbox_path(r->st, fstr(proc, "cwd", NULL));
	if (cwd) {
		_cleanup_json_ json_t *sop = json_pack("{s:s, s:s, s:b}", "op", "stat", "path", cwd, "follow", 1);
		_cleanup_json_ json_t *out = NULL;
		lc_error_t *e = NULL;
		if (!sop || lcd_runner_fs(lcd, r->id, sop, &out, NULL, &e) < 0 ||
		    strcmp(lc_json_str(json_object_get(out, "entry"), "type"), "dir")) {
			lc_error_free(e);
			invalid(&err, "cwd '%s' does not exist (or is not a directory)", cwd);
			return stream_fail(lcd, r->c, err);
		}
	}
	json_t *pty = json_object_get(r->msg, "pty"), *size = json_object_get(pty, "size");
	json_t *stdin_v = json_object_get(r->msg, "stdin");
	_cleanup_strv_ char **argv = start_argv(proc, !strcmp(cmd, "/bin/bash") && has_bash(r->srv, r->id, r->st));
	estream_t *s = stream_new(lcd, r->c, S_PROC);
	_cleanup_json_ json_t *config = json_pack("{s:s}", "cmd", cmd);
	json_object_set_new(config, "args", args ? json_incref(args) : json_array());
	json_object_set_new(config, "envs", envs ? json_incref(envs) : json_object());
	if (cwd)
		json_object_set_new(config, "cwd", json_string(cwd));
	lcd_proc_cfg_t cfg = {
		.argv = argv,
		.env = env,
		.workdir = cwd,
		.user_set = w.set,
		.uid = w.uid,
		.gid = w.gid,
		/* envd keeps stdin open unless told not to */
		.stdin_open = !pty && (!stdin_v || json_is_true(stdin_v)),
		.pty = pty != NULL && !json_is_null(pty),
		.cols = (unsigned)fint(size, "cols", NULL, 80),
		.rows = (unsigned)fint(size, "rows", NULL, 24),
		.tag = fstr(r->msg, "tag", NULL),
		.timeout_ms = s->deadline ? s->deadline - s->last_sent : 0,
		.config = config,
	};
	s->owns = true;
	if (lcd_proc_start(lcd, r->id, &cfg, &s->sub, &err) < 0) {
		stream_end(s, code_of(err), "%s", err->msg);
		lc_error_free(err);
	}
	return stream_reply(r->c, s);
}

static enum MHD_Result p_connect(rpc_t *r)
{
	lcd_proc_sel_t sel;
	lc_error_t *err = NULL;
	if (!selector(r->msg, &sel)) {
		invalid(&err, "process: expected a pid or a tag");
		return stream_fail(r->srv->lcd, r->c, err);
	}
	estream_t *s = stream_new(r->srv->lcd, r->c, S_PROC);
	s->sub = lcd_proc_connect(r->srv->lcd, r->id, &sel, &err);
	if (!s->sub) {
		stream_end(s, "not_found", "%s", err ? err->msg : "no such process");
		lc_error_free(err);
	}
	return stream_reply(r->c, s);
}

static enum MHD_Result p_list(rpc_t *r)
{
	_cleanup_json_ json_t *list = lcd_proc_list(r->srv->lcd, r->id);
	json_t *out = json_array();
	size_t i;
	json_t *p;
	json_array_foreach(list, i, p) {
		json_t *e = json_pack("{s:O, s:O}", "config", json_object_get(p, "config"), "pid", json_object_get(p, "pid"));
		if (json_object_get(p, "tag"))
			json_object_set(e, "tag", json_object_get(p, "tag"));
		json_array_append_new(out, e);
	}
	return rpc_reply(r->c, json_pack("{s:o}", "processes", out));
}

static enum MHD_Result p_input(rpc_t *r)
{
	lcd_proc_sel_t sel;
	if (!selector(r->msg, &sel))
		return rpc_fail(r->c, "invalid_argument", "process: expected a pid or a tag");
	json_t *in = json_object_get(r->msg, "input");
	const char *data = fstr(in, "stdin", NULL);
	bool pty = false;
	if (!data && (data = fstr(in, "pty", NULL)))
		pty = true;
	if (!data)
		return rpc_fail(r->c, "invalid_argument", "input: expected stdin or pty bytes");
	size_t len = 0;
	_cleanup_free_ unsigned char *bytes = b64_decode(data, &len);
	if (!bytes)
		return rpc_fail(r->c, "invalid_argument", "input: not base64");
	lc_error_t *err = NULL;
	if (lcd_proc_input(r->srv->lcd, r->id, &sel, bytes, len, pty, &err) < 0)
		return rpc_fail_err(r->c, err);
	return rpc_reply(r->c, json_object());
}

static enum MHD_Result p_signal(rpc_t *r)
{
	lcd_proc_sel_t sel;
	if (!selector(r->msg, &sel))
		return rpc_fail(r->c, "invalid_argument", "process: expected a pid or a tag");
	json_t *sv = json_object_get(r->msg, "signal");
	int sig = json_is_integer(sv) ? (int)json_integer_value(sv)
		  : json_is_string(sv) && !strcmp(json_string_value(sv), "SIGNAL_SIGKILL") ? SIGKILL
		  : json_is_string(sv) && !strcmp(json_string_value(sv), "SIGNAL_SIGTERM") ? SIGTERM : 0;
	if (sig != SIGKILL && sig != SIGTERM)
		return rpc_fail(r->c, "invalid_argument", "signal: expected SIGNAL_SIGKILL or SIGNAL_SIGTERM");
	lc_error_t *err = NULL;
	if (lcd_proc_signal(r->srv->lcd, r->id, &sel, sig, &err) < 0)
		return rpc_fail_err(r->c, err);
	return rpc_reply(r->c, json_object());
}

static enum MHD_Result p_close_stdin(rpc_t *r)
{
	lcd_proc_sel_t sel;
	if (!selector(r->msg, &sel))
		return rpc_fail(r->c, "invalid_argument", "process: expected a pid or a tag");
	lc_error_t *err = NULL;
	if (lcd_proc_close_stdin(r->srv->lcd, r->id, &sel, &err) < 0)
		return rpc_fail_err(r->c, err);
	return rpc_reply(r->c, json_object());
}

static enum MHD_Result p_update(rpc_t *r)
{
	lcd_proc_sel_t sel;
	if (!selector(r->msg, &sel))
		return rpc_fail(r->c, "invalid_argument", "process: expected a pid or a tag");
	json_t *size = json_object_get(json_object_get(r->msg, "pty"), "size");
	if (!size)
		return rpc_reply(r->c, json_object()); /* nothing to change */
	lc_error_t *err = NULL;
	if (lcd_proc_resize(r->srv->lcd, r->id, &sel, (unsigned)fint(size, "cols", NULL, 0),
			    (unsigned)fint(size, "rows", NULL, 0), &err) < 0)
		return rpc_fail_err(r->c, err);
	return rpc_reply(r->c, json_object());
}

/* ---- filesystem.Filesystem ---- */

/* One sbfs operation on path (and to) for the call's user: its result. */
static json_t *fs_call(rpc_t *r, const char *what, const char *path_key, json_t *extra, enum MHD_Result *ret)
{
	who_t w;
	if (!call_user(r, &w, ret, false))
		return NULL;
	_cleanup_free_ char *path = sandbox_path(r->st, fstr(r->msg, path_key, NULL));
	if (!path) {
		*ret = rpc_fail(r->c, "invalid_argument", "%s: expected a path", path_key);
		return NULL;
	}
	_cleanup_json_ json_t *op = json_pack("{s:s, s:s}", "op", what, "path", path);
	if (!op) {
		*ret = rpc_fail(r->c, "invalid_argument", "%s: not UTF-8", path_key);
		return NULL;
	}
	if (extra)
		json_object_update(op, extra);
	if (w.set) {
		json_object_set_new(op, "uid", json_integer(w.uid));
		json_object_set_new(op, "gid", json_integer(w.gid));
	}
	json_t *out = NULL;
	lc_error_t *err = NULL;
	if (lcd_runner_fs(r->srv->lcd, r->id, op, &out, NULL, &err) < 0) {
		*ret = rpc_fail_err(r->c, err);
		return NULL;
	}
	return out;
}

static enum MHD_Result f_entry(rpc_t *r, const char *what, const char *path_key, json_t *extra)
{
	enum MHD_Result ret;
	_cleanup_json_ json_t *out = fs_call(r, what, path_key, extra, &ret);
	json_decref(extra);
	if (!out)
		return ret;
	return rpc_reply(r->c, json_pack("{s:o}", "entry", entry_info(json_object_get(out, "entry"))));
}

static enum MHD_Result f_list(rpc_t *r)
{
	enum MHD_Result ret;
	long long depth = fint(r->msg, "depth", NULL, 1);
	_cleanup_json_ json_t *extra = json_pack("{s:I}", "depth", (json_int_t)(depth < 1 ? 1 : depth));
	_cleanup_json_ json_t *out = fs_call(r, "list", "path", extra, &ret);
	if (!out)
		return ret;
	json_t *entries = json_array();
	size_t i;
	json_t *e;
	json_array_foreach(json_object_get(out, "entries"), i, e)
		json_array_append_new(entries, entry_info(e));
	return rpc_reply(r->c, json_pack("{s:o}", "entries", entries));
}

static enum MHD_Result f_move(rpc_t *r)
{
	const char *to = fstr(r->msg, "destination", NULL);
	_cleanup_free_ char *dst = sandbox_path(r->st, to);
	if (!dst)
		return rpc_fail(r->c, "invalid_argument", "destination: expected a path");
	return f_entry(r, "move", "source", json_pack("{s:s}", "to", dst));
}

static enum MHD_Result f_remove(rpc_t *r)
{
	enum MHD_Result ret;
	_cleanup_json_ json_t *out = fs_call(r, "remove", "path", NULL, &ret);
	if (!out)
		return ret;
	return rpc_reply(r->c, json_object());
}

static enum MHD_Result f_watch(rpc_t *r)
{
	lcd_t *lcd = r->srv->lcd;
	enum MHD_Result ret;
	who_t w;
	if (!call_user(r, &w, &ret, true))
		return ret;
	lc_error_t *err = NULL;
	_cleanup_free_ char *path = sandbox_path(r->st, fstr(r->msg, "path", NULL));
	if (!path) {
		invalid(&err, "path: expected the directory to watch");
		return stream_fail(lcd, r->c, err);
	}
	_cleanup_json_ json_t *op = json_pack("{s:s, s:b, s:b}", "path", path, "recursive",
					      json_is_true(field(r->msg, "recursive", NULL)), "include_entry",
					      json_is_true(field(r->msg, "includeEntry", "include_entry")));
	if (!op) {
		invalid(&err, "path: not UTF-8");
		return stream_fail(lcd, r->c, err);
	}
	estream_t *s = stream_new(lcd, r->c, S_WATCH);
	if (lcd_runner_watch(lcd, r->id, op, &s->watch, &err) < 0) {
		stream_end(s, code_of(err), "%s", err->msg);
		lc_error_free(err);
		return stream_reply(r->c, s);
	}
	fcntl(s->watch, F_SETFL, fcntl(s->watch, F_GETFL) | O_NONBLOCK);
	stream_put(s, 0, json_pack("{s:{}}", "start"));
	return stream_reply(r->c, s);
}

/* ---- dispatch ---- */

static enum MHD_Result h_rpc(struct lcd_e2b *srv, struct MHD_Connection *c, const char *url, e2b_req_t *rq)
{
	bool proc = !strncmp(url, RPC_PREFIX_PROC, strlen(RPC_PREFIX_PROC));
	const char *method = url + strlen(proc ? RPC_PREFIX_PROC : RPC_PREFIX_FS);
	bool streaming = (proc && (!strcmp(method, "Start") || !strcmp(method, "Connect"))) ||
			 (!proc && !strcmp(method, "WatchDir"));
	const char *ct = header(c, "Content-Type");
	if (ct && (strstr(ct, "proto") || (streaming != !strncmp(ct, "application/connect+", 20))))
		return rpc_fail(c, "invalid_argument", "Content-Type %s: lcd's envd speaks the Connect protocol with JSON "
						      "(application/json, application/connect+json for streams)", ct);
	enum MHD_Result ret;
	_cleanup_json_ json_t *st = running_state(c, url, rq->sandbox, &ret);
	if (!st)
		return ret;
	json_t *msg = NULL;
	if (streaming) {
		const char *why = NULL;
		msg = lcd_connect_unwrap(rq->body, rq->len, &why);
		if (!msg)
			return rpc_fail(c, "invalid_argument", "%s", why);
	} else {
		msg = rq->len ? json_loadb(rq->body, rq->len, 0, NULL) : json_object();
		if (!json_is_object(msg)) {
			json_decref(msg);
			return rpc_fail(c, "invalid_argument", "the request is not a JSON object");
		}
	}
	_cleanup_json_ json_t *hold = msg;
	rpc_t r = { .srv = srv, .c = c, .url = url, .id = rq->sandbox, .msg = msg, .st = st };
	if (proc) {
		if (!strcmp(method, "Start"))
			return p_start(&r);
		if (!strcmp(method, "Connect"))
			return p_connect(&r);
		if (!strcmp(method, "List"))
			return p_list(&r);
		if (!strcmp(method, "SendInput"))
			return p_input(&r);
		if (!strcmp(method, "SendSignal"))
			return p_signal(&r);
		if (!strcmp(method, "CloseStdin"))
			return p_close_stdin(&r);
		if (!strcmp(method, "Update"))
			return p_update(&r);
	} else {
		if (!strcmp(method, "Stat"))
			return f_entry(&r, "stat", "path", NULL);
		if (!strcmp(method, "MakeDir"))
			return f_entry(&r, "mkdir", "path", NULL);
		if (!strcmp(method, "Move"))
			return f_move(&r);
		if (!strcmp(method, "ListDir"))
			return f_list(&r);
		if (!strcmp(method, "Remove"))
			return f_remove(&r);
		if (!strcmp(method, "WatchDir"))
			return f_watch(&r);
	}
	return rpc_fail(c, "unimplemented", "%s%s: not served by lcd's envd (see contrib/e2b)", proc ? "process." : "filesystem.",
			method);
}

enum MHD_Result lcd_envd_handle(struct lcd_e2b *srv, struct MHD_Connection *c, const char *method, const char *url,
				e2b_req_t *rq)
{
	enum MHD_Result r;
	if (!strcmp(url, "/health")) {
		json_t *st = running_state(c, url, rq->sandbox, &r);
		if (!st)
			return r;
		json_decref(st);
		return e2b_reply(c, 204, NULL);
	}
	if (!strcmp(url, "/files")) {
		if (!strcmp(method, "GET"))
			return h_download(srv, c, url, rq);
		if (!strcmp(method, "POST") && rq->upload)
			return upload_end(c, rq->upload);
		return e2b_fail(c, 405, "%s /files: expected GET or POST", method);
	}
	if (!strcmp(url, "/envs")) {
		_cleanup_json_ json_t *st = running_state(c, url, rq->sandbox, &r);
		if (!st)
			return r;
		json_t *out = json_object();
		size_t i;
		json_t *kv;
		json_array_foreach(json_object_get(json_object_get(st, "spec"), "env"), i, kv) {
			const char *s = json_string_value(kv), *eq = s ? strchr(s, '=') : NULL;
			if (eq) {
				_cleanup_free_ char *k = strndup(s, (size_t)(eq - s));
				json_object_set_new(out, k, json_string(eq + 1));
			}
		}
		return e2b_reply(c, 200, out);
	}
	if (strcmp(method, "POST"))
		return rpc_fail(c, "unimplemented", "%s %s: Connect calls are POSTs", method, url);
	return h_rpc(srv, c, url, rq);
}
