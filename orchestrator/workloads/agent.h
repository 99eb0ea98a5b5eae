/* agent.h — run a coding agent (Claude Code, Codex, or any command that
 * prints in one of their formats) in a sandbox made through lcd's API, and
 * read what it says about its run: summary, turns, spend.
 *
 * Used by the coding-agents app (solve-issue) and meant for any workload
 * that runs an agent (an eval, best-of-N): make the sandbox with
 * agent_sandbox_create (the one place an agent's sandbox is made, so the
 * way it reaches the model is decided in one place), put the repository in
 * it (a snapshot image), then agent_run with a prompt.
 *
 * Configuration comes from the function's environment (the app's config):
 *   AGENT                  claude (default) | codex: the built-in command and
 *                          the format its stdout is read in
 *   AGENT_COMMAND          a shell line replacing the built-in command; run
 *                          in the working directory as the agent user with
 *                          the prompt in $AGENT_PROMPT_FILE; stdout read in
 *                          AGENT's format
 *   AGENT_MODEL            --model (claude), -m (codex); default: the CLI's
 *   AGENT_MAX_BUDGET_USD   default 5: claude's --max-budget-usd; a run that
 *                          reports more is "over-budget" whatever the agent
 *   AGENT_TIMEOUT_SECONDS  default 1800: the agent is killed after it
 *   AGENT_IMAGE            the image the repo-builder starts from (agent-cli)
 *   AGENT_USER             default 1000:1000 (the image's `agent`)
 *   MODEL_ACCESS           gateway (default): lcd's model gateway gives the
 *                          sandbox its base URL and a token of its own (the
 *                          key, ANTHROPIC_API_KEY for claude, OPENAI_API_KEY
 *                          for codex, a secret the function declares, stays
 *                          in lcd) and enforces AGENT_MAX_BUDGET_USD; lcd
 *                          must have lcd.json "gateway".  direct: the key
 *                          reaches the sandbox's environment and the model
 *                          API's range is open to it (the seed's way)
 *   AGENT_NET              the agent sandbox's network policy (default: none
 *                          through the gateway, which lcd turns into allow
 *                          only the gateway; model-api when direct)
 *   ANTHROPIC_BASE_URL,    direct only: handed to the agent's sandbox (a
 *   OPENAI_BASE_URL        proxy, or a test double).  For codex a provider
 *                          block in ~/.codex/config.toml points at the base
 *                          URL (the gateway's, or OPENAI_BASE_URL)
 *
 * Every call returns 0 on success, negative with *err filled otherwise
 * (one line; the exit code of lcclient's errors). */
#ifndef AGENT_H
#define AGENT_H

#include <stdbool.h>
#include <stddef.h>
#include <jansson.h>

#include "error.h"
#include "lcclient.h"

typedef enum agent_format {
	AGENT_FORMAT_CLAUDE, /* one result object (claude -p --output-format json) */
	AGENT_FORMAT_CODEX,  /* JSONL events (codex exec --json) */
} agent_format_t;

typedef enum agent_access {
	AGENT_ACCESS_DIRECT,  /* the model key in the sandbox's environment */
	AGENT_ACCESS_GATEWAY, /* lcd's model gateway (create request "model_gateway") */
} agent_access_t;

typedef struct agent_config {
	char *agent;           /* "claude" or "codex" */
	agent_format_t format;
	char *command;         /* AGENT_COMMAND, or NULL: the built-in one */
	char *model;           /* or NULL */
	double max_budget_usd;
	int timeout_s;
	char *image;           /* AGENT_IMAGE */
	char *user;            /* "UID:GID" */
	char *net;             /* network policy name */
	agent_access_t access;
	char *key_secret;      /* ANTHROPIC_API_KEY or OPENAI_API_KEY */
	char *base_url;        /* ANTHROPIC_BASE_URL / OPENAI_BASE_URL, or NULL */
} agent_config_t;

/* Read the configuration from the environment; one line naming the key on
 * a bad value. */
int agent_config_from_env(agent_config_t *cfg, lc_error_t **err);
void agent_config_clear(agent_config_t *cfg);

typedef struct agent_sandbox_opts {
	const char *image;   /* required: e.g. the repository's snapshot */
	const char *workdir; /* the repository's directory */
	json_t *limits;      /* the calling function's limits (borrowed), or NULL */
	json_t *labels;      /* {"k": "v"} (borrowed), or NULL */
} agent_sandbox_opts_t;

/* Make the agent's sandbox: the image, user cfg->user, network cfg->net,
 * the environment IS_SANDBOX=1 (+ the base URL when direct) and the model
 * access (gateway: lcd's model gateway with the budget; direct: the key as
 * a secret).  Nothing else of the caller's environment goes in.  Through
 * the gateway on an lcd without one: one line saying what to do. */
int agent_sandbox_create(lcc_t *c, const agent_config_t *cfg, const agent_sandbox_opts_t *o, char **id,
			 lc_error_t **err);

/* What lcd's model gateway metered for sandbox id (GET /v1/sandboxes/ID;
 * read it before the sandbox is removed). */
typedef struct agent_gateway_usage {
	double spend_usd;
	bool budget_exceeded;
	long long requests;
	json_t *tokens;   /* {input, output, cache_read, cache_write}, or NULL */
	char *base_url;   /* the sandbox's base URL of the gateway, or NULL */
} agent_gateway_usage_t;

int agent_gateway_usage(lcc_t *c, const char *id, agent_gateway_usage_t *u, lc_error_t **err);
void agent_gateway_usage_clear(agent_gateway_usage_t *u);

/* How an agent's run ended. */
typedef enum agent_status {
	AGENT_OK,          /* it finished and said so */
	AGENT_ERROR,       /* it reported an error (is_error, turn.failed) */
	AGENT_OVER_BUDGET, /* it stopped at, or reported spending more than, the budget */
	AGENT_TIMED_OUT,   /* killed at AGENT_TIMEOUT_SECONDS */
	AGENT_CRASHED,     /* killed by a signal, no result */
	AGENT_FAILED,      /* exited non-zero, no result */
	AGENT_NO_RESULT,   /* exited 0 but printed nothing readable */
} agent_status_t;

typedef struct agent_result {
	agent_status_t status;
	int exit_code;    /* the command's status (124: timed out, 128+N: signal N) */
	char *summary;    /* the agent's last message, or NULL */
	int turns;        /* -1: not reported */
	double spend_usd; /* -1: not reported */
	long long input_tokens, output_tokens, cached_tokens;
	char *error;      /* one line when status is not AGENT_OK */
	char *stderr_tail; /* the last lines of its stderr */
	long long duration_ms;
	json_t *raw;      /* claude: the result object; codex: the last turn.completed/failed */
} agent_result_t;

const char *agent_status_name(agent_status_t s); /* "ok", "error", "over-budget", "timed-out", … */
/* The gateway stopped the agent (u->budget_exceeded) and it did not finish
 * (an error, a crash, no result; not a timeout): "over-budget", with the
 * agent's own error kept after the reason. */
void agent_result_gateway_stop(agent_result_t *r, const agent_gateway_usage_t *u, double budget_usd);

/* Run the agent once in sandbox id (made by agent_sandbox_create), in
 * workdir, with the prompt written to a file ($AGENT_PROMPT_FILE, outside
 * the workdir).  Returns 0 with *res filled whatever the agent did (its
 * failures are res->status); negative only when lcd could not run it. */
int agent_run(lcc_t *c, const char *id, const agent_config_t *cfg, const char *workdir, const char *prompt,
	      agent_result_t *res, lc_error_t **err);

/* The pure part of agent_run: read the agent's stdout in fmt, given how
 * the command ended (exit_code, timed_out), into *res.  budget_usd > 0
 * marks a reported spend above it as over budget. */
void agent_parse_output(agent_format_t fmt, const char *out, size_t len, int exit_code, bool timed_out,
			double budget_usd, agent_result_t *res);

/* {status, exit_code, summary, turns, spend_usd, input_tokens,
 *  output_tokens, cached_tokens, error, duration_ms}: nulls for unknowns. */
json_t *agent_result_json(const agent_result_t *r);
void agent_result_clear(agent_result_t *r);

/* The last n lines of s (a new string). */
char *agent_tail(const char *s, size_t len, int n);

#endif
