/* libFuzzer target for the patch contract (orchestrator/workloads/
 * patch_contract.c), built and run by tests/fuzz/run-fuzz.  The first
 * byte picks what the rest is:
 *   0: a model's message content  -> pc_parse_message
 *   1: a patch document built from raw bytes (paths and contents need not
 *      be UTF-8: json_stringn_nocheck) -> pc_validate
 *   2: one path -> pc_normalise, pc_is_test_file
 * Beyond the sanitizers, every outcome is checked against the contract
 * with code written independently of the module: an accepted patch that
 * breaks a rule, or a refusal that is not one clean line, aborts. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "patch_contract.h"

static const char *const allowed[] = { "calculator.py", "src/", "./pkg//", "test_calculator.py", "tests/",
				       "../evil.py", "/etc/", "", NULL };

#define CHECK(cond)                                                                                          \
	do {                                                                                                 \
		if (!(cond)) {                                                                               \
			fprintf(stderr, "contract broken: %s (%s:%d)\n", #cond, __FILE__, __LINE__);        \
			abort();                                                                             \
		}                                                                                            \
	} while (0)

/* Decode one UTF-8 sequence the long way round; -1 when it is not one.
 * (The module validates with byte ranges; this builds the code point and
 * checks it against the shortest form.) */
static long next_cp(const unsigned char *s, size_t len, size_t *n)
{
	unsigned char c = s[0];
	int k = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
	if (k == 0 || (size_t)k > len)
		return -1;
	long cp = k == 1 ? c : k == 2 ? (c & 0x1F) : k == 3 ? (c & 0x0F) : (c & 0x07);
	for (int i = 1; i < k; i++) {
		if ((s[i] & 0xC0) != 0x80)
			return -1;
		cp = cp << 6 | (s[i] & 0x3F);
	}
	static const long min[] = { 0, 0, 0x80, 0x800, 0x10000 };
	if (cp < min[k] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
		return -1;
	*n = (size_t)k;
	return cp;
}

/* Well-formed UTF-8 without NUL, control characters (but those in ok) or
 * bidirectional overrides. */
static int clean_text(const char *str, size_t len, const char *ok)
{
	const unsigned char *s = (const unsigned char *)str;
	for (size_t i = 0, n; i < len; i += n) {
		long cp = next_cp(s + i, len - i, &n);
		if (cp < 0 || cp == 0)
			return 0;
		if ((cp < 0x20 && !strchr(ok, (int)cp)) || (cp >= 0x7F && cp <= 0x9F))
			return 0;
		if ((cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069))
			return 0;
	}
	return 1;
}

/* The shape a normalised path has. */
static void check_normal_form(const char *p)
{
	size_t len = strlen(p);
	CHECK(len > 0 && p[0] != '/' && p[len - 1] != '/');
	CHECK(!strstr(p, "//"));
	const char *c = p;
	for (;;) {
		const char *e = strchr(c, '/');
		size_t n = e ? (size_t)(e - c) : strlen(c);
		CHECK(n > 0 && n <= 255);
		CHECK(!(n == 1 && c[0] == '.') && !(n == 2 && c[0] == '.' && c[1] == '.'));
		if (!e)
			break;
		c = e + 1;
	}
}

static void check_patch(const pc_patch_t *p)
{
	CHECK(p->n >= 1 && p->n <= PC_MAX_FILES);
	size_t total = 0;
	for (size_t i = 0; i < p->n; i++) {
		const pc_file_t *f = &p->files[i];
		check_normal_form(f->path);
		/* allowed: the list above, read by hand ("pkg/" and "src/" are
		 * directories; ../evil.py, /etc/ and "" allow nothing) */
		int ok = !strcmp(f->path, "calculator.py") || !strncmp(f->path, "src/", 4) ||
			 !strncmp(f->path, "pkg/", 4);
		CHECK(ok);
		/* never a test file, even though the list names some */
		const char *base = strrchr(f->path, '/');
		base = base ? base + 1 : f->path;
		CHECK(strncasecmp(base, "test_", 5) != 0);
		for (const char *c = f->path, *e; (e = strchr(c, '/')); c = e + 1)
			CHECK(!((e - c == 4 && !strncasecmp(c, "test", 4)) || (e - c == 5 && !strncasecmp(c, "tests", 5))));
		CHECK(clean_text(f->path, strlen(f->path), ""));
		CHECK(strlen(f->content) == f->len); /* no NUL inside */
		CHECK(clean_text(f->content, f->len, "\t\n\r"));
		for (size_t k = 0; k < i; k++)
			CHECK(strcmp(p->files[k].path, f->path) != 0);
		total += f->len;
	}
	CHECK(total == p->total && total <= PC_MAX_TOTAL_BYTES);
	json_t *j = pc_patch_json(p);
	CHECK(j != NULL);
	char *text = json_dumps(j, JSON_COMPACT);
	CHECK(text != NULL);
	free(text);
	json_decref(j);
}

static void check_refusal(const pc_refusal_t *why)
{
	CHECK(why->rule && why->message);
	size_t r = strlen(why->rule);
	CHECK(!strncmp(why->message, why->rule, r) && why->message[r] == ':');
	CHECK(clean_text(why->message, strlen(why->message), ""));
	CHECK(!why->path || clean_text(why->path, strlen(why->path), ""));
}

static void outcome(int r, pc_patch_t *p, pc_refusal_t *why)
{
	if (r == 0) {
		CHECK(p != NULL);
		check_patch(p);
		pc_patch_free(p);
	} else {
		CHECK(r == -1 && p == NULL);
		check_refusal(why);
		pc_refusal_clear(why);
	}
}

/* Take n bytes (fewer at the end) from the input. */
static const char *take(const uint8_t **data, size_t *size, size_t n, size_t *got)
{
	*got = n < *size ? n : *size;
	const char *s = (const char *)*data;
	*data += *got;
	*size -= *got;
	return s;
}

static json_t *raw_doc(const uint8_t *data, size_t size)
{
	if (size < 1)
		return json_object();
	int n = data[0] % 6;
	int extra = data[0] & 0x80; /* an unknown member in the last file */
	data++;
	size--;
	json_t *files = json_array();
	for (int i = 0; i < n; i++) {
		size_t got, plen = size ? data[0] : 0, clen;
		take(&data, &size, 1, &got);
		const char *path = take(&data, &size, plen, &plen);
		clen = size >= 2 ? (size_t)(data[0] | data[1] << 8) : 0;
		take(&data, &size, 2, &got);
		const char *content = take(&data, &size, clen, &clen);
		json_t *f = json_object();
		json_object_set_new(f, "path", json_stringn_nocheck(path, plen));
		json_object_set_new(f, "content", json_stringn_nocheck(content, clen));
		if (extra && i == n - 1)
			json_object_set_new(f, "mode", json_string("delete"));
		json_array_append_new(files, f);
	}
	return json_pack("{s:o}", "files", files);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	int mode = data[0] % 3;
	data++;
	size--;
	pc_patch_t *p = NULL;
	pc_refusal_t why = { 0 };
	if (mode == 0) {
		outcome(pc_parse_message((const char *)data, size, allowed, &p, &why), p, &why);
	} else if (mode == 1) {
		json_t *doc = raw_doc(data, size);
		outcome(pc_validate(doc, allowed, &p, &why), p, &why);
		json_decref(doc);
	} else {
		char *path = strndup((const char *)data, size);
		const char *rule = NULL;
		char *norm = pc_normalise(path, &rule);
		if (norm) {
			check_normal_form(norm);
			const char *rule2 = NULL;
			char *again = pc_normalise(norm, &rule2);
			CHECK(again && !strcmp(again, norm)); /* normalising is idempotent */
			free(again);
			(void)pc_is_test_file(norm);
			free(norm);
		} else {
			CHECK(rule != NULL);
		}
		(void)pc_utf8_valid_prefix((const unsigned char *)data, size);
		free(path);
	}
	return 0;
}
