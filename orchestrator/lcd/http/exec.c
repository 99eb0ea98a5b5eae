/* exec.c — commands in a sandbox over the API: exec with its output
 * captured (capped), exec streamed as NDJSON lines as the output happens,
 * and sessions (a shell's working directory and variables carried from
 * one run to the next).
 *
 * A command runs with lc_sandbox_exec() (in a child of lcd's runner,
 * runner.c) waited for by a thread of its own; its stdout and stderr are
 * pipes that the request's thread reads (and its stdin, when given, a
 * pipe it writes).  The command is killed when the client goes
 * away, when lcd stops, on its timeout, or when its session is deleted
 * (lc_exec_opts_t.cancel_fd).  The secrets the sandbox was given reach the
 * command's environment from lcd's store at each exec, never from disk. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <openssl/evp.h>

#include "api.h"
#include "exec.h"
#include "json.h"
#include "reply.h"
#include "runner.h"
#include "sandboxes.h"
#include "util.h"

#define OUTPUT_CAP (1 << 20)        /* captured bytes per stream, by default */
#define OUTPUT_CAP_MAX (64 << 20)
#define STDIN_MAX (16 << 20)
#define EXEC_TIMEOUT_MAX (7 * 86400)
#define DRAIN_MS 200                /* output read after the command ended */
#define SESSIONS_MAX 16             /* per sandbox */
#define CHUNK 16384

/* ---- text ---- */

/* Length of the longest prefix of s[0..n) that does not end inside a
 * UTF-8 sequence (final: everything). */
static size_t utf8_complete(const unsigned char *s, size_t n, bool final)
{
	if (final || n == 0)
		return n;
	size_t i = n, back = 0;
	while (i > 0 && back < 4 && (s[i - 1] & 0xC0) == 0x80) {
		i--;
		back++;
	}
	if (i == 0)
		return n;
	unsigned char lead = s[i - 1];
	size_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
	return need > back + 1 ? i - 1 : n;
}

/* s as a JSON string: invalid UTF-8 becomes U+FFFD. */
static json_t *utf8_json(const unsigned char *s, size_t n)
{
	json_t *j = json_stringn((const char *)s, n);
	if (j)
		return j;
	char *out = lc_xmalloc0(n * 3 + 1);
	size_t o = 0;
	for (size_t i = 0; i < n;) {
		unsigned char c = s[i];
		size_t len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
		bool ok = len > 0 && i + len <= n && c != 0;
		for (size_t k = 1; ok && k < len; k++)
			ok = (s[i + k] & 0xC0) == 0x80;
		if (ok && len > 1) {
			/* no overlong forms, surrogates or values beyond U+10FFFF */
			unsigned cp = c & (0x7F >> len);
			for (size_t k = 1; k < len; k++)
				cp = (cp << 6) | (s[i + k] & 0x3F);
			ok = !(len == 2 && cp < 0x80) && !(len == 3 && cp < 0x800) && !(len == 4 && cp < 0x10000) &&
			     !(cp >= 0xD800 && cp <= 0xDFFF) && cp <= 0x10FFFF;
		}
		if (ok) {
			memcpy(out + o, s + i, len);
			o += len;
			i += len;
		} else {
			memcpy(out + o, "\xEF\xBF\xBD", 3);
			o += 3;
			i++;
		}
	}
	j = json_stringn(out, o);
	free(out);
	return j ? j : json_string("");
}

static json_t *b64_json(const unsigned char *s, size_t n)
{
	char *out = lc_xmalloc0(4 * ((n + 2) / 3) + 1);
	int len = EVP_EncodeBlock((unsigned char *)out, s, (int)n);
	json_t *j = json_stringn(out, len > 0 ? (size_t)len : 0);
	free(out);
	return j;
}

static int b64_decode(const char *in, size_t n, unsigned char **out, size_t *len, lc_error_t **err)
{
	if (n % 4)
		return lc_error_set(err, LC_EXIT_INVALID, 0, "stdin: expected base64");
	*out = lc_xmalloc0(n / 4 * 3 + 1);
	int r = n ? EVP_DecodeBlock(*out, (const unsigned char *)in, (int)n) : 0;
	if (r < 0) {
		free(*out);
		*out = NULL;
		return lc_error_set(err, LC_EXIT_INVALID, 0, "stdin: expected base64");
	}
	size_t pad = 0;
	while (pad < 2 && n > pad && in[n - 1 - pad] == '=')
		pad++;
	*len = (size_t)r - pad;
	return 0;
}

/* Refuse keys a request does not take (a typo must not pass silently). */
static int check_keys(json_t *b, const char *const *keys, lc_error_t **err)
{
	if (!b)
		return 0;
	if (!json_is_object(b))
		return lc_error_set(err, LC_EXIT_INVALID, 0, "request body: expected a JSON object");
	return lcd_check_keys(b, "", keys, err);
}

/* ---- one command ---- */

typedef struct xrun {
	lcd_t *lcd;
	char id[LC_ID_LEN + 1];
	lc_exec_opts_t opts;
	char **argv, **env;
	int in_w, out_r, err_r;  /* our ends */
	int child[3];            /* the command's ends, closed when it ended */
	int cancel[2];           /* a byte on [1]: kill the command */
	int done[2];             /* the thread wrote a byte on [1]: ended */
	pthread_t th;
	bool started, ended, cancelled;
	int rc;
	lc_result_t res;
	lc_error_t *err;
	unsigned char *in;       /* stdin to write, then in_w is closed */
	size_t in_len, in_off;
	long long drain_until;   /* ms: after the end, read what is left until then */
	bool open[2];            /* stdout, stderr not at EOF */
} xrun_t;

static void xrun_free(xrun_t *x)
{
	if (!x)
		return;
	int *fds[] = { &x->in_w, &x->out_r, &x->err_r, &x->child[0], &x->child[1], &x->child[2],
		       &x->cancel[0], &x->cancel[1], &x->done[0], &x->done[1] };
	for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
		if (*fds[i] >= 0)
			close(*fds[i]);
	lc_strv_free(x->argv);
	for (size_t i = 0; x->env && x->env[i]; i++)
		explicit_bzero(x->env[i], strlen(x->env[i]));
	lc_strv_free(x->env);
	free((char *)x->opts.workdir);
	free(x->in);
	lc_error_free(x->err);
	free(x);
}

static void *xrun_thread(void *arg)
{
	xrun_t *x = arg;
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	x->rc = lcd_runner_exec(x->lcd, x->id, &x->opts, &x->res, &x->err);
	for (int i = 0; i < 3; i++) {
		if (x->child[i] >= 0)
			close(x->child[i]);
		x->child[i] = -1;
	}
	(void)!write(x->done[1], "x", 1);
	return NULL;
}

/* The command's description from a request (exec: argv or cmd; session:
 * shell); env gets the sandbox's secrets first. */
static int xrun_parse(lcd_t *lcd, json_t *row, json_t *b, xrun_t *x, lc_error_t **err)
{
	if (b && !json_is_object(b))
		return lc_error_set(err, LC_EXIT_INVALID, 0, "request body: expected a JSON object");
	json_t *v;
	if (lcd_sandbox_secret_env(lcd, row, &x->env, err) < 0 ||
	    lcd_env_parse(json_object_get(b, "env"), "env", &x->env, err) < 0)
		return -1;
	if ((v = json_object_get(b, "workdir"))) {
		if (!lcd_sandbox_path_ok(json_string_value(v)))
			return lc_error_set(err, LC_EXIT_INVALID, 0, "workdir: expected an absolute path without '..'");
		x->opts.workdir = strdup(json_string_value(v));
	}
	if ((v = json_object_get(b, "user"))) {
		if (lcd_user_parse(v, "user", &x->opts.uid, &x->opts.gid, err) < 0)
			return -1;
		x->opts.user_set = true;
	}
	if ((v = json_object_get(b, "timeout"))) {
		if (!json_is_integer(v) || json_integer_value(v) <= 0 || json_integer_value(v) > EXEC_TIMEOUT_MAX)
			return lc_error_set(err, LC_EXIT_INVALID, 0, "timeout: expected seconds, 1 to %d", EXEC_TIMEOUT_MAX);
		x->opts.timeout = (int)json_integer_value(v);
	}
	if ((v = json_object_get(b, "stdin"))) {
		if (!json_is_string(v) || json_string_length(v) > (size_t)STDIN_MAX / 3 * 4)
			return lc_error_set(err, LC_EXIT_INVALID, 0, "stdin: expected base64 of at most %d bytes", STDIN_MAX);
		if (b64_decode(json_string_value(v), json_string_length(v), &x->in, &x->in_len, err) < 0)
			return -1;
	}
	return 0;
}

static int xrun_argv(json_t *b, xrun_t *x, lc_error_t **err)
{
	json_t *argv = json_object_get(b, "argv"), *cmd = json_object_get(b, "cmd");
	if (!!argv == !!cmd)
		return lc_error_set(err, LC_EXIT_INVALID, 0, "request body: give either argv (an array) or cmd (a shell line)");
	if (cmd) {
		if (!json_is_string(cmd) || !json_string_length(cmd) || strlen(json_string_value(cmd)) != json_string_length(cmd))
			return lc_error_set(err, LC_EXIT_INVALID, 0, "cmd: expected a non-empty shell command line");
		lc_strv_push(&x->argv, "/bin/sh");
		lc_strv_push(&x->argv, "-c");
		lc_strv_push(&x->argv, json_string_value(cmd));
		return 0;
	}
	if (!json_is_array(argv) || !json_array_size(argv))
		return lc_error_set(err, LC_EXIT_INVALID, 0, "argv: expected a non-empty array of strings");
	size_t i;
	json_t *e;
	json_array_foreach(argv, i, e) {
		if (!json_is_string(e) || strlen(json_string_value(e)) != json_string_length(e))
			return lc_error_set(err, LC_EXIT_INVALID, 0, "argv[%zu]: expected a string", i);
		lc_strv_push(&x->argv, json_string_value(e));
	}
	return 0;
}

static xrun_t *xrun_new(lcd_t *lcd, const char *id)
{
	xrun_t *x = lc_xmalloc0(sizeof(*x));
	x->lcd = lcd;
	snprintf(x->id, sizeof(x->id), "%s", id);
	x->in_w = x->out_r = x->err_r = -1;
	x->child[0] = x->child[1] = x->child[2] = -1;
	x->cancel[0] = x->cancel[1] = x->done[0] = x->done[1] = -1;
	return x;
}

/* Is the sandbox there to run a command?  (Checked before a stream's
 * headers go out, so that the answer can still be an error.) */
static int running(const char *id, lc_error_t **err)
{
	_cleanup_json_ json_t *st = lc_sandbox_inspect(id, err);
	if (!st)
		return -1;
	const char *s = lc_json_str(st, "status");
	if (s && !strcmp(s, "running"))
		return 0;
	return lc_error_set(err, LC_EXIT_STATE, 0, "sandbox %s is %s, not running%s", id, s ? s : "unknown",
			    s && !strcmp(s, "paused") ? " (resume it)" : s && !strcmp(s, "stopped") ? " (start it)" : "");
}

static int xrun_start(xrun_t *x, lc_error_t **err)
{
	int o[2] = { -1, -1 }, e[2] = { -1, -1 }, i[2] = { -1, -1 };
	if (pipe2(o, O_CLOEXEC) < 0 || pipe2(e, O_CLOEXEC) < 0 || pipe2(x->cancel, O_CLOEXEC) < 0 ||
	    pipe2(x->done, O_CLOEXEC) < 0 || (x->in && pipe2(i, O_CLOEXEC) < 0)) {
		int en = errno;
		for (int k = 0; k < 2; k++) {
			if (o[k] >= 0)
				close(o[k]);
			if (e[k] >= 0)
				close(e[k]);
		}
		return lc_error_set(err, LC_EXIT_RUNTIME, en, "cannot create pipes");
	}
	x->out_r = o[0];
	x->err_r = e[0];
	x->child[1] = o[1];
	x->child[2] = e[1];
	if (x->in) {
		x->in_w = i[1];
		x->child[0] = i[0];
		fcntl(x->in_w, F_SETFL, O_NONBLOCK);
		x->opts.interactive = true;
	}
	x->opts.argv = x->argv;
	x->opts.env = x->env;
	x->opts.stdio[0] = x->child[0];
	x->opts.stdio[1] = x->child[1];
	x->opts.stdio[2] = x->child[2];
	x->opts.cancel_fd = x->cancel[0];
	x->opts.new_pgroup = true; /* a cancel or timeout takes its children too */
	x->open[0] = x->open[1] = true;
	int r = pthread_create(&x->th, NULL, xrun_thread, x);
	if (r != 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, r, "cannot start a thread");
	x->started = true;
	return 0;
}

static void xrun_cancel(xrun_t *x)
{
	if (!x->cancelled && x->cancel[1] >= 0) {
		x->cancelled = true;
		(void)!write(x->cancel[1], "x", 1);
	}
}

/* Wait for the command's thread (after cancelling it when asked). */
static void xrun_join(xrun_t *x, bool cancel)
{
	if (!x->started)
		return;
	if (cancel)
		xrun_cancel(x);
	pthread_join(x->th, NULL);
	x->started = false;
	x->ended = true;
}

/* Wait for output and read one piece of it: > 0 bytes read into buf from
 * stream *which (1 stdout, 2 stderr); 0 when the command has ended and its
 * output is drained; -1 when deadline (ms, 0: none) passed first.
 * Meanwhile stdin is written, and the command is cancelled when the client
 * hangs up (conn_fd) or lcd stops. */
static ssize_t xrun_step(lcd_t *lcd, xrun_t *x, int conn_fd, long long deadline, char *buf, size_t max, int *which)
{
	for (;;) {
		if (deadline && lc_now_ms() >= deadline)
			return -1;
		if (!x->open[0] && !x->open[1] && x->ended)
			return 0;
		if (x->ended && x->drain_until && lc_now_ms() >= x->drain_until)
			return 0; /* something it left running still holds the pipes */
		struct pollfd p[5] = {
			{ x->open[0] ? x->out_r : -1, POLLIN, 0 },
			{ x->open[1] ? x->err_r : -1, POLLIN, 0 },
			{ x->in_w >= 0 && x->in_off < x->in_len ? x->in_w : -1, POLLOUT, 0 },
			{ x->ended ? -1 : x->done[0], POLLIN, 0 },
			{ conn_fd, POLLRDHUP, 0 },
		};
		int n = poll(p, 5, x->ended ? 20 : 200);
		if (n < 0 && errno != EINTR)
			return 0;
		if (p[4].revents & (POLLRDHUP | POLLHUP | POLLERR)) {
			xrun_cancel(x); /* nobody listens any more */
			x->open[0] = x->open[1] = false;
		}
		pthread_mutex_lock(&lcd->lock);
		bool stop = lcd->stopping;
		pthread_mutex_unlock(&lcd->lock);
		if (stop)
			xrun_cancel(x);
		if (p[3].revents & (POLLIN | POLLHUP)) {
			xrun_join(x, false);
			x->drain_until = lc_now_ms() + DRAIN_MS;
		}
		if (p[2].revents & (POLLOUT | POLLERR | POLLHUP)) {
			ssize_t w = write(x->in_w, x->in + x->in_off, x->in_len - x->in_off);
			if (w > 0)
				x->in_off += (size_t)w;
			if ((w < 0 && errno != EAGAIN && errno != EINTR) || x->in_off >= x->in_len) {
				close(x->in_w);
				x->in_w = -1;
			}
		}
		if (x->in_w >= 0 && x->in_off >= x->in_len) {
			close(x->in_w); /* empty stdin: EOF at once */
			x->in_w = -1;
		}
		for (int k = 0; k < 2; k++) {
			if (!(p[k].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			ssize_t r = read(p[k].fd, buf, max);
			if (r > 0) {
				*which = k + 1;
				return r;
			}
			if (r == 0 || (errno != EINTR && errno != EAGAIN))
				x->open[k] = false;
		}
	}
}

static int conn_fd(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
	return ci ? ci->connect_fd : -1;
}

static json_t *result_json(xrun_t *x)
{
	return json_pack("{s:i, s:i, s:b, s:I}", "exit_code", x->res.exit_code, "signal", x->res.signal, "timed_out",
			 x->res.timed_out, "duration_ms", (json_int_t)(x->res.wall_us / 1000));
}

/* ---- captured output ---- */

typedef struct capture {
	unsigned char *buf[2];
	size_t len[2];
	size_t cap;
	bool truncated;
} capture_t;

static void capture_add(capture_t *c, int which, const char *data, size_t n)
{
	int k = which - 1;
	size_t room = c->cap - c->len[k];
	if (n > room) {
		c->truncated = true;
		n = room;
	}
	if (!n)
		return;
	c->buf[k] = realloc(c->buf[k], c->len[k] + n + 1);
	memcpy(c->buf[k] + c->len[k], data, n);
	c->len[k] += n;
}

static json_t *output_json(const unsigned char *s, size_t n, bool b64)
{
	return b64 ? b64_json(s, n) : utf8_json(s, n);
}

static void capture_into(capture_t *c, json_t *out, bool b64)
{
	json_object_set_new(out, "stdout", output_json(c->buf[0], c->len[0], b64));
	json_object_set_new(out, "stderr", output_json(c->buf[1], c->len[1], b64));
	json_object_set_new(out, "truncated", json_boolean(c->truncated));
	free(c->buf[0]);
	free(c->buf[1]);
}

static int parse_output_opts(json_t *b, size_t *cap, bool *b64, lc_error_t **err)
{
	json_t *v;
	*cap = OUTPUT_CAP;
	*b64 = false;
	if ((v = json_object_get(b, "max_output"))) {
		if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > OUTPUT_CAP_MAX)
			return lc_error_set(err, LC_EXIT_INVALID, 0, "max_output: expected bytes, 0 to %d", OUTPUT_CAP_MAX);
		*cap = (size_t)json_integer_value(v);
	}
	if ((v = json_object_get(b, "encoding"))) {
		const char *e = json_string_value(v);
		if (!e || (strcmp(e, "utf-8") && strcmp(e, "base64")))
			return lc_error_set(err, LC_EXIT_INVALID, 0, "encoding: expected \"utf-8\" or \"base64\"");
		*b64 = !strcmp(e, "base64");
	}
	return 0;
}

/* ---- the NDJSON stream ---- */

typedef struct xstream {
	lcd_t *lcd;
	xrun_t *x;
	int conn;
	bool b64, finished;
	unsigned char carry[2][4]; /* an incomplete UTF-8 sequence per stream */
	size_t ncarry[2];
	char *pending;             /* a formatted line not yet handed to MHD */
	size_t plen, poff;
} xstream_t;

static void stream_line(xstream_t *s, json_t *obj)
{
	char *t = json_dumps(obj, JSON_COMPACT);
	json_decref(obj);
	size_t n = strlen(t);
	t = realloc(t, n + 2);
	t[n++] = '\n';
	free(s->pending);
	s->pending = t;
	s->plen = n;
	s->poff = 0;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	xstream_t *s = cls;
	(void)pos;
	while (!s->pending || s->poff >= s->plen) {
		if (s->finished)
			return MHD_CONTENT_READER_END_OF_STREAM;
		unsigned char data[CHUNK + 4];
		int which = 0;
		ssize_t n = xrun_step(s->lcd, s->x, s->conn, 0, (char *)data + 4, CHUNK, &which);
		if (n > 0 && s->b64) {
			stream_line(s, json_pack("{s:o}", which == 1 ? "stdout" : "stderr", b64_json(data + 4, (size_t)n)));
		} else if (n > 0) {
			/* prepend what was left of a split character */
			int k = which - 1;
			unsigned char *start = data + 4 - s->ncarry[k];
			memcpy(start, s->carry[k], s->ncarry[k]);
			size_t total = (size_t)n + s->ncarry[k];
			size_t ok = utf8_complete(start, total, false);
			s->ncarry[k] = total - ok;
			memcpy(s->carry[k], start + ok, s->ncarry[k]);
			if (ok)
				stream_line(s, json_pack("{s:o}", which == 1 ? "stdout" : "stderr", utf8_json(start, ok)));
		} else {
			for (int k = 0; k < 2; k++)
				if (s->ncarry[k]) {
					stream_line(s, json_pack("{s:o}", k == 0 ? "stdout" : "stderr", utf8_json(s->carry[k], s->ncarry[k])));
					s->ncarry[k] = 0;
					goto have_line;
				}
			xrun_join(s->x, true);
			s->finished = true;
			if (s->x->rc < 0)
				stream_line(s, json_pack("{s:s, s:i}", "error", s->x->err->msg, "exit_code", s->x->err->exit_code));
			else
				stream_line(s, result_json(s->x));
		}
	have_line:;
	}
	size_t n = s->plen - s->poff < max ? s->plen - s->poff : max;
	memcpy(buf, s->pending + s->poff, n);
	s->poff += n;
	return (ssize_t)n;
}

static void stream_free(void *cls)
{
	xstream_t *s = cls;
	xrun_join(s->x, true);
	xrun_free(s->x);
	free(s->pending);
	free(s);
}

/* The output an exec captures is held in lcd until it ends: each takes
 * its caps (both streams) of lcd.json's exec_memory_max first, or is
 * refused (503) while others hold it; what is under way is not touched. */
static bool exec_mem_take(lcd_t *lcd, long long n)
{
	long long cur = __atomic_load_n(&lcd->exec_memory, __ATOMIC_SEQ_CST);
	do {
		if (cur + n > lcd->exec_memory_max)
			return false;
	} while (!__atomic_compare_exchange_n(&lcd->exec_memory, &cur, cur + n, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST));
	return true;
}

static void exec_mem_give(lcd_t *lcd, long long n)
{
	__atomic_sub_fetch(&lcd->exec_memory, n, __ATOMIC_SEQ_CST);
}

static enum MHD_Result exec_mem_refused(call_t *call, size_t cap)
{
	return api_fail_status(call->c, MHD_HTTP_SERVICE_UNAVAILABLE, LC_EXIT_BUSY,
			       "lcd holds as much exec output as exec_memory_max allows (%lld bytes; this one may take %zu): "
			       "try again, ask for less (max_output), or stream it",
			       call->lcd->exec_memory_max, 2 * cap);
}

enum MHD_Result lcd_api_exec(call_t *call, json_t *row, bool stream)
{
	const char *id = lc_json_str(row, "id");
	lc_error_t *err = NULL;
	size_t cap;
	bool b64;
	static const char *const keys[] = { "argv", "cmd", "env", "workdir", "user", "timeout", "stdin", "max_output",
		"encoding", NULL };
	xrun_t *x = xrun_new(call->lcd, id);
	if (check_keys(call->body, keys, &err) < 0 || parse_output_opts(call->body, &cap, &b64, &err) < 0 || xrun_argv(call->body, x, &err) < 0 ||
	    xrun_parse(call->lcd, row, call->body, x, &err) < 0 || running(id, &err) < 0) {
		xrun_free(x);
		return api_fail_err(call->c, err);
	}
	long long held = stream ? 0 : 2 * (long long)cap;
	if (held && !exec_mem_take(call->lcd, held)) {
		xrun_free(x);
		return exec_mem_refused(call, cap);
	}
	if (xrun_start(x, &err) < 0) {
		exec_mem_give(call->lcd, held);
		xrun_free(x);
		return api_fail_err(call->c, err);
	}
	if (stream) {
		xstream_t *s = lc_xmalloc0(sizeof(*s));
		s->lcd = call->lcd;
		s->x = x;
		s->conn = conn_fd(call->c);
		s->b64 = b64;
		struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 64 * 1024, stream_read, s,
									   stream_free);
		MHD_add_response_header(r, "Content-Type", "application/x-ndjson");
		enum MHD_Result ret = MHD_queue_response(call->c, MHD_HTTP_OK, r);
		MHD_destroy_response(r);
		return ret;
	}
	capture_t c = { .cap = cap };
	int fd = conn_fd(call->c);
	char buf[CHUNK];
	int which;
	ssize_t n;
	while ((n = xrun_step(call->lcd, x, fd, 0, buf, sizeof(buf), &which)) > 0)
		capture_add(&c, which, buf, (size_t)n);
	xrun_join(x, true);
	if (x->rc < 0) {
		free(c.buf[0]);
		free(c.buf[1]);
		exec_mem_give(call->lcd, held);
		err = lc_steal(x->err);
		xrun_free(x);
		return api_fail_err(call->c, err);
	}
	json_t *out = result_json(x);
	capture_into(&c, out, b64);
	exec_mem_give(call->lcd, held);
	xrun_free(x);
	return api_reply(call->c, MHD_HTTP_OK, out);
}

/* ---- sessions ----
 *
 * A session is a shell's state carried from one run to the next: its
 * working directory and its variables, exported or not.  Each run is a
 * command of its own, as an exec is: a fresh shell that takes the state
 * the last run left, runs the command (stdin at EOF), then prints the
 * state it leaves after a marker, and exits with the command's status.
 * So a run's end and its status are that process's own, which nothing
 * else in the sandbox can write.  (With one shell kept between runs both
 * came in-band on its output, and anything running as the sandbox's user
 * -- a background job of an earlier run -- could read the next run's
 * marker from the shell's stdin and forge its end and status.)  What a
 * forged marker can still change is the state the next run starts from:
 * the session's own, which the command could change itself.  A run that
 * exits the shell (exit), is killed or times out ends the session. */

#define STATE_MAX (256 << 10) /* bytes of a session's state (directory, variables) */

static const char SESSION_SH[] =
	"if [ -n \"$2\" ]; then cd -- \"$2\" 2>/dev/null; fi\n"
	"eval \"$3\" 2>/dev/null\n"
	"__lcd_cmd=$1 __lcd_mark=$4\n"
	"shift 4\n"
	"command eval \"$__lcd_cmd\" </dev/null\n"
	"__lcd_rc=$?\n"
	"printf '\\n%s\\n' \"$__lcd_mark\"\n"
	"unset __lcd_cmd __lcd_mark\n"
	"pwd\n"
	"set\n"
	"export -p\n"
	"exit \"$__lcd_rc\"\n";

struct lcd_session {
	char id[LC_ID_LEN + 1];
	char sandbox[LC_ID_LEN + 1];
	char *shell;
	json_t *opts;     /* the create's env, workdir and user, for every run */
	char *cwd;        /* where the last run left off ("": the create's workdir) */
	char *vars;       /* the variables it left (set, export -p: shell input) */
	xrun_t *run;      /* the run under way, or NULL */
	int refs;         /* the list's, and a run's */
	bool busy;        /* a run is under way */
	bool dead;        /* deleted, or its last run ended it */
	struct lcd_session *next;
};
typedef struct lcd_session session_t;

static void session_unref(lcd_t *lcd, session_t *s)
{
	pthread_mutex_lock(&lcd->lock);
	bool last = --s->refs == 0;
	pthread_mutex_unlock(&lcd->lock);
	if (!last)
		return;
	free(s->shell);
	json_decref(s->opts);
	free(s->cwd);
	if (s->vars)
		explicit_bzero(s->vars, strlen(s->vars)); /* it may hold a secret's value */
	free(s->vars);
	free(s);
}

/* Take it out of the list (it is dead from now on) and stop its run; the
 * caller holds the lock. */
static void session_unlink(lcd_t *lcd, session_t *s)
{
	for (session_t **pp = &lcd->sessions; *pp; pp = &(*pp)->next)
		if (*pp == s) {
			*pp = s->next;
			break;
		}
	s->dead = true;
	if (s->run)
		xrun_cancel(s->run);
}

void lcd_sessions_drop(lcd_t *lcd, const char *sandbox)
{
	for (;;) {
		pthread_mutex_lock(&lcd->lock);
		session_t *s = lcd->sessions;
		while (s && strcmp(s->sandbox, sandbox))
			s = s->next;
		if (s)
			session_unlink(lcd, s);
		pthread_mutex_unlock(&lcd->lock);
		if (!s)
			return;
		lcd_log("sandbox %s: session %s ended", sandbox, s->id);
		session_unref(lcd, s);
	}
}

static session_t *session_get(lcd_t *lcd, const char *sandbox, const char *id)
{
	pthread_mutex_lock(&lcd->lock);
	session_t *s = lcd->sessions;
	while (s && (strcmp(s->sandbox, sandbox) || strcmp(s->id, id)))
		s = s->next;
	if (s)
		s->refs++;
	pthread_mutex_unlock(&lcd->lock);
	return s;
}

static enum MHD_Result h_session_new(call_t *call, json_t *row, const char *sandbox)
{
	lc_error_t *err = NULL;
	json_t *b = call->body;
	static const char *const keys[] = { "shell", "env", "workdir", "user", NULL };
	if (check_keys(b, keys, &err) < 0)
		return api_fail_err(call->c, err);
	json_t *shell = json_object_get(b, "shell");
	if (shell && (!json_is_string(shell) || !lcd_sandbox_path_ok(json_string_value(shell))))
		return FAIL(call, LC_EXIT_INVALID, "shell: expected an absolute path (default /bin/sh)");
	pthread_mutex_lock(&call->lcd->lock);
	int have = 0;
	for (session_t *s = call->lcd->sessions; s; s = s->next)
		have += !strcmp(s->sandbox, sandbox);
	pthread_mutex_unlock(&call->lcd->lock);
	if (have >= SESSIONS_MAX)
		return api_fail_status(call->c, MHD_HTTP_TOO_MANY_REQUESTS, LC_EXIT_BUSY,
				       "sandbox %s has %d sessions already (at most %d)", sandbox, have, SESSIONS_MAX);
	/* what every run takes, checked now */
	json_t *opts = json_object();
	for (size_t i = 1; keys[i]; i++)
		if (json_object_get(b, keys[i]))
			json_object_set(opts, keys[i], json_object_get(b, keys[i]));
	xrun_t *probe = xrun_new(call->lcd, sandbox);
	int r = xrun_parse(call->lcd, row, opts, probe, &err);
	xrun_free(probe);
	if (r < 0 || running(sandbox, &err) < 0) {
		json_decref(opts);
		return api_fail_err(call->c, err);
	}
	session_t *s = lc_xmalloc0(sizeof(*s));
	lc_random_hex(s->id, LC_ID_LEN);
	snprintf(s->sandbox, sizeof(s->sandbox), "%s", sandbox);
	s->shell = strdup(shell ? json_string_value(shell) : "/bin/sh");
	s->opts = opts;
	s->cwd = strdup("");
	s->vars = strdup("");
	s->refs = 1;
	pthread_mutex_lock(&call->lcd->lock);
	s->next = call->lcd->sessions;
	call->lcd->sessions = s;
	pthread_mutex_unlock(&call->lcd->lock);
	lcd_log("sandbox %s: session %s started", sandbox, s->id);
	return api_reply(call->c, MHD_HTTP_CREATED, json_pack("{s:s, s:s}", "id", s->id, "sandbox", sandbox));
}

/* A run's stdout: its first bytes (the command's output, capped) and its
 * last (where the marker and the state are).  The run's own marker line
 * is the last in the stream: the shell prints it after the command, and
 * only the state follows; one written earlier by anything else (it can
 * read the marker from the shell's command line) neither cuts the output
 * short nor ends the run. */
#define TAIL_MAX (STATE_MAX + 64)

typedef struct marked {
	unsigned char *head;
	size_t head_len, cap;
	unsigned char *tail;
	size_t tail_len;
	unsigned long long total; /* bytes seen */
} marked_t;

static void marked_add(marked_t *m, const char *data, size_t n)
{
	size_t room = m->head_len < m->cap ? m->cap - m->head_len : 0;
	size_t keep = n < room ? n : room;
	if (keep) {
		m->head = realloc(m->head, m->head_len + keep + 1);
		memcpy(m->head + m->head_len, data, keep);
		m->head_len += keep;
	}
	/* the last TAIL_MAX bytes at least (n is a read's, CHUNK at most) */
	if (m->tail_len + n > 2 * TAIL_MAX) {
		size_t drop = m->tail_len + n - TAIL_MAX;
		memmove(m->tail, m->tail + drop, m->tail_len - drop);
		m->tail_len -= drop;
	}
	m->tail = realloc(m->tail, m->tail_len + n + 1);
	memcpy(m->tail + m->tail_len, data, n);
	m->tail_len += n;
	m->total += n;
}

/* At the end: where the output ends (stream position) and the state, or
 * false when the stream holds no marker line within its tail. */
static bool marked_end(const marked_t *m, const char *mark, unsigned long long *out_end, const char **state,
		       size_t *state_len)
{
	size_t ml = strlen(mark);
	if (m->tail_len < ml + 2)
		return false;
	for (size_t i = m->tail_len - ml - 2 + 1; i-- > 0;) {
		if (m->tail[i] != '\n' || memcmp(m->tail + i + 1, mark, ml) || m->tail[i + 1 + ml] != '\n')
			continue;
		*out_end = m->total - m->tail_len + i;
		*state = (const char *)m->tail + i + ml + 2;
		*state_len = m->tail_len - i - ml - 2;
		return true;
	}
	return false;
}

static enum MHD_Result h_session_run(call_t *call, json_t *row, const char *sandbox, const char *sid)
{
	static const char *const keys[] = { "cmd", "timeout", "max_output", "encoding", NULL };
	json_t *b = call->body;
	lc_error_t *err = NULL;
	if (check_keys(b, keys, &err) < 0)
		return api_fail_err(call->c, err);
	json_t *cmd = json_object_get(b, "cmd"), *to = json_object_get(b, "timeout");
	if (!json_is_string(cmd) || !json_string_length(cmd) || strlen(json_string_value(cmd)) != json_string_length(cmd))
		return FAIL(call, LC_EXIT_INVALID, "cmd: expected a non-empty shell command line");
	if (to && (!json_is_integer(to) || json_integer_value(to) <= 0 || json_integer_value(to) > EXEC_TIMEOUT_MAX))
		return FAIL(call, LC_EXIT_INVALID, "timeout: expected seconds, 1 to %d", EXEC_TIMEOUT_MAX);
	size_t cap;
	bool b64;
	if (parse_output_opts(b, &cap, &b64, &err) < 0)
		return api_fail_err(call->c, err);
	session_t *s = session_get(call->lcd, sandbox, sid);
	if (!s)
		return FAIL(call, LC_EXIT_UNKNOWN, "sandbox %s has no session '%s'", sandbox, sid);
	pthread_mutex_lock(&call->lcd->lock);
	bool busy = s->busy || s->dead;
	if (!busy)
		s->busy = true;
	pthread_mutex_unlock(&call->lcd->lock);
	if (busy) {
		session_unref(call->lcd, s);
		return FAIL(call, LC_EXIT_STATE, "session %s is running a command already", sid);
	}
	long long held = 2 * (long long)cap + 2 * TAIL_MAX;
	if (!exec_mem_take(call->lcd, held)) {
		pthread_mutex_lock(&call->lcd->lock);
		s->busy = false;
		pthread_mutex_unlock(&call->lcd->lock);
		session_unref(call->lcd, s);
		return exec_mem_refused(call, cap);
	}
	char mark[40];
	memcpy(mark, "__LCD_", 6);
	lc_random_hex(mark + 6, 16);
	strcpy(mark + 22, "__");
	xrun_t *x = xrun_new(call->lcd, sandbox);
	lc_strv_push(&x->argv, s->shell);
	lc_strv_push(&x->argv, "-c");
	lc_strv_push(&x->argv, SESSION_SH);
	lc_strv_push(&x->argv, "lcd-session");
	lc_strv_push(&x->argv, json_string_value(cmd));
	lc_strv_push(&x->argv, s->cwd);
	lc_strv_push(&x->argv, s->vars);
	lc_strv_push(&x->argv, mark);
	int rc = xrun_parse(call->lcd, row, s->opts, x, &err);
	if (to)
		x->opts.timeout = (int)json_integer_value(to);
	pthread_mutex_lock(&call->lcd->lock);
	bool dead = s->dead;
	if (!dead)
		s->run = x;
	pthread_mutex_unlock(&call->lcd->lock);
	if (rc == 0 && !dead)
		rc = xrun_start(x, &err);
	marked_t m = { .cap = cap };
	capture_t c2 = { .cap = cap }; /* stderr: as an exec's */
	if (rc == 0 && !dead) {
		int fd = conn_fd(call->c);
		char buf[CHUNK];
		int which;
		ssize_t n;
		while ((n = xrun_step(call->lcd, x, fd, 0, buf, sizeof(buf), &which)) > 0) {
			if (which == 1)
				marked_add(&m, buf, (size_t)n);
			else
				capture_add(&c2, which, buf, (size_t)n);
		}
		xrun_join(x, true);
	}
	pthread_mutex_lock(&call->lcd->lock);
	s->run = NULL;
	pthread_mutex_unlock(&call->lcd->lock);
	json_t *out = NULL;
	if (rc < 0 || dead || x->rc < 0) {
		err = rc < 0 ? err : dead ? NULL : lc_steal(x->err);
		if (!err)
			lc_error_set(&err, LC_EXIT_UNKNOWN, 0, "session %s was deleted", sid);
	} else {
		/* ended: the shell did not get to its marker (exit, a kill, the
		 * timeout), or left more state than a session keeps */
		unsigned long long out_end = m.total;
		const char *state = NULL;
		size_t state_len = 0;
		bool timed_out = x->res.timed_out;
		bool ended = !marked_end(&m, mark, &out_end, &state, &state_len) || timed_out;
		if (!ended) {
			const char *nl = memchr(state, '\n', state_len);
			pthread_mutex_lock(&call->lcd->lock);
			free(s->cwd);
			s->cwd = nl ? strndup(state, (size_t)(nl - state)) : strdup("");
			if (s->vars)
				explicit_bzero(s->vars, strlen(s->vars));
			free(s->vars);
			s->vars = nl ? strndup(nl + 1, state_len - (size_t)(nl + 1 - state)) : strdup("");
			pthread_mutex_unlock(&call->lcd->lock);
		} else {
			pthread_mutex_lock(&call->lcd->lock);
			if (!s->dead) {
				session_unlink(call->lcd, s);
				s->refs--; /* the list's */
			}
			pthread_mutex_unlock(&call->lcd->lock);
			lcd_log("sandbox %s: session %s ended (%s)", sandbox, sid,
				timed_out ? "timeout" : "its shell exited, or left more state than a session keeps");
		}
		size_t shown = out_end < m.head_len ? (size_t)out_end : m.head_len;
		out = json_pack("{s:i, s:b, s:b}", "exit_code", timed_out ? LC_EXIT_TIMEOUT : x->res.exit_code, "timed_out",
				timed_out, "session_ended", ended);
		json_object_set_new(out, "stdout", output_json(m.head, shown, b64));
		json_object_set_new(out, "stderr", output_json(c2.buf[1], c2.len[1], b64));
		json_object_set_new(out, "truncated", json_boolean(c2.truncated || out_end > cap));
	}
	free(m.head);
	if (m.tail)
		explicit_bzero(m.tail, m.tail_len);
	free(m.tail);
	free(c2.buf[0]);
	free(c2.buf[1]);
	for (size_t i = 0; x->argv && x->argv[i]; i++) /* the state in argv may hold a secret's value */
		explicit_bzero(x->argv[i], strlen(x->argv[i]));
	xrun_free(x);
	exec_mem_give(call->lcd, held);
	pthread_mutex_lock(&call->lcd->lock);
	s->busy = false;
	pthread_mutex_unlock(&call->lcd->lock);
	session_unref(call->lcd, s);
	return out ? api_reply(call->c, MHD_HTTP_OK, out) : api_fail_err(call->c, err);
}

enum MHD_Result lcd_api_sessions(call_t *call, json_t *row)
{
	const char *sandbox = lc_json_str(row, "id");
	const char *m = call->method;
	if (call->n == 3 && !strcmp(m, "POST"))
		return h_session_new(call, row, sandbox);
	if (call->n == 3 && !strcmp(m, "GET")) {
		json_t *list = json_array();
		pthread_mutex_lock(&call->lcd->lock);
		for (session_t *s = call->lcd->sessions; s; s = s->next)
			if (!strcmp(s->sandbox, sandbox))
				json_array_append_new(list, json_pack("{s:s, s:b}", "id", s->id, "busy", s->busy));
		pthread_mutex_unlock(&call->lcd->lock);
		return api_reply(call->c, MHD_HTTP_OK, json_pack("{s:o}", "sessions", list));
	}
	if (call->n == 5 && !strcmp(m, "POST") && !strcmp(call->seg[4], "run"))
		return h_session_run(call, row, sandbox, call->seg[3]);
	if (call->n == 4 && !strcmp(m, "DELETE")) {
		session_t *s = session_get(call->lcd, sandbox, call->seg[3]);
		if (!s)
			return FAIL(call, LC_EXIT_UNKNOWN, "sandbox %s has no session '%s'", sandbox, call->seg[3]);
		pthread_mutex_lock(&call->lcd->lock);
		bool was = !s->dead;
		if (was) {
			session_unlink(call->lcd, s);
			s->refs--;
		}
		pthread_mutex_unlock(&call->lcd->lock);
		session_unref(call->lcd, s);
		lcd_log("sandbox %s: session %s deleted", sandbox, call->seg[3]);
		return api_reply(call->c, MHD_HTTP_OK, json_pack("{s:s, s:b}", "id", call->seg[3], "deleted", 1));
	}
	return api_fail_status(call->c, MHD_HTTP_NOT_FOUND, LC_EXIT_UNKNOWN, "no such endpoint: %s …/sessions", m);
}
