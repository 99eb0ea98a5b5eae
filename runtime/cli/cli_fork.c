/* cli_fork.c — lcrun fork IMAGE --count N [run options] -- CMD…
 *
 * N sandboxes from one image, in parallel, each with its own upper.  The
 * image is unpacked once, before the first starts; lcrun fork starts,
 * watches and tears down every sandbox itself (lc_run_batch). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "image.h"
#include "json.h"
#include "util.h"

#define FORK_MAX 256

static const char fork_help[] =
	"usage: lcrun fork IMAGE --count N [run options] [--result FILE] -- CMD [ARG…]\n\n"
	"Start N sandboxes from IMAGE in parallel, each with its own upper layer,\n"
	"run CMD in each, and report every exit status (one line each on stderr,\n"
	"all of them as a JSON array with --result).  Exits 0 when every command\n"
	"exited 0, else with the first failing sandbox's code.  Takes the options\n"
	"of lcrun run except --image, --rootfs, --name and --id.\n";

/* Each result as it comes; the lines on stderr in the sandboxes' order. */
typedef struct {
	json_t **res;
	long count, next;
	int code;
} collect_t;

static void on_done(long i, json_t *r, void *ud)
{
	collect_t *c = ud;
	c->res[i] = r;
	for (; c->next < c->count && c->res[c->next]; c->next++) {
		json_t *j = c->res[c->next];
		long k = c->next + 1;
		int ec = (int)json_integer_value(json_object_get(j, "exit_code"));
		const char *e = lc_json_str(j, "error");
		const char *id = lc_json_str(j, "id");
		if (e)
			fprintf(stderr, "lcrun: fork %ld/%ld: %s\n", k, c->count, e);
		else
			fprintf(stderr, "lcrun: fork %ld/%ld: sandbox %s exited %d\n", k, c->count, id ? id : "?", ec);
		if (ec && !c->code)
			c->code = ec;
		json_object_set_new(j, "index", json_integer(k));
	}
}

int lc_cmd_fork(int argc, char **argv)
{
	if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		fputs(fork_help, stdout);
		return 0;
	}
	if (argc < 2 || argv[1][0] == '-')
		return lc_cli_usage_error("usage: lcrun fork IMAGE --count N [run options] -- CMD (see lcrun fork --help)");
	const char *image = argv[1];
	long count = 0;
	/* take --count out; the rest are run options */
	_cleanup_free_ char **nargv = lc_xmalloc0((size_t)(argc + 1) * sizeof(char *));
	int nargc = 0;
	nargv[nargc++] = argv[0];
	for (int i = 2; i < argc; i++) {
		const char *v = NULL;
		if (!strcmp(argv[i], "--")) {
			while (i < argc)
				nargv[nargc++] = argv[i++];
			break;
		}
		if (!strcmp(argv[i], "--count") || !strcmp(argv[i], "-n")) {
			if (i + 1 >= argc)
				return lc_cli_usage_error("fork: --count needs a number");
			v = argv[++i];
		} else if (!strncmp(argv[i], "--count=", 8)) {
			v = argv[i] + 8;
		}
		if (v) {
			char *end;
			errno = 0;
			count = strtol(v, &end, 10);
			if (errno || *end || count < 1 || count > FORK_MAX)
				return lc_cli_usage_error("fork: --count '%s': a number from 1 to %d", v, FORK_MAX);
			continue;
		}
		nargv[nargc++] = argv[i];
	}
	if (!count)
		return lc_cli_usage_error("fork: --count N is required");
	lc_spec_t *s = lc_spec_new();
	_cleanup_free_ char *result_path = NULL;
	int idx = lc_cli_parse_run(nargc, nargv, s, &result_path, true);
	if (idx == -1000) {
		lc_spec_free(s);
		fputs(fork_help, stdout);
		return 0;
	}
	if (idx < 0) {
		lc_spec_free(s);
		return -idx;
	}
	if (s->image || s->rootfs || s->name || s->id) {
		lc_spec_free(s);
		return lc_cli_usage_error("fork: --image, --rootfs, --name and --id cannot be given (the image is "
					  "the first argument; each sandbox draws its own id)");
	}
	if (idx >= nargc) {
		lc_spec_free(s);
		return lc_cli_usage_error("fork: no command given (lcrun fork IMAGE --count N -- CMD)");
	}
	for (int i = idx; i < nargc; i++)
		lc_strv_push(&s->argv, nargv[i]);
	s->image = strdup(image);
	s->forward_signals = true;

	/* unpack once, before any sandbox wants it */
	lc_error_t *err = NULL;
	lc_image_resolved_t *img = NULL;
	if (lc_image_resolve(image, &img, &err) < 0 || lc_image_apply_config(s, img, &err) < 0) {
		lc_image_resolved_free(img);
		lc_spec_free(s);
		return lc_cli_fail(err);
	}
	lc_image_resolved_free(img);
	/* What every sandbox would prepare alike (its seccomp program, the
	 * idmap user namespace), made once here and inherited; their
	 * directories go to one trash directory, emptied after the last. */
	lc_run_shared_t *sh = NULL;
	if (lc_run_shared_new(s, &sh, &err) < 0) {
		lc_spec_free(s);
		return lc_cli_fail(err);
	}

	/* Signals go to the sandboxes, and lcrun fork stays to collect
	 * their results and start the batch's removal. */
	static const int fwd_signals[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT };
	sigset_t old;
	int sfd = lc_signals_to_fd(fwd_signals, sizeof(fwd_signals) / sizeof(fwd_signals[0]), &old);

	/* one clock for the whole trace */
	lc_trace("fork: image resolved");
	LC_FAULT("fork-resolved");
	fflush(NULL);
	collect_t col = { lc_xmalloc0((size_t)count * sizeof(json_t *)), count, 0, 0 };
	lc_run_batch(s, sh, count, sfd, on_done, &col);
	json_t *all = json_array();
	for (long i = 0; i < count; i++)
		json_array_append_new(all, col.res[i]);
	free(col.res);
	int code = col.code;
	lc_trace("fork: all results in");
	LC_FAULT("fork-results");
	if (result_path && json_dump_file(all, result_path, JSON_INDENT(2)) < 0)
		fprintf(stderr, "lcrun: cannot write --result %s\n", result_path);
	json_decref(all);
	lc_run_shared_free(sh);
	if (sfd >= 0)
		close(sfd);
	sigprocmask(SIG_SETMASK, &old, NULL);
	lc_spec_free(s);
	return code;
}
