/* Unit tests for image.c: the store in a temporary LCRUN_ROOT. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "image.h"
#include "lcrun.h"
#include "util.h"

static char scratch[256];

static void setup(void)
{
	snprintf(scratch, sizeof(scratch), "/var/tmp/lc-test-image-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(scratch));
	char p[400];
	snprintf(p, sizeof(p), "%s/root", scratch);
	setenv("LCRUN_ROOT", p, 1);
	snprintf(p, sizeof(p), "%s/state", scratch);
	mkdir(p, 0755);
	setenv("LCRUN_STATE_DIR", p, 1);
}

static void teardown(void)
{
	lc_rm_rf(scratch, NULL);
}

static void put(const char *dir, const char *name, const char *data)
{
	char p[512];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	FILE *f = fopen(p, "w");
	ck_assert_ptr_nonnull(f);
	fputs(data, f);
	fclose(f);
}

static char *mkdir_in(const char *name)
{
	char *p = lc_strdup_printf("%s/%s", scratch, name);
	ck_assert_int_eq(lc_mkdir_p(p, 0755, NULL), 0);
	return p;
}

static size_t count_entries(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return 0;
	size_t n = 0;
	struct dirent *de;
	while ((de = readdir(d)))
		n += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
	closedir(d);
	return n;
}

static void import_base(void)
{
	_cleanup_free_ char *src = mkdir_in("src");
	put(src, "hello", "hello\n");
	_cleanup_free_ char *bin = mkdir_in("src/bin");
	put(bin, "tool", "#!/bin/sh\n");
	lc_error_t *err = NULL;
	json_t *names = NULL;
	ck_assert_msg(lc_image_import(src, "base", 0, &names, &err) == 0, "%s", err ? err->msg : "");
	ck_assert_str_eq(json_string_value(json_array_get(names, 0)), "base");
	json_decref(names);
}

START_TEST(test_names)
{
	ck_assert(lc_image_name_valid("busybox"));
	ck_assert(lc_image_name_valid("debian:12"));
	ck_assert(lc_image_name_valid("team/agent-cli_v2.1"));
	ck_assert(!lc_image_name_valid(""));
	ck_assert(!lc_image_name_valid("host"));
	ck_assert(!lc_image_name_valid("-x"));
	ck_assert(!lc_image_name_valid("a/../b"));
	ck_assert(!lc_image_name_valid("a b"));
	ck_assert(!lc_image_name_valid(NULL));
}
END_TEST

START_TEST(test_import_resolve)
{
	import_base();
	lc_image_resolved_t *img = NULL;
	lc_error_t *err = NULL;
	ck_assert_int_eq(lc_image_resolve("base", &img, &err), 0);
	ck_assert_int_eq(img->n_layers, 1);
	ck_assert(!img->base_host);
	ck_assert(!strncmp(img->diff_ids[0], "sha256:", 7));
	char p[512];
	snprintf(p, sizeof(p), "%s/hello", img->layer_dirs[0]);
	_cleanup_free_ char *data = NULL;
	ck_assert_int_eq(lc_read_file(p, &data, NULL, NULL), 0);
	ck_assert_str_eq(data, "hello\n");
	ck_assert_ptr_nonnull(strstr(img->layer_dirs[0], img->diff_ids[0] + 7));
	ck_assert_ptr_nonnull(img->config.env);
	ck_assert(!strncmp(img->config.env[0], "PATH=", 5));
	/* by digest too */
	lc_image_resolved_t *again = NULL;
	ck_assert_int_eq(lc_image_resolve(img->manifest_digest, &again, &err), 0);
	ck_assert_str_eq(again->layer_dirs[0], img->layer_dirs[0]);
	lc_image_resolved_free(again);

	/* an unpacked layer that vanished is unpacked again from its blob */
	_cleanup_free_ char *dir = strdup(img->layer_dirs[0]);
	lc_image_resolved_free(img);
	ck_assert_int_eq(lc_rm_rf(dir, NULL), 0);
	ck_assert_int_eq(lc_image_resolve("base", &img, &err), 0);
	ck_assert_int_eq(access(p, F_OK), 0);
	lc_image_resolved_free(img);

	ck_assert_int_lt(lc_image_resolve("nope", &img, &err), 0);
	ck_assert_int_eq(err->exit_code, LC_EXIT_UNKNOWN);
	lc_error_free(err);
	err = NULL;
	/* the same name twice is a conflict */
	_cleanup_free_ char *src = lc_strdup_printf("%s/src", scratch);
	ck_assert_int_lt(lc_image_import(src, "base", 0, NULL, &err), 0);
	ck_assert_int_eq(err->exit_code, LC_EXIT_BUSY);
	lc_error_free(err);
}
END_TEST

START_TEST(test_commit_on_parent_and_host)
{
	if (geteuid() != 0)
		return;
	import_base();
	const uid_t B = lc_uid_base();
	_cleanup_free_ char *up = mkdir_in("upper");
	ck_assert_int_eq(chown(up, B, B), 0);
	put(up, "new", "new file\n");
	char p[512];
	snprintf(p, sizeof(p), "%s/new", up);
	ck_assert_int_eq(chown(p, B + 1000, B + 1000), 0);
	snprintf(p, sizeof(p), "%s/hello", up);
	ck_assert_int_eq(mknod(p, S_IFCHR, makedev(0, 0)), 0);
	ck_assert_int_eq(chown(p, B, B), 0);
	lc_upper_t u = { up, "" };
	lc_error_t *err = NULL;
	ck_assert_msg(lc_image_commit("base", false, &u, 1, B, B, "snap", &err) == 0, "%s", err ? err->msg : "");
	lc_image_resolved_t *img = NULL;
	ck_assert_int_eq(lc_image_resolve("snap", &img, &err), 0);
	ck_assert_int_eq(img->n_layers, 2);
	snprintf(p, sizeof(p), "%s/hello", img->layer_dirs[1]);
	struct stat st;
	ck_assert_int_eq(lstat(p, &st), 0);
	ck_assert(S_ISCHR(st.st_mode));
	snprintf(p, sizeof(p), "%s/new", img->layer_dirs[1]);
	ck_assert_int_eq(stat(p, &st), 0);
	ck_assert_int_eq(st.st_uid, 1000);
	lc_image_resolved_free(img);

	/* the same name again: refused, nothing changes */
	ck_assert_int_lt(lc_image_commit("base", false, &u, 1, B, B, "snap", &err), 0);
	ck_assert_int_eq(err->exit_code, LC_EXIT_BUSY);
	lc_error_free(err);
	err = NULL;

	/* a host-image sandbox: only its own layer, marked base host */
	ck_assert_int_eq(lc_image_commit(NULL, true, &u, 1, B, B, "hostsnap", &err), 0);
	ck_assert_int_eq(lc_image_resolve("hostsnap", &img, &err), 0);
	ck_assert(img->base_host);
	ck_assert_int_eq(img->n_layers, 1);
	lc_image_resolved_free(img);
	/* and a snapshot of that one stays on the host base */
	ck_assert_int_eq(lc_image_commit("hostsnap", false, &u, 1, B, B, "hostsnap2", &err), 0);
	ck_assert_int_eq(lc_image_resolve("hostsnap2", &img, &err), 0);
	ck_assert(img->base_host);
	ck_assert_int_eq(img->n_layers, 2);
	lc_image_resolved_free(img);
	json_t *j = NULL;
	ck_assert_int_eq(lc_image_inspect("hostsnap2", &j, &err), 0);
	ck_assert_str_eq(json_string_value(json_object_get(j, "base")), "host");
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(j, "annotations"), "org.lcrun.base")),
			 "host");
	json_decref(j);
}
END_TEST

START_TEST(test_tag_rm_prune)
{
	import_base();
	lc_error_t *err = NULL;
	ck_assert_int_eq(lc_image_tag("base", "copy", &err), 0);
	ck_assert_int_lt(lc_image_tag("base", "copy", &err), 0);
	ck_assert_int_eq(err->exit_code, LC_EXIT_BUSY);
	lc_error_free(err);
	err = NULL;
	ck_assert_int_lt(lc_image_tag("missing", "x", &err), 0);
	ck_assert_int_eq(err->exit_code, LC_EXIT_UNKNOWN);
	lc_error_free(err);
	err = NULL;

	_cleanup_free_ char *other = mkdir_in("other");
	put(other, "o", "other\n");
	ck_assert_int_eq(lc_image_import(other, "other", 0, NULL, &err), 0);
	_cleanup_free_ char *blobs = lc_strdup_printf("%s/root/images/blobs/sha256", scratch);
	_cleanup_free_ char *layers = lc_strdup_printf("%s/root/layers", scratch);
	size_t nb = count_entries(blobs);
	ck_assert_int_eq(nb, 6); /* two images: manifest, config, layer each */
	ck_assert_int_eq(count_entries(layers), 2);

	lc_prune_stats_t st;
	ck_assert_int_eq(lc_image_prune(&st, &err), 0);
	ck_assert_int_eq(st.blobs, 0);
	ck_assert_int_eq(st.layers, 0);

	/* base is still named copy: nothing of it may go */
	ck_assert_int_eq(lc_image_remove("base", &err), 0);
	ck_assert_int_eq(lc_image_prune(&st, &err), 0);
	ck_assert_int_eq(st.blobs, 0);

	/* other goes, but a sandbox still runs on its layer */
	lc_image_resolved_t *img = NULL;
	ck_assert_int_eq(lc_image_resolve("other", &img, &err), 0);
	_cleanup_free_ char *sd = lc_strdup_printf("%s/state/0123456789ab", scratch);
	mkdir(sd, 0755);
	_cleanup_free_ char *state = lc_strdup_printf("%s/state.json", sd);
	_cleanup_json_ json_t *sj = json_pack("{s:[s]}", "layers", img->diff_ids[0]);
	ck_assert_int_eq(json_dump_file(sj, state, 0), 0);
	ck_assert_int_eq(lc_image_remove("other", &err), 0);
	ck_assert_int_eq(lc_image_prune(&st, &err), 0);
	ck_assert_int_eq(st.blobs, 3);
	ck_assert_int_eq(st.layers, 0);
	ck_assert_int_eq(access(img->layer_dirs[0], F_OK), 0);
	ck_assert_int_eq(count_entries(blobs), 3);
	/* the sandbox is gone: now the layer goes too */
	unlink(state);
	ck_assert_int_eq(lc_image_prune(&st, &err), 0);
	ck_assert_int_eq(st.layers, 1);
	ck_assert_int_ne(access(img->layer_dirs[0], F_OK), 0);
	lc_image_resolved_free(img);
	/* copy still resolves */
	ck_assert_int_eq(lc_image_resolve("copy", &img, &err), 0);
	lc_image_resolved_free(img);
	ck_assert_int_lt(lc_image_remove("other", &err), 0);
	ck_assert_int_eq(err->exit_code, LC_EXIT_UNKNOWN);
	lc_error_free(err);
}
END_TEST

START_TEST(test_bad_import_leaves_nothing)
{
	_cleanup_free_ char *src = mkdir_in("bad");
	put(src, "suid", "x");
	char p[512];
	snprintf(p, sizeof(p), "%s/suid", src);
	ck_assert_int_eq(chmod(p, 04755), 0);
	lc_error_t *err = NULL;
	ck_assert_int_lt(lc_image_import(src, "bad", 0, NULL, &err), 0);
	ck_assert_msg(strstr(err->msg, "suid") != NULL, "%s", err->msg);
	lc_error_free(err);
	err = NULL;
	_cleanup_free_ char *blobs = lc_strdup_printf("%s/root/images/blobs/sha256", scratch);
	_cleanup_free_ char *layers = lc_strdup_printf("%s/root/layers", scratch);
	_cleanup_free_ char *tmp = lc_strdup_printf("%s/root/tmp", scratch);
	ck_assert_int_eq(count_entries(blobs), 0);
	ck_assert_int_eq(count_entries(layers), 0);
	ck_assert_int_eq(count_entries(tmp), 0);
	ck_assert_int_eq(lc_image_exists("bad", &err), 0);
	/* trusted: accepted */
	ck_assert_int_eq(lc_image_import(src, "bad", LC_LAYER_TRUSTED, NULL, &err), 0);
	ck_assert_int_eq(lc_image_exists("bad", &err), 1);
}
END_TEST

START_TEST(test_apply_config)
{
	lc_image_resolved_t img = { .name = "t" };
	char *env[] = { "PATH=/img/bin", "A=image", NULL };
	char *ep[] = { "/entry", "--flag", NULL };
	char *cmd[] = { "default", NULL };
	img.config.env = env;
	img.config.entrypoint = ep;
	img.config.cmd = cmd;
	img.config.workdir = "/work";
	img.config.user = "1000:100";
	lc_spec_t *s = lc_spec_new();
	lc_strv_push(&s->env, "A=mine");
	lc_error_t *err = NULL;
	ck_assert_int_eq(lc_image_apply_config(s, &img, &err), 0);
	ck_assert_str_eq(s->env[0], "PATH=/img/bin");
	ck_assert_str_eq(s->env[1], "A=mine");
	ck_assert_ptr_null(s->env[2]);
	ck_assert_str_eq(s->argv[0], "/entry");
	ck_assert_str_eq(s->argv[2], "default");
	ck_assert_str_eq(s->workdir, "/work");
	ck_assert_int_eq(s->uid, 1000);
	ck_assert_int_eq(s->gid, 100);
	lc_spec_free(s);

	/* the given command replaces cmd; given workdir and user win */
	s = lc_spec_new();
	lc_strv_push(&s->argv, "given");
	s->workdir = strdup("/mine");
	s->user_set = true;
	ck_assert_int_eq(lc_image_apply_config(s, &img, &err), 0);
	ck_assert_str_eq(s->argv[0], "/entry");
	ck_assert_str_eq(s->argv[2], "given");
	ck_assert_ptr_null(s->argv[3]);
	ck_assert_str_eq(s->workdir, "/mine");
	ck_assert_int_eq(s->uid, 0);
	lc_spec_free(s);

	/* a user name cannot be resolved without the image's passwd: said so */
	img.config.user = "postgres";
	s = lc_spec_new();
	ck_assert_int_lt(lc_image_apply_config(s, &img, &err), 0);
	ck_assert_int_eq(err->exit_code, LC_EXIT_INVALID);
	ck_assert_ptr_nonnull(strstr(err->msg, "postgres"));
	lc_error_free(err);
	lc_spec_free(s);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("image");
	TCase *tc = tcase_create("store");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_names);
	tcase_add_test(tc, test_import_resolve);
	tcase_add_test(tc, test_commit_on_parent_and_host);
	tcase_add_test(tc, test_tag_rm_prune);
	tcase_add_test(tc, test_bad_import_leaves_nothing);
	tcase_add_test(tc, test_apply_config);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
