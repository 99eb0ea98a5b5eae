/* Unit tests for app manifest validation (orchestrator/lcd/model/manifest.c). */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "grant.h"
#include "manifest.h"
#include "util.h"

static const char *good =
	"{\"name\": \"demo\","
	" \"functions\": {"
	"   \"solve\": {\"command\": [\"/bin/true\"], \"timeout\": 30, \"concurrency\": 3, \"queue\": 20,"
	"             \"retries\": 1, \"secrets\": [\"MODEL_KEY\"], \"limits\": {\"memory\": \"512M\", \"pids\": 64}},"
	"   \"shell\": {\"command\": \"echo hi\"}},"
	" \"schedules\": {\"nightly\": {\"cron\": \"0 3 * * *\", \"function\": \"solve\", \"args\": {\"n\": 1}}},"
	" \"maps\": [\"claims\"],"
	" \"webhooks\": {\"github\": {\"function\": \"solve\", \"secret\": \"GH_SECRET\", \"events\": [\"issues\", \"ping\"]}},"
	" \"config\": {\"REPOSITORY\": \"https://example.test/r.git\", \"LABEL\": \"agent\", \"EMPTY\": \"\"}}";

static char *parse_err(const char *text)
{
	json_error_t je;
	json_t *m = json_loads(text, 0, &je);
	ck_assert_msg(m != NULL, "test JSON broken: %s", je.text);
	lcd_app_t *app = NULL;
	lc_error_t *err = NULL;
	int r = lcd_app_parse(m, &app, &err);
	json_decref(m);
	ck_assert_int_eq(r, -1);
	ck_assert_ptr_null(app);
	ck_assert_int_eq(err->exit_code, LC_EXIT_INVALID);
	char *msg = strdup(err->msg);
	lc_error_free(err);
	return msg;
}

/* A manifest that must parse; the caller unrefs the app. */
static lcd_app_t *parse_ok(const char *text)
{
	json_t *m = json_loads(text, 0, NULL);
	ck_assert_ptr_nonnull(m);
	lcd_app_t *app = NULL;
	lc_error_t *err = NULL;
	ck_assert_msg(lcd_app_parse(m, &app, &err) == 0, "refused: %s", err ? err->msg : "");
	json_decref(m);
	return app;
}

/* Replace the first occurrence of `from` in the good manifest. */
static char *mutate(const char *from, const char *to)
{
	const char *p = strstr(good, from);
	ck_assert_ptr_nonnull(p);
	char *out = malloc(strlen(good) + strlen(to) + 1);
	size_t pre = (size_t)(p - good);
	memcpy(out, good, pre);
	strcpy(out + pre, to);
	strcat(out, p + strlen(from));
	return out;
}

static void expect(const char *from, const char *to, const char *msg)
{
	char *text = mutate(from, to);
	char *got = parse_err(text);
	ck_assert_msg(strcmp(got, msg) == 0, "got '%s', want '%s'", got, msg);
	free(got);
	free(text);
}

START_TEST(test_good)
{
	json_t *m = json_loads(good, 0, NULL);
	lcd_app_t *app = NULL;
	lc_error_t *err = NULL;
	ck_assert_int_eq(lcd_app_parse(m, &app, &err), 0);
	json_decref(m);
	ck_assert_str_eq(app->name, "demo");
	const lcd_function_t *f = lcd_app_function(app, "solve");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(f->timeout, 30);
	ck_assert_int_eq(f->concurrency, 3);
	ck_assert_int_eq(f->queue, 20);
	ck_assert_int_eq(f->retries, 1);
	ck_assert_str_eq(f->secrets[0], "MODEL_KEY");
	ck_assert_int_eq(f->limits.memory, 512LL << 20);
	ck_assert_int_eq(f->limits.pids, 64);
	ck_assert_str_eq(f->net, "none");
	ck_assert_ptr_null(f->image);
	const lcd_function_t *sh = lcd_app_function(app, "shell");
	ck_assert_str_eq(sh->argv[0], "/bin/sh");
	ck_assert_str_eq(sh->argv[2], "echo hi");
	ck_assert_int_eq(sh->concurrency, 1);
	ck_assert_int_eq(sh->limits.memory, -1);
	const lcd_schedule_t *s = lcd_app_schedule(app, "nightly");
	ck_assert_ptr_nonnull(s);
	ck_assert_str_eq(s->function, "solve");
	ck_assert(lcd_app_has_map(app, "claims"));
	ck_assert(!lcd_app_has_map(app, "other"));
	ck_assert_int_eq(app->n_webhooks, 1);
	ck_assert_int_eq(app->sandboxes_max, LCD_SANDBOXES_MAX_DEFAULT);
	const lcd_webhook_t *w = lcd_app_webhook(app, "github");
	ck_assert_ptr_nonnull(w);
	ck_assert_ptr_null(lcd_app_webhook(app, "gitlab"));
	ck_assert_str_eq(w->secret, "GH_SECRET");
	ck_assert(lcd_webhook_wants(w, "issues"));
	ck_assert(!lcd_webhook_wants(w, "push"));
	ck_assert(!lcd_webhook_wants(w, "issue")); /* whole names only */
	/* config, in the manifest's order, as environment entries */
	ck_assert_uint_eq(lc_strv_len(app->config), 3);
	ck_assert_str_eq(app->config[0], "REPOSITORY=https://example.test/r.git");
	ck_assert_str_eq(app->config[1], "LABEL=agent");
	ck_assert_str_eq(app->config[2], "EMPTY=");
	lcd_app_unref(app);
}
END_TEST

START_TEST(test_webhook_events_optional)
{
	char *text = mutate(", \"events\": [\"issues\", \"ping\"]", "");
	lcd_app_t *app = parse_ok(text);
	ck_assert(lcd_webhook_wants(lcd_app_webhook(app, "github"), "anything"));
	ck_assert_ptr_null(app->webhooks[0].events);
	lcd_app_unref(app);
	free(text);
}
END_TEST

START_TEST(test_config_errors)
{
	expect("{\"REPOSITORY\": \"https://example.test/r.git\", \"LABEL\": \"agent\", \"EMPTY\": \"\"}", "[\"REPOSITORY=x\"]",
	       "config: expected an object of strings {\"NAME\": \"value\"}");
	expect("\"LABEL\": \"agent\"", "\"LABEL\": 3", "config.LABEL: expected a string");
	expect("\"LABEL\": \"agent\"", "\"LABEL\": null", "config.LABEL: expected a string");
	expect("\"LABEL\": \"agent\"", "\"LA-BEL\": \"agent\"",
	       "config.LA-BEL: bad name (an environment variable name: letters, digits, '_'; not starting with a digit)");
	expect("\"LABEL\": \"agent\"", "\"1LABEL\": \"agent\"",
	       "config.1LABEL: bad name (an environment variable name: letters, digits, '_'; not starting with a digit)");
	expect("\"LABEL\": \"agent\"", "\"LC_TASK_ID\": \"x\"",
	       "config.LC_TASK_ID: names starting with LC_TASK_ or LCD_ are set by lcd");
	expect("\"LABEL\": \"agent\"", "\"LCD_SOCKET\": \"x\"",
	       "config.LCD_SOCKET: names starting with LC_TASK_ or LCD_ are set by lcd");
	/* a secret's name: the value would shadow (or be shadowed by) the secret */
	expect("\"LABEL\": \"agent\"", "\"MODEL_KEY\": \"x\"",
	       "config.MODEL_KEY: also a secret of functions.solve (config is not secret)");

	/* NUL inside a value (JSON allows \u0000 when the decoder does) */
	json_t *m = json_loads(good, 0, NULL);
	json_object_set_new(json_object_get(m, "config"), "LABEL", json_stringn("a\0b", 3));
	lcd_app_t *app = NULL;
	lc_error_t *err = NULL;
	ck_assert_int_eq(lcd_app_parse(m, &app, &err), -1);
	ck_assert_str_eq(err->msg, "config.LABEL: must not contain NUL bytes");
	lc_error_free(err);
	err = NULL;
	/* 16 KiB per value; 16 KiB itself is fine */
	char *big = malloc(16385);
	memset(big, 'x', 16384);
	big[16384] = '\0';
	json_object_set_new(json_object_get(m, "config"), "LABEL", json_string(big));
	ck_assert_int_eq(lcd_app_parse(m, &app, &err), 0);
	lcd_app_unref(app);
	app = NULL;
	big[16384] = 'x';
	json_object_set_new(json_object_get(m, "config"), "LABEL", json_stringn(big, 16385));
	ck_assert_int_eq(lcd_app_parse(m, &app, &err), -1);
	ck_assert_str_eq(err->msg, "config.LABEL: at most 16384 bytes");
	lc_error_free(err);
	err = NULL;
	free(big);
	/* at most 128 keys */
	json_t *cfg = json_object();
	for (int i = 0; i < 129; i++) {
		char k[16];
		snprintf(k, sizeof(k), "K%d", i);
		json_object_set_new(cfg, k, json_string("v"));
	}
	json_object_set_new(m, "config", cfg);
	ck_assert_int_eq(lcd_app_parse(m, &app, &err), -1);
	ck_assert_str_eq(err->msg, "config: at most 128 keys");
	lc_error_free(err);
	json_decref(m);
}
END_TEST

START_TEST(test_sandboxes_max)
{
	char *text = mutate("\"maps\": [\"claims\"]", "\"maps\": [\"claims\"], \"sandboxes\": {\"max\": 0}");
	lcd_app_t *app = parse_ok(text);
	ck_assert_int_eq(app->sandboxes_max, 0); /* its tasks may make none */
	lcd_app_unref(app);
	free(text);
	expect("\"maps\": [\"claims\"]", "\"sandboxes\": {\"max\": -2}", "sandboxes.max: expected a non-negative integer");
	expect("\"maps\": [\"claims\"]", "\"sandboxes\": {\"max\": 20000}", "sandboxes.max: at most 10000");
	expect("\"maps\": [\"claims\"]", "\"sandboxes\": {\"mx\": 2}", "sandboxes.mx: unknown key");
	expect("\"maps\": [\"claims\"]", "\"sandboxes\": 3",
	       "sandboxes: expected an object {\"max\", \"net\", \"images\", \"limits\", \"model_gateway\"}");
}
END_TEST

/* The grant (manifest's "sandboxes") and a task's requests held to it. */
START_TEST(test_grant)
{
	/* what an app that says nothing gives its tasks */
	lcd_app_t *app = parse_ok(good);
	const lcd_grant_t *g = &app->grant;
	ck_assert_str_eq(g->net[0], "none");
	ck_assert_ptr_null(g->net[1]);
	ck_assert_str_eq(g->images[0], "host");
	ck_assert_int_eq(g->limits.memory, LCD_GRANT_MEMORY_DEFAULT);
	ck_assert_int_eq(g->limits.pids, LCD_GRANT_PIDS_DEFAULT);
	ck_assert(!g->model_gateway);
	lc_error_t *err = NULL;
	json_t *open = json_string("open");
	ck_assert_int_eq(lcd_grant_net(g, "demo", open, &err), -1);
	ck_assert_int_eq(err->exit_code, LC_EXIT_PERM);
	ck_assert_str_eq(err->msg, "net: app demo's tasks may make sandboxes with the network policies none only, not "
				   "open (sandboxes.net in its manifest)");
	lc_error_free(err);
	err = NULL;
	json_t *own = json_pack("{s:s}", "mode", "allow");
	ck_assert_int_eq(lcd_grant_net(g, "demo", own, &err), -1);
	lc_error_free(err);
	err = NULL;
	json_t *none = json_string("none");
	ck_assert_int_eq(lcd_grant_net(g, "demo", none, &err), 0);
	ck_assert_int_eq(lcd_grant_net(g, "demo", NULL, &err), 0);
	ck_assert_int_eq(lcd_grant_image(g, "demo", "host", &err), 0);
	ck_assert_int_eq(lcd_grant_image(g, "demo", "demo/snap-1", &err), 0);
	ck_assert_int_eq(lcd_grant_image(g, "demo", "demo/", &err), -1);
	lc_error_free(err);
	err = NULL;
	ck_assert_int_eq(lcd_grant_image(g, "demo", "demos/x", &err), -1);
	lc_error_free(err);
	err = NULL;
	ck_assert_int_eq(lcd_grant_image(g, "demo", "agent-cli", &err), -1);
	ck_assert_str_eq(err->msg, "image: app demo's tasks may make sandboxes from host and the app's own snapshots "
				   "(demo/...) only, not agent-cli (sandboxes.images in its manifest)");
	lc_error_free(err);
	err = NULL;
	ck_assert_int_eq(lcd_grant_snapshot_name("demo", "demo/x", &err), 0);
	ck_assert_int_eq(lcd_grant_snapshot_name("demo", "agent-cli", &err), -1);
	lc_error_free(err);
	err = NULL;
	/* limits: the grant's when none is asked (best effort), within it otherwise */
	lc_limits_t out;
	ck_assert_int_eq(lcd_grant_limits(g, "demo", NULL, 64LL << 20, &out, &err), 0);
	ck_assert_int_eq(out.memory, LCD_GRANT_MEMORY_DEFAULT);
	ck_assert_int_eq(out.disk, 64LL << 20); /* lcd.json's task_disk: the grant names none */
	ck_assert(out.best_effort);
	lc_limits_t asked = { .memory = 1LL << 30, .memory_swap = -1, .pids = -1 };
	ck_assert_int_eq(lcd_grant_limits(g, "demo", &asked, 64LL << 20, &out, &err), 0);
	ck_assert_int_eq(out.memory, 1LL << 30);
	ck_assert_int_eq(out.pids, LCD_GRANT_PIDS_DEFAULT);
	ck_assert_int_eq(out.disk, 64LL << 20);
	ck_assert(!out.best_effort);
	asked.disk = 32LL << 20;
	ck_assert_int_eq(lcd_grant_limits(g, "demo", &asked, 64LL << 20, &out, &err), 0);
	ck_assert_int_eq(out.disk, 32LL << 20);
	asked.disk = 65LL << 20;
	ck_assert_int_eq(lcd_grant_limits(g, "demo", &asked, 64LL << 20, &out, &err), -1);
	ck_assert_str_eq(err->msg, "limits.disk: 68157440 is more than app demo's tasks may ask for (67108864: "
				   "sandboxes.limits.disk in its manifest, else lcd.json's task_disk)");
	lc_error_free(err);
	err = NULL;
	asked.disk = 0;
	asked.memory = 3LL << 30;
	ck_assert_int_eq(lcd_grant_limits(g, "demo", &asked, 64LL << 20, &out, &err), -1);
	ck_assert_str_eq(err->msg, "limits.memory: 3221225472 is more than app demo's tasks may ask for (2147483648: "
				   "sandboxes.limits.memory in its manifest)");
	lc_error_free(err);
	err = NULL;
	lcd_app_unref(app);
	json_decref(open);
	json_decref(own);
	json_decref(none);

	/* a grant that names policies, images ("$KEY"s from the config), limits */
	char *text = mutate("\"maps\": [\"claims\"]",
			    "\"maps\": [\"claims\"], \"sandboxes\": {\"net\": [\"open\", \"$NET\", \"$EMPTY\"], "
			    "\"images\": [\"agent-cli\", \"$IMG\"], \"limits\": {\"memory\": \"1G\", \"cpus\": 2}, "
			    "\"model_gateway\": true}");
	char *text2 = NULL;
	{
		const char *from = "\"EMPTY\": \"\"";
		char *p = strstr(text, from);
		ck_assert_ptr_nonnull(p);
		text2 = lc_strdup_printf("%.*s\"EMPTY\": \"\", \"NET\": \"github\", \"IMG\": \"python\"%s", (int)(p - text), text,
					 p + strlen(from));
	}
	app = parse_ok(text2);
	g = &app->grant;
	ck_assert_str_eq(g->net[0], "none");
	ck_assert_str_eq(g->net[1], "open");
	ck_assert_str_eq(g->net[2], "github");
	ck_assert_ptr_null(g->net[3]);
	ck_assert_str_eq(g->images[1], "agent-cli");
	ck_assert_str_eq(g->images[2], "python");
	ck_assert_int_eq(g->limits.memory, 1LL << 30);
	ck_assert_int_eq(g->limits.pids, LCD_GRANT_PIDS_DEFAULT); /* what it leaves out keeps the default */
	ck_assert(g->limits.cpus == 2);
	ck_assert(g->model_gateway);
	json_t *gh = json_string("github");
	ck_assert_int_eq(lcd_grant_net(g, "demo", gh, &err), 0);
	json_decref(gh);
	ck_assert_int_eq(lcd_grant_image(g, "demo", "python", &err), 0);
	lcd_app_unref(app);
	free(text2);
	free(text);

	expect("\"maps\": [\"claims\"]", "\"sandboxes\": {\"net\": [\"$NOPE\"]}", "sandboxes.net[0]: $NOPE is not a key of config");
	expect("\"maps\": [\"claims\"]", "\"sandboxes\": {\"net\": [\"Bad Name\"]}",
	       "sandboxes.net[0]: expected a network policy name (\"allow\": allow lists of the task's own) or \"$CONFIG_KEY\"");
	expect("\"maps\": [\"claims\"]", "\"sandboxes\": {\"images\": [\"no good\"]}",
	       "sandboxes.images[0]: expected an image name, \"host\" or \"$CONFIG_KEY\"");
	expect("\"maps\": [\"claims\"]", "\"sandboxes\": {\"model_gateway\": 1}", "sandboxes.model_gateway: expected true or false");
	expect("\"maps\": [\"claims\"]", "\"sandboxes\": {\"limits\": {\"memory\": \"1G\", \"best_effort\": true}}",
	       "sandboxes.limits.best_effort: not here: a task's sandbox gets what the host enforces of these (the rest is logged)");
}
END_TEST

/* "net": "$KEY" is the policy the app's config names. */
START_TEST(test_net_from_config)
{
	char *text = mutate("\"timeout\": 30,", "\"timeout\": 30, \"net\": \"$LABEL\",");
	lcd_app_t *app = parse_ok(text);
	ck_assert_str_eq(app->functions[0].net, "agent"); /* config LABEL's value */
	ck_assert_str_eq(app->functions[1].net, "none");
	lcd_app_unref(app);
	free(text);
	expect("\"timeout\": 30,", "\"timeout\": 30, \"net\": \"$NET\",",
	       "functions.solve.net: $NET is not a key of config");
	expect("\"timeout\": 30,", "\"timeout\": 30, \"net\": \"$REPOSITORY\",",
	       "functions.solve.net: config.REPOSITORY: expected \"none\" or a network policy name, not "
	       "'https://example.test/r.git'");
	expect("\"timeout\": 30,", "\"timeout\": 30, \"net\": \"$bad-key\",",
	       "functions.solve.net: expected \"none\", a network policy name or \"$CONFIG_KEY\"");
	expect("\"timeout\": 30,", "\"timeout\": 30, \"net\": \"Model\",",
	       "functions.solve.net: expected \"none\", a network policy name or \"$CONFIG_KEY\"");
}
END_TEST

/* The good manifest with solve's "model_gateway" gw and config keys A
 * (gateway), D (direct), B (0.25), X (x). */
static char *with_gateway(const char *gw)
{
	char *fn = lc_strdup_printf("\"timeout\": 30, \"model_gateway\": %s,", gw);
	char *a = mutate("\"timeout\": 30,", fn);
	const char *from = "\"EMPTY\": \"\"}";
	char *p = strstr(a, from);
	ck_assert_ptr_nonnull(p);
	*p = '\0';
	char *out = lc_strdup_printf("%s\"EMPTY\": \"\", \"A\": \"gateway\", \"D\": \"direct\", \"B\": \"0.25\", \"X\": \"x\"}%s", a,
				     p + strlen(from));
	free(a);
	free(fn);
	return out;
}

static void gw_expect(const char *gw, const char *msg)
{
	char *text = with_gateway(gw);
	char *m = parse_err(text);
	ck_assert_str_eq(m, msg);
	free(m);
	free(text);
}

START_TEST(test_model_gateway)
{
	/* literal: on, with its budget */
	char *text = with_gateway("{\"provider\": \"openai\", \"secret\": \"MODEL_KEY\", \"budget_usd\": 2}");
	lcd_app_t *app = parse_ok(text);
	json_t *g = app->functions[0].model_gateway;
	ck_assert_ptr_nonnull(g);
	ck_assert_str_eq(json_string_value(json_object_get(g, "provider")), "openai");
	ck_assert_str_eq(json_string_value(json_object_get(g, "secret")), "MODEL_KEY");
	ck_assert(json_number_value(json_object_get(g, "budget_usd")) == 2);
	ck_assert_ptr_null(json_object_get(g, "access"));
	ck_assert_ptr_null(app->functions[0].gateway_access_key);
	ck_assert_ptr_null(app->functions[1].model_gateway);
	lcd_app_unref(app);
	free(text);
	/* from the config: access and budget */
	text = with_gateway("{\"provider\": \"anthropic\", \"secret\": \"MODEL_KEY\", \"budget_usd\": \"$B\", \"access\": \"$A\"}");
	app = parse_ok(text);
	g = app->functions[0].model_gateway;
	ck_assert_ptr_nonnull(g);
	ck_assert(json_number_value(json_object_get(g, "budget_usd")) == 0.25);
	ck_assert_str_eq(app->functions[0].gateway_access_key, "A");
	lcd_app_unref(app);
	free(text);
	/* "" for the budget: none; access direct: no gateway at all */
	text = with_gateway("{\"provider\": \"openai\", \"secret\": \"MODEL_KEY\", \"budget_usd\": \"$EMPTY\"}");
	app = parse_ok(text);
	ck_assert_ptr_nonnull(app->functions[0].model_gateway);
	ck_assert_ptr_null(json_object_get(app->functions[0].model_gateway, "budget_usd"));
	lcd_app_unref(app);
	free(text);
	text = with_gateway("{\"provider\": \"openai\", \"secret\": \"MODEL_KEY\", \"access\": \"$D\"}");
	app = parse_ok(text);
	ck_assert_ptr_null(app->functions[0].model_gateway);
	lcd_app_unref(app);
	free(text);
	/* errors name the path */
	gw_expect("\"openai\"", "functions.solve.model_gateway: expected {\"provider\": \"openai\", \"secret\": NAME, "
				"\"budget_usd\": N, \"access\": \"gateway\"}");
	gw_expect("{\"provider\": \"openai\", \"secret\": \"K\", \"budget\": 1}", "functions.solve.model_gateway.budget: unknown key");
	gw_expect("{\"provider\": \"google\", \"secret\": \"K\"}",
		  "functions.solve.model_gateway.provider: expected \"anthropic\" or \"openai\"");
	gw_expect("{\"provider\": \"openai\"}",
		  "functions.solve.model_gateway.secret: required (the secret holding the provider's key)");
	gw_expect("{\"provider\": \"openai\", \"secret\": \"a-b\"}", "functions.solve.model_gateway.secret: expected a secret name");
	gw_expect("{\"provider\": \"openai\", \"secret\": \"K\", \"access\": \"proxy\"}",
		  "functions.solve.model_gateway.access: expected \"gateway\", \"direct\" or \"$CONFIG_KEY\"");
	gw_expect("{\"provider\": \"openai\", \"secret\": \"K\", \"access\": \"$NOPE\"}",
		  "functions.solve.model_gateway.access: $NOPE is not a key of config");
	gw_expect("{\"provider\": \"openai\", \"secret\": \"K\", \"access\": \"$X\"}",
		  "functions.solve.model_gateway.access: config.X: expected gateway or direct, not 'x'");
	gw_expect("{\"provider\": \"openai\", \"secret\": \"K\", \"budget_usd\": \"$X\"}",
		  "functions.solve.model_gateway.budget_usd: config.X: expected a number of dollars, not 'x'");
	gw_expect("{\"provider\": \"openai\", \"secret\": \"K\", \"budget_usd\": \"$NOPE\"}",
		  "functions.solve.model_gateway.budget_usd: $NOPE is not a key of config");
}
END_TEST

START_TEST(test_paths)
{
	expect("\"timeout\": 30", "\"timeout\": 0", "functions.solve.timeout: expected a positive integer");
	expect("\"timeout\": 30", "\"timeout\": \"30\"", "functions.solve.timeout: expected a positive integer");
	expect("\"queue\": 20", "\"queue\": -1", "functions.solve.queue: expected a non-negative integer");
	expect("\"concurrency\": 3", "\"concurency\": 3", "functions.solve.concurency: unknown key");
	expect("[\"/bin/true\"]", "[]", "functions.solve.command: expected a non-empty string or array of strings");
	expect("[\"/bin/true\"]", "[\"/bin/true\", 3]", "functions.solve.command[1]: expected a non-empty string");
	expect("\"MODEL_KEY\"", "\"MODEL-KEY\"",
	       "functions.solve.secrets[0]: bad secret name (letters, digits, '_'; not starting with a digit)");
	expect("\"512M\"", "\"lots\"", "functions.solve.limits.memory: expected a size (bytes, or like \"512M\")");
	expect("\"0 3 * * *\"", "\"0 25 * * *\"",
	       "schedules.nightly.cron: bad cron expression '0 25 * * *': hour 25 out of range 0-23");
	expect("\"function\": \"solve\", \"args\"", "\"function\": \"nope\", \"args\"",
	       "schedules.nightly.function: no function 'nope' in this app");
	expect("\"name\": \"demo\"", "\"name\": \"Demo App\"",
	       "name: bad app name (lowercase letters, digits, '-', '_'; at most 63)");
	expect("\"maps\": [\"claims\"]", "\"maps\": [\"a/b\"]",
	       "maps[0]: bad map name (lowercase letters, digits, '-', '_'; at most 63)");
	expect("\"webhooks\": {\"github\": {\"function\": \"solve\"", "\"webhooks\": {\"github\": {\"function\": \"x\"",
	       "webhooks.github.function: no function 'x' in this app");
	expect("\"nightly\": {", "\"shell\": {", "schedules.shell: a function has the same name");
	expect(", \"secret\": \"GH_SECRET\"", "",
	       "webhooks.github.secret: required (the name of the secret that signs deliveries)");
	expect("\"secret\": \"GH_SECRET\"", "\"secret\": \"GH-SECRET\"", "webhooks.github.secret: expected a secret name");
	expect("[\"issues\", \"ping\"]", "[]",
	       "webhooks.github.events: expected at least one event (leave it out to take every event)");
	expect("[\"issues\", \"ping\"]", "[\"issues\", 7]", "webhooks.github.events[1]: expected a non-empty string");
	char *m = parse_err("{\"name\": \"x\"}");
	ck_assert_str_eq(m, "functions: required");
	free(m);
	m = parse_err("[1]");
	ck_assert_str_eq(m, "manifest: expected a JSON object");
	free(m);
}
END_TEST

static time_t at(int y, int mon, int d, int h, int mi)
{
	struct tm tm = { .tm_year = y - 1900, .tm_mon = mon - 1, .tm_mday = d, .tm_hour = h, .tm_min = mi };
	return timegm(&tm);
}

/* optional_secrets join secrets (every check sees them) and are listed
 * apart, for the task to run without them when they are not set. */
START_TEST(test_optional_secrets)
{
	char *t = mutate("\"secrets\": [\"MODEL_KEY\"]", "\"secrets\": [\"MODEL_KEY\"], \"optional_secrets\": [\"TOK\", \"APP_KEY\"]");
	lcd_app_t *app = parse_ok(t);
	free(t);
	const lcd_function_t *f = lcd_app_function(app, "solve");
	ck_assert_int_eq(lc_strv_len(f->secrets), 3);
	ck_assert_str_eq(f->secrets[1], "TOK");
	ck_assert_str_eq(f->secrets[2], "APP_KEY");
	ck_assert_int_eq(lc_strv_len(f->optional_secrets), 2);
	lcd_app_unref(app);
	t = mutate("\"secrets\": [\"MODEL_KEY\"]", "\"secrets\": [\"MODEL_KEY\"], \"optional_secrets\": [\"TOK\", \"MODEL_KEY\"]");
	char *m = parse_err(t);
	ck_assert_str_eq(m, "functions.solve.optional_secrets[1]: also in secrets");
	free(m);
	free(t);
	t = mutate("\"secrets\": [\"MODEL_KEY\"]", "\"optional_secrets\": [\"bad-name\"]");
	m = parse_err(t);
	ck_assert_str_eq(m, "functions.solve.optional_secrets[0]: bad secret name (letters, digits, '_'; not starting with a digit)");
	free(m);
	free(t);
	/* an optional secret is a secret: no config key may shadow it */
	t = mutate("\"secrets\": [\"MODEL_KEY\"]", "\"optional_secrets\": [\"LABEL\"]");
	m = parse_err(t);
	ck_assert_str_eq(m, "config.LABEL: also a secret of functions.solve (config is not secret)");
	free(m);
	free(t);
}
END_TEST

START_TEST(test_schedule_due)
{
	lcd_schedule_t s = { 0 };
	ck_assert_int_eq(lcd_cron_parse("0 3 * * *", &s.cron, NULL), 0);
	long long out[10], newest;
	size_t skipped;
	/* nothing due yet */
	ck_assert_uint_eq(lcd_schedule_due(&s, at(2030, 1, 1, 2, 0), at(2030, 1, 1, 2, 59), 10, out, &newest, &skipped), 0);
	ck_assert_int_eq(newest, 0);
	/* on time: one slot */
	ck_assert_uint_eq(lcd_schedule_due(&s, at(2030, 1, 1, 2, 59), at(2030, 1, 1, 3, 0) + 5, 10, out, &newest, &skipped), 1);
	ck_assert_int_eq(out[0], at(2030, 1, 1, 3, 0));
	ck_assert_uint_eq(skipped, 0);
	/* the last slot is not due again */
	ck_assert_uint_eq(lcd_schedule_due(&s, at(2030, 1, 1, 3, 0), at(2030, 1, 1, 3, 0) + 50, 10, out, &newest, &skipped), 0);
	/* down for 5 days, catchup all: each missed slot once, oldest first */
	long long last = at(2030, 1, 1, 3, 0), now = at(2030, 1, 6, 12, 0);
	ck_assert_uint_eq(lcd_schedule_due(&s, last, now, 10, out, &newest, &skipped), 5);
	ck_assert_int_eq(out[0], at(2030, 1, 2, 3, 0));
	ck_assert_int_eq(out[4], at(2030, 1, 6, 3, 0));
	ck_assert_int_eq(newest, at(2030, 1, 6, 3, 0));
	/* ... but no more than max, the newest ones */
	ck_assert_uint_eq(lcd_schedule_due(&s, last, now, 3, out, &newest, &skipped), 3);
	ck_assert_int_eq(out[0], at(2030, 1, 4, 3, 0));
	ck_assert_uint_eq(skipped, 2);
	/* catchup one: a single run for all of them */
	s.catchup = LCD_CATCHUP_ONE;
	ck_assert_uint_eq(lcd_schedule_due(&s, last, now, 10, out, &newest, &skipped), 1);
	ck_assert_int_eq(out[0], at(2030, 1, 6, 3, 0));
	ck_assert_uint_eq(skipped, 4);
	/* catchup none: missed slots are skipped, a slot due this minute fires */
	s.catchup = LCD_CATCHUP_NONE;
	ck_assert_uint_eq(lcd_schedule_due(&s, last, now, 10, out, &newest, &skipped), 0);
	ck_assert_uint_eq(skipped, 5);
	ck_assert_int_eq(newest, at(2030, 1, 6, 3, 0)); /* still recorded as done */
	ck_assert_uint_eq(lcd_schedule_due(&s, last, at(2030, 1, 6, 3, 0) + 30, 10, out, &newest, &skipped), 1);
	ck_assert_int_eq(out[0], at(2030, 1, 6, 3, 0));
	ck_assert_uint_eq(skipped, 4);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("manifest");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_good);
	tcase_add_test(tc, test_paths);
	tcase_add_test(tc, test_sandboxes_max);
	tcase_add_test(tc, test_grant);
	tcase_add_test(tc, test_webhook_events_optional);
	tcase_add_test(tc, test_config_errors);
	tcase_add_test(tc, test_net_from_config);
	tcase_add_test(tc, test_model_gateway);
	tcase_add_test(tc, test_schedule_due);
	tcase_add_test(tc, test_optional_secrets);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
