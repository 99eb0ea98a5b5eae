/* state.c — /run/lcrun/ID/state.json, written atomically, and names. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "json.h"
#include "paths.h"
#include "state.h"
#include "util.h"

bool lc_id_valid(const char *id)
{
	if (!id || strlen(id) != LC_ID_LEN)
		return false;
	for (const char *p = id; *p; p++)
		if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
			return false;
	return true;
}

int lc_state_write(const char *id, json_t *state, lc_error_t **err)
{
	_cleanup_free_ char *dir = lc_state_dir(id);
	if (lc_mkdir_p(dir, 0700, err) < 0)
		return -1;
	_cleanup_free_ char *path = lc_strdup_printf("%s/state.json", dir);
	_cleanup_free_ char *s = json_dumps(state, JSON_INDENT(2) | JSON_SORT_KEYS);
	if (!s)
		return lc_error_set(err, LC_EXIT_RUNTIME, ENOMEM, "cannot serialize state of %s", id);
	/* /run is volatile: rename is all the atomicity it needs, no fsync. */
	_cleanup_free_ char *tmp = lc_strdup_printf("%s.tmp.%d", path, getpid());
	_cleanup_close_ int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || lc_write_all(fd, s, strlen(s)) < 0 || rename(tmp, path) < 0) {
		int e = errno;
		unlink(tmp);
		return lc_error_set(err, LC_EXIT_RUNTIME, e, "cannot write %s", path);
	}
	return 0;
}

json_t *lc_state_read(const char *id, lc_error_t **err)
{
	_cleanup_free_ char *path = lc_strdup_printf("%s/%s/state.json", lc_run_dir(), id);
	/* One open and one read for a state of the usual size (1-3 KiB; a
	 * listing reads one per sandbox), parsed from memory; a larger one
	 * from the file. */
	char buf[8192];
	json_error_t je = { .text = "" };
	json_t *j = NULL;
	ssize_t n = lc_read_small(AT_FDCWD, path, buf, sizeof(buf), true);
	if (n >= 0 && (size_t)n + 1 < sizeof(buf))
		j = json_loadb(buf, (size_t)n, 0, &je);
	else if (n >= 0)
		j = json_load_file(path, 0, &je);
	else
		snprintf(je.text, sizeof(je.text), "%s", strerror(errno));
	if (!j) {
		if (access(path, F_OK) < 0)
			lc_error_set(err, LC_EXIT_UNKNOWN, 0, "no such sandbox: %s", id);
		else
			lc_error_set(err, LC_EXIT_RUNTIME, 0, "state of sandbox %s is unreadable: %s", id, je.text);
		return NULL;
	}
	return j;
}

void lc_name_unlink(const char *id, const char *name)
{
	_cleanup_free_ char *link = lc_strdup_printf("%s/names/%s", lc_run_dir(), name);
	char target[64];
	ssize_t n = readlink(link, target, sizeof(target) - 1);
	if (n > 0) {
		target[n] = '\0';
		if (!strcmp(target, id))
			unlink(link);
	}
}

int lc_name_link(const char *id, const char *name, lc_error_t **err)
{
	if (!*name || strchr(name, '/') || name[0] == '.' || strlen(name) > 64 || lc_id_valid(name))
		return lc_error_set(err, LC_EXIT_USAGE, 0, "invalid sandbox name '%s'", name);
	_cleanup_free_ char *dir = lc_strdup_printf("%s/names", lc_run_dir());
	if (lc_mkdir_p(dir, 0700, err) < 0)
		return -1;
	_cleanup_free_ char *link = lc_strdup_printf("%s/%s", dir, name);
	for (int attempt = 0; attempt < 2; attempt++) {
		if (symlink(id, link) == 0)
			return 1;
		if (errno != EEXIST)
			return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot record name %s", name);
		char target[64];
		ssize_t n = readlink(link, target, sizeof(target) - 1);
		if (n > 0) {
			target[n] = '\0';
			if (!strcmp(target, id))
				return 0; /* start again: the name is already ours */
			_cleanup_free_ char *sd = lc_state_dir(target);
			if (access(sd, F_OK) == 0)
				return lc_error_set(err, LC_EXIT_BUSY, 0, "name '%s' is taken by sandbox %s", name, target);
		}
		unlink(link); /* stale: its sandbox is gone */
	}
	return lc_error_set(err, LC_EXIT_BUSY, 0, "name '%s' is taken", name);
}

int lc_state_remove(const char *id)
{
	_cleanup_free_ char *dir = lc_state_dir(id);
	json_t *st = lc_state_read(id, NULL);
	if (st) {
		const char *name = lc_json_str(st, "name");
		if (name)
			lc_name_unlink(id, name);
		json_decref(st);
	}
	return lc_rm_rf(dir, NULL);
}

int lc_state_resolve(const char *id_or_name, char **id, lc_error_t **err)
{
	if (lc_id_valid(id_or_name)) {
		_cleanup_free_ char *dir = lc_state_dir(id_or_name);
		if (access(dir, F_OK) == 0) {
			*id = strdup(id_or_name);
			return 0;
		}
	}
	if (strchr(id_or_name, '/') || !*id_or_name || id_or_name[0] == '.')
		return lc_error_set(err, LC_EXIT_UNKNOWN, 0, "no such sandbox: %s", id_or_name);
	_cleanup_free_ char *link = lc_strdup_printf("%s/names/%s", lc_run_dir(), id_or_name);
	char target[64];
	ssize_t n = readlink(link, target, sizeof(target) - 1);
	if (n > 0) {
		target[n] = '\0';
		if (lc_id_valid(target)) {
			*id = strdup(target);
			return 0;
		}
	}
	/* A unique id prefix of at least 4 characters. */
	if (strlen(id_or_name) >= 4 && strlen(id_or_name) < LC_ID_LEN) {
		_cleanup_dir_ DIR *d = opendir(lc_run_dir());
		struct dirent *de;
		char *found = NULL;
		int count = 0;
		while (d && (de = readdir(d))) {
			if (lc_id_valid(de->d_name) && !strncmp(de->d_name, id_or_name, strlen(id_or_name))) {
				count++;
				free(found);
				found = strdup(de->d_name);
			}
		}
		if (count == 1) {
			*id = found;
			return 0;
		}
		free(found);
		if (count > 1)
			return lc_error_set(err, LC_EXIT_UNKNOWN, 0, "sandbox id prefix '%s' is ambiguous", id_or_name);
	}
	return lc_error_set(err, LC_EXIT_UNKNOWN, 0, "no such sandbox: %s", id_or_name);
}

json_t *lc_state_open(const char *id_or_name, char **id, lc_error_t **err)
{
	if (lc_state_resolve(id_or_name, id, err) < 0)
		return NULL;
	return lc_state_read(*id, err);
}
