/* patch_contract.c — validate a model's patch (see patch_contract.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "patch_contract.h"

#define MAX_COMPONENT 255
#define SHOWN_PATH_MAX 160 /* bytes of a path quoted in a message */

/* ---- small helpers (self-contained: the fuzz target builds this file alone) ---- */

static void *xmalloc0(size_t n)
{
	void *p = calloc(1, n ? n : 1);
	if (!p)
		abort();
	return p;
}

static char *xstrndup(const char *s, size_t n)
{
	char *p = xmalloc0(n + 1);
	memcpy(p, s, n);
	return p;
}

static char *xprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *xprintf(const char *fmt, ...)
{
	va_list ap;
	char *s = NULL;
	va_start(ap, fmt);
	int n = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (n < 0)
		abort();
	return s;
}

static void strv_push(char ***v, size_t *n, char *s)
{
	char **nv = realloc(*v, (*n + 2) * sizeof(**v));
	if (!nv)
		abort();
	nv[(*n)++] = s;
	nv[*n] = NULL;
	*v = nv;
}

void pc_strv_free(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

/* ---- UTF-8 and characters ---- */

size_t pc_utf8_valid_prefix(const unsigned char *s, size_t len)
{
	size_t i = 0;
	while (i < len) {
		unsigned char c = s[i];
		size_t n;
		unsigned char lo = 0x80, hi = 0xBF; /* the second byte's range */
		if (c < 0x80) {
			i++;
			continue;
		} else if (c >= 0xC2 && c <= 0xDF) {
			n = 2;
		} else if (c >= 0xE0 && c <= 0xEF) {
			n = 3;
			if (c == 0xE0)
				lo = 0xA0; /* no overlongs */
			else if (c == 0xED)
				hi = 0x9F; /* no surrogates */
		} else if (c >= 0xF0 && c <= 0xF4) {
			n = 4;
			if (c == 0xF0)
				lo = 0x90; /* no overlongs */
			else if (c == 0xF4)
				hi = 0x8F; /* nothing above U+10FFFF */
		} else {
			return i; /* C0/C1 (overlong lead), F5-FF, or a stray continuation byte */
		}
		if (len - i < n || s[i + 1] < lo || s[i + 1] > hi)
			return i;
		for (size_t k = 2; k < n; k++)
			if ((s[i + k] & 0xC0) != 0x80)
				return i;
		i += n;
	}
	return len;
}

/* The code point at s (well-formed UTF-8, checked before), its length in *n. */
static unsigned decode(const unsigned char *s, size_t *n)
{
	if (s[0] < 0x80) {
		*n = 1;
		return s[0];
	}
	if (s[0] < 0xE0) {
		*n = 2;
		return (unsigned)(s[0] & 0x1F) << 6 | (s[1] & 0x3F);
	}
	if (s[0] < 0xF0) {
		*n = 3;
		return (unsigned)(s[0] & 0x0F) << 12 | (unsigned)(s[1] & 0x3F) << 6 | (s[2] & 0x3F);
	}
	*n = 4;
	return (unsigned)(s[0] & 0x07) << 18 | (unsigned)(s[1] & 0x3F) << 12 | (unsigned)(s[2] & 0x3F) << 6 |
	       (s[3] & 0x3F);
}

static bool is_bidi_control(unsigned cp)
{
	return (cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069);
}

struct text_fault {
	const char *rule;
	size_t at;     /* byte offset */
	size_t line;   /* 1-based */
	unsigned what; /* the byte or code point */
};

/* NUL, invalid UTF-8, control characters (but those in `ok`), bidi
 * controls: the first fault in s, in that order of rules. */
static bool text_fault(const char *str, size_t len, const char *ok, struct text_fault *f)
{
	const unsigned char *s = (const unsigned char *)str;
	const unsigned char *z = memchr(s, 0, len);
	size_t valid = pc_utf8_valid_prefix(s, len);
	if (z || valid < len) {
		bool nul = z && (size_t)(z - s) <= valid;
		f->rule = nul ? PC_RULE_NUL : PC_RULE_INVALID_UTF8;
		f->at = nul ? (size_t)(z - s) : valid;
		f->what = s[f->at];
	} else {
		f->rule = NULL;
		for (size_t i = 0, n; i < len && !f->rule; i += n) {
			unsigned cp = decode(s + i, &n);
			if ((cp < 0x20 && !(cp && strchr(ok, (int)cp))) || (cp >= 0x7F && cp <= 0x9F)) {
				f->rule = PC_RULE_CONTROL_CHAR;
			} else if (is_bidi_control(cp)) {
				f->rule = PC_RULE_BIDI_CONTROL;
			} else {
				continue;
			}
			f->at = i;
			f->what = cp;
		}
		if (!f->rule)
			return false;
	}
	f->line = 1;
	for (size_t i = 0; i < f->at; i++)
		f->line += s[i] == '\n';
	return true;
}

/* A path as messages show it: printable text, quotes and backslashes and
 * anything else escaped as \xNN, at most SHOWN_PATH_MAX bytes of it. */
static char *shown(const char *p, size_t len)
{
	size_t valid = pc_utf8_valid_prefix((const unsigned char *)p, len);
	char *out = xmalloc0(SHOWN_PATH_MAX + 4 * 4 + 8);
	size_t o = 0;
	for (size_t i = 0; i < len; i++) {
		if (o >= SHOWN_PATH_MAX) {
			memcpy(out + o, "...", 4);
			return out;
		}
		unsigned char c = (unsigned char)p[i];
		size_t n = 1;
		bool plain = c >= 0x20 && c < 0x7F && c != '"' && c != '\\';
		if (c >= 0x80 && i < valid) {
			unsigned cp = decode((const unsigned char *)p + i, &n);
			plain = !(cp >= 0x80 && cp <= 0x9F) && !is_bidi_control(cp);
		}
		if (plain)
			memcpy(out + o, p + i, n);
		for (size_t k = 0; !plain && k < n; k++)
			sprintf(out + o + 4 * k, "\\x%02x", (unsigned char)p[i + k]);
		o += plain ? n : 4 * n;
		i += n - 1;
	}
	out[o] = '\0';
	return out;
}

/* ---- refusals ---- */

void pc_refusal_clear(pc_refusal_t *why)
{
	if (!why)
		return;
	free(why->path);
	free(why->message);
	why->rule = NULL;
	why->path = why->message = NULL;
}

/* where: "files[1]" or "" (the document); path: NULL or the path as given. */
static int refuse(pc_refusal_t *why, const char *rule, const char *where, const char *path, size_t path_len,
		  const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static int refuse(pc_refusal_t *why, const char *rule, const char *where, const char *path, size_t path_len,
		  const char *fmt, ...)
{
	if (!why)
		return -1;
	char *what = NULL;
	va_list ap;
	va_start(ap, fmt);
	if (vasprintf(&what, fmt, ap) < 0)
		abort();
	va_end(ap);
	why->rule = rule;
	why->path = path ? shown(path, path_len) : NULL;
	if (why->path)
		why->message = xprintf("%s: %s%s\"%s\": %s", rule, where, *where ? " " : "", why->path, what);
	else
		why->message = xprintf("%s: %s%s%s", rule, where, *where ? ": " : "", what);
	free(what);
	return -1;
}

/* ---- paths ---- */

char *pc_normalise(const char *path, const char **rule)
{
	size_t len = strlen(path);
	if (path[0] == '/') {
		*rule = PC_RULE_PATH_ABSOLUTE;
		return NULL;
	}
	char *out = xmalloc0(len + 1);
	size_t o = 0;
	bool parent = false;
	const char *p = path;
	while (*p) {
		const char *e = strchr(p, '/');
		size_t n = e ? (size_t)(e - p) : strlen(p);
		if (n > MAX_COMPONENT) {
			free(out);
			*rule = PC_RULE_PATH_TOO_LONG;
			return NULL;
		}
		if (n == 2 && p[0] == '.' && p[1] == '.') {
			parent = true;
			if (o == 0) {
				free(out);
				*rule = PC_RULE_PATH_ESCAPES;
				return NULL;
			}
			while (o > 0 && out[o - 1] != '/')
				o--;
			if (o > 0)
				o--; /* the slash before the dropped component */
		} else if (n > 0 && !(n == 1 && p[0] == '.')) {
			if (o > 0)
				out[o++] = '/';
			memcpy(out + o, p, n);
			o += n;
		}
		out[o] = '\0';
		p += n;
		if (*p == '/')
			p++;
	}
	out[o] = '\0';
	if (parent) {
		free(out);
		*rule = PC_RULE_PATH_PARENT;
		return NULL;
	}
	if (o == 0) {
		free(out);
		*rule = PC_RULE_PATH_EMPTY;
		return NULL;
	}
	return out;
}

static bool has_prefix_ci(const char *s, size_t n, const char *prefix)
{
	size_t k = strlen(prefix);
	return n >= k && strncasecmp(s, prefix, k) == 0;
}

static bool name_eq_ci(const char *s, size_t n, const char *name)
{
	return strlen(name) == n && strncasecmp(s, name, n) == 0;
}

/* Does the stem (a name less its last extension) mark a test? */
static bool test_stem(const char *s, size_t n)
{
	if (name_eq_ci(s, n, "test") || name_eq_ci(s, n, "tests") || has_prefix_ci(s, n, "test_") ||
	    has_prefix_ci(s, n, "tests_"))
		return true;
	static const char *const ends[] = { "_test", "_tests", ".test", ".spec", "_spec", NULL };
	for (size_t i = 0; ends[i]; i++) {
		size_t k = strlen(ends[i]);
		if (n > k && strncasecmp(s + n - k, ends[i], k) == 0)
			return true;
	}
	/* JUnit and xUnit style, as written: FooTest.java, FooTests.cs */
	if ((n > 4 && !strncmp(s + n - 4, "Test", 4)) || (n > 5 && !strncmp(s + n - 5, "Tests", 5)))
		return true;
	return false;
}

bool pc_is_test_file(const char *path)
{
	static const char *const dirs[] = { "test", "tests", "__tests__", "__snapshots__", "spec", "specs", "testdata", NULL };
	static const char *const names[] = { "conftest.py", "pytest.ini", "tox.ini", NULL };
	const char *p = path;
	for (;;) {
		const char *e = strchr(p, '/');
		size_t n = e ? (size_t)(e - p) : strlen(p);
		if (e) {
			for (size_t i = 0; dirs[i]; i++)
				if (name_eq_ci(p, n, dirs[i]))
					return true;
			p = e + 1;
			continue;
		}
		for (size_t i = 0; names[i]; i++)
			if (name_eq_ci(p, n, names[i]))
				return true;
		if (test_stem(p, n))
			return true; /* "test_calc" with no extension, "calc_test" (Go's binaries, scripts) */
		const char *dot = memrchr(p, '.', n);
		return dot && dot > p && test_stem(p, (size_t)(dot - p));
	}
}

static bool allowed_path(const char *path, const char *const *allowed)
{
	for (size_t i = 0; allowed && allowed[i]; i++) {
		const char *a = allowed[i];
		size_t alen = strlen(a);
		bool dir = alen > 0 && a[alen - 1] == '/';
		const char *rule;
		char *na = pc_normalise(a, &rule);
		if (!na)
			continue;
		size_t n = strlen(na);
		bool ok = dir ? !strncmp(path, na, n) && path[n] == '/' : !strcmp(path, na);
		free(na);
		if (ok)
			return true;
	}
	return false;
}

static char *allowed_list(const char *const *allowed)
{
	size_t cap = 1, n = 0;
	for (size_t i = 0; allowed && allowed[i]; i++)
		cap += strlen(allowed[i]) + 2;
	char *out = xmalloc0(cap + 8);
	for (size_t i = 0; allowed && allowed[i]; i++)
		n += (size_t)sprintf(out + n, "%s%s", i ? ", " : "", allowed[i]);
	if (n == 0)
		strcpy(out, "none");
	return out;
}

char **pc_allowed_parse(const char *spec)
{
	char **v = xmalloc0(sizeof(*v));
	size_t n = 0;
	const char *p = spec ? spec : "";
	while (*p) {
		while (*p == ',' || isspace((unsigned char)*p))
			p++;
		size_t k = strcspn(p, ", \t\r\n\v\f");
		if (k)
			strv_push(&v, &n, xstrndup(p, k));
		p += k;
	}
	return v;
}

/* ---- the document ---- */

static const char *rule_text(const char *rule)
{
	if (!strcmp(rule, PC_RULE_PATH_ABSOLUTE))
		return "an absolute path";
	if (!strcmp(rule, PC_RULE_PATH_ESCAPES))
		return "leaves the tree";
	if (!strcmp(rule, PC_RULE_PATH_PARENT))
		return "\"..\" is not allowed in a path";
	if (!strcmp(rule, PC_RULE_PATH_TOO_LONG))
		return "a path component longer than 255 bytes";
	return "names no file";
}

static const char *fault_text(const struct text_fault *f)
{
	if (!strcmp(f->rule, PC_RULE_NUL))
		return "a NUL byte";
	if (!strcmp(f->rule, PC_RULE_INVALID_UTF8))
		return "not UTF-8";
	if (!strcmp(f->rule, PC_RULE_BIDI_CONTROL))
		return "a bidirectional control character";
	return "a control character";
}

/* One file entry: its normalised path, or -1 with *why. */
static int check_file(json_t *f, size_t i, const char *const *allowed, pc_patch_t *patch, pc_refusal_t *why)
{
	char where[32];
	snprintf(where, sizeof(where), "files[%zu]", i);
	if (!json_is_object(f))
		return refuse(why, PC_RULE_SHAPE, where, NULL, 0, "expected an object {\"path\", \"content\"}");
	const char *key;
	json_t *v;
	json_object_foreach(f, key, v) {
		if (strcmp(key, "path") && strcmp(key, "content")) {
			char *k = shown(key, strlen(key));
			int r = refuse(why, PC_RULE_SHAPE, where, NULL, 0,
				       "unknown key \"%s\" (a file has only \"path\" and \"content\")", k);
			free(k);
			return r;
		}
	}
	json_t *jp = json_object_get(f, "path"), *jc = json_object_get(f, "content");
	if (!json_is_string(jp))
		return refuse(why, PC_RULE_SHAPE, where, NULL, 0, "\"path\": %s", jp ? "expected a string" : "required");
	const char *path = json_string_value(jp);
	size_t plen = json_string_length(jp);
	if (!json_is_string(jc))
		return refuse(why, PC_RULE_SHAPE, where, path, plen, "\"content\": %s",
			      jc ? "expected a string (the file's complete new contents)" : "required");

	struct text_fault tf;
	if (plen == 0)
		return refuse(why, PC_RULE_PATH_EMPTY, where, path, plen, "names no file");
	if (plen > PC_MAX_PATH)
		return refuse(why, PC_RULE_PATH_TOO_LONG, where, path, plen, "longer than %d bytes", PC_MAX_PATH);
	if (text_fault(path, plen, "", &tf))
		return refuse(why, tf.rule, where, path, plen, "%s in the path at byte %zu", fault_text(&tf), tf.at);
	const char *rule = NULL;
	char *norm = pc_normalise(path, &rule);
	if (!norm)
		return refuse(why, rule, where, path, plen, "%s", rule_text(rule));
	if (pc_is_test_file(norm)) {
		refuse(why, PC_RULE_TEST_FILE, where, path, plen, "test files are never writable");
		free(norm);
		return -1;
	}
	if (!allowed_path(norm, allowed)) {
		char *list = allowed_list(allowed);
		refuse(why, PC_RULE_NOT_ALLOWED, where, path, plen, "not an allowed path (allowed: %s)", list);
		free(list);
		free(norm);
		return -1;
	}
	for (size_t k = 0; k < patch->n; k++) {
		if (!strcmp(patch->files[k].path, norm)) {
			refuse(why, PC_RULE_DUPLICATE, where, path, plen, "the same file as files[%zu] (%s)", k, norm);
			free(norm);
			return -1;
		}
	}
	const char *content = json_string_value(jc);
	size_t clen = json_string_length(jc);
	if (text_fault(content, clen, "\t\n\r", &tf)) {
		free(norm);
		if (!strcmp(tf.rule, PC_RULE_NUL) || !strcmp(tf.rule, PC_RULE_INVALID_UTF8))
			return refuse(why, tf.rule, where, path, plen, "%s in the content at byte %zu (line %zu)",
				      fault_text(&tf), tf.at, tf.line);
		return refuse(why, tf.rule, where, path, plen, "%s (U+%04X) in the content at byte %zu (line %zu)",
			      fault_text(&tf), tf.what, tf.at, tf.line);
	}
	if (clen > PC_MAX_TOTAL_BYTES || patch->total + clen > PC_MAX_TOTAL_BYTES) {
		free(norm);
		return refuse(why, PC_RULE_TOO_LARGE, where, path, plen,
			      "the contents come to %zu bytes with this file, more than %d", patch->total + clen,
			      PC_MAX_TOTAL_BYTES);
	}
	pc_file_t *pf = &patch->files[patch->n++];
	pf->path = norm;
	pf->content = xstrndup(content, clen);
	pf->len = clen;
	patch->total += clen;
	return 0;
}

int pc_validate(json_t *doc, const char *const *allowed, pc_patch_t **out, pc_refusal_t *why)
{
	/* Other members ("explanation", "summary": models add them) are
	 * ignored: only "files" is ever written.  A file's members are not:
	 * an unknown one could mean something this contract does not do. */
	if (!json_is_object(doc))
		return refuse(why, PC_RULE_SHAPE, "", NULL, 0, "expected an object {\"files\": [...]}");
	json_t *files = json_object_get(doc, "files");
	if (!json_is_array(files))
		return refuse(why, PC_RULE_SHAPE, "files", NULL, 0, "%s",
			      files ? "expected an array of {\"path\", \"content\"}" : "required");
	size_t n = json_array_size(files);
	if (n == 0)
		return refuse(why, PC_RULE_NO_FILES, "files", NULL, 0, "no file in the patch");
	if (n > PC_MAX_FILES) {
		json_t *p = json_object_get(json_array_get(files, PC_MAX_FILES), "path");
		char where[32];
		snprintf(where, sizeof(where), "files[%d]", PC_MAX_FILES);
		return refuse(why, PC_RULE_TOO_MANY_FILES, where, json_string_value(p), json_string_length(p),
			      "%zu files, more than %d", n, PC_MAX_FILES);
	}
	pc_patch_t *patch = xmalloc0(sizeof(*patch));
	patch->files = xmalloc0(n * sizeof(*patch->files));
	for (size_t i = 0; i < n; i++) {
		if (check_file(json_array_get(files, i), i, allowed, patch, why) < 0) {
			pc_patch_free(patch);
			return -1;
		}
	}
	*out = patch;
	return 0;
}

void pc_patch_free(pc_patch_t *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->n; i++) {
		free(p->files[i].path);
		free(p->files[i].content);
	}
	free(p->files);
	free(p);
}

json_t *pc_patch_json(const pc_patch_t *p)
{
	json_t *files = json_array();
	for (size_t i = 0; i < p->n; i++)
		json_array_append_new(files, json_pack("{s:s, s:s%}", "path", p->files[i].path, "content",
						       p->files[i].content, p->files[i].len));
	return json_pack("{s:o}", "files", files);
}

/* ---- the message ---- */

#define JSON_FLAGS (JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL)

static bool is_patch_doc(json_t *j)
{
	return json_is_object(j) && json_object_get(j, "files");
}

/* A fence line: up to 3 spaces, then 3 or more ` or ~.  Sets *ch, *count
 * and *info (the rest of the line, trimmed) and returns true. */
static bool fence(const char *line, size_t n, char *ch, size_t *count, const char **info, size_t *info_len)
{
	size_t i = 0;
	while (i < n && i < 3 && line[i] == ' ')
		i++;
	if (i >= n || (line[i] != '`' && line[i] != '~'))
		return false;
	char c = line[i];
	size_t k = 0;
	while (i + k < n && line[i + k] == c)
		k++;
	if (k < 3)
		return false;
	const char *s = line + i + k, *e = line + n;
	while (s < e && isspace((unsigned char)*s))
		s++;
	while (e > s && isspace((unsigned char)e[-1]))
		e--;
	if (c == '`' && memchr(s, '`', (size_t)(e - s)))
		return false; /* not a fence: inline code */
	*ch = c;
	*count = k;
	*info = s;
	*info_len = (size_t)(e - s);
	return true;
}

static bool info_is_json(const char *info, size_t n)
{
	size_t w = 0;
	while (w < n && !isspace((unsigned char)info[w]) && info[w] != '{')
		w++;
	return w == 0 || (w == 4 && !strncasecmp(info, "json", 4));
}

int pc_extract(const char *content, size_t len, json_t **doc, pc_refusal_t *why)
{
	if (!content)
		return refuse(why, PC_RULE_NO_PATCH, "message", NULL, 0, "no content");
	if (len > PC_MAX_MESSAGE)
		return refuse(why, PC_RULE_TOO_LARGE, "message", NULL, 0, "%zu bytes, more than %d", len, PC_MAX_MESSAGE);
	const char *s = content, *e = content + len;
	while (s < e && isspace((unsigned char)*s))
		s++;
	while (e > s && isspace((unsigned char)e[-1]))
		e--;
	json_error_t je;
	if (s < e && *s == '{') {
		json_t *j = json_loadb(s, (size_t)(e - s), JSON_FLAGS, &je);
		if (!j) {
			char *t = shown(je.text, strlen(je.text)); /* it can quote the input's bytes */
			refuse(why, PC_RULE_NOT_JSON, "message", NULL, 0, "line %d, column %d: %s", je.line, je.column, t);
			free(t);
			return -1;
		}
		*doc = j;
		return 0;
	}

	/* Fenced blocks: the one holding {"files": ...}. */
	json_t *found = NULL;
	size_t n_found = 0, first_line = 0, bad_line = 0, line_no = 0;
	char bad_text[256] = "";
	const char *p = content, *end = content + len;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
		line_no++;
		char ch;
		size_t count, info_len;
		const char *info;
		if (!fence(p, n, &ch, &count, &info, &info_len)) {
			p += n + (nl != NULL);
			continue;
		}
		size_t open_line = line_no;
		bool json_info = info_is_json(info, info_len);
		const char *body = p + n + (nl != NULL), *q = body, *body_end = end;
		p = end;
		while (q < end) {
			const char *nl2 = memchr(q, '\n', (size_t)(end - q));
			size_t n2 = nl2 ? (size_t)(nl2 - q) : (size_t)(end - q);
			line_no++;
			char ch2;
			size_t count2, il2;
			const char *i2;
			if (fence(q, n2, &ch2, &count2, &i2, &il2) && ch2 == ch && count2 >= count && il2 == 0) {
				body_end = q;
				p = q + n2 + (nl2 != NULL);
				break;
			}
			q += n2 + (nl2 != NULL);
		}
		if (!json_info)
			continue;
		json_t *j = json_loadb(body, (size_t)(body_end - body), JSON_FLAGS, &je);
		if (!j) {
			if (!bad_line) {
				bad_line = open_line;
				char *t = shown(je.text, strlen(je.text));
				snprintf(bad_text, sizeof(bad_text), "line %d, column %d: %s", je.line, je.column, t);
				free(t);
			}
			continue;
		}
		if (is_patch_doc(j)) {
			if (n_found++ == 0) {
				found = j;
				first_line = open_line;
				continue;
			}
		}
		json_decref(j);
	}
	if (n_found == 1) {
		*doc = found;
		return 0;
	}
	json_decref(found);
	if (n_found > 1)
		return refuse(why, PC_RULE_AMBIGUOUS, "message", NULL, 0,
			      "%zu fenced blocks hold {\"files\": ...} (the first at line %zu): send one", n_found, first_line);
	if (bad_line)
		return refuse(why, PC_RULE_NOT_JSON, "message", NULL, 0, "the fenced block at line %zu: %s", bad_line,
			      bad_text);
	return refuse(why, PC_RULE_NO_PATCH, "message", NULL, 0,
		      "no {\"files\": [...]} in it (as the whole message, or in a ```json fenced block)");
}

int pc_parse_message(const char *content, size_t len, const char *const *allowed, pc_patch_t **out,
		     pc_refusal_t *why)
{
	json_t *doc = NULL;
	if (pc_extract(content, len, &doc, why) < 0)
		return -1;
	int r = pc_validate(doc, allowed, out, why);
	json_decref(doc);
	return r;
}
