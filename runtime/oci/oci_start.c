/* oci_start.c — lcrun-oci start ID: let a created container's program run. */
#include <stdio.h>
#include <string.h>

#include "json.h"
#include "oci.h"
#include "util.h"

int oci_start_loaded(oci_container_t *c, lc_error_t **err)
{
	if (!strcmp(c->status, "stopped"))
		return lc_error_set(err, LC_EXIT_STATE, 0, "cannot start a container that has stopped");
	if (strcmp(c->status, "created"))
		return lc_error_set(err, LC_EXIT_STATE, 0, "cannot start an already %s container", c->status);
	_cleanup_free_ char *fifo = lc_strdup_printf("%s/exec.fifo", c->dir);
	if (lc_ctr_start(fifo, err) < 0)
		return -1;
	json_t *hooks = json_object_get(json_object_get(c->state, "lcrun"), "hooks");
	if (hooks && json_array_size(json_object_get(hooks, "poststart"))) {
		lc_ctr_spec_t *s = lc_ctr_spec_new();
		s->id = strdup(c->id);
		s->bundle = strdup(lc_json_str(c->state, "bundle") ?: "");
		json_t *ann = json_object_get(c->state, "annotations");
		s->annotations = ann ? json_incref(ann) : NULL;
		lc_error_t *e = NULL;
		json_t *st = lc_ctr_state_json(s, "running", c->pid);
		/* The spec: a failing poststart hook is a warning. */
		if (oci_hooks_parse(hooks, s, &e) < 0 || lc_ctr_run_hooks(s, LC_HOOK_POSTSTART, st, &e) < 0) {
			fprintf(stderr, "lcrun-oci: warning: %s\n", e->msg);
			lc_error_free(e);
		}
		json_decref(st);
		lc_ctr_spec_free(s);
	}
	return 0;
}

int oci_cmd_start(int argc, char **argv)
{
	if (argc != 2 || argv[1][0] == '-')
		return oci_failf("usage: lcrun-oci start ID");
	lc_error_t *err = NULL;
	oci_container_t c;
	if (oci_load(argv[1], &c, &err) < 0)
		return oci_fail(err);
	int r = oci_start_loaded(&c, &err);
	oci_container_clear(&c);
	return r < 0 ? oci_fail(err) : 0;
}
