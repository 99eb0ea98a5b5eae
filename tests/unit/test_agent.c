/* Unit tests for orchestrator/workloads/agent.c: reading Claude Code's
 * result object and Codex's JSONL, how a run ended, the configuration. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"

static void parse(agent_format_t f, const char *out, int code, bool timed_out, double budget, agent_result_t *r)
{
	memset(r, 0, sizeof(*r));
	agent_parse_output(f, out, out ? strlen(out) : 0, code, timed_out, budget, r);
}

/* What claude 2.1.332 prints with --output-format json (trimmed). */
static const char *claude_ok =
	"{\"type\":\"result\",\"subtype\":\"success\",\"is_error\":false,\"duration_ms\":812,\"num_turns\":2,"
	"\"result\":\"Fixed add().\",\"stop_reason\":\"end_turn\",\"session_id\":\"s\",\"total_cost_usd\":0.01305,"
	"\"usage\":{\"input_tokens\":3000,\"cache_creation_input_tokens\":400,\"cache_read_input_tokens\":3000,"
	"\"output_tokens\":110}}\n";

START_TEST(test_claude_ok)
{
	agent_result_t r;
	parse(AGENT_FORMAT_CLAUDE, claude_ok, 0, false, 5, &r);
	ck_assert_int_eq(r.status, AGENT_OK);
	ck_assert_str_eq(agent_status_name(r.status), "ok");
	ck_assert_str_eq(r.summary, "Fixed add().");
	ck_assert_int_eq(r.turns, 2);
	ck_assert(fabs(r.spend_usd - 0.01305) < 1e-12);
	ck_assert_int_eq(r.input_tokens, 6400);
	ck_assert_int_eq(r.cached_tokens, 3000);
	ck_assert_int_eq(r.output_tokens, 110);
	ck_assert_ptr_null(r.error);
	json_t *j = agent_result_json(&r);
	ck_assert_str_eq(json_string_value(json_object_get(j, "status")), "ok");
	ck_assert_int_eq(json_integer_value(json_object_get(j, "turns")), 2);
	ck_assert(json_is_null(json_object_get(j, "error")));
	json_decref(j);
	agent_result_clear(&r);

	/* a wrapper's lines before it; the last result object counts */
	parse(AGENT_FORMAT_CLAUDE, "starting\n{\"note\": 1}\n{\"type\":\"result\",\"result\":\"a\"}\n"
				   "{\"type\":\"result\",\"result\":\"b\",\"num_turns\":4}\ntrailer\n",
	      0, false, 5, &r);
	ck_assert_int_eq(r.status, AGENT_OK);
	ck_assert_str_eq(r.summary, "b");
	ck_assert_int_eq(r.turns, 4);
	ck_assert(r.spend_usd < 0);
	agent_result_clear(&r);
}
END_TEST

START_TEST(test_claude_errors)
{
	agent_result_t r;
	parse(AGENT_FORMAT_CLAUDE,
	      "{\"type\":\"result\",\"subtype\":\"error_max_budget_usd\",\"is_error\":true,\"num_turns\":7,"
	      "\"total_cost_usd\":5.02,\"result\":\"\",\"terminal_reason\":\"completed\"}",
	      1, false, 5, &r);
	ck_assert_int_eq(r.status, AGENT_OVER_BUDGET);
	ck_assert_str_eq(agent_status_name(r.status), "over-budget");
	ck_assert_str_eq(r.error, "the agent reported an error: error_max_budget_usd");
	ck_assert_int_eq(r.turns, 7);
	agent_result_clear(&r);

	parse(AGENT_FORMAT_CLAUDE,
	      "{\"type\":\"result\",\"subtype\":\"success\",\"is_error\":true,\"terminal_reason\":\"api_error\",\"result\":\"API Error: 529\"}",
	      1, false, 5, &r);
	ck_assert_int_eq(r.status, AGENT_ERROR);
	ck_assert_str_eq(r.error, "the agent reported an error: success: API Error: 529");
	agent_result_clear(&r);
	parse(AGENT_FORMAT_CLAUDE, "{\"type\":\"result\",\"is_error\":true,\"terminal_reason\":\"api_error\",\"result\":\"\"}",
	      1, false, 5, &r);
	ck_assert_str_eq(r.error, "the agent reported an error: error: api_error");
	agent_result_clear(&r);

	/* a spend above the budget is over budget whatever the agent says */
	parse(AGENT_FORMAT_CLAUDE, "{\"type\":\"result\",\"result\":\"done\",\"total_cost_usd\":0.75}", 0, false, 0.5, &r);
	ck_assert_int_eq(r.status, AGENT_OVER_BUDGET);
	ck_assert_str_eq(r.error, "the agent spent $0.75, over the budget of $0.50");
	ck_assert_str_eq(r.summary, "done");
	agent_result_clear(&r);
}
END_TEST

START_TEST(test_gateway_stop)
{
	/* the gateway's 402 makes the agent report an error: over-budget */
	agent_gateway_usage_t u = { .budget_exceeded = true };
	agent_result_t r;
	parse(AGENT_FORMAT_CLAUDE, "", 3, false, 5, &r);
	agent_result_gateway_stop(&r, &u, 0.01);
	ck_assert_int_eq(r.status, AGENT_OVER_BUDGET);
	ck_assert_str_eq(r.error, "the model gateway stopped the agent: its budget of $0.01 is spent; "
				  "the agent exited with status 3 and printed no result");
	json_t *j = agent_result_json(&r);
	ck_assert_str_eq(json_string_value(json_object_get(j, "status")), "over-budget");
	json_decref(j);
	agent_result_clear(&r);
	/* finished, or killed at its timeout: that stays what it says */
	parse(AGENT_FORMAT_CLAUDE, claude_ok, 0, false, 5, &r);
	agent_result_gateway_stop(&r, &u, 0.01);
	ck_assert_int_eq(r.status, AGENT_OK);
	agent_result_clear(&r);
	parse(AGENT_FORMAT_CLAUDE, "", 124, true, 5, &r);
	agent_result_gateway_stop(&r, &u, 0.01);
	ck_assert_int_eq(r.status, AGENT_TIMED_OUT);
	agent_result_clear(&r);
	/* an error while the budget lasts is an error */
	u.budget_exceeded = false;
	parse(AGENT_FORMAT_CLAUDE, "", 3, false, 5, &r);
	agent_result_gateway_stop(&r, &u, 0.01);
	ck_assert_int_eq(r.status, AGENT_FAILED);
	agent_result_clear(&r);
}
END_TEST

START_TEST(test_endings)
{
	agent_result_t r;
	parse(AGENT_FORMAT_CLAUDE, "{\"partial", 124, true, 5, &r);
	ck_assert_int_eq(r.status, AGENT_TIMED_OUT);
	ck_assert_str_eq(r.error, "the agent was killed: it ran past AGENT_TIMEOUT_SECONDS");
	agent_result_clear(&r);
	/* timed out after a result was printed: still timed out */
	parse(AGENT_FORMAT_CLAUDE, claude_ok, 124, true, 5, &r);
	ck_assert_int_eq(r.status, AGENT_TIMED_OUT);
	agent_result_clear(&r);
	parse(AGENT_FORMAT_CLAUDE, "{\"partial", 139, false, 5, &r);
	ck_assert_int_eq(r.status, AGENT_CRASHED);
	ck_assert_str_eq(r.error, "the agent was killed by signal 11 and printed no result");
	agent_result_clear(&r);
	parse(AGENT_FORMAT_CLAUDE, "", 3, false, 5, &r);
	ck_assert_int_eq(r.status, AGENT_FAILED);
	ck_assert_str_eq(r.error, "the agent exited with status 3 and printed no result");
	agent_result_clear(&r);
	parse(AGENT_FORMAT_CLAUDE, NULL, 0, false, 5, &r);
	ck_assert_int_eq(r.status, AGENT_NO_RESULT);
	ck_assert_int_eq(r.turns, -1);
	json_t *j = agent_result_json(&r);
	ck_assert(json_is_null(json_object_get(j, "turns")));
	ck_assert(json_is_null(json_object_get(j, "spend_usd")));
	ck_assert_str_eq(json_string_value(json_object_get(j, "status")), "no-result");
	json_decref(j);
	agent_result_clear(&r);
}
END_TEST

/* What codex exec --json 0.171 prints (trimmed), with the harmless error
 * items and a reasoning item, none of which is a turn. */
static const char *codex_ok =
	"{\"type\":\"thread.started\",\"thread_id\":\"t\"}\n"
	"{\"type\":\"turn.started\"}\n"
	"{\"type\":\"error\",\"message\":\"Model metadata for `gpt-5` not found.\"}\n"
	"{\"type\":\"item.completed\",\"item\":{\"id\":\"item_0\",\"type\":\"command_execution\",\"command\":\"sed -i s/-/+/ calc.py\",\"exit_code\":0}}\n"
	"{\"type\":\"item.completed\",\"item\":{\"id\":\"item_r\",\"type\":\"reasoning\",\"text\":\"Looking.\"}}\n"
	"{\"type\":\"item.completed\",\"item\":{\"id\":\"item_e\",\"type\":\"error\",\"message\":\"Reconnecting... 1/5\"}}\n"
	"{\"type\":\"item.completed\",\"item\":{\"id\":\"item_1\",\"type\":\"agent_message\",\"text\":\"Fixed add().\"}}\n"
	"{\"type\":\"turn.completed\",\"usage\":{\"input_tokens\":2000000,\"cached_input_tokens\":1000000,\"output_tokens\":100000,\"reasoning_output_tokens\":0}}\n";

START_TEST(test_codex)
{
	agent_result_t r;
	unsetenv("AGENT_PRICE_PER_MTOK");
	parse(AGENT_FORMAT_CODEX, codex_ok, 0, false, 5, &r);
	ck_assert_int_eq(r.status, AGENT_OK);
	ck_assert_str_eq(r.summary, "Fixed add().");
	ck_assert_int_eq(r.turns, 2);
	ck_assert_int_eq(r.input_tokens, 2000000);
	ck_assert_int_eq(r.cached_tokens, 1000000);
	ck_assert_int_eq(r.output_tokens, 100000);
	/* 1M uncached at $1.25, 1M cached at $0.125, 0.1M out at $10 */
	ck_assert(fabs(r.spend_usd - 2.375) < 1e-9);
	agent_result_clear(&r);

	setenv("AGENT_PRICE_PER_MTOK", "3,0.3,15", 1);
	parse(AGENT_FORMAT_CODEX, codex_ok, 0, false, 5, &r);
	ck_assert(fabs(r.spend_usd - 4.8) < 1e-9);
	agent_result_clear(&r);
	unsetenv("AGENT_PRICE_PER_MTOK");

	parse(AGENT_FORMAT_CODEX,
	      "{\"type\":\"turn.started\"}\n{\"type\":\"turn.failed\",\"error\":{\"message\":\"stream disconnected\"}}\n",
	      1, false, 5, &r);
	ck_assert_int_eq(r.status, AGENT_ERROR);
	ck_assert_str_eq(r.error, "the agent reported an error: stream disconnected");
	agent_result_clear(&r);

	/* the error item alone does not end a run; no turn.completed: no result */
	parse(AGENT_FORMAT_CODEX, "{\"type\":\"error\",\"message\":\"Model metadata\"}\n", 0, false, 5, &r);
	ck_assert_int_eq(r.status, AGENT_NO_RESULT);
	agent_result_clear(&r);
}
END_TEST

START_TEST(test_tail)
{
	char *t = agent_tail("a\nb\nc\nd\n\n", 9, 2);
	ck_assert_str_eq(t, "c\nd");
	free(t);
	t = agent_tail("only", 4, 5);
	ck_assert_str_eq(t, "only");
	free(t);
	t = agent_tail(NULL, 0, 5);
	ck_assert_str_eq(t, "");
	free(t);
}
END_TEST

START_TEST(test_config)
{
	static const char *keys[] = { "AGENT", "AGENT_COMMAND", "AGENT_MODEL", "AGENT_MAX_BUDGET_USD",
				      "AGENT_TIMEOUT_SECONDS", "AGENT_IMAGE", "AGENT_USER", "AGENT_NET",
				      "MODEL_ACCESS", "ANTHROPIC_BASE_URL", "OPENAI_BASE_URL", NULL };
	for (int i = 0; keys[i]; i++)
		unsetenv(keys[i]);
	agent_config_t c;
	lc_error_t *err = NULL;
	ck_assert_int_eq(agent_config_from_env(&c, &err), 0);
	ck_assert_str_eq(c.agent, "claude");
	ck_assert_int_eq(c.format, AGENT_FORMAT_CLAUDE);
	ck_assert_ptr_null(c.command);
	ck_assert(c.max_budget_usd == 5);
	ck_assert_int_eq(c.timeout_s, 1800);
	ck_assert_str_eq(c.image, "agent-cli");
	ck_assert_str_eq(c.user, "1000:1000");
	/* the gateway by default: no network but lcd's rule to it */
	ck_assert_str_eq(c.net, "none");
	ck_assert_int_eq(c.access, AGENT_ACCESS_GATEWAY);
	ck_assert_str_eq(c.key_secret, "ANTHROPIC_API_KEY");
	ck_assert_ptr_null(c.base_url);
	agent_config_clear(&c);

	setenv("AGENT", "codex", 1);
	setenv("OPENAI_BASE_URL", "http://192.0.2.10:8080/v1", 1);
	setenv("ANTHROPIC_BASE_URL", "http://elsewhere", 1);
	setenv("AGENT_MAX_BUDGET_USD", "0.25", 1);
	setenv("MODEL_ACCESS", "direct", 1);
	ck_assert_int_eq(agent_config_from_env(&c, &err), 0);
	ck_assert_int_eq(c.format, AGENT_FORMAT_CODEX);
	ck_assert_str_eq(c.key_secret, "OPENAI_API_KEY");
	ck_assert_str_eq(c.base_url, "http://192.0.2.10:8080/v1");
	ck_assert(c.max_budget_usd == 0.25);
	ck_assert_int_eq(c.access, AGENT_ACCESS_DIRECT);
	ck_assert_str_eq(c.net, "model-api"); /* direct: the model API's range */
	agent_config_clear(&c);
	setenv("AGENT_NET", "my-proxy", 1);
	setenv("MODEL_ACCESS", "gateway", 1);
	ck_assert_int_eq(agent_config_from_env(&c, &err), 0);
	ck_assert_int_eq(c.access, AGENT_ACCESS_GATEWAY);
	ck_assert_str_eq(c.net, "my-proxy"); /* AGENT_NET wins in either mode */
	agent_config_clear(&c);

	struct { const char *key, *value, *msg; } bad[] = {
		{ "AGENT", "aider", "AGENT=aider: expected claude or codex" },
		{ "AGENT_MAX_BUDGET_USD", "-1", "AGENT_MAX_BUDGET_USD=-1: expected a positive number of dollars" },
		{ "AGENT_MAX_BUDGET_USD", "5$", "AGENT_MAX_BUDGET_USD=5$: expected a positive number of dollars" },
		{ "AGENT_TIMEOUT_SECONDS", "0", "AGENT_TIMEOUT_SECONDS=0: expected seconds (1 to 604800)" },
		{ "MODEL_ACCESS", "proxy", "MODEL_ACCESS=proxy: expected gateway or direct" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		for (int k = 0; keys[k]; k++)
			unsetenv(keys[k]);
		setenv(bad[i].key, bad[i].value, 1);
		ck_assert_int_lt(agent_config_from_env(&c, &err), 0);
		ck_assert_str_eq(err->msg, bad[i].msg);
		ck_assert_int_eq(err->exit_code, LC_EXIT_USAGE);
		lc_error_free(err);
		err = NULL;
		agent_config_clear(&c);
	}
}
END_TEST

int main(void)
{
	Suite *s = suite_create("agent");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_claude_ok);
	tcase_add_test(tc, test_claude_errors);
	tcase_add_test(tc, test_endings);
	tcase_add_test(tc, test_gateway_stop);
	tcase_add_test(tc, test_codex);
	tcase_add_test(tc, test_tail);
	tcase_add_test(tc, test_config);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
