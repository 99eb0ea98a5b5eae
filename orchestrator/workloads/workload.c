/* workload.c — arguments, config, result and failure of a workload
 * program (see workload.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "json.h"
#include "patch_contract.h"
#include "util.h"
#include "workload.h"

static const char *prog = "workload";

void wl_set_name(const char *name)
{
	prog = name;
}

const char *wl_name(void)
{
	return prog;
}

static const char *env_or(const char *key, const char *def)
{
	const char *v = getenv(key);
	return v && *v ? v : def;
}

json_t *wl_args(lc_error_t **err)
{
	const char *path = env_or("LC_TASK_ARGS", "/run/task/args.json");
	json_error_t je;
	json_t *a = json_load_file(path, JSON_DECODE_ANY, &je);
	if (!a) {
		if (errno == ENOENT && !getenv("LC_TASK_ARGS"))
			return json_object(); /* run by hand, outside a task */
		lc_error_set(err, WL_EXIT_USAGE, 0, "cannot read the arguments %s: %s", path, je.text);
		return NULL;
	}
	if (json_is_null(a)) {
		json_decref(a);
		return json_object();
	}
	if (!json_is_object(a)) {
		json_decref(a);
		lc_error_set(err, WL_EXIT_USAGE, 0, "the arguments must be a JSON object");
		return NULL;
	}
	return a;
}

const char *wl_config(const char *key, const char *def)
{
	return env_or(key, def);
}

long long wl_config_int(const char *key, long long def, long long min, long long max, lc_error_t **err)
{
	const char *v = wl_config(key, NULL);
	if (!v)
		return def;
	char *end = NULL;
	errno = 0;
	long long n = strtoll(v, &end, 10);
	if (errno || end == v || *end || n < min || n > max)
		return lc_error_set(err, WL_EXIT_USAGE, 0, "config %s: expected a number from %lld to %lld, not '%s'", key,
				    min, max, v);
	return n;
}

int wl_result(json_t *result)
{
	const char *path = env_or("LC_TASK_RESULT", "/run/task/result.json");
	_cleanup_free_ char *text = json_dumps(result, JSON_INDENT(2) | JSON_ENCODE_ANY | JSON_SORT_KEYS);
	if (!text) {
		fprintf(stderr, "%s: cannot encode the result\n", prog);
		return -1;
	}
	lc_error_t *err = NULL;
	size_t n = strlen(text);
	text = realloc(text, n + 2);
	text[n] = '\n';
	text[n + 1] = '\0';
	if (lc_write_file_atomic(path, text, n + 1, 0644, &err) < 0) {
		lc_error_print(err, prog);
		lc_error_free(err);
		return -1;
	}
	return 0;
}

static int fail_msg(int code, json_t *extra, const char *msg)
{
	fprintf(stderr, "%s: %s\n", prog, msg);
	json_t *r = json_is_object(extra) ? extra : json_object();
	if (extra && r != extra)
		json_decref(extra);
	json_object_set_new(r, "error", json_string(msg)); /* msg is valid UTF-8 (wl_printable) */
	wl_result(r);
	json_decref(r);
	return code;
}

int wl_fail(int code, json_t *extra, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	_cleanup_free_ char *raw = NULL;
	if (vasprintf(&raw, fmt, ap) < 0)
		raw = NULL;
	va_end(ap);
	_cleanup_free_ char *msg = wl_printable(raw ? raw : "out of memory", raw ? strlen(raw) : 13, 4096);
	return fail_msg(code, extra, msg);
}

int wl_fail_err(int code, json_t *extra, lc_error_t *err)
{
	int r = wl_fail(code, extra, "%s", err && err->msg ? err->msg : "failed");
	lc_error_free(err);
	return r;
}

/* s[0..len) as valid UTF-8: every byte that starts no well-formed
 * sequence becomes '?'; controls too unless keep_space (\t \n \r kept). */
static char *utf8_clean(const char *s, size_t len, bool keep_space)
{
	char *out = lc_xmalloc0(len + 1);
	size_t o = 0, i = 0;
	while (i < len) {
		size_t ok = pc_utf8_valid_prefix((const unsigned char *)s + i, len - i);
		for (size_t k = 0; k < ok; k++) {
			unsigned char c = (unsigned char)s[i + k];
			bool ctl = c < 0x20 || c == 0x7f;
			if (ctl && !(keep_space && (c == '\n' || c == '\t' || c == '\r')))
				c = '?';
			out[o++] = (char)c;
		}
		i += ok;
		if (i < len) {
			out[o++] = '?';
			i++;
		}
	}
	out[o] = '\0';
	return out;
}

/* Cut s to at most max bytes at a character boundary. */
static size_t utf8_cut(const char *s, size_t len, size_t max)
{
	if (len <= max)
		return len;
	while (max > 0 && ((unsigned char)s[max] & 0xc0) == 0x80)
		max--;
	return max;
}

char *wl_printable(const char *s, size_t len, size_t max)
{
	_cleanup_free_ char *c = utf8_clean(s, len, false);
	size_t n = strlen(c);
	size_t keep = utf8_cut(c, n, max);
	if (keep == n)
		return lc_steal(c);
	return lc_strdup_printf("%.*s…", (int)keep, c);
}

char *wl_tail(const char *s, size_t len, size_t max)
{
	_cleanup_free_ char *c = utf8_clean(s, len, true);
	size_t n = strlen(c);
	if (n <= max)
		return lc_steal(c);
	size_t start = n - max;
	while (start < n && ((unsigned char)c[start] & 0xc0) == 0x80)
		start++;
	return lc_strdup_printf("[… %zu bytes before]\n%s", start, c + start);
}

/* ---- trees of files, into sandboxes ---- */

static int tree_walk(int dfd, const char *prefix, json_t *files, size_t *total, size_t max_files, size_t max_bytes,
		     lc_error_t **err)
{
	_cleanup_dir_ DIR *d = fdopendir(dfd);
	if (!d) {
		close(dfd);
		return lc_error_set(err, WL_EXIT_USAGE, errno, "%s", *prefix ? prefix : ".");
	}
	struct dirent *e;
	_cleanup_strv_ char **names = NULL;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && strcmp(e->d_name, "__pycache__"))
			lc_strv_push(&names, e->d_name);
	/* sorted: a model and a test see the same order every time */
	lc_strv_sort(names);
	size_t n = lc_strv_len(names);
	for (size_t i = 0; i < n; i++) {
		_cleanup_free_ char *rel = *prefix ? lc_strdup_printf("%s/%s", prefix, names[i]) : strdup(names[i]);
		int fd = openat(dirfd(d), names[i], O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
		if (fd < 0) {
			if (errno == ELOOP)
				continue; /* a symbolic link: not part of the tree */
			return lc_error_set(err, WL_EXIT_USAGE, errno, "%s", rel);
		}
		struct stat st;
		if (fstat(fd, &st) < 0) {
			close(fd);
			return lc_error_set(err, WL_EXIT_USAGE, errno, "%s", rel);
		}
		if (S_ISDIR(st.st_mode)) {
			if (tree_walk(fd, rel, files, total, max_files, max_bytes, err) < 0)
				return -1;
			continue;
		}
		_cleanup_close_ int ffd = fd;
		if (!S_ISREG(st.st_mode))
			continue;
		if (json_array_size(files) >= max_files || *total + (size_t)st.st_size > max_bytes)
			return lc_error_set(err, WL_EXIT_USAGE, 0, "more than %zu files or %zu bytes", max_files, max_bytes);
		_cleanup_free_ char *buf = lc_xmalloc0((size_t)st.st_size + 1);
		ssize_t got = lc_read_all(ffd, buf, (size_t)st.st_size);
		if (got < 0)
			return lc_error_set(err, WL_EXIT_USAGE, errno, "%s", rel);
		json_t *content = json_stringn(buf, (size_t)got);
		if (!content)
			return lc_error_set(err, WL_EXIT_USAGE, 0, "%s is not UTF-8 text", rel);
		*total += (size_t)got;
		json_array_append_new(files, json_pack("{s:s, s:o, s:i}", "path", rel, "content", content, "mode",
						       (int)(st.st_mode & 0755)));
	}
	return 0;
}

json_t *wl_tree_read(const char *dir, size_t max_files, size_t max_bytes, lc_error_t **err)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		lc_error_set(err, WL_EXIT_USAGE, errno, "%s", dir);
		return NULL;
	}
	json_t *files = json_array();
	size_t total = 0;
	if (tree_walk(fd, "", files, &total, max_files, max_bytes, err) < 0) {
		json_decref(files);
		lc_error_wrap(err, "%s", dir);
		return NULL;
	}
	if (json_array_size(files) == 0) {
		json_decref(files);
		lc_error_set(err, WL_EXIT_USAGE, 0, "%s has no files", dir);
		return NULL;
	}
	return files;
}

json_t *wl_tree_find(json_t *files, const char *path)
{
	size_t i;
	json_t *f;
	json_array_foreach(files, i, f) {
		if (!strcmp(lc_json_str(f, "path"), path))
			return json_object_get(f, "content");
	}
	return NULL;
}

int wl_sh(lcc_t *c, const char *id, const char *user, const char *workdir, const char *cmd, json_t *env,
	  long timeout_s, lcc_exec_result_t *res, lc_error_t **err)
{
	_cleanup_json_ json_t *req = json_pack("{s:s, s:s}", "cmd", cmd, "workdir", workdir ? workdir : "/");
	if (user)
		json_object_set_new(req, "user", json_string(user));
	if (env)
		json_object_set(req, "env", env);
	if (timeout_s > 0)
		json_object_set_new(req, "timeout", json_integer(timeout_s));
	return lcc_sandbox_exec(c, id, req, res, err);
}

int wl_tree_upload(lcc_t *c, const char *id, const char *root, const char *user, json_t *files, lc_error_t **err)
{
	/* the directories: root's mkdir, then handed to user */
	_cleanup_free_ char *qroot = lc_shell_quote(root), *quser = lc_shell_quote(user);
	_cleanup_free_ char *cmd = lc_strdup_printf("mkdir -p %s", qroot);
	size_t i;
	json_t *f;
	json_array_foreach(files, i, f) {
		const char *p = lc_json_str(f, "path");
		const char *slash = strrchr(p, '/');
		if (!slash)
			continue;
		_cleanup_free_ char *dir = lc_strdup_printf("%s/%.*s", root, (int)(slash - p), p);
		_cleanup_free_ char *q = lc_shell_quote(dir);
		char *n = lc_strdup_printf("%s %s", cmd, q);
		free(cmd);
		cmd = n;
	}
	char *n = lc_strdup_printf("%s && chown -R %s %s", cmd, quser, qroot);
	free(cmd);
	cmd = n;
	lcc_exec_result_t res;
	if (wl_sh(c, id, "0:0", "/", cmd, NULL, 120, &res, err) < 0)
		return -1;
	int rc = res.exit_code;
	_cleanup_free_ char *tail = wl_tail(res.err, res.err_len, 400);
	lcc_exec_result_clear(&res);
	if (rc != 0)
		return lc_error_set(err, WL_EXIT_LCD, 0, "cannot make %s in sandbox %s: %s", root, id, tail);
	json_array_foreach(files, i, f) {
		json_t *content = json_object_get(f, "content");
		json_t *mode = json_object_get(f, "mode");
		_cleanup_free_ char *dst =
			lc_strdup_printf("%s/%s", root, lc_json_str(f, "path"));
		if (lcc_sandbox_upload(c, id, dst, json_string_value(content), json_string_length(content),
				       json_is_integer(mode) ? (unsigned)json_integer_value(mode) : 0644, err) < 0)
			return lc_error_wrap(err, "uploading %s", dst);
	}
	return 0;
}
