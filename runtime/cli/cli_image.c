/* cli_image.c — lcrun image ls|inspect|rm|tag|import|export|prune|build. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "image.h"
#include "registry.h"
#include "json.h"
#include "util.h"

static void human_size(long long n, char *buf, size_t len)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double v = (double)n;
	size_t u = 0;
	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%lld B", n);
	else
		snprintf(buf, len, "%.1f %s", v, units[u]);
}

/* getopt over argv where argv[0] is the sub-verb. */
static void reset_getopt(void)
{
	optind = 0;
	opterr = 0;
}

static int bad_option(const char *verb, char **argv)
{
	return lc_cli_usage_error("image %s: unknown option '%s' (see lcrun image --help)", verb,
				  argv[optind - 1]);
}

static int cmd_ls(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "all", no_argument, NULL, 'a' },
		{ NULL, 0, NULL, 0 },
	};
	bool json = false, all = false;
	int c;
	reset_getopt();
	while ((c = getopt_long(argc, argv, "+a", opts, NULL)) != -1) {
		if (c == 'j')
			json = true;
		else if (c == 'a')
			all = true;
		else
			return bad_option("ls", argv);
	}
	if (optind < argc)
		return lc_cli_usage_error("image ls takes no arguments");
	lc_error_t *err = NULL;
	_cleanup_json_ json_t *list = NULL;
	if (lc_image_list(&list, &err) < 0)
		return lc_cli_fail(err);
	/* build cache steps are images too, shown with --all */
	for (size_t k = json_array_size(list); !all && k-- > 0;)
		if (!strncmp(lc_json_str(json_array_get(list, k), "name"), LC_IMAGE_CACHE_PREFIX,
			     strlen(LC_IMAGE_CACHE_PREFIX)))
			json_array_remove(list, k);
	if (json) {
		json_dumpf(list, stdout, JSON_INDENT(2));
		fputc('\n', stdout);
		return 0;
	}
	printf("%-24s %-12s %6s %10s  %-5s %s\n", "NAME", "DIGEST", "LAYERS", "SIZE", "BASE", "CREATED");
	size_t i;
	json_t *row;
	json_array_foreach(list, i, row) {
		const char *dg = lc_json_str(row, "digest");
		char sz[32];
		human_size(json_integer_value(json_object_get(row, "size")), sz, sizeof(sz));
		const char *base = lc_json_str(row, "base");
		const char *created = lc_json_str(row, "created");
		printf("%-24s %-12.12s %6lld %10s  %-5s %s\n", lc_json_str(row, "name"),
		       dg && strlen(dg) > 7 ? dg + 7 : "?", (long long)json_integer_value(json_object_get(row, "layers")),
		       sz, base ? base : "-", created ? created : "-");
	}
	return 0;
}

static int cmd_inspect(int argc, char **argv)
{
	if (argc != 2 || argv[1][0] == '-')
		return lc_cli_usage_error("usage: lcrun image inspect NAME");
	lc_error_t *err = NULL;
	_cleanup_json_ json_t *j = NULL;
	if (lc_image_inspect(argv[1], &j, &err) < 0)
		return lc_cli_fail(err);
	json_dumpf(j, stdout, JSON_INDENT(2));
	fputc('\n', stdout);
	return 0;
}

static int cmd_rm(int argc, char **argv)
{
	if (argc < 2)
		return lc_cli_usage_error("usage: lcrun image rm NAME…");
	for (int i = 1; i < argc; i++) {
		lc_error_t *err = NULL;
		if (lc_image_remove(argv[i], &err) < 0)
			return lc_cli_fail(err);
	}
	return 0;
}

static int cmd_tag(int argc, char **argv)
{
	if (argc != 3)
		return lc_cli_usage_error("usage: lcrun image tag SRC NEW");
	lc_error_t *err = NULL;
	if (lc_image_tag(argv[1], argv[2], &err) < 0)
		return lc_cli_fail(err);
	return 0;
}

static int cmd_import(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "name", required_argument, NULL, 'n' },
		{ "trusted", no_argument, NULL, 't' },
		{ NULL, 0, NULL, 0 },
	};
	const char *name = NULL;
	unsigned flags = 0;
	int c;
	reset_getopt();
	while ((c = getopt_long(argc, argv, "n:", opts, NULL)) != -1) {
		if (c == 'n')
			name = optarg;
		else if (c == 't')
			flags |= LC_LAYER_TRUSTED;
		else
			return bad_option("import", argv);
	}
	if (optind != argc - 1)
		return lc_cli_usage_error("usage: lcrun image import FILE.tar|DIR|- [--name NAME] [--trusted]");
	lc_error_t *err = NULL;
	_cleanup_json_ json_t *names = NULL;
	if (lc_image_import(argv[optind], name, flags, &names, &err) < 0)
		return lc_cli_fail(err);
	size_t i;
	json_t *n;
	json_array_foreach(names, i, n)
		printf("%s\n", json_string_value(n));
	return 0;
}

static int cmd_export(int argc, char **argv)
{
	static const struct option opts[] = { { "output", required_argument, NULL, 'o' }, { NULL, 0, NULL, 0 } };
	const char *out = NULL;
	int c;
	reset_getopt();
	while ((c = getopt_long(argc, argv, "o:", opts, NULL)) != -1) {
		if (c == 'o')
			out = optarg;
		else
			return bad_option("export", argv);
	}
	if (optind != argc - 1)
		return lc_cli_usage_error("usage: lcrun image export NAME [-o FILE.tar] (or > FILE.tar)");
	const char *name = argv[optind];
	lc_error_t *err = NULL;
	if (!out) {
		if (isatty(STDOUT_FILENO))
			return lc_cli_usage_error("image export: refusing to write an archive to a terminal "
						  "(use > FILE.tar or -o FILE.tar)");
		if (lc_image_export(name, STDOUT_FILENO, &err) < 0)
			return lc_cli_fail(err);
		return 0;
	}
	_cleanup_free_ char *tmp = lc_strdup_printf("%s.tmp.%d", out, (int)getpid());
	int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0) {
		lc_error_set(&err, errno == ENOENT ? LC_EXIT_NOENT : LC_EXIT_RUNTIME, errno, "cannot create %s", tmp);
		return lc_cli_fail(err);
	}
	if (lc_image_export(name, fd, &err) < 0 || fsync(fd) < 0 || close(fd) < 0 || rename(tmp, out) < 0) {
		if (!err)
			lc_error_set(&err, LC_EXIT_RUNTIME, errno, "cannot write %s", out);
		unlink(tmp);
		return lc_cli_fail(err);
	}
	return 0;
}

/* lcrun image push|pull NAME REF [--json] [--trusted (pull)] */
static int cmd_registry(int argc, char **argv, bool push)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "trusted", no_argument, NULL, 't' },
		{ NULL, 0, NULL, 0 },
	};
	const char *verb = push ? "push" : "pull";
	bool json = false;
	unsigned flags = 0;
	int c;
	reset_getopt();
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c == 'j')
			json = true;
		else if (c == 't' && !push)
			flags |= LC_LAYER_TRUSTED;
		else
			return bad_option(verb, argv);
	}
	if (optind != argc - 2)
		return lc_cli_usage_error("usage: lcrun image %s NAME REGISTRY/REPOSITORY[:TAG]%s [--json]", verb,
					  push ? "" : " [--trusted]");
	const char *name = argv[optind], *ref = argv[optind + 1];
	lc_error_t *err = NULL;
	lc_registry_stats_t st;
	if ((push ? lc_image_push(name, ref, &st, &err) : lc_image_pull(name, ref, flags, &st, &err)) < 0)
		return lc_cli_fail(err);
	if (json) {
		_cleanup_json_ json_t *o = json_pack("{s:s, s:s, s:s, s:I, s:I}", "name", name, "ref", ref, "digest", st.digest,
						     "blobs", (json_int_t)st.blobs, push ? "sent" : "fetched", (json_int_t)st.moved);
		json_dumpf(o, stdout, JSON_INDENT(2));
		fputc('\n', stdout);
	} else {
		printf("%s %s %s %s: %zu of %zu blobs %s, the rest %s\n", push ? "pushed" : "pulled", push ? name : ref,
		       push ? "to" : "as", push ? ref : name, st.moved, st.blobs, push ? "sent" : "fetched",
		       push ? "were there already" : "were here already");
		printf("%s\n", st.digest);
	}
	return 0;
}

static int cmd_push(int argc, char **argv)
{
	return cmd_registry(argc, argv, true);
}

static int cmd_pull(int argc, char **argv)
{
	return cmd_registry(argc, argv, false);
}

static int cmd_prune(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "cache", no_argument, NULL, 'c' },
		{ NULL, 0, NULL, 0 },
	};
	bool json = false, cache = false;
	int c;
	reset_getopt();
	while ((c = getopt_long(argc, argv, "+", opts, NULL)) != -1) {
		if (c == 'j')
			json = true;
		else if (c == 'c')
			cache = true;
		else
			return bad_option("prune", argv);
	}
	if (optind < argc)
		return lc_cli_usage_error("image prune takes no arguments");
	lc_error_t *err = NULL;
	if (cache) {
		_cleanup_json_ json_t *list = NULL;
		if (lc_image_list(&list, &err) < 0)
			return lc_cli_fail(err);
		size_t i;
		json_t *row;
		json_array_foreach(list, i, row) {
			const char *n = lc_json_str(row, "name");
			if (!strncmp(n, LC_IMAGE_CACHE_PREFIX, strlen(LC_IMAGE_CACHE_PREFIX)) &&
			    lc_image_remove(n, &err) < 0)
				return lc_cli_fail(err);
		}
	}
	lc_prune_stats_t st;
	if (lc_image_prune(&st, &err) < 0)
		return lc_cli_fail(err);
	if (json) {
		printf("{\"blobs\": %zu, \"bytes\": %llu, \"layers\": %zu}\n", st.blobs, (unsigned long long)st.bytes,
		       st.layers);
	} else {
		char sz[32];
		human_size((long long)st.bytes, sz, sizeof(sz));
		printf("removed %zu blobs (%s) and %zu unpacked layers\n", st.blobs, sz, st.layers);
	}
	return 0;
}

static int cmd_build(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "name", required_argument, NULL, 'n' },
		{ "secret", required_argument, NULL, 's' },
		{ "trusted", no_argument, NULL, 't' },
		{ NULL, 0, NULL, 0 },
	};
	const char *name = NULL;
	unsigned flags = 0;
	_cleanup_strv_ char **secrets = NULL;
	int c;
	reset_getopt();
	while ((c = getopt_long(argc, argv, "n:", opts, NULL)) != -1) {
		if (c == 'n') {
			name = optarg;
		} else if (c == 't') {
			flags |= LC_LAYER_TRUSTED;
		} else if (c == 's') {
			/* The strings the value came from (an argument, an
			 * environment string) stay in this process: helpers it
			 * forks zero them (lc_secret_note), and the copy made
			 * here is zeroed before it is freed. */
			if (strchr(optarg, '=')) {
				lc_secret_note(optarg);
				lc_strv_push(&secrets, optarg);
			} else {
				char *v = getenv(optarg);
				if (!v)
					return lc_cli_usage_error("--secret '%s': expected NAME=VALUE (or NAME set in lcrun's "
								  "environment)", optarg);
				lc_secret_note(v);
				char *kv = lc_strdup_printf("%s=%s", optarg, v);
				lc_strv_push(&secrets, kv);
				explicit_bzero(kv, strlen(kv));
				free(kv);
			}
		} else {
			return bad_option("build", argv);
		}
	}
	if (optind != argc - 1)
		return lc_cli_usage_error("usage: lcrun image build FILE.json [--name NAME] [--secret NAME=VALUE]");
	lc_error_t *err = NULL;
	_cleanup_free_ char *out = NULL;
	if (lc_image_build(argv[optind], name, secrets, flags, stderr, &out, &err) < 0)
		return lc_cli_fail(err);
	printf("%s\n", out);
	return 0;
}

static const struct {
	const char *name;
	lc_verb_fn fn;
	const char *help;
} image_verbs[] = {
	{ "ls", cmd_ls, "list images [--json]" },
	{ "inspect", cmd_inspect, "NAME: manifest, config and layers as JSON" },
	{ "rm", cmd_rm, "NAME…: forget the names (prune frees the space)" },
	{ "tag", cmd_tag, "SRC NEW: a second name for an image" },
	{ "import", cmd_import, "FILE.tar|DIR|- [--name NAME] [--trusted]: rootfs tarball, directory or OCI archive" },
	{ "export", cmd_export, "NAME > FILE.tar: write an OCI archive" },
	{ "push", cmd_push, "NAME REGISTRY/REPO[:TAG] [--json]: send an image to an OCI registry" },
	{ "pull", cmd_pull, "NAME REGISTRY/REPO[:TAG|@DIGEST] [--trusted] [--json]: fetch one as NAME" },
	{ "prune", cmd_prune, "[--cache] remove blobs and unpacked layers nothing uses (--cache: and the build cache)" },
	{ "build", cmd_build, "FILE.json [--name NAME] [--secret NAME=VALUE] [--trusted]: build an image" },
	{ NULL, NULL, NULL },
};

int lc_cmd_image(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		FILE *f = argc < 2 ? stderr : stdout;
		fprintf(f, "usage: lcrun image VERB …\n\n");
		for (size_t i = 0; image_verbs[i].name; i++)
			fprintf(f, "  %-8s %s\n", image_verbs[i].name, image_verbs[i].help);
		return argc < 2 ? LC_EXIT_USAGE : 0;
	}
	for (size_t i = 0; image_verbs[i].name; i++)
		if (!strcmp(image_verbs[i].name, argv[1]))
			return image_verbs[i].fn(argc - 1, argv + 1);
	return lc_cli_usage_error("unknown image verb '%s' (see lcrun image --help)", argv[1]);
}
