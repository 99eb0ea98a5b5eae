/* limits.c — named limit sets from policies/limits.json (--limits NAME). */
#include <string.h>

#include "lcrun.h"
#include "util.h"

static int field_size(json_t *o, const char *path, const char *key, long long *out, lc_error_t **err)
{
	json_t *v = json_object_get(o, key);
	if (!v)
		return 0;
	if (json_is_integer(v) && json_integer_value(v) >= 0) {
		*out = json_integer_value(v);
		return 0;
	}
	if (json_is_string(v) && lc_parse_size(json_string_value(v), out) == 0)
		return 0;
	return lc_error_set(err, LC_EXIT_INVALID, 0, "%s: %s: expected a size like \"4G\" or bytes", path, key);
}

int lc_limits_load(const char *name, lc_limits_t *lim, lc_error_t **err)
{
	if (!strcmp(name, "best-effort")) {
		lim->best_effort = true;
		return 0;
	}
	_cleanup_free_ char *path = lc_strdup_printf("%s/limits.json", lc_policy_dir());
	json_error_t je;
	_cleanup_json_ json_t *j = json_load_file(path, 0, &je);
	if (!j)
		return lc_error_set(err, LC_EXIT_INVALID, 0, "%s:%d:%d: %s", path, je.line, je.column, je.text);
	json_t *set = json_object_get(j, name);
	if (!set) {
		_cleanup_free_ char *names = strdup("best-effort");
		const char *k;
		json_t *v;
		json_object_foreach(j, k, v) {
			char *n = lc_strdup_printf("%s, %s", names, k);
			free(names);
			names = n;
		}
		return lc_error_set(err, LC_EXIT_UNKNOWN, 0, "--limits: no limit set named '%s' (known: %s)", name, names);
	}
	if (!json_is_object(set))
		return lc_error_set(err, LC_EXIT_INVALID, 0, "%s: %s: expected an object", path, name);
	_cleanup_free_ char *where = lc_strdup_printf("%s: %s", path, name);
	if (field_size(set, where, "memory", &lim->memory, err) < 0 ||
	    field_size(set, where, "memory_swap", &lim->memory_swap, err) < 0 ||
	    field_size(set, where, "disk", &lim->disk, err) < 0)
		return -1;
	json_t *v;
	if ((v = json_object_get(set, "pids"))) {
		if (!json_is_integer(v) || json_integer_value(v) < 1)
			return lc_error_set(err, LC_EXIT_INVALID, 0, "%s.pids: expected a positive integer", where);
		lim->pids = json_integer_value(v);
	}
	if ((v = json_object_get(set, "cpus"))) {
		if (!json_is_number(v) || json_number_value(v) <= 0)
			return lc_error_set(err, LC_EXIT_INVALID, 0, "%s.cpus: expected a positive number", where);
		lim->cpus = json_number_value(v);
	}
	if ((v = json_object_get(set, "cpu_weight"))) {
		if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > 10000)
			return lc_error_set(err, LC_EXIT_INVALID, 0, "%s.cpu_weight: expected 1-10000", where);
		lim->cpu_weight = (int)json_integer_value(v);
	}
	return 0;
}
