/* oci_list.c — lcrun-oci list [--format table|json] [--quiet] */
#include <dirent.h>
#include <stdio.h>
#include <string.h>

#include "json.h"
#include "oci.h"
#include "util.h"

int oci_cmd_list(int argc, char **argv)
{
	bool json = false, quiet = false;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-q") || !strcmp(argv[i], "--quiet"))
			quiet = true;
		else if ((!strcmp(argv[i], "--format") || !strcmp(argv[i], "-f")) && i + 1 < argc)
			json = !strcmp(argv[++i], "json");
		else if (!strcmp(argv[i], "--format=json"))
			json = true;
		else if (strcmp(argv[i], "--format=table"))
			return oci_failf("list: unknown option '%s'", argv[i]);
	}
	_cleanup_json_ json_t *all = json_array();
	_cleanup_dir_ DIR *d = opendir(oci_g.root);
	struct dirent *de;
	while (d && (de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		oci_container_t c;
		lc_error_t *err = NULL;
		if (oci_load(de->d_name, &c, &err) < 0) {
			lc_error_free(err);
			continue;
		}
		json_array_append_new(all, oci_state_public(&c));
		oci_container_clear(&c);
	}
	if (json) {
		_cleanup_free_ char *s = json_dumps(all, JSON_COMPACT);
		printf("%s\n", s);
		return 0;
	}
	if (!quiet)
		printf("%-24s %-8s %-10s %-40s %s\n", "ID", "PID", "STATUS", "BUNDLE", "CREATED");
	size_t i;
	json_t *c;
	json_array_foreach(all, i, c) {
		if (quiet)
			printf("%s\n", lc_json_str(c, "id"));
		else
			printf("%-24s %-8lld %-10s %-40s %s\n", lc_json_str(c, "id"),
			       (long long)json_integer_value(json_object_get(c, "pid")),
			       lc_json_str(c, "status"),
			       lc_json_str(c, "bundle"),
			       lc_json_str(c, "created"));
	}
	return 0;
}
