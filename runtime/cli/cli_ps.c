/* cli_ps.c — lcrun ps [--json], inspect ID, logs [-f] ID, gc [--json] [--wait] */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "json.h"
#include "util.h"

static bool want_json(int argc, char **argv, int *bad)
{
	bool json = false;
	*bad = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			json = true;
		else
			*bad = i;
	}
	return json;
}

static void human_bytes(long long b, char *out, size_t n)
{
	if (b < 0)
		snprintf(out, n, "-");
	else if (b >= 1LL << 30)
		snprintf(out, n, "%.1fG", (double)b / (1 << 30));
	else if (b >= 1LL << 20)
		snprintf(out, n, "%.1fM", (double)b / (1 << 20));
	else
		snprintf(out, n, "%lldK", b >> 10);
}

int lc_cmd_ps(int argc, char **argv)
{
	int bad;
	bool json = want_json(argc, argv, &bad);
	if (bad)
		return lc_cli_usage_error("ps: unknown option '%s' (lcrun ps [--json])", argv[bad]);
	lc_error_t *err = NULL;
	_cleanup_json_ json_t *list = lc_sandbox_list(&err);
	if (!list)
		return lc_cli_fail(err);
	if (json) {
		json_dumpf(list, stdout, JSON_INDENT(2));
		putchar('\n');
		return 0;
	}
	printf("%-12s  %-16s  %-10s  %-8s  %-20s  %8s  %8s  %s\n", "ID", "NAME", "IMAGE", "STATE", "CREATED", "CPU",
	       "MEMORY", "NET");
	size_t i;
	json_t *x;
	json_array_foreach(list, i, x) {
		const char *name = lc_json_str(x, "name");
		time_t t = (time_t)(json_integer_value(json_object_get(x, "created")) / 1000);
		char created[32], cpu[32], mem[32];
		struct tm tm;
		strftime(created, sizeof(created), "%Y-%m-%d %H:%M:%S", gmtime_r(&t, &tm));
		json_t *c = json_object_get(x, "cpu_usec");
		if (json_is_integer(c))
			snprintf(cpu, sizeof(cpu), "%.2fs", (double)json_integer_value(c) / 1e6);
		else
			snprintf(cpu, sizeof(cpu), "-");
		json_t *m = json_object_get(x, "memory_bytes");
		human_bytes(json_is_integer(m) ? json_integer_value(m) : -1, mem, sizeof(mem));
		const char *addr = lc_json_str(x, "address");
		printf("%-12s  %-16s  %-10s  %-8s  %-20s  %8s  %8s  %s%s%s\n",
		       lc_json_str(x, "id"), name ? name : "-",
		       lc_json_str(x, "image"), lc_json_str(x, "state"),
		       created, cpu, mem, lc_json_str(x, "net"), addr ? " " : "", addr ? addr : "");
	}
	return 0;
}

int lc_cmd_inspect(int argc, char **argv)
{
	if (argc != 2 || argv[1][0] == '-')
		return lc_cli_usage_error("inspect: expected one sandbox (lcrun inspect ID)");
	lc_error_t *err = NULL;
	_cleanup_json_ json_t *st = lc_sandbox_inspect(argv[1], &err);
	if (!st)
		return lc_cli_fail(err);
	json_dumpf(st, stdout, JSON_INDENT(2) | JSON_SORT_KEYS);
	putchar('\n');
	return 0;
}

int lc_cmd_logs(int argc, char **argv)
{
	bool follow = false;
	const char *id = NULL;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-f") || !strcmp(argv[i], "--follow"))
			follow = true;
		else if (argv[i][0] == '-' || id)
			return lc_cli_usage_error("logs: expected [-f] ID");
		else
			id = argv[i];
	}
	if (!id)
		return lc_cli_usage_error("logs: no sandbox given (lcrun logs [-f] ID)");
	fflush(stdout);
	lc_error_t *err = NULL;
	if (lc_sandbox_logs(id, 1, follow, &err) < 0)
		return lc_cli_fail(err);
	return 0;
}

int lc_cmd_gc(int argc, char **argv)
{
	bool json = false, wait = false, spares = false;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			json = true;
		else if (!strcmp(argv[i], "--wait"))
			wait = true;
		else if (!strcmp(argv[i], "--spares"))
			spares = true;
		else
			return lc_cli_usage_error("gc: unknown option '%s' (lcrun gc [--json] [--wait] [--spares])", argv[i]);
	}
	lc_error_t *err = NULL;
	_cleanup_json_ json_t *removed = NULL;
	if (wait && lc_gc_wait(10000, &err) < 0)
		return lc_cli_fail(err);
	if (lc_gc(&removed, &err) < 0 || (spares && lc_gc_spares(removed, &err) < 0))
		return lc_cli_fail(err);
	if (json) {
		json_dumpf(removed, stdout, JSON_INDENT(2));
		putchar('\n');
		return 0;
	}
	size_t i;
	json_t *x;
	json_array_foreach(removed, i, x)
		printf("%s\n", json_string_value(x));
	return 0;
}
