/* oci_pause.c — lcrun-oci pause ID / resume ID (cgroup.freeze). */
#include <string.h>

#include "cgroup.h"
#include "oci.h"

static int freeze(int argc, char **argv, bool frozen)
{
	const char *verb = frozen ? "pause" : "resume";
	if (argc != 2 || argv[1][0] == '-')
		return oci_failf("usage: lcrun-oci %s ID", verb);
	lc_error_t *err = NULL;
	oci_container_t c;
	if (oci_load(argv[1], &c, &err) < 0)
		return oci_fail(err);
	int r = 0;
	if (strcmp(c.status, frozen ? "running" : "paused"))
		r = lc_error_set(&err, LC_EXIT_STATE, 0, "container %s is %s, not %s", c.id, c.status,
				 frozen ? "running" : "paused");
	else if (!c.cgroup)
		r = lc_error_set(&err, LC_EXIT_STATE, 0, "container %s has no cgroup to freeze", c.id);
	else
		r = lc_cgroup_freeze(c.cgroup, frozen, &err);
	oci_container_clear(&c);
	return r < 0 ? oci_fail(err) : 0;
}

int oci_cmd_pause(int argc, char **argv)
{
	return freeze(argc, argv, true);
}

int oci_cmd_resume(int argc, char **argv)
{
	return freeze(argc, argv, false);
}
