/* oci_ps.c — lcrun-oci ps [--format table|json] ID: the container's processes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "oci.h"
#include "util.h"

int oci_cmd_ps(int argc, char **argv)
{
	bool json = false;
	int i = 1;
	for (; i < argc && argv[i][0] == '-'; i++) {
		const char *f = NULL;
		if (!strcmp(argv[i], "--format") || !strcmp(argv[i], "-f"))
			f = i + 1 < argc ? argv[++i] : "";
		else if (!strncmp(argv[i], "--format=", 9))
			f = argv[i] + 9;
		else
			return oci_failf("ps: unknown option '%s'", argv[i]);
		if (strcmp(f, "json") && strcmp(f, "table"))
			return oci_failf("ps: --format '%s': expected table or json", f);
		json = !strcmp(f, "json");
	}
	if (i != argc - 1)
		return oci_failf("usage: lcrun-oci ps [--format table|json] ID");
	lc_error_t *err = NULL;
	oci_container_t c;
	if (oci_load(argv[i], &c, &err) < 0)
		return oci_fail(err);
	_cleanup_free_ pid_t *pids = NULL;
	size_t n = 0;
	if (!strcmp(c.status, "stopped") || !c.cgroup) {
		n = 0;
	} else if (lc_cgroup_pids(c.cgroup, &pids, &n, &err) < 0) {
		oci_container_clear(&c);
		return oci_fail(err);
	}
	if (json) {
		_cleanup_json_ json_t *a = json_array();
		for (size_t k = 0; k < n; k++)
			json_array_append_new(a, json_integer(pids[k]));
		_cleanup_free_ char *s = json_dumps(a, JSON_COMPACT);
		printf("%s\n", s);
	} else {
		printf("%-8s %s\n", "PID", "CMD");
		for (size_t k = 0; k < n; k++) {
			_cleanup_free_ char *p = lc_strdup_printf("/proc/%d/cmdline", pids[k]);
			_cleanup_free_ char *cmd = NULL;
			size_t len = 0;
			if (lc_read_file(p, &cmd, &len, NULL) < 0)
				continue;
			for (size_t j = 0; j + 1 < len; j++)
				if (!cmd[j])
					cmd[j] = ' ';
			printf("%-8d %s\n", pids[k], cmd);
		}
	}
	oci_container_clear(&c);
	return 0;
}
