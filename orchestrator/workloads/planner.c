/* planner.c — the sandboxed-coding-agent app's functions
 * (docs/guides/sandboxed-coding-agent.md):
 *
 *   plan-patch         ask an OpenAI-compatible model for one patch (complete
 *                      contents of allowed files) and validate it against
 *                      the patch contract; makes no sandbox
 *   run-agent          spawn plan-patch, validate its patch again, and test it
 *                      in a sandbox with no network, no secrets and no
 *                      retained filesystem, removed in every case
 *   inspect-sandboxes  the app's last N sandboxes, live or ended
 *
 * One program, the function's name as its first argument. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat.h"
#include "lcclient.h"
#include "patch_contract.h"
#include "util.h"
#include "workload.h"

#define DEFAULT_INSTRUCTION                                                                                            \
	"Fix the deliberately broken calculator.add so that the unit tests pass. Do not change the test file."
#define DEFAULT_SEED_DIR "/run/lcd/apps/sandboxed-coding-agent/seed"
#define DEFAULT_ALLOWED "calculator.py"
#define DEFAULT_TEST_COMMAND "python3 -m unittest -v"
#define SEED_MAX_FILES 64
#define SEED_MAX_BYTES (256 * 1024)
#define TEST_OUTPUT_MAX 8192
#define WORKDIR "/work"
#define TEST_USER "1000:1000"

/* ---- the seed project ---- */

/* [{path, content, mode}] of every regular file below SEED_DIR, sorted. */
static json_t *seed_read(lc_error_t **err)
{
	const char *dir = wl_config("SEED_DIR", DEFAULT_SEED_DIR);
	json_t *files = wl_tree_read(dir, SEED_MAX_FILES, SEED_MAX_BYTES, err);
	if (!files)
		lc_error_wrap(err, "the seed project (config SEED_DIR)");
	return files;
}

/* The task's args.instruction (a new string), or the default. */
static char *task_instruction(lc_error_t **err)
{
	_cleanup_json_ json_t *args = wl_args(err);
	if (!args)
		return NULL;
	json_t *v = json_object_get(args, "instruction");
	if (!v)
		return strdup(DEFAULT_INSTRUCTION);
	if (!json_is_string(v) || json_string_length(v) == 0 || json_string_length(v) > 16384 ||
	    strlen(json_string_value(v)) != json_string_length(v)) {
		lc_error_set(err, WL_EXIT_USAGE, 0, "args.instruction: expected a non-empty string of at most 16384 bytes");
		return NULL;
	}
	return strdup(json_string_value(v));
}

static json_t *refusal_json(const pc_refusal_t *why)
{
	return json_pack("{s:s, s:s?}", "rule", why->rule, "path", why->path);
}

/* ---- plan-patch ---- */

static json_t *response_format(lc_error_t **err)
{
	const char *f = wl_config("PLANNER_RESPONSE_FORMAT", "json_schema");
	if (!strcmp(f, "none"))
		return json_null();
	if (!strcmp(f, "json_object"))
		return json_pack("{s:s}", "type", "json_object");
	if (strcmp(f, "json_schema")) {
		lc_error_set(err, WL_EXIT_USAGE, 0, "config PLANNER_RESPONSE_FORMAT: expected json_schema, json_object or none, not '%s'", f);
		return NULL;
	}
	return json_pack(
		"{s:s, s:{s:s, s:b, s:{s:s, s:{s:{s:s, s:{s:s, s:{s:{s:s}, s:{s:s}}, s:[s, s], s:b}}}, s:[s], s:b}}}",
		"type", "json_schema", "json_schema", "name", "patch", "strict", 1, "schema", "type", "object",
		"properties", "files", "type", "array", "items", "type", "object", "properties", "path", "type", "string",
		"content", "type", "string", "required", "path", "content", "additionalProperties", 0, "required",
		"files", "additionalProperties", 0);
}

static char *allowed_text(char **allowed)
{
	_cleanup_free_ char *s = strdup("");
	for (size_t i = 0; allowed && allowed[i]; i++) {
		char *n = lc_strdup_printf("%s%s%s", s, i ? ", " : "", allowed[i]);
		free(s);
		s = n;
	}
	return lc_steal(s);
}

static json_t *planner_messages(const char *instruction, json_t *seed, char **allowed)
{
	_cleanup_free_ char *paths = allowed_text(allowed);
	_cleanup_free_ char *system = lc_strdup_printf(
		"You change a small software project by giving the complete new contents of the files you change.\n"
		"Answer with one JSON object and nothing else:\n"
		"{\"files\": [{\"path\": \"relative/path\", \"content\": \"the file's complete new contents\"}]}\n"
		"Rules: you may write only these paths: %s. Never change a test file. At most %d files and %d bytes "
		"of content in all; UTF-8 text; no absolute paths and no '..'.",
		paths, PC_MAX_FILES, PC_MAX_TOTAL_BYTES);
	_cleanup_json_ json_t *project = json_pack("{s:O}", "files", seed);
	_cleanup_free_ char *ptext = json_dumps(project, JSON_INDENT(1));
	_cleanup_free_ char *user = lc_strdup_printf("Instruction:\n%s\n\nThe project's files, as JSON:\n%s\n", instruction, ptext);
	return json_pack("[{s:s, s:s}, {s:s, s:s}]", "role", "system", "content", system, "role", "user", "content", user);
}

static int plan_patch(void)
{
	lc_error_t *err = NULL;
	_cleanup_free_ char *instruction = task_instruction(&err);
	if (!instruction)
		return wl_fail_err(WL_EXIT_USAGE, NULL, err);
	/* MODEL_ACCESS=gateway (the default): lcd's model gateway, its base
	 * URL and a token of this task's own in OPENAI_BASE_URL and
	 * OPENAI_API_KEY (the function's "model_gateway"); direct: the
	 * provider at CODING_AGENT_BASE_URL with the key CODING_AGENT_API_KEY */
	const char *access = wl_config("MODEL_ACCESS", "gateway");
	bool gateway = !strcmp(access, "gateway");
	if (!gateway && strcmp(access, "direct"))
		return wl_fail(WL_EXIT_USAGE, NULL, "MODEL_ACCESS=%s: expected gateway or direct", access);
	const char *base_key = gateway ? "OPENAI_BASE_URL" : "CODING_AGENT_BASE_URL";
	const char *key_key = gateway ? "OPENAI_API_KEY" : "CODING_AGENT_API_KEY";
	const char *base = wl_config(base_key, NULL), *model = wl_config("CODING_AGENT_MODEL", NULL);
	if (gateway && !base)
		return wl_fail(WL_EXIT_USAGE, NULL,
			       "MODEL_ACCESS=gateway, but this task has no model gateway (OPENAI_BASE_URL is not set): "
			       "give its function \"model_gateway\", or deploy with MODEL_ACCESS=direct");
	if (!base || !model)
		return wl_fail(WL_EXIT_USAGE, NULL, "the secret %s is not set (lcctl secret set %s)",
			       base ? "CODING_AGENT_MODEL" : base_key, base ? "CODING_AGENT_MODEL" : base_key);
	/* The key (through the gateway: the token): kept in this process's
	 * memory only; its copy in the environment block (what
	 * /proc/PID/environ shows) is wiped. */
	char *env_key = getenv(key_key);
	_cleanup_free_ char *key = strdup(env_key ? env_key : "");
	if (env_key)
		explicit_bzero(env_key, strlen(env_key));
	unsetenv(key_key);
	long long timeout = wl_config_int("PLANNER_TIMEOUT_SECONDS", 120, 1, 3600, &err);
	long long backoff = timeout < 0 ? -1 : wl_config_int("PLANNER_RETRY_BACKOFF_MS", 1000, 0, 60000, &err);
	if (timeout < 0 || backoff < 0)
		return wl_fail_err(WL_EXIT_USAGE, NULL, err);
	_cleanup_strv_ char **allowed = pc_allowed_parse(wl_config("ALLOWED_PATHS", DEFAULT_ALLOWED));
	_cleanup_json_ json_t *seed = seed_read(&err);
	if (!seed)
		return wl_fail_err(WL_EXIT_USAGE, NULL, err);
	_cleanup_json_ json_t *fmt = response_format(&err);
	if (!fmt)
		return wl_fail_err(WL_EXIT_USAGE, NULL, err);

	_cleanup_json_ json_t *req = json_pack("{s:o, s:i}", "messages", planner_messages(instruction, seed, allowed),
					       "temperature", 0);
	if (!json_is_null(fmt))
		json_object_set(req, "response_format", fmt);
	wl_chat_opts_t o = { .base_url = base, .model = model, .api_key = key, .timeout_s = timeout,
			     .connect_timeout_s = timeout < 10 ? timeout : 10, .retries = 1, .backoff_ms = backoff,
			     .backoff_max_ms = 30000 };
	wl_chat_answer_t a;
	int r = wl_chat_complete(&o, req, &a, &err);
	explicit_bzero(key, strlen(key));
	if (r < 0) {
		json_t *extra = json_pack("{s:i, s:i}", "status", (int)a.status, "attempts", a.attempts);
		wl_chat_answer_clear(&a);
		return wl_fail_err(WL_EXIT_PROVIDER, extra, err);
	}
	fprintf(stderr, "plan-patch: %s answered %ld after %d attempt(s): %zu bytes\n", a.model ? a.model : model,
		a.status, a.attempts, a.len);

	pc_patch_t *patch = NULL;
	pc_refusal_t why = { 0 };
	if (pc_parse_message(a.content, a.len, (const char *const *)allowed, &patch, &why) < 0) {
		json_t *extra = refusal_json(&why);
		wl_chat_answer_clear(&a);
		int code = wl_fail(WL_EXIT_REFUSED, extra, "the model's patch is refused: %s", why.message);
		pc_refusal_clear(&why);
		return code;
	}
	json_t *out = pc_patch_json(patch);
	pc_patch_free(patch);
	json_object_set_new(out, "model", json_string(a.model ? a.model : model));
	json_object_set(out, "usage", a.usage);
	json_object_set_new(out, "attempts", json_integer(a.attempts));
	wl_chat_answer_clear(&a);
	r = wl_result(out);
	json_decref(out);
	return r < 0 ? WL_EXIT_LCD : 0;
}

/* ---- run-agent ---- */

struct run {
	lcc_t *lcd;
	char *planner_task;
	char *sandbox;
};

/* The planner's task, to its end.  Returns its result, or NULL with the
 * failure written (code in *code). */
static json_t *run_planner(struct run *run, const char *instruction, int *code)
{
	lc_error_t *err = NULL;
	_cleanup_json_ json_t *pargs = json_pack("{s:s}", "instruction", instruction);
	const char *app = wl_config("LC_TASK_APP", "sandboxed-coding-agent");
	const char *fn = wl_config("PLANNER_FUNCTION", "plan-patch");
	if (lcc_spawn(run->lcd, app, fn, pargs, &run->planner_task, &err) < 0) {
		*code = wl_fail(WL_EXIT_LCD, NULL, "cannot spawn %s:%s: %s", app, fn, err->msg);
		lc_error_free(err);
		return NULL;
	}
	fprintf(stderr, "run-agent: planner task %s\n", run->planner_task);
	_cleanup_json_ json_t *task = NULL;
	if (lcc_task_wait(run->lcd, run->planner_task, 0, &task, &err) < 0) {
		*code = wl_fail(WL_EXIT_LCD, json_pack("{s:s}", "planner_task_id", run->planner_task),
				"waiting for the planner task %s: %s", run->planner_task, err->msg);
		lc_error_free(err);
		return NULL;
	}
	const char *state = json_string_value(json_object_get(task, "state"));
	json_t *result = json_object_get(task, "result");
	if (!state || strcmp(state, "succeeded")) {
		/* the planner's own reason (provider status, contract rule) */
		json_t *extra = json_pack("{s:s, s:s?}", "planner_task_id", run->planner_task, "planner_state", state);
		static const char *const copy[] = { "rule", "path", "status", "attempts" };
		for (size_t i = 0; i < sizeof(copy) / sizeof(copy[0]); i++)
			if (json_object_get(result, copy[i]))
				json_object_set(extra, copy[i], json_object_get(result, copy[i]));
		long long pcode = json_integer_value(json_object_get(task, "exit_code"));
		const char *why = json_string_value(json_object_get(result, "error"));
		if (!why)
			why = json_string_value(json_object_get(task, "error"));
		*code = wl_fail(pcode == WL_EXIT_PROVIDER || pcode == WL_EXIT_REFUSED || pcode == WL_EXIT_USAGE ? (int)pcode
			       : WL_EXIT_LCD, extra, "the planner task %s %s: %s", run->planner_task, state ? state : "?",
			       why ? why : "no reason given");
		return NULL;
	}
	return json_incref(result);
}

/* Make the test sandbox, put the project and the patch in, run the test. */
static int test_patch(struct run *run, json_t *seed, json_t *files, json_t *out, lc_error_t **err)
{
	long long timeout = wl_config_int("TEST_TIMEOUT_SECONDS", 120, 1, 3600, err);
	if (timeout < 0)
		return -1;
	const char *image = wl_config("TEST_IMAGE", "host");
	/* No network, no secrets, no files kept: the ttl is a backstop should
	 * this task be killed before its own delete (lcd removes a task's
	 * sandboxes when it ends in any case). */
	_cleanup_json_ json_t *req = json_pack("{s:s, s:s, s:s, s:s, s:I, s:{s:s, s:s}}", "image", image, "net", "none",
					       "user", TEST_USER, "workdir", "/", "ttl", (json_int_t)timeout + 600, "labels",
					       "role", "test-patch", "planner_task", run->planner_task);
	const char *limits = wl_config("TEST_LIMITS", NULL);
	if (limits)
		json_object_set_new(req, "limits", json_string(limits));
	if (lcc_sandbox_create(run->lcd, req, &run->sandbox, NULL, err) < 0)
		return lc_error_wrap(err, "cannot create the test-patch sandbox");
	json_object_set_new(out, "sandbox_id", json_string(run->sandbox));
	fprintf(stderr, "run-agent: test-patch sandbox %s\n", run->sandbox);
	if (wl_tree_upload(run->lcd, run->sandbox, WORKDIR, TEST_USER, seed, err) < 0 ||
	    wl_tree_upload(run->lcd, run->sandbox, WORKDIR, TEST_USER, files, err) < 0)
		return -1;
	const char *test = wl_config("TEST_COMMAND", DEFAULT_TEST_COMMAND);
	_cleanup_json_ json_t *env = json_pack("{s:s}", "TEST_COMMAND", test);
	lcc_exec_result_t res;
	if (wl_sh(run->lcd, run->sandbox, TEST_USER, WORKDIR, "exec 2>&1; eval \"$TEST_COMMAND\"", env, timeout, &res, err) < 0)
		return lc_error_wrap(err, "running the test in sandbox %s", run->sandbox);
	_cleanup_free_ char *tail = wl_tail(res.out, res.out_len, TEST_OUTPUT_MAX);
	json_object_set_new(out, "test_command", json_string(test));
	json_object_set_new(out, "test_exit_code", json_integer(res.exit_code));
	json_object_set_new(out, "test_timed_out", json_boolean(res.timed_out));
	json_object_set_new(out, "test_output", json_string(tail));
	json_object_set_new(out, "tests_passed", json_boolean(res.exit_code == 0 && !res.timed_out));
	lcc_exec_result_clear(&res);
	return 0;
}

/* Validate the planner's result again and test it; fills out, returns the
 * exit code. */
static int check_and_test(struct run *run, json_t *seed, char **allowed, json_t *planned, json_t *out)
{
	/* Nothing but a patch that keeps the contract reaches a sandbox,
	 * whoever wrote the planner's result. */
	pc_patch_t *patch = NULL;
	pc_refusal_t why = { 0 };
	if (pc_validate(planned, (const char *const *)allowed, &patch, &why) < 0) {
		json_t *extra = refusal_json(&why);
		json_object_set_new(extra, "planner_task_id", json_string(run->planner_task));
		int code = wl_fail(WL_EXIT_REFUSED, extra, "the planner's result is refused: %s", why.message);
		pc_refusal_clear(&why);
		return code;
	}
	_cleanup_json_ json_t *pj = pc_patch_json(patch);
	json_t *changed = json_array();
	for (size_t i = 0; i < patch->n; i++) {
		json_t *old = wl_tree_find(seed, patch->files[i].path);
		if (!old || json_string_length(old) != patch->files[i].len ||
		    memcmp(json_string_value(old), patch->files[i].content, patch->files[i].len))
			json_array_append_new(changed, json_string(patch->files[i].path));
	}
	pc_patch_free(patch);
	json_object_set_new(out, "changed_paths", changed);

	lc_error_t *err = NULL;
	if (test_patch(run, seed, json_object_get(pj, "files"), out, &err) < 0) {
		json_object_set_new(out, "tests_passed", json_false());
		return wl_fail_err(err->exit_code == WL_EXIT_USAGE ? WL_EXIT_USAGE : WL_EXIT_LCD, json_deep_copy(out), err);
	}
	if (wl_result(out) < 0)
		return WL_EXIT_LCD;
	return json_is_true(json_object_get(out, "tests_passed")) ? 0 : WL_EXIT_FAILED;
}

static int run_agent(void)
{
	lc_error_t *err = NULL;
	_cleanup_free_ char *instruction = task_instruction(&err);
	if (!instruction)
		return wl_fail_err(WL_EXIT_USAGE, NULL, err);
	_cleanup_strv_ char **allowed = pc_allowed_parse(wl_config("ALLOWED_PATHS", DEFAULT_ALLOWED));
	_cleanup_json_ json_t *seed = seed_read(&err);
	if (!seed)
		return wl_fail_err(WL_EXIT_USAGE, NULL, err);
	struct run run = { 0 };
	run.lcd = lcc_new(NULL, NULL, &err);
	if (!run.lcd)
		return wl_fail_err(WL_EXIT_LCD, NULL, err);

	int code = 0;
	_cleanup_json_ json_t *planned = run_planner(&run, instruction, &code);
	_cleanup_json_ json_t *out = NULL;
	if (planned) {
		out = json_pack("{s:s, s:n}", "planner_task_id", run.planner_task, "sandbox_id");
		code = check_and_test(&run, seed, allowed, planned, out);
	}
	/* The test sandbox goes in every case. */
	if (run.sandbox) {
		lc_error_t *e = NULL;
		if (lcc_sandbox_delete(run.lcd, run.sandbox, &e) < 0) {
			code = wl_fail(WL_EXIT_LCD, json_deep_copy(out), "cannot remove the test-patch sandbox %s: %s",
				       run.sandbox, e->msg);
			lc_error_free(e);
		} else {
			fprintf(stderr, "run-agent: sandbox %s removed\n", run.sandbox);
		}
	}
	lcc_free(run.lcd);
	free(run.planner_task);
	free(run.sandbox);
	return code;
}

/* ---- inspect-sandboxes ---- */

static int inspect_sandboxes(void)
{
	lc_error_t *err = NULL;
	_cleanup_json_ json_t *args = wl_args(&err);
	if (!args)
		return wl_fail_err(WL_EXIT_USAGE, NULL, err);
	json_t *nv = json_object_get(args, "n");
	long long n = 20;
	if (nv) {
		if (!json_is_integer(nv) || json_integer_value(nv) < 1 || json_integer_value(nv) > 1000)
			return wl_fail(WL_EXIT_USAGE, NULL, "args.n: expected a number from 1 to 1000");
		n = json_integer_value(nv);
	}
	const char *app = wl_config("LC_TASK_APP", "sandboxed-coding-agent");
	lcc_t *c = lcc_new(NULL, NULL, &err);
	if (!c)
		return wl_fail_err(WL_EXIT_LCD, NULL, err);
	_cleanup_free_ char *eapp = lcc_escape(app);
	_cleanup_free_ char *path = lc_strdup_printf("/sandboxes?app=%s&history=1&limit=%lld", eapp, n);
	_cleanup_json_ json_t *answer = NULL;
	int r = lcc_request(c, "GET", path, NULL, NULL, &answer, &err);
	lcc_free(c);
	if (r < 0)
		return wl_fail_err(WL_EXIT_LCD, NULL, err);
	json_t *list = json_object_get(answer, "sandboxes");
	size_t live = 0, i;
	json_t *s;
	json_array_foreach(list, i, s) {
		if (strcmp(json_string_value(json_object_get(s, "state")) ?: "", "terminated"))
			live++;
	}
	_cleanup_json_ json_t *out = json_pack("{s:s, s:I, s:O, s:I}", "app", app, "n", (json_int_t)n, "sandboxes", list,
					       "not_terminated", (json_int_t)live);
	return wl_result(out) < 0 ? WL_EXIT_LCD : 0;
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		int (*fn)(void);
	} fns[] = { { "plan-patch", plan_patch }, { "run-agent", run_agent }, { "inspect-sandboxes", inspect_sandboxes } };
	if (argc == 2)
		for (size_t i = 0; i < sizeof(fns) / sizeof(fns[0]); i++)
			if (!strcmp(argv[1], fns[i].name)) {
				wl_set_name(fns[i].name);
				return fns[i].fn();
			}
	fprintf(stderr, "usage: planner plan-patch|run-agent|inspect-sandboxes (run by lcd as a function: "
			"docs/guides/sandboxed-coding-agent.md)\n");
	return WL_EXIT_USAGE;
}
