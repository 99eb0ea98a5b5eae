/* Unit tests for webhook deliveries (orchestrator/lcd/model/delivery.c): the
 * signature check against known values, and the delivery-id record on a
 * temp db (a race of 20 claimers, forget, expiry, app delete). */
#include <check.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "delivery.h"
#include "store.h"
#include "util.h"

/* GitHub's documented example ("Validating webhook deliveries"). */
#define GH_SECRET "It's a Secret to Everybody"
#define GH_BODY "Hello, World!"
#define GH_SIG "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"

static bool ok(const char *secret, const char *body, const char *header)
{
	return lcd_delivery_signature_ok(secret, secret ? strlen(secret) : 0, body, strlen(body), header);
}

START_TEST(test_signature)
{
	ck_assert(ok(GH_SECRET, GH_BODY, GH_SIG));
	/* upper-case hex is the same digest */
	ck_assert(ok(GH_SECRET, GH_BODY, "sha256=757107EA0EB2509FC211221CCE984B8A37570B6D7586C22C46F4379C8B043E17"));
	/* RFC 4231 test case 2: HMAC-SHA256("Jefe", "what do ya want for nothing?") */
	ck_assert(ok("Jefe", "what do ya want for nothing?",
		     "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"));
	/* an empty body has a signature too */
	ck_assert(ok("key", "", "sha256=5d5d139563c95b5967b9bd9a8c9b233a9dedb45072794cd232dc1b74832607d0"));

	ck_assert(!ok(GH_SECRET, GH_BODY, NULL));
	ck_assert(!ok(GH_SECRET, GH_BODY, ""));
	ck_assert(!ok(GH_SECRET, GH_BODY, "sha256="));
	ck_assert(!ok(GH_SECRET, "Hello, World?", GH_SIG));
	ck_assert(!ok("It's a secret to everybody", GH_BODY, GH_SIG));
	ck_assert(!ok(NULL, GH_BODY, GH_SIG));
	ck_assert(!ok("", GH_BODY, GH_SIG));
	/* one digit off, anywhere */
	for (size_t i = 7; i < strlen(GH_SIG); i++) {
		char h[80];
		strcpy(h, GH_SIG);
		h[i] = h[i] == '0' ? '1' : '0';
		ck_assert_msg(!ok(GH_SECRET, GH_BODY, h), "digit %zu", i);
	}
	/* the form: prefix, length, hex */
	ck_assert(!ok(GH_SECRET, GH_BODY, GH_SIG "0"));
	ck_assert(!ok(GH_SECRET, GH_BODY, "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e1"));
	ck_assert(!ok(GH_SECRET, GH_BODY, "sha1=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"));
	ck_assert(!ok(GH_SECRET, GH_BODY, "SHA256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"));
	ck_assert(!ok(GH_SECRET, GH_BODY, " sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"));
	ck_assert(!ok(GH_SECRET, GH_BODY, "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e1g"));
	ck_assert(!ok(GH_SECRET, GH_BODY, "757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"));
	/* the body is bytes: a NUL in it counts */
	ck_assert(!lcd_delivery_signature_ok(GH_SECRET, strlen(GH_SECRET), GH_BODY "\0", strlen(GH_BODY) + 1, GH_SIG));
}
END_TEST

START_TEST(test_names)
{
	ck_assert(lcd_delivery_id_valid("72d3162e-cc78-11e3-81ab-4c9367dc0958"));
	ck_assert(lcd_delivery_id_valid("a"));
	ck_assert(!lcd_delivery_id_valid(NULL));
	ck_assert(!lcd_delivery_id_valid(""));
	ck_assert(!lcd_delivery_id_valid("a b"));
	ck_assert(!lcd_delivery_id_valid("a\nb"));
	ck_assert(!lcd_delivery_id_valid("a'--"));
	char longid[130];
	memset(longid, 'a', 129);
	longid[129] = '\0';
	ck_assert(!lcd_delivery_id_valid(longid));
	longid[128] = '\0';
	ck_assert(lcd_delivery_id_valid(longid));
	ck_assert(lcd_delivery_event_valid("issues"));
	ck_assert(lcd_delivery_event_valid("pull_request_review_comment"));
	ck_assert(!lcd_delivery_event_valid("Issues"));
	ck_assert(!lcd_delivery_event_valid(""));
	ck_assert(!lcd_delivery_event_valid("issues\r\nX-Injected: 1"));
}
END_TEST

static char dir[] = "/tmp/lcd-delivery-XXXXXX";
static char *path;
static lcd_db_t *db;

static void setup(void)
{
	strcpy(dir, "/tmp/lcd-delivery-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	path = lc_strdup_printf("%s/lcd.db", dir);
	lc_error_t *err = NULL;
	ck_assert_int_eq(lcd_db_open(path, &db, &err), 0);
	ck_assert_int_eq(lcd_store_app_put(db, "demo", "{}", NULL, 1000, NULL, &err), 0);
	ck_assert_int_eq(lcd_store_app_put(db, "other", "{}", NULL, 1000, NULL, &err), 0);
}

static void teardown(void)
{
	lcd_db_close(db);
	lc_rm_rf(dir, NULL);
	free(path);
}

START_TEST(test_claim)
{
	lc_error_t *err = NULL;
	char *task = (char *)"untouched";
	ck_assert_int_eq(lcd_delivery_claim(db, "demo", "github", "d1", NULL, "issues", 5000, &task, &err), 1);
	ck_assert_str_eq(task, "untouched"); /* only set for a duplicate */
	/* seen: no task recorded yet */
	task = NULL;
	ck_assert_int_eq(lcd_delivery_claim(db, "demo", "github", "d1", NULL, "issues", 6000, &task, &err), 0);
	ck_assert_ptr_null(task);
	ck_assert_int_eq(lcd_delivery_set_task(db, "demo", "github", "d1", "abc123", &err), 1);
	ck_assert_int_eq(lcd_delivery_claim(db, "demo", "github", "d1", NULL, "issues", 6000, &task, &err), 0);
	ck_assert_str_eq(task, "abc123");
	free(task);
	ck_assert_int_eq(lcd_delivery_claim(db, "demo", "github", "d1", NULL, "issues", 6000, NULL, &err), 0);
	/* the same id to another hook or app is another delivery */
	ck_assert_int_eq(lcd_delivery_claim(db, "demo", "gitlab", "d1", NULL, "issues", 6000, NULL, &err), 1);
	ck_assert_int_eq(lcd_delivery_claim(db, "other", "github", "d1", NULL, "issues", 6000, NULL, &err), 1);
	/* forgotten: a redelivery is new again */
	ck_assert_int_eq(lcd_delivery_forget(db, "demo", "github", "d1", &err), 1);
	ck_assert_int_eq(lcd_delivery_claim(db, "demo", "github", "d1", NULL, "issues", 7000, NULL, &err), 1);
	/* expiry: records received before the cutoff go */
	ck_assert_int_eq(lcd_delivery_claim(db, "demo", "github", "d2", NULL, "issues", 9000, NULL, &err), 1);
	ck_assert_int_eq(lcd_delivery_gc(db, 8000, &err), 3); /* demo/gitlab, other/github (6000), demo/github d1 (7000) */
	ck_assert_int_eq(lcd_delivery_claim(db, "demo", "github", "d1", NULL, "issues", 10000, NULL, &err), 1);
	ck_assert_int_eq(lcd_delivery_claim(db, "demo", "github", "d2", NULL, "issues", 10000, NULL, &err), 0);
	/* a body seen before is a duplicate under any id: a signed body
	 * captured and replayed with fresh delivery ids starts nothing */
	static const char *const sha = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
	ck_assert_int_eq(lcd_delivery_claim(db, "demo", "github", "b1", sha, "issues", 11000, NULL, &err), 1);
	ck_assert_int_eq(lcd_delivery_set_task(db, "demo", "github", "b1", "t-b1", &err), 1);
	task = NULL;
	ck_assert_int_eq(lcd_delivery_claim(db, "demo", "github", "fresh-id-1", sha, "issues", 12000, &task, &err), 0);
	ck_assert_str_eq(task, "t-b1");
	free(task);
	ck_assert_int_eq(lcd_delivery_claim(db, "demo", "github", "fresh-id-2", sha, "issues", 12000, NULL, &err), 0);
	/* ... to the same hook; another hook takes it */
	ck_assert_int_eq(lcd_delivery_claim(db, "demo", "other-hook", "fresh-id-3", sha, "issues", 12000, NULL, &err), 1);
	/* an app's records go with it */
	ck_assert_int_eq(lcd_store_app_delete(db, "demo", &err), 1);
	ck_assert_int_eq(lcd_db_query_int(db, &err, -1, "SELECT count(*) FROM webhook_deliveries WHERE app = 'demo'", ""), 0);
}
END_TEST

static void *claimer(void *arg)
{
	(void)arg;
	lc_error_t *err = NULL;
	int r = lcd_delivery_claim(db, "demo", "github", "race", NULL, "issues", 5000, NULL, &err);
	lc_error_free(err);
	return (void *)(intptr_t)r;
}

START_TEST(test_claim_race)
{
	pthread_t th[20];
	for (int i = 0; i < 20; i++)
		pthread_create(&th[i], NULL, claimer, NULL);
	int won = 0, lost = 0;
	for (int i = 0; i < 20; i++) {
		void *r;
		pthread_join(th[i], &r);
		won += (intptr_t)r == 1;
		lost += (intptr_t)r == 0;
	}
	ck_assert_int_eq(won, 1);
	ck_assert_int_eq(lost, 19);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("delivery");
	TCase *tc = tcase_create("signature");
	tcase_add_test(tc, test_signature);
	tcase_add_test(tc, test_names);
	suite_add_tcase(s, tc);
	TCase *tdb = tcase_create("record");
	tcase_add_checked_fixture(tdb, setup, teardown);
	tcase_add_test(tdb, test_claim);
	tcase_add_test(tdb, test_claim_race);
	suite_add_tcase(s, tdb);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
