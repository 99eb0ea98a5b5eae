/* manifest.h — an app: functions, schedules, maps, webhooks (app.json). */
#ifndef LCD_MANIFEST_H
#define LCD_MANIFEST_H

#include <stdbool.h>
#include <jansson.h>

#include "cron.h"
#include "devbox_def.h"
#include "lcrun.h"

enum { LCD_CATCHUP_ALL = 0, LCD_CATCHUP_ONE, LCD_CATCHUP_NONE };

typedef struct lcd_function {
	char *name;
	char **argv;
	char *image;     /* NULL: the host image */
	lc_limits_t limits;
	char *net;       /* "none" or a network policy name (a "$KEY" in the manifest: config KEY's value) */
	int timeout;     /* seconds */
	int retries;
	bool retry_on_node_loss; /* a task of its that was running on a node that died is queued again */
	int concurrency; /* at most this many running */
	int queue;       /* at most this many waiting */
	char **secrets;  /* names of the secrets it sees as environment (optional ones too) */
	char **optional_secrets; /* those of them it runs without when they are not set */
	lc_mount_t *mounts; /* host paths bound into its sandboxes ("mounts") */
	size_t n_mounts;
	long long budget_pusd; /* budget_usd: what a task may spend through the model gateway (0: no cap) */
	/* "model_gateway": {"provider", "secret", "budget_usd", "access"}: the
	 * task's own sandbox reaches the model through lcd's gateway.  NULL
	 * when not declared or when its access is "direct"; else the object
	 * lcd_gateway_parse() takes ("$KEY"s resolved, "access" dropped). */
	json_t *model_gateway;
	char *gateway_access_key; /* the config key "access" named ("$KEY"), or NULL */
	json_t *gateway_raw;      /* as the manifest says, until the config is read */
} lcd_function_t;

typedef struct lcd_schedule {
	char *name;
	char *cron_expr;
	lcd_cron_t cron;
	char *function;
	json_t *args;
	int catchup;     /* LCD_CATCHUP_* */
} lcd_schedule_t;

typedef struct lcd_webhook {
	char *name;
	char *function;
	char *secret;    /* name of the secret that signs deliveries (required) */
	char **events;   /* events handed on (NULL: every event) */
} lcd_webhook_t;

/* "sandboxes": what the app's tasks may make through the sandbox API (an
 * operator's sandbox is bound by none of it).  A request wider than the
 * grant is refused (403) naming the key. */
typedef struct lcd_grant {
	int max;        /* sandboxes its tasks may hold at once */
	char **net;     /* network policies a task may name ("none" always);
			   "allow": a task may give allow lists of its own (public
			   addresses only) */
	char **images;  /* images a task may make sandboxes from ("host" and the
			   images the manifest names, "$KEY"s resolved); the app's
			   own snapshots (APP/...) always */
	lc_limits_t limits; /* the limits of a task's sandbox that names none,
			       and the most one may ask for (-1 / 0: none) */
	bool model_gateway; /* a task may make sandboxes with the model gateway
			       (default: if a function declares model_gateway) */
	char **net_raw, **images_raw; /* as the manifest says, until the config is read */
} lcd_grant_t;

/* The limits of a task's sandbox when the manifest says none. */
#define LCD_GRANT_MEMORY_DEFAULT (2LL << 30)
/* lcd.json task_disk's default: a task-made sandbox's upper layer. */
#define LCD_TASK_DISK_DEFAULT (8LL << 30)
#define LCD_GRANT_PIDS_DEFAULT 1024

typedef struct lcd_app {
	int refs;
	char *name;
	json_t *manifest;
	lcd_function_t *functions;
	size_t n_functions;
	lcd_schedule_t *schedules;
	size_t n_schedules;
	char **maps;
	lcd_webhook_t *webhooks;
	size_t n_webhooks;
	char **config;   /* "KEY=VALUE" from the config object, for every function's environment */
	int sandboxes_max; /* sandboxes its tasks may hold at once (sandboxes.max) */
	lcd_grant_t grant; /* "sandboxes": what its tasks may make */
	long long daily_budget_pusd; /* budget.daily_usd: the model gateway's cap per UTC day (0: none) */
	lcd_devbox_def_t *devboxes; /* "devboxes": boxes you SSH into (devbox.h) */
	size_t n_devboxes;
} lcd_app_t;

#define LCD_BUDGET_MAX_USD 1e6

#define LCD_SANDBOXES_MAX_DEFAULT 10

/* Validate a manifest and build the app (refs = 1).  Errors name the JSON
 * path: "functions.solve.timeout: expected a positive integer". */
int lcd_app_parse(json_t *manifest, lcd_app_t **out, lc_error_t **err);
lcd_app_t *lcd_app_ref(lcd_app_t *app);
void lcd_app_unref(lcd_app_t *app);
static inline void lcd_app_unrefp(lcd_app_t **app)
{
	lcd_app_unref(*app);
}
#define _cleanup_app_ __attribute__((cleanup(lcd_app_unrefp)))

/* The slots of s due in (last, now] (epoch seconds) and which of them to
 * fire under its catch-up policy: at most max, oldest first, into out.
 * Returns how many to fire; *newest is the latest due slot (0: none),
 * *skipped how many due slots are not fired. */
size_t lcd_schedule_due(const lcd_schedule_t *s, long long last, long long now, size_t max, long long *out,
			long long *newest, size_t *skipped);

/* Refuse keys of obj outside allowed (NULL-terminated): "PATH.KEY: unknown
 * key" ("KEY: …" when path is ""), so that typos do not pass silently. */
int lcd_check_keys(json_t *obj, const char *path, const char *const *allowed, lc_error_t **err);
/* A mount's "idmap": true (LC_IDMAP_ON), false (LC_IDMAP_OFF), "auto" or
 * absent (LC_IDMAP_AUTO); -1 for anything else. */
int lcd_idmap_value(json_t *v);
/* A "limits" object (memory, memory_swap, pids, cpus, cpu_weight,
 * io_weight, best_effort) into l; errors name path.  v NULL: no limits. */
int lcd_limits_parse(json_t *v, const char *path, lc_limits_t *l, lc_error_t **err);
/* A disk size in lcd.json (bytes, or like "8G"): 0 for 0, else at least
 * LC_DISK_MIN; -1 for anything else. */
int lcd_config_size(json_t *v, long long *out);

const lcd_function_t *lcd_app_function(const lcd_app_t *app, const char *name);
const lcd_schedule_t *lcd_app_schedule(const lcd_app_t *app, const char *name);
const lcd_webhook_t *lcd_app_webhook(const lcd_app_t *app, const char *name);
/* Is event one of the webhook's events (or does it take every event)? */
bool lcd_webhook_wants(const lcd_webhook_t *w, const char *event);
bool lcd_app_has_map(const lcd_app_t *app, const char *name);
/* Names of apps, functions, maps, schedules: [a-z0-9][a-z0-9_-]{0,62}. */
bool lcd_name_valid(const char *s);
/* Secret names are environment variable names: [A-Za-z_][A-Za-z0-9_]{0,127}. */
bool lcd_secret_name_valid(const char *s);

#endif
