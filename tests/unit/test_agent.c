/* Unit tests for orchestrator/workloads/agent.c: reading Claude Code's
 * result object and Codex's JSONL, how a run ended, the configuration. */
#include <check.h>
#include <math.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "ghauth.h"
#include "gitops.h"

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

/* base64url without padding (RFC 4648 section 5) */
START_TEST(test_b64url)
{
	char *e = gh_b64url((const unsigned char *)"", 0);
	ck_assert_str_eq(e, "");
	free(e);
	e = gh_b64url((const unsigned char *)"f", 1);
	ck_assert_str_eq(e, "Zg");
	free(e);
	e = gh_b64url((const unsigned char *)"foob", 4);
	ck_assert_str_eq(e, "Zm9vYg");
	free(e);
	const unsigned char b[] = { 0xfb, 0xff, 0xbf };
	e = gh_b64url(b, 3);
	ck_assert_str_eq(e, "-_-_");
	free(e);
}
END_TEST

static unsigned char *b64url_decode(const char *s, size_t n, size_t *out)
{
	char *t = calloc(1, n + 4);
	memcpy(t, s, n);
	for (size_t i = 0; i < n; i++)
		t[i] = t[i] == '-' ? '+' : t[i] == '_' ? '/' : t[i];
	while (n % 4)
		t[n++] = '=';
	unsigned char *d = calloc(1, n);
	int len = EVP_DecodeBlock(d, (unsigned char *)t, (int)n);
	ck_assert_int_ge(len, 0);
	size_t pad = 0;
	for (size_t i = n; i > 0 && t[i - 1] == '='; i--)
		pad++;
	*out = (size_t)len - pad;
	free(t);
	return d;
}

/* A GitHub App's JWT: RS256 over header.claims with the App's key,
 * verified here with the public half; iat 60 s back, exp 9 minutes on. */
START_TEST(test_app_jwt)
{
	EVP_PKEY *k = EVP_RSA_gen(2048);
	ck_assert_ptr_nonnull(k);
	BIO *b = BIO_new(BIO_s_mem());
	ck_assert(PEM_write_bio_PrivateKey(b, k, NULL, NULL, 0, NULL, NULL));
	char *pem = NULL;
	long n = BIO_get_mem_data(b, &pem);
	char *key = strndup(pem, (size_t)n);
	BIO_free(b);
	lc_error_t *err = NULL;
	time_t now = 1700000000;
	char *jwt = gh_app_jwt(key, "4242", now, &err);
	ck_assert_msg(jwt != NULL, "%s", err ? err->msg : "");
	char *dot1 = strchr(jwt, '.'), *dot2 = strrchr(jwt, '.');
	ck_assert_ptr_nonnull(dot1);
	ck_assert_ptr_ne(dot1, dot2);
	size_t hl, cl, sl;
	unsigned char *h = b64url_decode(jwt, (size_t)(dot1 - jwt), &hl);
	unsigned char *c = b64url_decode(dot1 + 1, (size_t)(dot2 - dot1 - 1), &cl);
	unsigned char *sig = b64url_decode(dot2 + 1, strlen(dot2 + 1), &sl);
	json_t *hj = json_loadb((char *)h, hl, 0, NULL), *cj = json_loadb((char *)c, cl, 0, NULL);
	ck_assert_str_eq(json_string_value(json_object_get(hj, "alg")), "RS256");
	ck_assert_int_eq(json_integer_value(json_object_get(cj, "iat")), now - 60);
	ck_assert_int_eq(json_integer_value(json_object_get(cj, "exp")), now + 540);
	ck_assert_int_eq(json_integer_value(json_object_get(cj, "iss")), 4242);
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	ck_assert_int_eq(EVP_DigestVerifyInit(ctx, NULL, EVP_sha256(), NULL, k), 1);
	ck_assert_int_eq(EVP_DigestVerify(ctx, sig, sl, (unsigned char *)jwt, (size_t)(dot2 - jwt)), 1);
	/* one bit off: no longer valid */
	sig[10] ^= 1;
	ck_assert_int_ne(EVP_DigestVerifyInit(ctx, NULL, EVP_sha256(), NULL, k) == 1 &&
			 EVP_DigestVerify(ctx, sig, sl, (unsigned char *)jwt, (size_t)(dot2 - jwt)) == 1, 1);
	EVP_MD_CTX_free(ctx);
	json_decref(hj);
	json_decref(cj);
	free(h);
	free(c);
	free(sig);
	free(jwt);
	/* a client id as iss stays a string */
	jwt = gh_app_jwt(key, "Iv1.abc", now, &err);
	ck_assert_ptr_nonnull(jwt);
	dot1 = strchr(jwt, '.');
	dot2 = strrchr(jwt, '.');
	c = b64url_decode(dot1 + 1, (size_t)(dot2 - dot1 - 1), &cl);
	cj = json_loadb((char *)c, cl, 0, NULL);
	ck_assert_str_eq(json_string_value(json_object_get(cj, "iss")), "Iv1.abc");
	json_decref(cj);
	free(c);
	free(jwt);
	/* not a key: one line naming the secret */
	ck_assert_ptr_null(gh_app_jwt("-----BEGIN PRIVATE KEY-----\nnope\n-----END PRIVATE KEY-----\n", "1", now, &err));
	ck_assert_msg(strncmp(err->msg, "GITHUB_APP_PRIVATE_KEY: not a PEM private key (", 47) == 0, "%s", err->msg);
	lc_error_free(err);
	err = NULL;
	free(key);
	EVP_PKEY_free(k);
}
END_TEST

/* The configuration's ways and its half-ways. */
START_TEST(test_auth_env)
{
	unsetenv("GITHUB_APP_ID");
	unsetenv("GITHUB_APP_INSTALLATION_ID");
	unsetenv("GITHUB_APP_PRIVATE_KEY");
	unsetenv("GITHUB_TOKEN");
	gh_auth_t *a = NULL;
	lc_error_t *err = NULL;
	ck_assert_int_eq(gh_auth_from_env("https://api.github.com", "o/r", NULL, &a, &err), 0);
	ck_assert_int_eq(gh_auth_kind(a), GH_AUTH_NONE);
	const char *t = "x";
	ck_assert_int_eq(gh_auth_token(a, &t, &err), 0);
	ck_assert_ptr_null(t);
	gh_auth_free(a);
	setenv("GITHUB_TOKEN", "ghp_abc", 1);
	ck_assert_int_eq(gh_auth_from_env("https://api.github.com", "o/r", NULL, &a, &err), 0);
	ck_assert_int_eq(gh_auth_kind(a), GH_AUTH_TOKEN);
	ck_assert_int_eq(gh_auth_token(a, &t, &err), 0);
	ck_assert_str_eq(t, "ghp_abc");
	ck_assert_str_eq(gh_auth_name(a), "GITHUB_TOKEN");
	gh_auth_free(a);
	setenv("GITHUB_APP_ID", "4242", 1);
	ck_assert_int_lt(gh_auth_from_env("https://api.github.com", "o/r", NULL, &a, &err), 0);
	ck_assert_str_eq(err->msg, "a GitHub App needs both GITHUB_APP_ID and GITHUB_APP_INSTALLATION_ID "
				   "(GITHUB_APP_INSTALLATION_ID is not set)");
	lc_error_free(err);
	err = NULL;
	setenv("GITHUB_APP_INSTALLATION_ID", "77", 1);
	ck_assert_int_lt(gh_auth_from_env("https://api.github.com", "o/r", NULL, &a, &err), 0);
	ck_assert_str_eq(err->msg, "GITHUB_APP_ID is set, but this function has no GITHUB_APP_PRIVATE_KEY: "
				   "lcctl secret set GITHUB_APP_PRIVATE_KEY < the App's .pem");
	lc_error_free(err);
	err = NULL;
	setenv("GITHUB_APP_PRIVATE_KEY", "not a key", 1);
	ck_assert_int_lt(gh_auth_from_env("https://api.github.com", "o/r", NULL, &a, &err), 0);
	ck_assert_msg(strstr(err->msg, "GITHUB_APP_PRIVATE_KEY: not a PEM private key") == err->msg, "%s", err->msg);
	lc_error_free(err);
	unsetenv("GITHUB_APP_ID");
	unsetenv("GITHUB_APP_INSTALLATION_ID");
	unsetenv("GITHUB_APP_PRIVATE_KEY");
	unsetenv("GITHUB_TOKEN");
}
END_TEST

/* Submodule URLs as git resolves them: relative to the remote, never
 * above its host. */
START_TEST(test_resolve_url)
{
	static const char *const cases[][3] = {
		{ "http://h:8080/octo/demo.git", "../lib.git", "http://h:8080/octo/lib.git" },
		{ "https://h/octo/demo.git/", "./sub", "https://h/octo/demo.git/sub" },
		{ "https://h/octo/demo", "../../other/x.git", "https://h/other/x.git" },
		{ "https://h/octo/demo", "../../../../x.git", "https://h/x.git" },
		{ "https://h/octo/demo", "https://elsewhere/a/b.git", "https://elsewhere/a/b.git" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *u = gitops_resolve_url(cases[i][0], cases[i][1]);
		ck_assert_str_eq(u, cases[i][2]);
		free(u);
	}
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
	tcase_add_test(tc, test_b64url);
	tcase_add_test(tc, test_app_jwt);
	tcase_add_test(tc, test_auth_env);
	tcase_add_test(tc, test_resolve_url);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
