/* build.c — lcrun image build FILE.json: an image from a short definition.
 *
 *   { "name": "busybox",
 *     "from": "host" | "scratch" | "IMAGE" | "rootfs.tar.gz" | "debootstrap:SUITE",
 *     "hosts": ["deb.debian.org", …],   (pinned in run steps' /etc/hosts)
 *     "steps": [ {"run": "sh command" | ["argv", …]},
 *                {"copy": "path/in/the/definition/folder" | "host:/abs/path", "to": "/dest"},
 *                {"env": {"K": "V"}}, {"workdir": "/w"}, {"user": "1000:1000"},
 *                {"entrypoint": [...]}, {"cmd": [...]} ] }
 *
 * Every step's result is an image named build-cache/<key>, where key hashes
 * the parent's key and the step's definition (for copy: and the copied
 * files), so an unchanged step is found and not run again.  run steps run in
 * a sandbox with --net open on the parent and are snapshotted; copy steps
 * write a layer directly; the others change the config only.  Build-time
 * secrets reach a run step's environment and nothing else (not the key, not
 * the config). */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <fcntl.h>
#include <libgen.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "image.h"
#include "json.h"
#include "lcrun.h"
#include "paths.h"
#include "state.h"
#include "util.h"

extern char **environ;

#define CACHE_PREFIX LC_IMAGE_CACHE_PREFIX

static char *cache_name(const char *key)
{
	return lc_strdup_printf(CACHE_PREFIX "%.40s", key);
}

static void hash_str(const char *s, char *hex)
{
	lc_sha256_buf(s, strlen(s), hex);
}

/* A fresh directory lc_lib_dir()/tmp/PREFIX-PID.START-XXXXXX (lcrun gc and
 * prune remove it if this process is killed). */
static char *make_tmp_dir(const char *prefix, lc_error_t **err)
{
	_cleanup_free_ char *tmpd = lc_strdup_printf("%s/tmp", lc_lib_dir());
	if (lc_mkdir_p(tmpd, 0700, err) < 0)
		return NULL;
	char *dir = lc_image_tmp_name(tmpd, prefix);
	if (!mkdtemp(dir)) {
		lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot create %s", dir);
		free(dir);
		return NULL;
	}
	return dir;
}

/* Run argv (a host tool, its output on our stderr), wait; 0 when it
 * exited 0. */
static int spawn_wait(char *const argv[], lc_error_t **err)
{
	pid_t pid;
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, STDERR_FILENO, STDOUT_FILENO);
	int r = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (r != 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, r, "cannot run %s", argv[0]);
	int status;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot wait for %s", argv[0]);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, 0, "%s failed (status %d)", argv[0],
				    WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
	return 0;
}

/* The first http(s) mirror apt is configured with. */
static char *debian_mirror(void)
{
	const char *files[] = { "/etc/apt/sources.list.d/debian.sources", "/etc/apt/sources.list" };
	for (size_t f = 0; f < 2; f++) {
		_cleanup_fclose_ FILE *fp = fopen(files[f], "r");
		char line[1024];
		while (fp && fgets(line, sizeof(line), fp)) {
			char *u = NULL;
			if (!strncmp(line, "URIs:", 5))
				u = line + 5;
			else if (!strncmp(line, "deb ", 4))
				u = strstr(line, "http");
			if (!u)
				continue;
			while (*u == ' ' || *u == '\t')
				u++;
			u[strcspn(u, " \t\n")] = '\0';
			if (!strncmp(u, "http", 4) && !strstr(u, "security"))
				return strdup(u);
		}
	}
	return strdup("http://deb.debian.org/debian");
}

struct build {
	const char *def_dir;
	json_t *hosts; /* names to pin in run steps' /etc/hosts */
	char **secrets; /* K=V */
	unsigned flags;
	FILE *log;
	size_t step, n_steps;
	bool ran_any;
	bool host_base; /* no parent yet: the host image (else scratch) */
};

static void say(struct build *b, const char *what, const char *detail, bool cached)
{
	fprintf(b->log, "lcrun build: step %zu/%zu %s%s%s%s\n", b->step, b->n_steps, what, detail ? " " : "",
		detail ? detail : "", cached ? ": cached" : "");
	fflush(b->log);
}

/* The base: key and the name of an image to build on (NULL: host). */
static int build_from(struct build *b, const char *from, char *key, char **parent, lc_error_t **err)
{
	*parent = NULL;
	b->host_base = false;
	if (!from || !strcmp(from, LC_IMAGE_HOST)) {
		b->host_base = true;
		hash_str("from host", key);
		return 0;
	}
	if (!strcmp(from, "scratch")) {
		hash_str("from scratch", key);
		return 0;
	}
	if (!strncmp(from, "debootstrap:", 12)) {
		const char *suite = from + 12;
		for (const char *p = suite; *p; p++)
			if (!(*p >= 'a' && *p <= 'z') && !(*p >= '0' && *p <= '9') && *p != '-')
				return lc_error_set(err, LC_EXIT_INVALID, 0, "from: bad debootstrap suite '%s'", suite);
		_cleanup_free_ char *mirror = debian_mirror();
		_cleanup_free_ char *k = lc_strdup_printf("from debootstrap %s %s", suite, mirror);
		hash_str(k, key);
		*parent = cache_name(key);
		if (lc_image_exists(*parent, err) > 0) {
			say(b, "from", from, true);
			return 0;
		}
		say(b, "from", from, false);
		_cleanup_free_ char *dir = make_tmp_dir("debootstrap", err);
		if (!dir)
			return -1;
		char *argv[] = { "debootstrap", "--variant=minbase", (char *)suite, dir, mirror, NULL };
		int r = spawn_wait(argv, err);
		/* debootstrap leaves device nodes in /dev; the sandbox brings its own */
		_cleanup_free_ char *dev = lc_strdup_printf("%s/dev", dir);
		if (r == 0 && lc_rm_rf(dev, err) == 0 && mkdir(dev, 0755) == 0)
			r = lc_image_import(dir, *parent, b->flags | LC_LAYER_TRUSTED, NULL, err);
		lc_rm_rf(dir, NULL);
		b->ran_any = true;
		return r < 0 ? lc_error_wrap(err, "from %s", from) : 0;
	}
	/* a rootfs tarball beside the definition, or an image */
	_cleanup_free_ char *path = from[0] == '/' ? strdup(from) : lc_strdup_printf("%s/%s", b->def_dir, from);
	struct stat st;
	int is_image = lc_image_name_valid(from) ? lc_image_exists(from, err) : 0;
	if (is_image < 0)
		return -1;
	if (!is_image && stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
		char fh[LC_HEX_LEN + 1];
		if (lc_sha256_file(path, fh, NULL, err) < 0)
			return lc_error_wrap(err, "from");
		_cleanup_free_ char *k = lc_strdup_printf("from tar %s", fh);
		hash_str(k, key);
		*parent = cache_name(key);
		if (lc_image_exists(*parent, err) > 0) {
			say(b, "from", from, true);
			return 0;
		}
		say(b, "from", from, false);
		b->ran_any = true;
		if (lc_image_import(path, *parent, b->flags, NULL, err) < 0)
			return lc_error_wrap(err, "from %s", from);
		return 0;
	}
	lc_image_resolved_t *img = NULL;
	if (lc_image_resolve(from, &img, err) < 0)
		return lc_error_wrap(err, "from");
	_cleanup_free_ char *k = lc_strdup_printf("from image %s", img->manifest_digest);
	hash_str(k, key);
	*parent = strdup(img->manifest_digest);
	lc_image_resolved_free(img);
	return 0;
}

/* Config changes for env/workdir/user/entrypoint/cmd steps. */
static int config_change(const char *parent, const char *kind, json_t *val, json_t **out, lc_error_t **err)
{
	if (!strcmp(kind, "env")) {
		if (!json_is_object(val))
			return lc_error_set(err, LC_EXIT_INVALID, 0, "env: expected an object of NAME: value");
		_cleanup_strv_ char **env = NULL;
		if (parent) {
			lc_image_resolved_t *img = NULL;
			if (lc_image_resolve(parent, &img, err) < 0)
				return -1;
			for (size_t i = 0; img->config.env && img->config.env[i]; i++)
				lc_strv_push(&env, img->config.env[i]);
			lc_image_resolved_free(img);
		} else {
			lc_strv_push(&env, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
		}
		const char *k;
		json_t *v;
		json_object_foreach(val, k, v) {
			if (!json_is_string(v) || !*k || strchr(k, '='))
				return lc_error_set(err, LC_EXIT_INVALID, 0, "env: %s: expected a string value", k);
			size_t kl = strlen(k);
			_cleanup_free_ char *kv = lc_strdup_printf("%s=%s", k, json_string_value(v));
			bool replaced = false;
			for (size_t i = 0; env && env[i]; i++)
				if (!strncmp(env[i], k, kl) && env[i][kl] == '=') {
					free(env[i]);
					env[i] = strdup(kv);
					replaced = true;
				}
			if (!replaced)
				lc_strv_push(&env, kv);
		}
		*out = json_pack("{s:o}", "Env", lc_strv_to_json(env));
		return 0;
	}
	static const struct { const char *kind, *field; bool array; } map[] = {
		{ "workdir", "WorkingDir", false }, { "user", "User", false },
		{ "entrypoint", "Entrypoint", true }, { "cmd", "Cmd", true },
	};
	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
		if (strcmp(kind, map[i].kind))
			continue;
		if (map[i].array && json_is_string(val))
			val = json_pack("[s,s,O]", "/bin/sh", "-c", val);
		else
			json_incref(val);
		if (map[i].array ? !json_is_array(val) : !json_is_string(val)) {
			json_decref(val);
			return lc_error_set(err, LC_EXIT_INVALID, 0, "%s: expected %s", kind,
					    map[i].array ? "a list of strings" : "a string");
		}
		*out = json_pack("{s:o}", map[i].field, val);
		return 0;
	}
	return lc_error_set(err, LC_EXIT_INVALID, 0, "unknown step '%s' (run, copy, env, workdir, user, entrypoint, cmd)",
			    kind);
}

/* A path inside the definition's folder (no absolute paths, no ..), or
 * "host:/abs/path" for a file of the host (a static binary, a CA bundle). */
static char *def_path(struct build *b, const char *rel, lc_error_t **err)
{
	if (rel && !strncmp(rel, "host:/", 6))
		return strdup(rel + 5);
	if (!rel || !*rel || rel[0] == '/' || strstr(rel, "..")) {
		lc_error_set(err, LC_EXIT_INVALID, 0, "copy: '%s' must be a path inside the definition's folder",
			     rel ? rel : "");
		return NULL;
	}
	return lc_strdup_printf("%s/%s", b->def_dir, rel);
}

static int step_copy(struct build *b, const char *parent, json_t *step, const char *prev_key, char *key,
		     lc_error_t **err)
{
	const char *src_rel = lc_json_str(step, "copy");
	const char *to = lc_json_str(step, "to");
	if (!to || to[0] != '/' || strstr(to, ".."))
		return lc_error_set(err, LC_EXIT_INVALID, 0, "copy: \"to\" must be an absolute path without '..'");
	_cleanup_free_ char *src = def_path(b, src_rel, err);
	if (!src)
		return -1;
	struct stat st;
	if (stat(src, &st) < 0)
		return lc_error_set(err, LC_EXIT_NOENT, errno, "copy: %s", src);
	/* what is copied is part of the key: stage it, then hash the layer */
	_cleanup_free_ char *stage = make_tmp_dir("copy", err);
	if (!stage)
		return -1;
	int ret = -1;
	_cleanup_free_ char *dst = lc_strdup_printf("%s%s", stage, to);
	_cleanup_free_ char *dst_parent = strdup(dst);
	char *slash = strrchr(dst_parent, '/');
	*slash = '\0';
	if (chmod(stage, 0755) < 0 || lc_mkdir_p(dst_parent, 0755, err) < 0)
		goto out;
	{
		char *argv[] = { "cp", "-R", "--preserve=mode,timestamps,links,xattr", "--no-preserve=ownership",
				 "--no-dereference", src, dst, NULL };
		if (spawn_wait(argv, err) < 0)
			goto out;
	}
	/* the directories made for "to" get a fixed time, so the key only
	 * changes with what is copied */
	for (char *p = dst_parent + strlen(stage); p && *p;) {
		char *next = strchr(p + 1, '/');
		if (next)
			*next = '\0';
		struct timespec ts[2] = { { 0, 0 }, { 0, 0 } };
		utimensat(AT_FDCWD, dst_parent, ts, AT_SYMLINK_NOFOLLOW);
		if (next)
			*next = '/';
		p = next;
	}
	{
		char chex[LC_HEX_LEN + 1];
		_cleanup_close_ int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
		lc_upper_t u = { .dir = stage, .prefix = "" };
		if (lc_layer_write(&u, 1, 0, 0, LC_LAYER_RAW_IDS, null, chex, NULL, err) < 0)
			goto out;
		_cleanup_free_ char *def = json_dumps(step, JSON_COMPACT | JSON_SORT_KEYS);
		_cleanup_free_ char *k = lc_strdup_printf("%s\n%s\n%s", prev_key, def, chex);
		hash_str(k, key);
	}
	{
		_cleanup_free_ char *name = cache_name(key);
		if (lc_image_exists(name, err) > 0) {
			say(b, "copy", src_rel, true);
			ret = 0;
			goto out;
		}
		say(b, "copy", src_rel, false);
		b->ran_any = true;
		lc_upper_t u = { .dir = stage, .prefix = "" };
		_cleanup_free_ char *by = lc_strdup_printf("lcrun build: copy %s %s", src_rel, to);
		ret = lc_image_commit_ex(parent, b->host_base, NULL, &u, 1, 0, 0, name, NULL, by, NULL, err);
	}
out:
	lc_rm_rf(stage, NULL);
	return ret;
}

static int step_run(struct build *b, const char *parent, json_t *run, const char *name, lc_error_t **err)
{
	lc_spec_t *s = lc_spec_new();
	if (json_is_string(run)) {
		lc_strv_push(&s->argv, "/bin/sh");
		lc_strv_push(&s->argv, "-c");
		lc_strv_push(&s->argv, json_string_value(run));
	} else {
		size_t i;
		json_t *a;
		json_array_foreach(run, i, a) {
			if (!json_is_string(a)) {
				lc_spec_free(s);
				return lc_error_set(err, LC_EXIT_INVALID, 0, "run: expected a string or a list of strings");
			}
			lc_strv_push(&s->argv, json_string_value(a));
		}
	}
	if (!s->argv) {
		lc_spec_free(s);
		return lc_error_set(err, LC_EXIT_INVALID, 0, "run: empty command");
	}
	if (!parent && !b->host_base) {
		lc_spec_free(s);
		return lc_error_set(err, LC_EXIT_INVALID, 0, "run: nothing to run on yet (from scratch: copy a shell in first)");
	}
	s->image = parent ? strdup(parent) : NULL;
	if (parent) {
		/* the image's env, workdir and user apply; its entrypoint does not */
		lc_image_resolved_t *img = NULL;
		if (lc_image_resolve(parent, &img, err) < 0) {
			lc_spec_free(s);
			return -1;
		}
		lc_strv_free(img->config.entrypoint);
		img->config.entrypoint = NULL;
		int r = lc_image_apply_config(s, img, err);
		lc_image_resolved_free(img);
		if (r < 0) {
			lc_spec_free(s);
			return -1;
		}
	}
	s->keep = true;
	s->net.mode = LC_NET_OPEN;
	s->stdio[1] = STDERR_FILENO; /* stdout is for the image name */
	/* --net open has no resolver: the names a step needs are looked up
	 * here and pinned in its /etc/hosts */
	size_t hi;
	json_t *h;
	json_array_foreach(b->hosts, hi, h) {
		const char *hn = json_string_value(h);
		struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM }, *res = NULL;
		int gr = hn ? getaddrinfo(hn, NULL, &hints, &res) : EAI_NONAME;
		if (gr != 0) {
			lc_spec_free(s);
			return lc_error_set(err, LC_EXIT_RUNTIME, 0, "hosts: cannot resolve %s: %s", hn ? hn : "(not a string)",
					    gai_strerror(gr));
		}
		char ip[INET_ADDRSTRLEN];
		inet_ntop(AF_INET, &((struct sockaddr_in *)res->ai_addr)->sin_addr, ip, sizeof(ip));
		freeaddrinfo(res);
		s->net.hosts = realloc(s->net.hosts, (s->net.n_hosts + 1) * sizeof(*s->net.hosts));
		if (!s->net.hosts)
			abort();
		s->net.hosts[s->net.n_hosts].name = strdup(hn);
		s->net.hosts[s->net.n_hosts].ip = strdup(ip);
		s->net.n_hosts++;
	}
	for (size_t i = 0; b->secrets && b->secrets[i]; i++)
		lc_strv_push(&s->secret_env, b->secrets[i]);
	lc_result_t res;
	memset(&res, 0, sizeof(res));
	int r = lc_run(s, &res, err);
	lc_spec_free(s);
	if (r < 0)
		return lc_error_wrap(err, "run step");
	LC_FAULT("build-step-ran");
	if (res.exit_code == 0)
		r = lc_sandbox_snapshot(res.id, name, err);
	else
		r = lc_error_set(err, res.exit_code, 0, "run step exited %d (sandbox %s)", res.exit_code, res.id);
	LC_FAULT("build-step-snapshotted");
	/* the sandbox has served; its state and upper go */
	if (res.id[0]) {
		_cleanup_free_ char *sd = lc_sandbox_dir(res.id);
		lc_rm_rf(sd, NULL);
		lc_state_remove(res.id);
	}
	return r;
}

static void secrets_unnote(char ***v)
{
	lc_secrets_unnote(*v);
}

int lc_image_build(const char *file, const char *name_override, char **secrets, unsigned flags, FILE *log,
		   char **out_name, lc_error_t **err)
{
	json_error_t je;
	_cleanup_json_ json_t *def = json_load_file(file, 0, &je);
	if (!def)
		return lc_error_set(err, access(file, F_OK) ? LC_EXIT_NOENT : LC_EXIT_INVALID, 0, "%s: %s", file,
				    je.text);
	json_t *steps = json_object_get(def, "steps");
	if (steps && !json_is_array(steps))
		return lc_error_set(err, LC_EXIT_INVALID, 0, "%s: \"steps\" must be a list", file);
	_cleanup_free_ char *fcopy = strdup(file);
	_cleanup_free_ char *dcopy = strdup(dirname(fcopy));
	_cleanup_free_ char *name = NULL;
	if (name_override)
		name = strdup(name_override);
	else if (json_is_string(json_object_get(def, "name")))
		name = strdup(lc_json_str(def, "name"));
	else {
		_cleanup_free_ char *b2 = strdup(file);
		name = strdup(basename(b2));
		char *dot = strrchr(name, '.');
		if (dot && dot != name)
			*dot = '\0';
	}
	if (!lc_image_name_valid(name))
		return lc_error_set(err, LC_EXIT_USAGE, 0, "invalid image name '%s'", name);

	json_t *hosts = json_object_get(def, "hosts");
	if (hosts && !json_is_array(hosts))
		return lc_error_set(err, LC_EXIT_INVALID, 0, "%s: \"hosts\" must be a list of names", file);
	struct build b = { .def_dir = dcopy, .hosts = hosts, .secrets = secrets, .flags = flags, .log = log ? log : stderr,
			   .n_steps = json_array_size(steps) + 1 };
	/* The helpers that a run step's teardown forks (lcrun-net, a
	 * remover) are forks of this process: they zero the list (each run's
	 * spec has copies, noted and zeroed as well). */
	lc_secrets_note(secrets);
	__attribute__((cleanup(secrets_unnote))) char **noted = secrets;
	char key[LC_HEX_LEN + 1];
	_cleanup_free_ char *parent = NULL;
	b.step = 1;
	const char *from = lc_json_str(def, "from");
	if (build_from(&b, from, key, &parent, err) < 0)
		return lc_error_wrap(err, "%s", file);
	if (!parent)
		say(&b, "from", b.host_base ? LC_IMAGE_HOST : "scratch", false);
	size_t i;
	json_t *step;
	json_array_foreach(steps, i, step) {
		b.step = i + 2;
		const char *kind = NULL;
		json_t *val = NULL;
		const char *k;
		json_t *v;
		json_object_foreach(step, k, v) {
			if (strcmp(k, "to")) {
				kind = k;
				val = v;
			}
		}
		if (!kind)
			return lc_error_set(err, LC_EXIT_INVALID, 0, "%s: step %zu is empty", file, i + 1);
		char nkey[LC_HEX_LEN + 1];
		if (!strcmp(kind, "copy")) {
			if (step_copy(&b, parent, step, key, nkey, err) < 0)
				return lc_error_wrap(err, "%s: step %zu", file, i + 1);
		} else {
			_cleanup_free_ char *sdef = json_dumps(step, JSON_COMPACT | JSON_SORT_KEYS);
			_cleanup_free_ char *kk = lc_strdup_printf("%s\n%s", key, sdef);
			hash_str(kk, nkey);
			_cleanup_free_ char *cname = cache_name(nkey);
			int have = lc_image_exists(cname, err);
			if (have < 0)
				return -1;
			_cleanup_free_ char *detail = json_is_string(val) ? strdup(json_string_value(val)) : json_dumps(val, JSON_COMPACT);
			say(&b, kind, detail, have > 0);
			if (!have) {
				b.ran_any = true;
				if (!strcmp(kind, "run")) {
					if (step_run(&b, parent, val, cname, err) < 0)
						return lc_error_wrap(err, "%s: step %zu", file, i + 1);
				} else {
					_cleanup_json_ json_t *change = NULL;
					if (config_change(parent, kind, val, &change, err) < 0)
						return lc_error_wrap(err, "%s: step %zu", file, i + 1);
					_cleanup_free_ char *by = lc_strdup_printf("lcrun build: %s %s", kind, detail);
					if (lc_image_commit_ex(parent, b.host_base, NULL, NULL, 0, 0, 0, cname, change, by,
							       NULL, err) < 0)
						return lc_error_wrap(err, "%s: step %zu", file, i + 1);
				}
			}
		}
		memcpy(key, nkey, sizeof(key));
		free(parent);
		parent = cache_name(key);
	}
	if (!parent)
		return lc_error_set(err, LC_EXIT_INVALID, 0, "%s: nothing to build (no steps on the host image)", file);
	/* the name now points at the last step's image, in one write of the
	 * index: a build killed here leaves it naming the old image or the
	 * new one (it used to be removed, then tagged again) */
	LC_FAULT("build-naming");
	if (lc_image_tag_replace(parent, name, err) < 0)
		return -1;
	if (out_name)
		*out_name = lc_steal(name);
	return b.ran_any ? 1 : 0;
}
