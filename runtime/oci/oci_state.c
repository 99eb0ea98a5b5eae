/* oci_state.c — lcrun-oci state ID: the state the runtime spec defines. */
#include <stdio.h>
#include <stdlib.h>

#include "oci.h"
#include "util.h"

int oci_cmd_state(int argc, char **argv)
{
	if (argc != 2 || argv[1][0] == '-')
		return oci_failf("usage: lcrun-oci state ID");
	lc_error_t *err = NULL;
	oci_container_t c;
	if (oci_load(argv[1], &c, &err) < 0)
		return oci_fail(err);
	_cleanup_json_ json_t *j = oci_state_public(&c);
	_cleanup_free_ char *s = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	printf("%s\n", s);
	oci_container_clear(&c);
	return 0;
}
