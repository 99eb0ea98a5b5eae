/* Unit tests for the patch contract (orchestrator/workloads/patch_contract.c):
 * every rule, its message, and the edges between accepted and refused. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "patch_contract.h"

static const char *const calc[] = { "calculator.py", NULL };
static const char *const wide[] = { "calculator.py", "src/", "README.md", "test_calculator.py", "tests/", NULL };

/* {"files": [{"path": p, "content": c}]} with raw bytes (json_stringn_nocheck:
 * the contract must not rely on jansson having checked them). */
static json_t *doc1(const char *path, size_t plen, const char *content, size_t clen)
{
	json_t *f = json_object();
	json_object_set_new(f, "path", json_stringn_nocheck(path, plen));
	json_object_set_new(f, "content", json_stringn_nocheck(content, clen));
	return json_pack("{s:[o]}", "files", f);
}

static json_t *docp(const char *path)
{
	return doc1(path, strlen(path), "x = 1\n", 6);
}

static json_t *docc(const char *content, size_t len)
{
	return doc1("calculator.py", 13, content, len);
}

static json_t *parse(const char *text)
{
	json_error_t je;
	json_t *j = json_loads(text, JSON_ALLOW_NUL, &je);
	ck_assert_msg(j != NULL, "test JSON broken: %s", je.text);
	return j;
}

static pc_patch_t *accepted(json_t *doc, const char *const *allowed)
{
	pc_patch_t *p = NULL;
	pc_refusal_t why = { 0 };
	int r = pc_validate(doc, allowed, &p, &why);
	ck_assert_msg(r == 0, "refused: %s", why.message ? why.message : "?");
	json_decref(doc);
	return p;
}

/* Refused with rule; the message, when given, exactly. */
static void refused(json_t *doc, const char *const *allowed, const char *rule, const char *message)
{
	pc_patch_t *p = NULL;
	pc_refusal_t why = { 0 };
	ck_assert_int_eq(pc_validate(doc, allowed, &p, &why), -1);
	ck_assert_ptr_null(p);
	ck_assert_ptr_nonnull(why.rule);
	ck_assert_msg(!strcmp(why.rule, rule), "rule %s, want %s (%s)", why.rule, rule, why.message);
	ck_assert_msg(!strncmp(why.message, rule, strlen(rule)) && why.message[strlen(rule)] == ':',
		      "message does not start with its rule: %s", why.message);
	ck_assert_msg(!strchr(why.message, '\n'), "message is more than one line: %s", why.message);
	if (message)
		ck_assert_msg(!strcmp(why.message, message), "message\n  %s\nwant\n  %s", why.message, message);
	pc_refusal_clear(&why);
	json_decref(doc);
}

START_TEST(test_good)
{
	pc_patch_t *p = accepted(parse("{\"files\": [{\"path\": \"calculator.py\", \"content\": \"def add(a, b):\\n\\treturn a + b\\r\\n\"}]}"), calc);
	ck_assert_uint_eq(p->n, 1);
	ck_assert_str_eq(p->files[0].path, "calculator.py");
	ck_assert_str_eq(p->files[0].content, "def add(a, b):\n\treturn a + b\r\n");
	ck_assert_uint_eq(p->total, strlen(p->files[0].content));
	/* the output is the normalised patch */
	json_t *j = pc_patch_json(p);
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(json_object_get(j, "files"), 0), "path")),
			 "calculator.py");
	json_decref(j);
	pc_patch_free(p);

	/* normalised paths: ./, //, trailing / */
	p = accepted(docp("./calculator.py"), calc);
	ck_assert_str_eq(p->files[0].path, "calculator.py");
	pc_patch_free(p);
	p = accepted(docp("src//pkg/./mod.py"), wide);
	ck_assert_str_eq(p->files[0].path, "src/pkg/mod.py");
	pc_patch_free(p);

	/* empty content is a file's complete contents too; UTF-8 of every length */
	p = accepted(docc("", 0), calc);
	ck_assert_uint_eq(p->files[0].len, 0);
	pc_patch_free(p);
	const char *utf = "caf\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x9a\x80 \xc2\xa0 \xed\x9f\xbf \xee\x80\x80 \xf4\x8f\xbf\xbf \xef\xbb\xbf";
	pc_patch_free(accepted(docc(utf, strlen(utf)), calc));

	/* other top-level members are ignored */
	p = accepted(parse("{\"explanation\": \"fixed add\", \"files\": [{\"path\": \"calculator.py\", \"content\": \"\"}]}"), calc);
	ck_assert_uint_eq(p->n, 1);
	pc_patch_free(p);
}
END_TEST

START_TEST(test_shape)
{
	refused(parse("[]"), calc, PC_RULE_SHAPE, "shape: expected an object {\"files\": [...]}");
	refused(json_string("x"), calc, PC_RULE_SHAPE, NULL);
	refused(NULL, calc, PC_RULE_SHAPE, NULL);
	refused(parse("{}"), calc, PC_RULE_SHAPE, "shape: files: required");
	refused(parse("{\"files\": {\"path\": \"calculator.py\"}}"), calc, PC_RULE_SHAPE,
		"shape: files: expected an array of {\"path\", \"content\"}");
	refused(parse("{\"files\": [\"calculator.py\"]}"), calc, PC_RULE_SHAPE,
		"shape: files[0]: expected an object {\"path\", \"content\"}");
	refused(parse("{\"files\": [{\"content\": \"\"}]}"), calc, PC_RULE_SHAPE, "shape: files[0]: \"path\": required");
	refused(parse("{\"files\": [{\"path\": 7, \"content\": \"\"}]}"), calc, PC_RULE_SHAPE,
		"shape: files[0]: \"path\": expected a string");
	refused(parse("{\"files\": [{\"path\": \"calculator.py\"}]}"), calc, PC_RULE_SHAPE,
		"shape: files[0] \"calculator.py\": \"content\": required");
	refused(parse("{\"files\": [{\"path\": \"calculator.py\", \"content\": null}]}"), calc, PC_RULE_SHAPE,
		"shape: files[0] \"calculator.py\": \"content\": expected a string (the file's complete new contents)");
	refused(parse("{\"files\": [{\"path\": \"calculator.py\", \"content\": [\"a\"]}]}"), calc, PC_RULE_SHAPE, NULL);
	/* a member a file does not have: it might mean "delete" or "append" */
	refused(parse("{\"files\": [{\"path\": \"calculator.py\", \"content\": \"\", \"action\": \"delete\"}]}"), calc,
		PC_RULE_SHAPE, "shape: files[0]: unknown key \"action\" (a file has only \"path\" and \"content\")");
	refused(parse("{\"files\": [{\"path\": \"calculator.py\", \"content\": \"\"}, 3]}"), calc, PC_RULE_SHAPE,
		"shape: files[1]: expected an object {\"path\", \"content\"}");
}
END_TEST

START_TEST(test_counts_and_size)
{
	refused(parse("{\"files\": []}"), calc, PC_RULE_NO_FILES, "no-files: files: no file in the patch");
	/* 3 files are fine, 4 are not (named by the 4th's path) */
	const char *three = "{\"files\": [{\"path\": \"src/a.py\", \"content\": \"a\"}, {\"path\": \"src/b.py\", \"content\": \"b\"},"
			    " {\"path\": \"src/c.py\", \"content\": \"c\"}]}";
	pc_patch_t *p = accepted(parse(three), wide);
	ck_assert_uint_eq(p->n, 3);
	ck_assert_uint_eq(p->total, 3);
	pc_patch_free(p);
	refused(parse("{\"files\": [{\"path\": \"src/a.py\", \"content\": \"a\"}, {\"path\": \"src/b.py\", \"content\": \"b\"},"
		      " {\"path\": \"src/c.py\", \"content\": \"c\"}, {\"path\": \"src/d.py\", \"content\": \"d\"}]}"),
		wide, PC_RULE_TOO_MANY_FILES, "too-many-files: files[3] \"src/d.py\": 4 files, more than 3");

	/* 12,000 bytes in all is fine; one more is not, over one or several files */
	char *big = malloc(PC_MAX_TOTAL_BYTES + 2);
	memset(big, 'x', PC_MAX_TOTAL_BYTES + 1);
	big[PC_MAX_TOTAL_BYTES + 1] = '\0';
	pc_patch_free(accepted(docc(big, PC_MAX_TOTAL_BYTES), calc));
	refused(docc(big, PC_MAX_TOTAL_BYTES + 1), calc, PC_RULE_TOO_LARGE,
		"too-large: files[0] \"calculator.py\": the contents come to 12001 bytes with this file, more than 12000");
	json_t *d;
	d = json_pack("{s:[{s:s, s:s%}, {s:s, s:s%}]}", "files", "path", "src/a.py", "content", big, (size_t)6000, "path",
		      "src/b.py", "content", big, (size_t)6000);
	pc_patch_free(accepted(d, wide));
	d = json_pack("{s:[{s:s, s:s%}, {s:s, s:s%}]}", "files", "path", "src/a.py", "content", big, (size_t)6000, "path",
		      "src/b.py", "content", big, (size_t)6001);
	refused(d, wide, PC_RULE_TOO_LARGE,
		"too-large: files[1] \"src/b.py\": the contents come to 12001 bytes with this file, more than 12000");
	/* bytes, not characters: 4,001 three-byte characters are 12,003 bytes */
	char *wide_chars = malloc(3 * 4001 + 1);
	for (int i = 0; i < 4001; i++)
		memcpy(wide_chars + 3 * i, "\xe2\x9c\x93", 3);
	refused(docc(wide_chars, 3 * 4001), calc, PC_RULE_TOO_LARGE, NULL);
	pc_patch_free(accepted(docc(wide_chars, 3 * 4000), calc));
	free(wide_chars);
	free(big);
}
END_TEST

START_TEST(test_paths)
{
	refused(docp(""), calc, PC_RULE_PATH_EMPTY, "path-empty: files[0] \"\": names no file");
	refused(docp("."), calc, PC_RULE_PATH_EMPTY, NULL);
	refused(docp("./"), calc, PC_RULE_PATH_EMPTY, NULL);
	refused(docp(".//./"), calc, PC_RULE_PATH_EMPTY, NULL);
	refused(docp("/etc/passwd"), calc, PC_RULE_PATH_ABSOLUTE, "path-absolute: files[0] \"/etc/passwd\": an absolute path");
	refused(docp("//calculator.py"), calc, PC_RULE_PATH_ABSOLUTE, NULL);
	refused(docp("/calculator.py"), calc, PC_RULE_PATH_ABSOLUTE, NULL);
	refused(docp("../calculator.py"), calc, PC_RULE_PATH_ESCAPES, "path-escapes: files[0] \"../calculator.py\": leaves the tree");
	refused(docp(".."), calc, PC_RULE_PATH_ESCAPES, NULL);
	refused(docp("./../x"), calc, PC_RULE_PATH_ESCAPES, NULL);
	refused(docp("src/../../calculator.py"), calc, PC_RULE_PATH_ESCAPES, NULL);
	refused(docp("src/a/../../../etc/passwd"), calc, PC_RULE_PATH_ESCAPES, NULL);
	/* ".." that stays inside the tree is still refused */
	refused(docp("src/../calculator.py"), calc, PC_RULE_PATH_PARENT,
		"path-parent: files[0] \"src/../calculator.py\": \"..\" is not allowed in a path");
	refused(docp("calculator.py/.."), calc, PC_RULE_PATH_PARENT, NULL);
	/* "..." and "..a" are names */
	pc_patch_free(accepted(docp("src/..."), (const char *const[]){ "src/", NULL }));
	pc_patch_free(accepted(docp("src/..a"), (const char *const[]){ "src/", NULL }));
	/* lengths */
	char longp[PC_MAX_PATH + 2];
	memset(longp, 'a', sizeof(longp));
	for (int i = 100; i < PC_MAX_PATH; i += 100)
		longp[i] = '/';
	longp[PC_MAX_PATH + 1] = '\0';
	refused(docp(longp), calc, PC_RULE_PATH_TOO_LONG, NULL);
	char comp[300] = "src/";
	memset(comp + 4, 'b', 256);
	comp[260] = '\0';
	refused(docp(comp), wide, PC_RULE_PATH_TOO_LONG, NULL);
	comp[259] = '\0'; /* 255 is fine */
	pc_patch_free(accepted(docp(comp), wide));
	/* bytes in paths: NUL, bad UTF-8, any control character (\t \n \r too) */
	refused(doc1("calc\0.py", 8, "", 0), calc, PC_RULE_NUL,
		"nul: files[0] \"calc\\x00.py\": a NUL byte in the path at byte 4");
	refused(docp("calc\xff.py"), calc, PC_RULE_INVALID_UTF8, "invalid-utf8: files[0] \"calc\\xff.py\": not UTF-8 in the path at byte 4");
	refused(docp("calc\xc0\xae.py"), calc, PC_RULE_INVALID_UTF8, NULL); /* an overlong "." */
	refused(docp("calculator.py\n"), calc, PC_RULE_CONTROL_CHAR,
		"control-char: files[0] \"calculator.py\\x0a\": a control character in the path at byte 13");
	refused(docp("calc\tx.py"), calc, PC_RULE_CONTROL_CHAR, NULL);
	refused(docp("calc\rx.py"), calc, PC_RULE_CONTROL_CHAR, NULL);
	refused(docp("\x1b[31mcalculator.py"), calc, PC_RULE_CONTROL_CHAR, NULL);
	refused(docp("calc\x7f.py"), calc, PC_RULE_CONTROL_CHAR, NULL);
	refused(docp("calc\xc2\x85.py"), calc, PC_RULE_CONTROL_CHAR, NULL); /* U+0085, a C1 control */
	refused(docp("calc\xe2\x80\xae" "yp.py"), calc, PC_RULE_BIDI_CONTROL, NULL);
	/* a non-ASCII name is a name */
	pc_patch_free(accepted(docp("src/caf\xc3\xa9.py"), wide));
}
END_TEST

START_TEST(test_allowed)
{
	refused(docp("setup.py"), calc, PC_RULE_NOT_ALLOWED,
		"not-allowed: files[0] \"setup.py\": not an allowed path (allowed: calculator.py)");
	refused(docp("calculator.py"), (const char *const[]){ NULL }, PC_RULE_NOT_ALLOWED,
		"not-allowed: files[0] \"calculator.py\": not an allowed path (allowed: none)");
	refused(docp("calculator.py"), NULL, PC_RULE_NOT_ALLOWED, NULL);
	refused(docp("Calculator.py"), calc, PC_RULE_NOT_ALLOWED, NULL); /* exact, case and all */
	refused(docp("calculator.pyc"), calc, PC_RULE_NOT_ALLOWED, NULL);
	refused(docp("sub/calculator.py"), calc, PC_RULE_NOT_ALLOWED, NULL);
	/* a directory entry allows what is below it, not itself nor its look-alikes */
	const char *const src[] = { "src/", NULL };
	pc_patch_free(accepted(docp("src/a/b/c.py"), src));
	refused(docp("src"), src, PC_RULE_NOT_ALLOWED, NULL);
	refused(docp("srcx/a.py"), src, PC_RULE_NOT_ALLOWED, NULL);
	refused(docp("sr/a.py"), src, PC_RULE_NOT_ALLOWED, NULL);
	/* a file entry is not a directory */
	refused(docp("calculator.py/x"), calc, PC_RULE_NOT_ALLOWED, NULL);
	/* entries are normalised; ones that cannot be allow nothing */
	pc_patch_free(accepted(docp("calculator.py"), (const char *const[]){ "./calculator.py", NULL }));
	pc_patch_free(accepted(docp("pkg/mod.py"), (const char *const[]){ "./pkg//", NULL }));
	refused(docp("x.py"), (const char *const[]){ "./", "/", "../", "", NULL }, PC_RULE_NOT_ALLOWED, NULL);
	refused(docp("etc/passwd"), (const char *const[]){ "/etc/", NULL }, PC_RULE_NOT_ALLOWED, NULL);
}
END_TEST

START_TEST(test_test_files)
{
	/* never writable, even when the allowed list names them */
	refused(docp("test_calculator.py"), wide, PC_RULE_TEST_FILE,
		"test-file: files[0] \"test_calculator.py\": test files are never writable");
	refused(docp("tests/helpers.py"), wide, PC_RULE_TEST_FILE, NULL);
	refused(docp("./tests//x.py"), wide, PC_RULE_TEST_FILE, NULL);
	const char *yes[] = { "test_calculator.py", "TEST_X.PY", "Test_x.py", "tests/x.py", "src/tests/x.py", "src/test/a.c",
			      "src/__tests__/a.js", "src/__snapshots__/a.snap", "spec/a_spec.rb", "pkg/testdata/in.txt",
			      "calc_test.go", "calc_test", "calc_tests.py", "a.test.js", "a.spec.ts", "foo_spec.rb",
			      "conftest.py", "src/conftest.py", "pytest.ini", "tox.ini", "CalculatorTest.java",
			      "CalculatorTests.cs", "test.py", "tests.py", "Test.java", "test", "tests_util.py",
			      "test_calc", NULL };
	for (size_t i = 0; yes[i]; i++)
		ck_assert_msg(pc_is_test_file(yes[i]), "%s should be a test file", yes[i]);
	const char *no[] = { "calculator.py", "latest.py", "contest.py", "testing.py", "manifest.py", "attest_x.py",
			     "src/testing_utils.py", "protest/a.py", "Latest.java", "Contest.java", "src/tester.py",
			     "testsuite.c", "README.md", "detest", ".test", NULL };
	for (size_t i = 0; no[i]; i++)
		ck_assert_msg(!pc_is_test_file(no[i]), "%s should not be a test file", no[i]);
}
END_TEST

START_TEST(test_duplicates)
{
	const char *const src[] = { "src/", "calculator.py", NULL };
	refused(parse("{\"files\": [{\"path\": \"calculator.py\", \"content\": \"a\"}, {\"path\": \"calculator.py\", \"content\": \"b\"}]}"),
		src, PC_RULE_DUPLICATE, "duplicate: files[1] \"calculator.py\": the same file as files[0] (calculator.py)");
	refused(parse("{\"files\": [{\"path\": \"./calculator.py\", \"content\": \"a\"}, {\"path\": \"calculator.py\", \"content\": \"b\"}]}"),
		src, PC_RULE_DUPLICATE, NULL);
	refused(parse("{\"files\": [{\"path\": \"src/a.py\", \"content\": \"a\"}, {\"path\": \"src//./a.py/\", \"content\": \"b\"}]}"),
		src, PC_RULE_DUPLICATE, "duplicate: files[1] \"src//./a.py/\": the same file as files[0] (src/a.py)");
	/* distinct names that only look alike are distinct */
	pc_patch_t *p = accepted(parse("{\"files\": [{\"path\": \"src/a.py\", \"content\": \"a\"}, {\"path\": \"src/A.py\", \"content\": \"b\"}]}"), src);
	ck_assert_uint_eq(p->n, 2);
	pc_patch_free(p);
}
END_TEST

START_TEST(test_content)
{
	refused(docc("a\nb\0c", 5), calc, PC_RULE_NUL, "nul: files[0] \"calculator.py\": a NUL byte in the content at byte 3 (line 2)");
	/* invalid UTF-8, each way */
	const struct {
		const char *s;
		size_t at;
	} bad[] = {
		{ "ok \xc0\xaf", 3 },             /* overlong 2 bytes */
		{ "\xc1\xbf", 0 },                /* overlong 2 bytes */
		{ "\xe0\x80\xaf", 0 },            /* overlong 3 bytes */
		{ "\xe0\x9f\xbf", 0 },            /* overlong 3 bytes, the largest */
		{ "\xf0\x80\x80\xaf", 0 },        /* overlong 4 bytes */
		{ "\xf0\x8f\xbf\xbf", 0 },        /* overlong 4 bytes, the largest */
		{ "\xed\xa0\x80", 0 },            /* U+D800, a surrogate */
		{ "\xed\xbf\xbf", 0 },            /* U+DFFF */
		{ "\xed\xa0\xbd\xed\xb8\x80", 0 }, /* a surrogate pair, CESU-8 */
		{ "\xf4\x90\x80\x80", 0 },        /* U+110000 */
		{ "\xf5\x80\x80\x80", 0 },
		{ "\xf8\x88\x80\x80\x80", 0 },   /* 5 bytes */
		{ "\xfe", 0 },
		{ "\xff", 0 },
		{ "ab\x80", 2 },                  /* a stray continuation byte */
		{ "\xe2\x82", 0 },                /* truncated */
		{ "\xe2\x82x", 0 },               /* cut short by ASCII */
		{ "\xf0\x9f\x9a", 0 },
		{ "x\xc3", 1 },
		{ NULL, 0 },
	};
	for (size_t i = 0; bad[i].s; i++) {
		pc_patch_t *p = NULL;
		pc_refusal_t why = { 0 };
		json_t *d = docc(bad[i].s, strlen(bad[i].s));
		ck_assert_int_eq(pc_validate(d, calc, &p, &why), -1);
		ck_assert_msg(!strcmp(why.rule, PC_RULE_INVALID_UTF8), "case %zu: %s", i, why.message);
		char want[64];
		snprintf(want, sizeof(want), "at byte %zu (line 1)", bad[i].at);
		ck_assert_msg(strstr(why.message, want), "case %zu: %s (want %s)", i, why.message, want);
		pc_refusal_clear(&why);
		json_decref(d);
	}
	/* control characters: all of C0 but \t \n \r, DEL, C1 */
	for (int c = 1; c < 0x20; c++) {
		char s[4] = { 'a', (char)c, 'b', 0 };
		if (c == '\t' || c == '\n' || c == '\r')
			pc_patch_free(accepted(docc(s, 3), calc));
		else
			refused(docc(s, 3), calc, PC_RULE_CONTROL_CHAR, NULL);
	}
	refused(docc("x\n\x1b[2J", 5), calc, PC_RULE_CONTROL_CHAR,
		"control-char: files[0] \"calculator.py\": a control character (U+001B) in the content at byte 2 (line 2)");
	refused(docc("\x7f", 1), calc, PC_RULE_CONTROL_CHAR, NULL);
	refused(docc("\xc2\x80", 2), calc, PC_RULE_CONTROL_CHAR, NULL);
	refused(docc("\xc2\x9f", 2), calc, PC_RULE_CONTROL_CHAR, NULL);
	pc_patch_free(accepted(docc("\xc2\xa0", 2), calc)); /* U+00A0 is not a control */
	/* text that reads other than it runs (CVE-2021-42574) */
	refused(docc("s = \"\xe2\x80\xae\"", 9), calc, PC_RULE_BIDI_CONTROL,
		"bidi-control: files[0] \"calculator.py\": a bidirectional control character (U+202E) in the content at byte 5 (line 1)");
	refused(docc("\xe2\x81\xa6", 3), calc, PC_RULE_BIDI_CONTROL, NULL);
	refused(docc("\xe2\x81\xa9", 3), calc, PC_RULE_BIDI_CONTROL, NULL);
	pc_patch_free(accepted(docc("\xe2\x80\x8f", 3), calc)); /* U+200F, a mark, not an override */
	/* NUL before bad UTF-8 is named NUL; bad UTF-8 first is named that */
	refused(docc("\0\xff", 2), calc, PC_RULE_NUL, NULL);
	refused(docc("\xff\0", 2), calc, PC_RULE_INVALID_UTF8, NULL);
	/* the first file's fault is found before a later file's */
	refused(parse("{\"files\": [{\"path\": \"../x\", \"content\": \"\"}, {\"path\": \"/y\", \"content\": \"\"}]}"), calc,
		PC_RULE_PATH_ESCAPES, NULL);
}
END_TEST

START_TEST(test_utf8_prefix)
{
	ck_assert_uint_eq(pc_utf8_valid_prefix((const unsigned char *)"", 0), 0);
	ck_assert_uint_eq(pc_utf8_valid_prefix((const unsigned char *)"abc", 3), 3);
	ck_assert_uint_eq(pc_utf8_valid_prefix((const unsigned char *)"a\xf4\x8f\xbf\xbf", 5), 5);
	ck_assert_uint_eq(pc_utf8_valid_prefix((const unsigned char *)"a\xf4\x8f\xbf", 4), 1);
	/* every code point encodes to something it accepts, and only those */
	for (unsigned cp = 0; cp <= 0x10FFFF; cp += (cp < 0x10000 ? 1 : 97)) {
		unsigned char b[4];
		size_t n;
		if (cp < 0x80) {
			b[0] = (unsigned char)cp;
			n = 1;
		} else if (cp < 0x800) {
			b[0] = (unsigned char)(0xC0 | cp >> 6);
			b[1] = (unsigned char)(0x80 | (cp & 0x3F));
			n = 2;
		} else if (cp < 0x10000) {
			b[0] = (unsigned char)(0xE0 | cp >> 12);
			b[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
			b[2] = (unsigned char)(0x80 | (cp & 0x3F));
			n = 3;
		} else {
			b[0] = (unsigned char)(0xF0 | cp >> 18);
			b[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
			b[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
			b[3] = (unsigned char)(0x80 | (cp & 0x3F));
			n = 4;
		}
		bool surrogate = cp >= 0xD800 && cp <= 0xDFFF;
		ck_assert_msg(pc_utf8_valid_prefix(b, n) == (surrogate ? 0 : n), "U+%04X", cp);
	}
}
END_TEST

START_TEST(test_refusal_escapes_path)
{
	pc_patch_t *p = NULL;
	pc_refusal_t why = { 0 };
	json_t *d = docp("\x1b]0;owned\x07\"\\.py");
	ck_assert_int_eq(pc_validate(d, calc, &p, &why), -1);
	ck_assert_str_eq(why.path, "\\x1b]0;owned\\x07\\x22\\x5c.py");
	ck_assert_str_eq(why.message,
			 "control-char: files[0] \"\\x1b]0;owned\\x07\\x22\\x5c.py\": a control character in the path at byte 0");
	pc_refusal_clear(&why);
	pc_refusal_clear(&why); /* twice is harmless */
	json_decref(d);
	/* a multi-byte character that must not be shown is escaped whole */
	d = docp("calc\xe2\x80\xaepy.txt");
	ck_assert_int_eq(pc_validate(d, calc, &p, &why), -1);
	ck_assert_str_eq(why.path, "calc\\xe2\\x80\\xaepy.txt");
	pc_refusal_clear(&why);
	json_decref(d);
	/* the JSON parser's message quotes the input: escaped too */
	ck_assert_int_eq(pc_extract("{\"files\": \x01}", 13, &d, &why), -1);
	ck_assert_str_eq(why.rule, PC_RULE_NOT_JSON);
	ck_assert_ptr_null(strchr(why.message, '\x01'));
	ck_assert_ptr_nonnull(strstr(why.message, "\\x01"));
	pc_refusal_clear(&why);
	/* a long path is shown cut */
	char longp[600];
	memset(longp, 'a', sizeof(longp) - 1);
	longp[599] = '\0';
	d = docp(longp);
	ck_assert_int_eq(pc_validate(d, calc, &p, &why), -1);
	ck_assert_uint_lt(strlen(why.message), 300);
	ck_assert_ptr_nonnull(strstr(why.path, "..."));
	pc_refusal_clear(&why);
	json_decref(d);
}
END_TEST

START_TEST(test_allowed_parse)
{
	char **v = pc_allowed_parse("calculator.py, src/  README.md,,\tdocs/\n");
	ck_assert_str_eq(v[0], "calculator.py");
	ck_assert_str_eq(v[1], "src/");
	ck_assert_str_eq(v[2], "README.md");
	ck_assert_str_eq(v[3], "docs/");
	ck_assert_ptr_null(v[4]);
	pc_strv_free(v);
	v = pc_allowed_parse("");
	ck_assert_ptr_null(v[0]);
	pc_strv_free(v);
	v = pc_allowed_parse(NULL);
	ck_assert_ptr_null(v[0]);
	pc_strv_free(v);
	v = pc_allowed_parse(" , ,");
	ck_assert_ptr_null(v[0]);
	pc_strv_free(v);
}
END_TEST

/* ---- extracting the patch from a message's content ---- */

static json_t *extracted(const char *msg)
{
	json_t *doc = NULL;
	pc_refusal_t why = { 0 };
	int r = pc_extract(msg, strlen(msg), &doc, &why);
	ck_assert_msg(r == 0, "refused: %s", why.message ? why.message : "?");
	return doc;
}

static void not_extracted(const char *msg, size_t len, const char *rule, const char *message)
{
	json_t *doc = NULL;
	pc_refusal_t why = { 0 };
	ck_assert_int_eq(pc_extract(msg, len, &doc, &why), -1);
	ck_assert_ptr_null(doc);
	ck_assert_msg(!strcmp(why.rule, rule), "rule %s, want %s (%s)", why.rule, rule, why.message);
	if (message)
		ck_assert_msg(!strcmp(why.message, message), "message\n  %s\nwant\n  %s", why.message, message);
	pc_refusal_clear(&why);
}

/* form with its "%s" replaced by patch */
static void fill(char *buf, size_t len, const char *form, const char *patch)
{
	const char *at = strstr(form, "%s");
	ck_assert_ptr_nonnull(at);
	snprintf(buf, len, "%.*s%s%s", (int)(at - form), form, patch, at + 2);
}

static const char *first_path(json_t *doc)
{
	return json_string_value(json_object_get(json_array_get(json_object_get(doc, "files"), 0), "path"));
}

START_TEST(test_extract)
{
	const char *patch = "{\"files\": [{\"path\": \"calculator.py\", \"content\": \"def add(a, b):\\n    return a + b\\n\"}]}";
	json_t *d = extracted(patch);
	ck_assert_str_eq(first_path(d), "calculator.py");
	json_decref(d);
	/* white space around it */
	char buf[4096];
	snprintf(buf, sizeof(buf), "\n\n  %s \n", patch);
	d = extracted(buf);
	json_decref(d);
	/* in a ```json block, with prose around it */
	snprintf(buf, sizeof(buf), "Here is the fix:\n\n```json\n%s\n```\n\nThe bug was `a - b`.\n", patch);
	d = extracted(buf);
	ck_assert_str_eq(first_path(d), "calculator.py");
	json_decref(d);
	/* a bare fence, ~~~, JSON (any case), indented up to 3, a longer fence around ``` */
	const char *forms[] = { "```\n%s\n```", "~~~json\n%s\n~~~", "```JSON\n%s\n```", "   ```json\n%s\n   ```",
				"````json\n%s\n```\n````", "```json title=\"patch\"\n%s\n```", "```json\r\n%s\r\n```\r\n",
				"```json\n%s", /* never closed: to the end */ NULL };
	for (size_t i = 0; forms[i]; i++) {
		fill(buf, sizeof(buf), forms[i], patch);
		json_t *doc = NULL;
		pc_refusal_t why = { 0 };
		int r = pc_extract(buf, strlen(buf), &doc, &why);
		if (i == 4) {
			/* inside ````, the inner ``` is text: the block is not JSON */
			ck_assert_int_eq(r, -1);
			ck_assert_str_eq(why.rule, PC_RULE_NOT_JSON);
			pc_refusal_clear(&why);
			continue;
		}
		ck_assert_msg(r == 0, "form %zu: %s", i, why.message ? why.message : "?");
		ck_assert_str_eq(first_path(doc), "calculator.py");
		json_decref(doc);
	}
	/* other blocks around it are ignored: python code, a JSON block that is not a patch */
	snprintf(buf, sizeof(buf), "```python\nx = {\"files\": []}\n```\n```json\n{\"note\": 1}\n```\n```json\n%s\n```\n", patch);
	d = extracted(buf);
	ck_assert_str_eq(first_path(d), "calculator.py");
	json_decref(d);
}
END_TEST

START_TEST(test_extract_refused)
{
	const char *patch = "{\"files\": [{\"path\": \"calculator.py\", \"content\": \"\"}]}";
	char buf[4096];
	not_extracted("", 0, PC_RULE_NO_PATCH, NULL);
	not_extracted(NULL, 0, PC_RULE_NO_PATCH, "no-patch: message: no content");
	not_extracted("I could not find the bug.", 25, PC_RULE_NO_PATCH,
		      "no-patch: message: no {\"files\": [...]} in it (as the whole message, or in a ```json fenced block)");
	/* JSON in prose, not fenced, not the whole message: not taken */
	snprintf(buf, sizeof(buf), "Patch: %s", patch);
	not_extracted(buf, strlen(buf), PC_RULE_NO_PATCH, NULL);
	/* a one-line ```json {...}``` is inline code, not a fence */
	snprintf(buf, sizeof(buf), "```json %s```", patch);
	not_extracted(buf, strlen(buf), PC_RULE_NO_PATCH, NULL);
	/* a python block is not JSON */
	snprintf(buf, sizeof(buf), "```python\n%s\n```", patch);
	not_extracted(buf, strlen(buf), PC_RULE_NO_PATCH, NULL);
	/* broken JSON, whole or fenced, names where */
	not_extracted("{\"files\": [", 11, PC_RULE_NOT_JSON, NULL);
	const char *broken = "Fix:\n\n```json\n{\"files\": [{\"path\": \"calculator.py\",}]}\n```\n";
	json_t *doc = NULL;
	pc_refusal_t why = { 0 };
	ck_assert_int_eq(pc_extract(broken, strlen(broken), &doc, &why), -1);
	ck_assert_str_eq(why.rule, PC_RULE_NOT_JSON);
	ck_assert_ptr_nonnull(strstr(why.message, "the fenced block at line 3: line 1"));
	pc_refusal_clear(&why);
	/* two "files" members: refused, not the last one silently */
	const char *twice = "{\"files\": [], \"files\": [{\"path\": \"test_calculator.py\", \"content\": \"\"}]}";
	not_extracted(twice, strlen(twice), PC_RULE_NOT_JSON, NULL);
	/* two patches: which one? neither */
	snprintf(buf, sizeof(buf), "```json\n%s\n```\nor\n```json\n%s\n```\n", patch, patch);
	not_extracted(buf, strlen(buf), PC_RULE_AMBIGUOUS,
		      "ambiguous: message: 2 fenced blocks hold {\"files\": ...} (the first at line 1): send one");
	/* too big to be a patch */
	size_t big = PC_MAX_MESSAGE + 1;
	char *huge = malloc(big);
	memset(huge, ' ', big);
	not_extracted(huge, big, PC_RULE_TOO_LARGE, NULL);
	free(huge);
}
END_TEST

START_TEST(test_parse_message)
{
	const char *msg = "```json\n{\"files\": [{\"path\": \"./calculator.py\", \"content\": \"def add(a, b):\\n    return a + b\\n\"}]}\n```";
	pc_patch_t *p = NULL;
	pc_refusal_t why = { 0 };
	ck_assert_int_eq(pc_parse_message(msg, strlen(msg), calc, &p, &why), 0);
	ck_assert_str_eq(p->files[0].path, "calculator.py");
	pc_patch_free(p);
	p = NULL;
	/* "\u0000" in the JSON is a NUL in the content: the contract names it */
	const char *nul = "{\"files\": [{\"path\": \"calculator.py\", \"content\": \"a\\u0000b\"}]}";
	ck_assert_int_eq(pc_parse_message(nul, strlen(nul), calc, &p, &why), -1);
	ck_assert_str_eq(why.rule, PC_RULE_NUL);
	pc_refusal_clear(&why);
	/* a test file, through the whole path */
	const char *t = "{\"files\": [{\"path\": \"test_calculator.py\", \"content\": \"\"}]}";
	ck_assert_int_eq(pc_parse_message(t, strlen(t), wide, &p, &why), -1);
	ck_assert_str_eq(why.rule, PC_RULE_TEST_FILE);
	ck_assert_str_eq(why.path, "test_calculator.py");
	pc_refusal_clear(&why);
	/* a NULL refusal is allowed (the caller only wants yes or no) */
	ck_assert_int_eq(pc_parse_message(t, strlen(t), wide, &p, NULL), -1);
	ck_assert_int_eq(pc_extract("nothing", 7, &(json_t *){ NULL }, NULL), -1);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("patch_contract");
	TCase *tc = tcase_create("core");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_good);
	tcase_add_test(tc, test_shape);
	tcase_add_test(tc, test_counts_and_size);
	tcase_add_test(tc, test_paths);
	tcase_add_test(tc, test_allowed);
	tcase_add_test(tc, test_test_files);
	tcase_add_test(tc, test_duplicates);
	tcase_add_test(tc, test_content);
	tcase_add_test(tc, test_utf8_prefix);
	tcase_add_test(tc, test_refusal_escapes_path);
	tcase_add_test(tc, test_allowed_parse);
	tcase_add_test(tc, test_extract);
	tcase_add_test(tc, test_extract_refused);
	tcase_add_test(tc, test_parse_message);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
