/* Unit tests of the E2B listener's pure parts (orchestrator/lcd/model/
 * e2bproto.c): the file URL signature against the value the e2b SDK
 * computes, access tokens, Connect envelopes and codes, times, the list
 * cursor and the metadata filter as the SDK encodes it. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "e2bproto.h"
#include "util.h"

/* The e2b SDK (2.51.0, src/sandbox/signature.ts) for path "/home/user/a.txt",
 * operation "read", user "user", token "tok123", with and without the
 * expiration 1700000000, computed with node:
 *   "v1_" + base64(sha256("/home/user/a.txt:read:user:tok123")) without "=". */
#define SIG_PLAIN "v1_HB2bgZ+RgifWQVkD4WDT8wNBFTVrggZWSRD5EqI0H/0"
#define SIG_EXP "v1_V+Uu+RuPgK3z3SyT4Wv9NjsTMFBou2vkE1dnhJOU0HE"

START_TEST(test_signature)
{
	char sig[48];
	lcd_e2b_signature("/home/user/a.txt", "read", "user", "tok123", 0, sig);
	ck_assert_str_eq(sig, SIG_PLAIN);
	lcd_e2b_signature("/home/user/a.txt", "read", "user", "tok123", 1700000000, sig);
	ck_assert_str_eq(sig, SIG_EXP);
	ck_assert(lcd_e2b_signature_ok(SIG_PLAIN, NULL, "/home/user/a.txt", "read", "user", "tok123", 1800000000));
	ck_assert(lcd_e2b_signature_ok(SIG_EXP, "1700000000", "/home/user/a.txt", "read", "user", "tok123", 1600000000));
	/* expired, other operation, path, user or token: refused */
	ck_assert(!lcd_e2b_signature_ok(SIG_EXP, "1700000000", "/home/user/a.txt", "read", "user", "tok123", 1700000001));
	ck_assert(!lcd_e2b_signature_ok(SIG_PLAIN, NULL, "/home/user/a.txt", "write", "user", "tok123", 0));
	ck_assert(!lcd_e2b_signature_ok(SIG_PLAIN, NULL, "/home/user/b.txt", "read", "user", "tok123", 0));
	ck_assert(!lcd_e2b_signature_ok(SIG_PLAIN, NULL, "/home/user/a.txt", "read", "root", "tok123", 0));
	ck_assert(!lcd_e2b_signature_ok(SIG_PLAIN, NULL, "/home/user/a.txt", "read", "user", "tok124", 0));
	/* the expiration is part of what is signed */
	ck_assert(!lcd_e2b_signature_ok(SIG_EXP, "1700000001", "/home/user/a.txt", "read", "user", "tok123", 0));
	ck_assert(!lcd_e2b_signature_ok(SIG_EXP, "x", "/home/user/a.txt", "read", "user", "tok123", 0));
	ck_assert(!lcd_e2b_signature_ok(NULL, NULL, "/home/user/a.txt", "read", "user", "tok123", 0));
}
END_TEST

START_TEST(test_token)
{
	unsigned char k1[LCD_E2B_KEY_LEN], k2[LCD_E2B_KEY_LEN];
	memset(k1, 1, sizeof(k1));
	memset(k2, 2, sizeof(k2));
	char a[LCD_E2B_TOKEN_LEN + 1], b[LCD_E2B_TOKEN_LEN + 1], c[LCD_E2B_TOKEN_LEN + 1];
	lcd_e2b_token(k1, "0123456789ab", a);
	lcd_e2b_token(k1, "0123456789ab", b);
	ck_assert_str_eq(a, b);
	ck_assert_uint_eq(strlen(a), LCD_E2B_TOKEN_LEN);
	lcd_e2b_token(k1, "0123456789ac", c);
	ck_assert_str_ne(a, c); /* another sandbox */
	lcd_e2b_token(k2, "0123456789ab", c);
	ck_assert_str_ne(a, c); /* another key */
	ck_assert(lcd_e2b_same(a, b));
	ck_assert(!lcd_e2b_same(a, c));
	ck_assert(!lcd_e2b_same("", a));
	ck_assert(!lcd_e2b_same(NULL, a));
	b[10] ^= 1;
	ck_assert(!lcd_e2b_same(b, a));
}
END_TEST

START_TEST(test_envelope)
{
	json_t *m = json_pack("{s:i}", "pid", 7);
	size_t len;
	char *e = lcd_connect_envelope(0, m, &len);
	json_decref(m);
	ck_assert_uint_eq(len, 5 + strlen("{\"pid\":7}"));
	ck_assert_int_eq(e[0], 0);
	ck_assert_int_eq((unsigned char)e[4], strlen("{\"pid\":7}"));
	ck_assert(!memcmp(e + 5, "{\"pid\":7}", len - 5));
	const char *why = NULL;
	json_t *back = lcd_connect_unwrap(e, len, &why);
	ck_assert_ptr_nonnull(back);
	ck_assert_int_eq(json_integer_value(json_object_get(back, "pid")), 7);
	json_decref(back);
	/* cut short, compressed, not an object */
	ck_assert_ptr_null(lcd_connect_unwrap(e, len - 1, &why));
	e[0] = 1;
	ck_assert_ptr_null(lcd_connect_unwrap(e, len, &why));
	free(e);
	ck_assert_ptr_null(lcd_connect_unwrap("\0\0\0\0\0021", 7, &why));
	ck_assert_ptr_null(lcd_connect_unwrap("\0\0", 2, &why));
	json_t *end = lcd_connect_end(NULL, NULL);
	e = lcd_connect_envelope(LCD_CONNECT_END, end, &len);
	json_decref(end);
	ck_assert_int_eq(e[0], 2);
	ck_assert(!memcmp(e + 5, "{}", 2));
	free(e);
	end = lcd_connect_end("not_found", "no such process");
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(end, "error"), "code")), "not_found");
	json_decref(end);
	ck_assert_uint_eq(lcd_connect_http_status("not_found"), 404);
	ck_assert_uint_eq(lcd_connect_http_status("unauthenticated"), 401);
	ck_assert_uint_eq(lcd_connect_http_status("unavailable"), 503);
	ck_assert_uint_eq(lcd_connect_http_status("what"), 500);
}
END_TEST

START_TEST(test_times)
{
	char t[40];
	lcd_e2b_time_ms(1700000000123LL, t);
	ck_assert_str_eq(t, "2023-11-14T22:13:20.123Z");
	lcd_e2b_time_ms(0, t);
	ck_assert_str_eq(t, "1970-01-01T00:00:00.000Z");
	lcd_e2b_time_ns(1700000000000000007LL, t);
	ck_assert_str_eq(t, "2023-11-14T22:13:20.000000007Z");
}
END_TEST

START_TEST(test_cursor)
{
	char buf[64], id[13];
	long long ms = 0;
	lcd_e2b_cursor(1700000000123LL, "0123456789ab", buf, sizeof(buf));
	ck_assert(lcd_e2b_cursor_parse(buf, &ms, id, sizeof(id)));
	ck_assert_int_eq(ms, 1700000000123LL);
	ck_assert_str_eq(id, "0123456789ab");
	ck_assert(!lcd_e2b_cursor_parse("x_0123", &ms, id, sizeof(id)));
	ck_assert(!lcd_e2b_cursor_parse("12_", &ms, id, sizeof(id)));
	ck_assert(!lcd_e2b_cursor_parse("12_zz", &ms, id, sizeof(id)));
	ck_assert(!lcd_e2b_cursor_parse("12_0123456789abc", &ms, id, sizeof(id)));
	ck_assert(!lcd_e2b_cursor_parse(NULL, &ms, id, sizeof(id)));
}
END_TEST

START_TEST(test_metadata_query)
{
	/* {"user": "a b", "k=1": "x&y%"} as the SDK sends it, after the query's
	 * own decoding: encodeURIComponent each, then URLSearchParams */
	json_t *m = lcd_e2b_metadata_query("user=a%2520b&k%253D1=x%2526y%2525");
	ck_assert_ptr_nonnull(m);
	ck_assert_str_eq(json_string_value(json_object_get(m, "user")), "a b");
	ck_assert_str_eq(json_string_value(json_object_get(m, "k=1")), "x&y%");
	json_decref(m);
	m = lcd_e2b_metadata_query("");
	ck_assert_int_eq(json_object_size(m), 0);
	json_decref(m);
	m = lcd_e2b_metadata_query(NULL);
	ck_assert_int_eq(json_object_size(m), 0);
	json_decref(m);
	ck_assert_ptr_null(lcd_e2b_metadata_query("a=%zz"));
	ck_assert_ptr_null(lcd_e2b_metadata_query("=v"));
	ck_assert_ptr_null(lcd_e2b_metadata_query("a=%2500"));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("e2bproto");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_signature);
	tcase_add_test(tc, test_token);
	tcase_add_test(tc, test_envelope);
	tcase_add_test(tc, test_times);
	tcase_add_test(tc, test_cursor);
	tcase_add_test(tc, test_metadata_query);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
