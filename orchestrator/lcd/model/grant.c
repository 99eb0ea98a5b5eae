/* grant.c — a task's create request held to its app's grant (grant.h). */
#include <string.h>

#include "grant.h"
#include "json.h"
#include "firewall.h"
#include "netspec.h"
#include "util.h"

static bool listed(char *const *list, const char *s)
{
	for (size_t i = 0; list && list[i]; i++)
		if (!strcmp(list[i], s))
			return true;
	return false;
}

static char *joined(char *const *list)
{
	size_t len = 1;
	for (size_t i = 0; list && list[i]; i++)
		len += strlen(list[i]) + 2;
	char *s = lc_xmalloc0(len);
	for (size_t i = 0; list && list[i]; i++) {
		if (i)
			strcat(s, ", ");
		strcat(s, list[i]);
	}
	return s;
}

int lcd_grant_net(const lcd_grant_t *g, const char *app, json_t *net, lc_error_t **err)
{
	if (!net)
		return 0;
	_cleanup_free_ char *names = joined(g->net);
	if (json_is_string(net)) {
		const char *n = json_string_value(net);
		if (!strcmp(n, "none") || (strcmp(n, "allow") && listed(g->net, n)))
			return 0;
		return lc_error_set(err, LC_EXIT_PERM, 0,
				    "net: app %s's tasks may make sandboxes with the network policies %s only, not %s "
				    "(sandboxes.net in its manifest)", app, names, n);
	}
	const char *mode = lc_json_str(net, "mode");
	const char *need = mode && !strcmp(mode, "open") ? "open" : "allow";
	if (json_is_object(net) && listed(g->net, need))
		return 0;
	return lc_error_set(err, LC_EXIT_PERM, 0,
			    "net: app %s's tasks may not give a network policy of their own%s (sandboxes.net in its "
			    "manifest lists %s)", app, !strcmp(need, "open") ? " of mode open" : "", names);
}

int lcd_grant_rules(const lc_net_spec_t *net, lc_error_t **err)
{
	for (size_t i = 0; i < net->n_allow; i++) {
		const char *why = NULL;
		if (lc_net_rule_public(&net->allow[i], &why))
			continue;
		char rule[256];
		lc_net_rule_format(&net->allow[i], rule, sizeof(rule));
		return lc_error_set(err, LC_EXIT_PERM, 0,
				    "net.allow[%zu]: %s reaches %s: a task's allow list opens public addresses only (an "
				    "operator's named policy may open more)", i, rule, why);
	}
	return 0;
}

int lcd_grant_image(const lcd_grant_t *g, const char *app, const char *image, lc_error_t **err)
{
	size_t n = strlen(app);
	if (!strcmp(image, "host") || listed(g->images, image) || (!strncmp(image, app, n) && image[n] == '/' && image[n + 1]))
		return 0;
	_cleanup_free_ char *names = joined(g->images);
	return lc_error_set(err, LC_EXIT_PERM, 0,
			    "image: app %s's tasks may make sandboxes from %s and the app's own snapshots (%s/...) only, "
			    "not %s (sandboxes.images in its manifest)", app, names, app, image);
}

/* One limit: the grant's (g < 0 or 0: none) as default and ceiling. */
static int ceiling(const char *app, const char *key, long long g, long long asked, bool unset_asked, long long *out,
		   lc_error_t **err)
{
	if (unset_asked) {
		*out = g;
		return 0;
	}
	if (g > 0 && asked > g)
		return lc_error_set(err, LC_EXIT_PERM, 0,
				    "limits.%s: %lld is more than app %s's tasks may ask for (%lld: sandboxes.limits.%s in "
				    "its manifest)", key, asked, app, g, key);
	*out = asked;
	return 0;
}

int lcd_grant_limits(const lcd_grant_t *g, const char *app, const lc_limits_t *asked, long long disk_default,
		     lc_limits_t *out, lc_error_t **err)
{
	const lc_limits_t *gl = &g->limits;
	long long disk = gl->disk > 0 ? gl->disk : disk_default;
	if (!asked) {
		*out = *gl;
		out->best_effort = true;
		out->disk = disk;
		return 0;
	}
	*out = *asked;
	if (asked->disk <= 0)
		out->disk = disk;
	else if (disk > 0 && asked->disk > disk)
		return lc_error_set(err, LC_EXIT_PERM, 0,
				    "limits.disk: %lld is more than app %s's tasks may ask for (%lld: sandboxes.limits.disk in "
				    "its manifest, else lcd.json's task_disk)", asked->disk, app, disk);
	if (ceiling(app, "memory", gl->memory, asked->memory, asked->memory < 0, &out->memory, err) < 0 ||
	    ceiling(app, "memory_swap", gl->memory_swap, asked->memory_swap, asked->memory_swap < 0, &out->memory_swap,
		    err) < 0 ||
	    ceiling(app, "pids", gl->pids, asked->pids, asked->pids < 0, &out->pids, err) < 0)
		return -1;
	if (asked->cpus <= 0)
		out->cpus = gl->cpus;
	else if (gl->cpus > 0 && asked->cpus > gl->cpus)
		return lc_error_set(err, LC_EXIT_PERM, 0,
				    "limits.cpus: %g is more than app %s's tasks may ask for (%g: sandboxes.limits.cpus in its "
				    "manifest)", asked->cpus, app, gl->cpus);
	return 0;
}

int lcd_grant_snapshot_name(const char *app, const char *name, lc_error_t **err)
{
	size_t n = strlen(app);
	if (!strncmp(name, app, n) && name[n] == '/' && name[n + 1])
		return 0;
	return lc_error_set(err, LC_EXIT_PERM, 0,
			    "name: a snapshot of app %s's task is named %s/NAME (an image name outside it is the "
			    "operator's or another app's)", app, app);
}
