/* oci_delete.c — lcrun-oci delete [--force] ID */
#include <string.h>
#include <unistd.h>

#include "oci.h"
#include "util.h"

int oci_cmd_delete(int argc, char **argv)
{
	bool force = false;
	int i = 1;
	for (; i < argc && argv[i][0] == '-'; i++) {
		if (!strcmp(argv[i], "--force") || !strcmp(argv[i], "-f"))
			force = true;
		else
			return oci_failf("delete: unknown option '%s'", argv[i]);
	}
	if (i != argc - 1)
		return oci_failf("usage: lcrun-oci delete [--force] ID");
	const char *id = argv[i];
	lc_error_t *err = NULL;
	oci_container_t c;
	if (oci_load(id, &c, &err) < 0) {
		if (force && oci_id_valid(id)) {
			/* as runc: a directory left by an aborted create goes, quietly */
			_cleanup_free_ char *dir = oci_dir(id);
			lc_rm_rf(dir, NULL);
			lc_error_free(err);
			return 0;
		}
		return oci_fail(err);
	}
	if (!force && (!strcmp(c.status, "running") || !strcmp(c.status, "paused") || !strcmp(c.status, "creating"))) {
		int r = oci_failf("cannot delete container %s that is not stopped: %s", id, c.status);
		oci_container_clear(&c);
		return r;
	}
	int r = oci_destroy(&c, &err);
	oci_container_clear(&c);
	return r < 0 ? oci_fail(err) : 0;
}
