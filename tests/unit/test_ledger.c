/* Unit tests for the model gateway's books (orchestrator/lcd/model/ledger.c):
 * the price table and its errors, model names, exact costs, usage read
 * from Anthropic and OpenAI answers (streamed in pieces of every size, and
 * whole), SSE event boundaries, and the ledger's sums on a temp db. */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ledger.h"
#include "manifest.h"
#include "util.h"

static lcd_prices_t *prices_of(const char *text, lc_error_t **err)
{
	json_error_t je;
	json_t *doc = json_loads(text, 0, &je);
	ck_assert_msg(doc != NULL, "bad test JSON: %s", je.text);
	lcd_prices_t *p = NULL;
	int r = lcd_prices_from_json(doc, "p.json", &p, err);
	json_decref(doc);
	return r == 0 ? p : NULL;
}

static void price_error(const char *text, const char *want)
{
	lc_error_t *err = NULL;
	ck_assert_ptr_null(prices_of(text, &err));
	ck_assert_ptr_nonnull(err);
	ck_assert_msg(strstr(err->msg, want), "error '%s' lacks '%s'", err->msg, want);
	ck_assert_int_eq(err->exit_code, LC_EXIT_INVALID);
	lc_error_free(err);
}

START_TEST(test_prices_shipped)
{
	/* the shipped table loads, and has a catch-all for each provider */
	setenv("LCRUN_POLICY_DIR", LC_SRCDIR "/policies", 1);
	setenv("LCRUN_ETC_DIR", "/nonexistent-lcrun-etc", 1);
	lcd_prices_t *p = NULL;
	char *src = NULL;
	lc_error_t *err = NULL;
	ck_assert_int_eq(lcd_prices_load(&p, &src, &err), 0);
	ck_assert_str_eq(src, LC_SRCDIR "/policies/model-prices.json");
	lcd_price_t pr;
	ck_assert(lcd_prices_find(p, LCD_PROV_ANTHROPIC, "claude-sonnet-4-5", &pr));
	ck_assert_int_eq(pr.input, 3000000);
	ck_assert_int_eq(pr.output, 15000000);
	ck_assert_int_eq(pr.cache_read, 300000);
	ck_assert_int_eq(pr.cache_write, 3750000);
	ck_assert_int_eq(pr.cache_write_1h, 6000000); /* an hour's write: twice the input */
	ck_assert(lcd_prices_find(p, LCD_PROV_OPENAI, "gpt-4o-mini", &pr));
	ck_assert_int_eq(pr.cache_read, 75000);
	ck_assert(lcd_prices_find(p, LCD_PROV_ANTHROPIC, "some-future-model", &pr));
	ck_assert_int_eq(pr.output, 75000000);
	ck_assert(lcd_prices_find(p, LCD_PROV_OPENAI, "some-future-model", &pr));
	/* the catch-all is OpenAI's dearest (o1-pro, $150 and $600 per M), and
	 * a dated snapshot dearer than its alias has its own price */
	ck_assert_int_ge(pr.input, 150000000);
	ck_assert_int_ge(pr.output, 600000000);
	ck_assert(lcd_prices_find(p, LCD_PROV_OPENAI, "gpt-4o-2024-05-13", &pr));
	ck_assert_int_eq(pr.input, 5000000);
	ck_assert_int_eq(pr.output, 15000000);
	ck_assert(lcd_prices_find(p, LCD_PROV_OPENAI, "gpt-4o-2024-08-06", &pr));
	ck_assert_int_eq(pr.input, 2500000);
	lcd_prices_free(p);
	free(src);
}
END_TEST

START_TEST(test_prices_match)
{
	lc_error_t *err = NULL;
	lcd_prices_t *p = prices_of("{\"anthropic\": {\"m\": {\"input\": 1, \"output\": 2}, \"m-x\": {\"input\": 7, \"output\": 8}},"
				    " \"openai\": {\"*\": {\"input\": 0.000001, \"output\": 9}}}", &err);
	ck_assert_ptr_nonnull(p);
	lcd_price_t pr;
	ck_assert(lcd_prices_find(p, LCD_PROV_ANTHROPIC, "m", &pr));
	ck_assert_int_eq(pr.input, 1000000);
	/* cache prices default to the input price */
	ck_assert_int_eq(pr.cache_read, 1000000);
	ck_assert_int_eq(pr.cache_write, 1000000);
	/* dated versions take their model's price; another model does not */
	ck_assert(lcd_prices_find(p, LCD_PROV_ANTHROPIC, "m-20250929", &pr));
	ck_assert_int_eq(pr.input, 1000000);
	ck_assert(lcd_prices_find(p, LCD_PROV_ANTHROPIC, "m-2024-08-06", &pr));
	ck_assert(lcd_prices_find(p, LCD_PROV_ANTHROPIC, "m-latest", &pr));
	ck_assert(lcd_prices_find(p, LCD_PROV_ANTHROPIC, "m-x-20250101", &pr));
	ck_assert_int_eq(pr.input, 7000000);
	ck_assert(!lcd_prices_find(p, LCD_PROV_ANTHROPIC, "m-5", &pr));
	ck_assert(!lcd_prices_find(p, LCD_PROV_ANTHROPIC, "m-2025", &pr));
	ck_assert(!lcd_prices_find(p, LCD_PROV_ANTHROPIC, "mm", &pr));
	ck_assert(!lcd_prices_find(p, LCD_PROV_ANTHROPIC, NULL, &pr));
	/* "*" */
	ck_assert(lcd_prices_find(p, LCD_PROV_OPENAI, "anything", &pr));
	ck_assert_int_eq(pr.input, 1);
	lcd_prices_free(p);
}
END_TEST

START_TEST(test_prices_errors)
{
	price_error("[]", "expected a JSON object");
	price_error("{\"google\": {}}", "google: unknown key");
	price_error("{\"description\": 3}", "description: expected a string");
	price_error("{\"anthropic\": []}", "anthropic: expected an object");
	price_error("{\"anthropic\": {\"m\": 3}}", "anthropic.m: expected");
	price_error("{\"anthropic\": {\"m\": {\"output\": 1}}}", "anthropic.m.input: required");
	price_error("{\"anthropic\": {\"m\": {\"input\": 1}}}", "anthropic.m.output: required");
	price_error("{\"anthropic\": {\"m\": {\"input\": 1, \"output\": -1}}}", "anthropic.m.output: expected dollars");
	price_error("{\"anthropic\": {\"m\": {\"input\": \"1\", \"output\": 1}}}", "anthropic.m.input: expected dollars");
	price_error("{\"anthropic\": {\"m\": {\"input\": 0.0000001, \"output\": 1}}}", "anthropic.m.input: at most 6 decimals");
	price_error("{\"anthropic\": {\"m\": {\"input\": 1, \"output\": 1, \"cache\": 1}}}", "anthropic.m.cache: unknown key");
	price_error("{\"anthropic\": {\"m n\": {\"input\": 1, \"output\": 1}}}", "anthropic.m n: not a model name");
}
END_TEST

START_TEST(test_cost_exact)
{
	lcd_price_t sonnet = { 3000000, 15000000, 300000, 3750000 };
	lcd_usage_t u = { .input = 3000, .output = 110, .cache_read = 3000, .cache_write = 400 };
	/* Claude Code's own figure for the same usage: $0.01305 */
	ck_assert_int_eq(lcd_usage_cost(&u, &sonnet), 13050000000LL);
	/* 100 of the 400 writes kept an hour: at $6 per M, not $3.75 */
	sonnet.cache_write_1h = 6000000;
	u.cache_write_1h = 100;
	ck_assert_int_eq(lcd_usage_cost(&u, &sonnet), 13050000000LL + 100 * (6000000 - 3750000));
	long long b = 0;
	lc_error_t *err = NULL;
	json_t *v = json_real(0.01);
	ck_assert_int_eq(lcd_usd_parse(v, "budget_usd", 1e6, &b, &err), 0);
	ck_assert_int_eq(b, 10000000000LL);
	json_decref(v);
	v = json_integer(5);
	ck_assert_int_eq(lcd_usd_parse(v, "budget_usd", 1e6, &b, &err), 0);
	ck_assert_int_eq(b, 5 * LCD_PUSD_PER_USD);
	json_decref(v);
	const char *bad[] = { "0", "-1", "\"5\"", "2000000", "null" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		v = json_loads(bad[i], JSON_DECODE_ANY, NULL);
		ck_assert_int_eq(lcd_usd_parse(v, "x.budget_usd", 1e6, &b, &err), -1);
		ck_assert_ptr_nonnull(strstr(err->msg, "x.budget_usd: expected an amount of dollars"));
		lc_error_free(err);
		err = NULL;
		json_decref(v);
	}
	json_t *j = lcd_usd_json(13050000000LL);
	char *s = json_dumps(j, JSON_ENCODE_ANY | JSON_REAL_PRECISION(15));
	ck_assert_str_eq(s, "0.01305");
	free(s);
	json_decref(j);
}
END_TEST

static const char anthropic_sse[] =
	"event: message_start\n"
	"data: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"usage\":{\"input_tokens\":2000,"
	"\"cache_read_input_tokens\":3000,\"cache_creation_input_tokens\":400,\"output_tokens\":1}}}\n\n"
	"event: ping\ndata: {\"type\":\"ping\"}\n\n"
	"event: content_block_delta\r\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"text\":\"hi\"}}\r\n\r\n"
	"event: message_delta\n"
	"data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":10}}\n\n"
	"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";

START_TEST(test_meter_anthropic_sse)
{
	size_t len = strlen(anthropic_sse);
	/* fed in pieces of every size from 1 byte to the whole */
	for (size_t step = 1; step <= len; step += (step < 40 ? 1 : 97)) {
		lcd_meter_t *m = lcd_meter_new(LCD_PROV_ANTHROPIC, true);
		int changes = 0;
		bool saw_start = false;
		for (size_t off = 0; off < len; off += step) {
			size_t n = off + step > len ? len - off : step;
			if (lcd_meter_feed(m, anthropic_sse + off, n)) {
				changes++;
				const lcd_usage_t *u = lcd_meter_usage(m);
				if (!saw_start) {
					/* message_start: input known, not final */
					ck_assert_int_eq(u->input, 2000);
					ck_assert_int_eq(u->output, 1);
					ck_assert(!u->final);
					saw_start = true;
				}
			}
			/* the boundary is always at the end of an event */
			size_t b = lcd_meter_boundary(m);
			ck_assert(b == 0 || (b >= 2 && anthropic_sse[b - 1] == '\n' &&
					     (anthropic_sse[b - 2] == '\n' || anthropic_sse[b - 2] == '\r')));
		}
		ck_assert_int_eq(changes, 2);
		ck_assert(!lcd_meter_end(m));
		const lcd_usage_t *u = lcd_meter_usage(m);
		ck_assert_int_eq(u->input, 2000);
		ck_assert_int_eq(u->output, 10);
		ck_assert_int_eq(u->cache_read, 3000);
		ck_assert_int_eq(u->cache_write, 400);
		ck_assert(u->seen && u->final);
		ck_assert_int_eq(lcd_meter_boundary(m), len);
		lcd_meter_free(m);
	}
}
END_TEST

START_TEST(test_meter_boundary_held)
{
	lcd_meter_t *m = lcd_meter_new(LCD_PROV_ANTHROPIC, true);
	const char *a = "event: ping\ndata: {}\n\nevent: content_block_delta\ndata: {\"ty";
	lcd_meter_feed(m, a, strlen(a));
	ck_assert_int_eq(lcd_meter_boundary(m), strlen("event: ping\ndata: {}\n\n"));
	/* an unfinished last event counts at the end of the answer */
	const char *b = "pe\":\"message_delta\",\"usage\":{\"output_tokens\":7}}";
	ck_assert(!lcd_meter_feed(m, b, strlen(b)));
	ck_assert(lcd_meter_end(m));
	ck_assert_int_eq(lcd_meter_usage(m)->output, 7);
	ck_assert_int_eq(lcd_meter_boundary(m), strlen(a) + strlen(b));
	lcd_meter_free(m);
}
END_TEST

START_TEST(test_meter_malformed)
{
	/* not JSON, a truncated event, an oversized line: no usage, no crash */
	lcd_meter_t *m = lcd_meter_new(LCD_PROV_ANTHROPIC, true);
	const char *s = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":5\n\n"
			"data: not json\n\n"
			"data: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":-3}}\n\n";
	lcd_meter_feed(m, s, strlen(s));
	size_t big = (1 << 20) + 100;
	char *junk = malloc(big);
	memset(junk, 'x', big);
	memcpy(junk, "data: ", 6);
	lcd_meter_feed(m, junk, big);
	lcd_meter_feed(m, "\n\n", 2);
	lcd_meter_end(m);
	const lcd_usage_t *u = lcd_meter_usage(m);
	/* a negative count is not believed: the earlier value stays */
	ck_assert_int_eq(u->input, 0);
	ck_assert_int_eq(u->output, 0);
	free(junk);
	lcd_meter_free(m);
	/* a whole answer whose cache writes were kept an hour */
	const char *hour = "{\"usage\": {\"input_tokens\": 5, \"output_tokens\": 7, \"cache_creation_input_tokens\": 900, "
			   "\"cache_creation\": {\"ephemeral_5m_input_tokens\": 100, \"ephemeral_1h_input_tokens\": 800}}}";
	m = lcd_meter_new(LCD_PROV_ANTHROPIC, false);
	lcd_meter_feed(m, hour, strlen(hour));
	ck_assert(lcd_meter_end(m));
	ck_assert_int_eq(lcd_meter_usage(m)->cache_write, 900);
	ck_assert_int_eq(lcd_meter_usage(m)->cache_write_1h, 800);
	lcd_meter_free(m);
	/* a body that is not JSON */
	m = lcd_meter_new(LCD_PROV_ANTHROPIC, false);
	lcd_meter_feed(m, "{\"usage\": {\"input_tok", 21);
	ck_assert(!lcd_meter_end(m));
	ck_assert(!lcd_meter_usage(m)->seen);
	lcd_meter_free(m);
}
END_TEST

START_TEST(test_meter_openai)
{
	/* chat: the usage chunk; cached tokens come out of the input count */
	const char *chat = "data: {\"object\":\"chat.completion.chunk\",\"choices\":[{\"delta\":{\"content\":\"x\"}}],\"usage\":null}\n\n"
			   "data: {\"object\":\"chat.completion.chunk\",\"choices\":[],\"usage\":{\"prompt_tokens\":900,"
			   "\"completion_tokens\":150,\"prompt_tokens_details\":{\"cached_tokens\":100}}}\n\n"
			   "data: [DONE]\n\n";
	lcd_meter_t *m = lcd_meter_new(LCD_PROV_OPENAI, true);
	ck_assert(lcd_meter_feed(m, chat, strlen(chat)));
	const lcd_usage_t *u = lcd_meter_usage(m);
	ck_assert_int_eq(u->input, 800);
	ck_assert_int_eq(u->cache_read, 100);
	ck_assert_int_eq(u->output, 150);
	ck_assert(u->final);
	lcd_meter_free(m);
	/* responses: response.completed */
	const char *resp = "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"usage\":null}}\n\n"
			   "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"usage\":"
			   "{\"input_tokens\":2000,\"input_tokens_details\":{\"cached_tokens\":1500},\"output_tokens\":10,"
			   "\"output_tokens_details\":{\"reasoning_tokens\":5}}}}\n\n";
	m = lcd_meter_new(LCD_PROV_OPENAI, true);
	for (size_t i = 0; i < strlen(resp); i++)
		lcd_meter_feed(m, resp + i, 1);
	u = lcd_meter_usage(m);
	ck_assert_int_eq(u->input, 500);
	ck_assert_int_eq(u->cache_read, 1500);
	ck_assert_int_eq(u->output, 10);
	lcd_meter_free(m);
	/* whole answers */
	const char *whole = "{\"object\":\"chat.completion\",\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":3}}";
	m = lcd_meter_new(LCD_PROV_OPENAI, false);
	lcd_meter_feed(m, whole, 20);
	lcd_meter_feed(m, whole + 20, strlen(whole) - 20);
	ck_assert(lcd_meter_end(m));
	ck_assert_int_eq(lcd_meter_usage(m)->input, 10);
	ck_assert_int_eq(lcd_meter_usage(m)->output, 3);
	lcd_meter_free(m);
	const char *anth = "{\"type\":\"message\",\"usage\":{\"input_tokens\":1000,\"output_tokens\":100,"
			   "\"cache_read_input_tokens\":0,\"cache_creation_input_tokens\":0}}";
	m = lcd_meter_new(LCD_PROV_ANTHROPIC, false);
	lcd_meter_feed(m, anth, strlen(anth));
	ck_assert(lcd_meter_end(m));
	ck_assert_int_eq(lcd_meter_usage(m)->input, 1000);
	ck_assert_int_eq(lcd_meter_usage(m)->output, 100);
	lcd_meter_free(m);
	/* count_tokens' answer is no usage */
	m = lcd_meter_new(LCD_PROV_ANTHROPIC, false);
	lcd_meter_feed(m, "{\"input_tokens\": 42}", 20);
	ck_assert(!lcd_meter_end(m));
	lcd_meter_free(m);
}
END_TEST

START_TEST(test_ledger_sums)
{
	char dir[] = "/tmp/lcd-ledger-XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(dir));
	char *path = lc_strdup_printf("%s/lcd.db", dir);
	lcd_db_t *db = NULL;
	lc_error_t *err = NULL;
	ck_assert_int_eq(lcd_db_open(path, &db, &err), 0);
	lcd_ledger_entry_t e = { .sandbox = "sb1", .task = "t1", .app = "a", .provider = "anthropic", .model = "m",
				 .path = "/v1/messages", .outcome = "ok", .status = 200,
				 .usage = { .input = 10, .output = 2, .cache_read = 1, .cache_write = 3 },
				 .cost = 7000, .at = 1000, .ms = 5 };
	ck_assert_int_eq(lcd_ledger_add(db, &e, &err), 0);
	e.sandbox = "sb2";
	e.at = 5000;
	ck_assert_int_eq(lcd_ledger_add(db, &e, &err), 0);
	e.outcome = "unmetered"; /* an answer without usage: a request, at no cost */
	e.cost = 0;
	e.usage = (lcd_usage_t){ 0 };
	ck_assert_int_eq(lcd_ledger_add(db, &e, &err), 0);
	e.outcome = "refused";
	e.budget_exceeded = true;
	ck_assert_int_eq(lcd_ledger_add(db, &e, &err), 0);
	ck_assert_int_eq(lcd_ledger_spend(db, LCD_LEDGER_SANDBOX, "sb1", 0, &err), 7000);
	ck_assert_int_eq(lcd_ledger_spend(db, LCD_LEDGER_TASK, "t1", 0, &err), 14000);
	ck_assert_int_eq(lcd_ledger_spend(db, LCD_LEDGER_APP, "a", 2000, &err), 7000);
	ck_assert_int_eq(lcd_ledger_spend(db, LCD_LEDGER_APP, "b", 0, &err), 0);
	json_t *s = lcd_ledger_summary(db, LCD_LEDGER_TASK, "t1", &err);
	ck_assert_ptr_nonnull(s);
	ck_assert_int_eq(json_integer_value(json_object_get(s, "requests")), 3);
	ck_assert_int_eq(json_integer_value(json_object_get(s, "unmetered")), 1);
	ck_assert(json_is_true(json_object_get(s, "budget_exceeded")));
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(s, "tokens"), "input")), 20);
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(s, "tokens"), "cache_write")), 6);
	json_decref(s);
	s = lcd_ledger_summary(db, LCD_LEDGER_SANDBOX, "sb1", &err);
	ck_assert(json_is_false(json_object_get(s, "budget_exceeded")));
	ck_assert_int_eq(json_integer_value(json_object_get(s, "unmetered")), 0);
	json_decref(s);
	s = lcd_ledger_summary(db, LCD_LEDGER_SANDBOX, "none", &err);
	ck_assert_int_eq(json_integer_value(json_object_get(s, "requests")), 0);
	ck_assert(json_real_value(json_object_get(s, "spend_usd")) == 0.0);
	json_decref(s);
	lcd_db_close(db);
	lc_rm_rf(dir, NULL);
	free(path);
}
END_TEST

/* A manifest's budgets: a function's budget_usd, the app's budget.daily_usd. */
static int app_of(const char *text, lcd_app_t **app, char **msg)
{
	json_t *m = json_loads(text, 0, NULL);
	ck_assert_ptr_nonnull(m);
	lc_error_t *err = NULL;
	*app = NULL;
	int r = lcd_app_parse(m, app, &err);
	json_decref(m);
	*msg = err ? strdup(err->msg) : NULL;
	lc_error_free(err);
	return r;
}

START_TEST(test_manifest_budgets)
{
	lcd_app_t *app;
	char *msg;
	ck_assert_int_eq(app_of("{\"name\": \"a\", \"functions\": {\"f\": {\"command\": \"true\", \"budget_usd\": 0.25}}, "
				"\"budget\": {\"daily_usd\": 20}}", &app, &msg), 0);
	ck_assert_int_eq(lcd_app_function(app, "f")->budget_pusd, 250000000000LL);
	ck_assert_int_eq(app->daily_budget_pusd, 20 * LCD_PUSD_PER_USD);
	lcd_app_unref(app);
	ck_assert_int_eq(app_of("{\"name\": \"a\", \"functions\": {\"f\": {\"command\": \"true\"}}}", &app, &msg), 0);
	ck_assert_int_eq(lcd_app_function(app, "f")->budget_pusd, 0); /* no cap */
	ck_assert_int_eq(app->daily_budget_pusd, 0);
	lcd_app_unref(app);
	ck_assert_int_eq(app_of("{\"name\": \"a\", \"functions\": {\"f\": {\"command\": \"true\", \"budget_usd\": 0}}}", &app,
				&msg), -1);
	ck_assert_str_eq(msg, "functions.f.budget_usd: expected an amount of dollars above 0 and at most 1e+06");
	free(msg);
	ck_assert_int_eq(app_of("{\"name\": \"a\", \"functions\": {\"f\": {\"command\": \"true\"}}, \"budget\": {\"daily\": 1}}",
				&app, &msg), -1);
	ck_assert_str_eq(msg, "budget.daily: unknown key");
	free(msg);
	ck_assert_int_eq(app_of("{\"name\": \"a\", \"functions\": {\"f\": {\"command\": \"true\"}}, \"budget\": 5}", &app, &msg),
			 -1);
	ck_assert_str_eq(msg, "budget: expected an object {\"daily_usd\": N}");
	free(msg);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("ledger");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_prices_shipped);
	tcase_add_test(tc, test_prices_match);
	tcase_add_test(tc, test_prices_errors);
	tcase_add_test(tc, test_cost_exact);
	tcase_add_test(tc, test_meter_anthropic_sse);
	tcase_add_test(tc, test_meter_boundary_held);
	tcase_add_test(tc, test_meter_malformed);
	tcase_add_test(tc, test_meter_openai);
	tcase_add_test(tc, test_ledger_sums);
	tcase_add_test(tc, test_manifest_budgets);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
