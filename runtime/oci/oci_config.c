/* oci_config.c — config.json (runtime-spec 1.x) mapped onto lc_ctr_spec_t.
 *
 * Every field the spec defines is either mapped or refused with its JSON
 * path ("linux.intelRdt is not supported"); nothing is silently dropped.
 * Fields outside the spec are ignored, as the spec asks of runtimes. */
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <linux/mount.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cgroup.h"
#include "json.h"
#include "oci.h"
#include "util.h"

#define BAD(...) lc_error_set(err, LC_EXIT_INVALID, 0, __VA_ARGS__)
#define UNSUPPORTED(path) lc_error_set(err, LC_EXIT_INVALID, 0, "%s is not supported by lcrun-oci", path)

static bool present(json_t *v)
{
	if (!v || json_is_null(v))
		return false;
	if (json_is_array(v) || json_is_object(v))
		return json_array_size(v) || json_object_size(v);
	if (json_is_string(v))
		return *json_string_value(v);
	if (json_is_false(v))
		return false;
	return true;
}

static int get_str(json_t *o, const char *key, const char *path, char **out, bool required, lc_error_t **err)
{
	json_t *v = json_object_get(o, key);
	if (!v || json_is_null(v)) {
		if (required)
			return BAD("%s%s: missing", path, key);
		return 0;
	}
	if (!json_is_string(v))
		return BAD("%s%s: expected a string", path, key);
	*out = strdup(json_string_value(v));
	return 0;
}

static int get_int(json_t *o, const char *key, const char *path, long long *out, bool *set, lc_error_t **err)
{
	json_t *v = json_object_get(o, key);
	if (set)
		*set = false;
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_integer(v))
		return BAD("%s%s: expected an integer", path, key);
	*out = json_integer_value(v);
	if (set)
		*set = true;
	return 0;
}

static int get_strv(json_t *o, const char *key, const char *path, char ***out, lc_error_t **err)
{
	json_t *v = json_object_get(o, key);
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_array(v))
		return BAD("%s%s: expected an array of strings", path, key);
	size_t i;
	json_t *e;
	json_array_foreach(v, i, e) {
		if (!json_is_string(e))
			return BAD("%s%s[%zu]: expected a string", path, key, i);
		lc_strv_push(out, json_string_value(e));
	}
	return 0;
}

/* Keys of o that must be absent or empty. */
static int refuse(json_t *o, const char *path, const char *const *keys, lc_error_t **err)
{
	for (size_t i = 0; keys[i]; i++)
		if (present(json_object_get(o, keys[i]))) {
			char p[256];
			snprintf(p, sizeof(p), "%s%s", path, keys[i]);
			return UNSUPPORTED(p);
		}
	return 0;
}

/* ---- process ------------------------------------------------------------- */

static int parse_caps(json_t *caps, lc_ctr_process_t *p, const char *where, lc_error_t **err)
{
	static const char *sets[LC_CAP_SETS] = { "bounding", "effective", "permitted", "inheritable", "ambient" };
	for (int k = 0; k < LC_CAP_SETS; k++) {
		json_t *v = json_object_get(caps, sets[k]);
		p->caps[k] = 0;
		if (!v || json_is_null(v))
			continue;
		if (!json_is_array(v))
			return BAD("%scapabilities.%s: expected an array", where, sets[k]);
		size_t i;
		json_t *e;
		json_array_foreach(v, i, e) {
			int c = json_is_string(e) ? lc_cap_from_name(json_string_value(e)) : -1;
			if (c < 0 || c > 63)
				return BAD("%scapabilities.%s[%zu]: unknown capability %s", where, sets[k], i,
					   json_is_string(e) ? json_string_value(e) : "(not a string)");
			p->caps[k] |= 1ULL << c;
		}
	}
	return 0;
}

static int parse_rlimits(json_t *v, lc_ctr_process_t *p, const char *where, lc_error_t **err)
{
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_array(v))
		return BAD("%srlimits: expected an array", where);
	p->rlimits = lc_xmalloc0((json_array_size(v) + 1) * sizeof(lc_rlimit_t));
	size_t i;
	json_t *e;
	json_array_foreach(v, i, e) {
		const char *type = lc_json_str(e, "type");
		json_t *hard = json_object_get(e, "hard"), *soft = json_object_get(e, "soft");
		if (!type || strncmp(type, "RLIMIT_", 7) || !json_is_integer(hard) || !json_is_integer(soft))
			return BAD("%srlimits[%zu]: expected {\"type\": \"RLIMIT_…\", \"hard\": N, \"soft\": N}", where, i);
		char name[32], spec[128];
		size_t k = 0;
		for (const char *s = type + 7; *s && k < sizeof(name) - 1; s++)
			name[k++] = (char)(*s >= 'A' && *s <= 'Z' ? *s + 32 : *s);
		name[k] = '\0';
		unsigned long long hv = (unsigned long long)json_integer_value(hard);
		unsigned long long sv = (unsigned long long)json_integer_value(soft);
		snprintf(spec, sizeof(spec), "%s=%llu:%llu", name, sv, hv);
		if (json_integer_value(soft) < 0 || json_integer_value(hard) < 0)
			snprintf(spec, sizeof(spec), "%s=%s:%s", name, json_integer_value(soft) < 0 ? "unlimited" : "0",
				 json_integer_value(hard) < 0 ? "unlimited" : "0");
		_cleanup_error_ lc_error_t *e2 = NULL;
		if (lc_rlimit_parse(spec, &p->rlimits[p->n_rlimits], &e2) < 0)
			return BAD("%srlimits[%zu]: unknown limit %s", where, i, type);
		if (sv > hv && json_integer_value(hard) >= 0)
			return BAD("%srlimits[%zu]: soft %llu is above hard %llu", where, i, sv, hv);
		p->n_rlimits++;
	}
	return 0;
}

int oci_process_parse(json_t *proc, lc_ctr_process_t *p, const char *where, lc_error_t **err)
{
	p->umask = -1;
	if (!json_is_object(proc))
		return BAD("%s: expected an object", where);
	char w[64];
	snprintf(w, sizeof(w), "%s.", where);
	static const char *const no[] = { "commandLine", "apparmorProfile", "selinuxLabel", "ioPriority",
					   "scheduler", "execCPUAffinity", NULL };
	if (refuse(proc, w, no, err) < 0)
		return -1;
	json_t *t = json_object_get(proc, "terminal");
	p->terminal = json_is_true(t);
	json_t *cs = json_object_get(proc, "consoleSize");
	if (json_is_object(cs)) {
		p->rows = (unsigned short)json_integer_value(json_object_get(cs, "height"));
		p->cols = (unsigned short)json_integer_value(json_object_get(cs, "width"));
	}
	json_t *user = json_object_get(proc, "user");
	if (user && json_is_object(user)) {
		long long uid = 0, gid = 0, um = -1;
		bool umset;
		char up[80];
		snprintf(up, sizeof(up), "%suser.", w);
		if (get_int(user, "uid", up, &uid, NULL, err) < 0 || get_int(user, "gid", up, &gid, NULL, err) < 0 ||
		    get_int(user, "umask", up, &um, &umset, err) < 0)
			return -1;
		if (present(json_object_get(user, "username")))
			return UNSUPPORTED("process.user.username");
		if (uid < 0 || uid > UINT_MAX - 1 || gid < 0 || gid > UINT_MAX - 1)
			return BAD("%suser: uid/gid out of range", w);
		p->uid = (uid_t)uid;
		p->gid = (gid_t)gid;
		if (umset) {
			if (um < 0 || um > 0777)
				return BAD("%suser.umask: %lld is not a mode", w, um);
			p->umask = (int)um;
		}
		json_t *ag = json_object_get(user, "additionalGids");
		if (json_is_array(ag)) {
			p->gids = lc_xmalloc0((json_array_size(ag) + 1) * sizeof(gid_t));
			size_t i;
			json_t *e;
			json_array_foreach(ag, i, e) {
				if (!json_is_integer(e) || json_integer_value(e) < 0)
					return BAD("%suser.additionalGids[%zu]: expected a gid", w, i);
				p->gids[p->n_gids++] = (gid_t)json_integer_value(e);
			}
		}
	}
	if (get_strv(proc, "args", w, &p->args, err) < 0 || get_strv(proc, "env", w, &p->env, err) < 0 ||
	    get_str(proc, "cwd", w, &p->cwd, false, err) < 0)
		return -1;
	if (p->cwd && p->cwd[0] != '/')
		return BAD("%scwd: '%s' is not an absolute path", w, p->cwd);
	json_t *caps = json_object_get(proc, "capabilities");
	if (caps && json_is_object(caps) && parse_caps(caps, p, w, err) < 0)
		return -1;
	if (parse_rlimits(json_object_get(proc, "rlimits"), p, w, err) < 0)
		return -1;
	p->no_new_privs = json_is_true(json_object_get(proc, "noNewPrivileges"));
	long long oom = 0;
	if (get_int(proc, "oomScoreAdj", w, &oom, &p->oom_set, err) < 0)
		return -1;
	if (p->oom_set && (oom < -1000 || oom > 1000))
		return BAD("%soomScoreAdj: %lld is outside -1000..1000", w, oom);
	p->oom_score_adj = (int)oom;
	return 0;
}

/* ---- mounts ----------------------------------------------------------------- */

static const struct { const char *name; bool clear; unsigned long flag; } mount_flags[] = {
	{ "ro", false, MS_RDONLY }, { "rw", true, MS_RDONLY }, { "nosuid", false, MS_NOSUID },
	{ "suid", true, MS_NOSUID }, { "nodev", false, MS_NODEV }, { "dev", true, MS_NODEV },
	{ "noexec", false, MS_NOEXEC }, { "exec", true, MS_NOEXEC }, { "sync", false, MS_SYNCHRONOUS },
	{ "async", true, MS_SYNCHRONOUS }, { "dirsync", false, MS_DIRSYNC }, { "remount", false, MS_REMOUNT },
	{ "mand", false, MS_MANDLOCK }, { "nomand", true, MS_MANDLOCK }, { "atime", true, MS_NOATIME },
	{ "noatime", false, MS_NOATIME }, { "diratime", true, MS_NODIRATIME }, { "nodiratime", false, MS_NODIRATIME },
	{ "relatime", false, MS_RELATIME }, { "norelatime", true, MS_RELATIME },
	{ "strictatime", false, MS_STRICTATIME }, { "nostrictatime", true, MS_STRICTATIME },
	{ "silent", false, MS_SILENT }, { "loud", true, MS_SILENT }, { "iversion", false, MS_I_VERSION },
	{ "noiversion", true, MS_I_VERSION }, { "lazytime", false, MS_LAZYTIME }, { "nolazytime", true, MS_LAZYTIME },
};

static const struct { const char *name; unsigned long flag; } propagations[] = {
	{ "private", MS_PRIVATE }, { "rprivate", MS_PRIVATE | MS_REC }, { "shared", MS_SHARED },
	{ "rshared", MS_SHARED | MS_REC }, { "slave", MS_SLAVE }, { "rslave", MS_SLAVE | MS_REC },
	{ "unbindable", MS_UNBINDABLE }, { "runbindable", MS_UNBINDABLE | MS_REC },
};

static const struct { const char *name; unsigned int attr; } rec_attrs[] = {
	{ "rro", MOUNT_ATTR_RDONLY }, { "rnosuid", MOUNT_ATTR_NOSUID }, { "rnodev", MOUNT_ATTR_NODEV },
	{ "rnoexec", MOUNT_ATTR_NOEXEC }, { "rnoatime", MOUNT_ATTR_NOATIME }, { "rnodiratime", MOUNT_ATTR_NODIRATIME },
};

static int parse_propagation(const char *s, unsigned long *out)
{
	for (size_t i = 0; i < sizeof(propagations) / sizeof(propagations[0]); i++)
		if (!strcmp(s, propagations[i].name)) {
			*out = propagations[i].flag;
			return 0;
		}
	return -1;
}

static int parse_mount(json_t *m, size_t idx, const char *bundle, lc_ctr_mount_t *out, lc_error_t **err)
{
	char w[48];
	snprintf(w, sizeof(w), "mounts[%zu].", idx);
	if (!json_is_object(m))
		return BAD("mounts[%zu]: expected an object", idx);
	if (get_str(m, "destination", w, &out->dst, true, err) < 0 || get_str(m, "type", w, &out->type, false, err) < 0 ||
	    get_str(m, "source", w, &out->src, false, err) < 0)
		return -1;
	if (out->dst[0] != '/') {
		char *abs = lc_strdup_printf("/%s", out->dst);
		free(out->dst);
		out->dst = abs;
	}
	if (present(json_object_get(m, "uidMappings")) || present(json_object_get(m, "gidMappings")))
		return BAD("%suidMappings (idmapped mounts) is not supported by lcrun-oci", w);
	_cleanup_strv_ char **opts = NULL;
	if (get_strv(m, "options", w, &opts, err) < 0)
		return -1;
	_cleanup_free_ char *data = strdup("");
	for (size_t i = 0; opts && opts[i]; i++) {
		const char *o = opts[i];
		bool done = false;
		if (!strcmp(o, "bind") || !strcmp(o, "rbind")) {
			out->bind = true;
			out->rec |= o[0] == 'r';
			continue;
		}
		for (size_t k = 0; !done && k < sizeof(mount_flags) / sizeof(mount_flags[0]); k++)
			if (!strcmp(o, mount_flags[k].name)) {
				if (mount_flags[k].clear)
					out->flags &= ~mount_flags[k].flag;
				else
					out->flags |= mount_flags[k].flag;
				done = true;
			}
		if (!done && parse_propagation(o, &out->propagation) == 0)
			done = true;
		for (size_t k = 0; !done && k < sizeof(rec_attrs) / sizeof(rec_attrs[0]); k++)
			if (!strcmp(o, rec_attrs[k].name)) {
				out->rec_set |= rec_attrs[k].attr;
				done = true;
			}
		if (done)
			continue;
		if (!strncmp(o, "x-", 2))
			continue; /* options for userspace tools (fstab's x-*), never the kernel's */
		if (!strcmp(o, "tmpcopyup") || !strcmp(o, "notmpcopyup")) {
			out->copyup = o[0] == 't';
			continue;
		}
		if (!strcmp(o, "idmap") || !strcmp(o, "ridmap") || !strcmp(o, "copy-symlink") ||
		    (o[0] == 'r' && (!strcmp(o + 1, "rw") || !strcmp(o + 1, "suid") || !strcmp(o + 1, "dev") ||
				     !strcmp(o + 1, "exec") || !strcmp(o + 1, "atime") || !strcmp(o + 1, "relatime") ||
				     !strcmp(o + 1, "strictatime"))))
			return BAD("%soptions: '%s' is not supported by lcrun-oci", w, o);
		/* Anything else is the filesystem's own (size=, mode=, gid=…). */
		char *nd = lc_strdup_printf("%s%s%s", data, *data ? "," : "", o);
		free(data);
		data = nd;
	}
	if (out->type && !strcmp(out->type, "bind"))
		out->bind = true;
	if (out->bind && !out->src)
		return BAD("%ssource: missing for a bind mount", w);
	if (out->bind && out->src[0] != '/') {
		char *abs = lc_strdup_printf("%s/%s", bundle, out->src);
		free(out->src);
		out->src = abs;
	}
	if (!out->bind && !out->type)
		return BAD("%stype: missing (and not a bind mount)", w);
	/* A bind takes no filesystem data: mount(8) and runc pass it to the
	 * kernel, which ignores it for MS_BIND (the spec's examples give
	 * bind mounts tmpfs-style option lists). */
	if (out->bind)
		*data = '\0';
	if (out->copyup && (out->bind || !out->type || strcmp(out->type, "tmpfs")))
		return BAD("%soptions: 'tmpcopyup' applies to tmpfs mounts only", w);
	if (*data)
		out->data = lc_steal(data);
	return 0;
}

/* ---- linux ---------------------------------------------------------------- */

static int ns_type(const char *s)
{
	static const struct { const char *n; int t; } t[] = {
		{ "pid", CLONE_NEWPID }, { "network", CLONE_NEWNET }, { "mount", CLONE_NEWNS }, { "ipc", CLONE_NEWIPC },
		{ "uts", CLONE_NEWUTS }, { "user", CLONE_NEWUSER }, { "cgroup", CLONE_NEWCGROUP }, { "time", CLONE_NEWTIME },
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (!strcmp(s, t[i].n))
			return t[i].t;
	return 0;
}

static int parse_maps(json_t *v, const char *name, char **out, lc_error_t **err)
{
	if (!v || json_is_null(v) || !json_array_size(v))
		return 0;
	if (!json_is_array(v))
		return BAD("linux.%s: expected an array", name);
	_cleanup_free_ char *s = strdup("");
	size_t i;
	json_t *e;
	json_array_foreach(v, i, e) {
		json_t *c = json_object_get(e, "containerID"), *h = json_object_get(e, "hostID"),
		       *z = json_object_get(e, "size");
		if (!json_is_integer(c) || !json_is_integer(h) || !json_is_integer(z) || json_integer_value(z) <= 0)
			return BAD("linux.%s[%zu]: expected {\"containerID\", \"hostID\", \"size\"}", name, i);
		char *n = lc_strdup_printf("%s%lld %lld %lld\n", s, (long long)json_integer_value(c),
					   (long long)json_integer_value(h), (long long)json_integer_value(z));
		free(s);
		s = n;
	}
	*out = lc_steal(s);
	return 0;
}

static int parse_devices(json_t *v, lc_ctr_spec_t *s, lc_error_t **err)
{
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_array(v))
		return BAD("linux.devices: expected an array");
	s->devices = lc_xmalloc0((json_array_size(v) + 1) * sizeof(lc_ctr_device_t));
	size_t i;
	json_t *e;
	json_array_foreach(v, i, e) {
		char w[40];
		snprintf(w, sizeof(w), "linux.devices[%zu].", i);
		lc_ctr_device_t *d = &s->devices[s->n_devices++];
		_cleanup_free_ char *type = NULL;
		long long maj = 0, min = 0, mode = 0666, uid = 0, gid = 0;
		bool mset = false, jset = false;
		if (get_str(e, "path", w, &d->path, true, err) < 0 || get_str(e, "type", w, &type, true, err) < 0 ||
		    get_int(e, "major", w, &maj, &jset, err) < 0 || get_int(e, "minor", w, &min, &mset, err) < 0 ||
		    get_int(e, "fileMode", w, &mode, NULL, err) < 0 || get_int(e, "uid", w, &uid, NULL, err) < 0 ||
		    get_int(e, "gid", w, &gid, NULL, err) < 0)
			return -1;
		if (d->path[0] != '/' || strstr(d->path, "/../") || strncmp(d->path, "/dev/", 5))
			return BAD("%spath: '%s' must be an absolute path under /dev", w, d->path);
		if (strlen(type) != 1 || !strchr("cbup", type[0]))
			return BAD("%stype: '%s' is not one of c, b, u, p", w, type);
		d->type = type[0] == 'u' ? 'c' : type[0];
		if (d->type != 'p' && (!jset || !mset))
			return BAD("%smajor/minor: required for type %s", w, type);
		d->major = (unsigned)maj;
		d->minor = (unsigned)min;
		d->mode = (mode_t)(mode & 07777);
		d->uid = (uid_t)uid;
		d->gid = (gid_t)gid;
	}
	return 0;
}

static int parse_devrules(json_t *v, lc_ctr_spec_t *s, lc_error_t **err)
{
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_array(v))
		return BAD("linux.resources.devices: expected an array");
	s->devrules = lc_xmalloc0((json_array_size(v) + 1) * sizeof(lc_ctr_devrule_t));
	size_t i;
	json_t *e;
	json_array_foreach(v, i, e) {
		lc_ctr_devrule_t *r = &s->devrules[s->n_devrules++];
		json_t *allow = json_object_get(e, "allow");
		if (!json_is_boolean(allow))
			return BAD("linux.resources.devices[%zu].allow: expected a boolean", i);
		r->allow = json_is_true(allow);
		const char *type = lc_json_str(e, "type");
		r->type = type && *type ? type[0] : 'a';
		if (type && (strlen(type) != 1 || !strchr("acb", type[0])))
			return BAD("linux.resources.devices[%zu].type: '%s' is not one of a, c, b", i, type);
		json_t *maj = json_object_get(e, "major"), *min = json_object_get(e, "minor");
		r->major = json_is_integer(maj) ? json_integer_value(maj) : -1;
		r->minor = json_is_integer(min) ? json_integer_value(min) : -1;
		const char *acc = lc_json_str(e, "access");
		r->access = acc ? 0 : LC_DEV_READ | LC_DEV_WRITE | LC_DEV_MKNOD;
		for (const char *a = acc; a && *a; a++) {
			if (*a == 'r')
				r->access |= LC_DEV_READ;
			else if (*a == 'w')
				r->access |= LC_DEV_WRITE;
			else if (*a == 'm')
				r->access |= LC_DEV_MKNOD;
			else
				return BAD("linux.resources.devices[%zu].access: '%s' is not made of r, w, m", i, acc);
		}
	}
	return 0;
}

static bool cg_has(const char *c)
{
	return lc_cgroup_has_controller(c);
}

static int need_controller(const char *field, const char *ctl, lc_error_t **err)
{
	if (cg_has(ctl))
		return 0;
	lc_cg_mode_t mode;
	const char *root = lc_cgroup_root(&mode);
	return lc_error_set(err, LC_EXIT_RUNTIME, 0,
			    "%s needs the cgroup v2 '%s' controller, which this host does not offer (%s host, v2 at %s)",
			    field, ctl, lc_cgroup_mode_name(mode), root ? root : "nowhere");
}

static int parse_resources(json_t *r, lc_ctr_spec_t *s, lc_error_t **err)
{
	if (!r || json_is_null(r))
		return 0;
	if (!json_is_object(r))
		return BAD("linux.resources: expected an object");
	static const char *const no[] = { "hugepageLimits", "network", "rdma", NULL };
	if (refuse(r, "linux.resources.", no, err) < 0)
		return -1;
	if (parse_devrules(json_object_get(r, "devices"), s, err) < 0)
		return -1;
	json_t *mem = json_object_get(r, "memory");
	if (present(mem)) {
		static const char *const mno[] = { "kernel", "kernelTCP", "swappiness", "disableOOMKiller",
						   "checkBeforeUpdate", NULL };
		if (refuse(mem, "linux.resources.memory.", mno, err) < 0)
			return -1;
		long long limit = 0, swap = 0, res = 0;
		bool lset, sset, rset;
		if (get_int(mem, "limit", "linux.resources.memory.", &limit, &lset, err) < 0 ||
		    get_int(mem, "swap", "linux.resources.memory.", &swap, &sset, err) < 0 ||
		    get_int(mem, "reservation", "linux.resources.memory.", &res, &rset, err) < 0)
			return -1;
		if ((lset || sset || rset) && need_controller("linux.resources.memory", "memory", err) < 0)
			return -1;
		if (lset && limit > 0) {
			s->limits.memory = limit;
			/* OCI's swap is memory+swap; memory.swap.max is swap alone. */
			if (sset && swap > 0) {
				if (swap < limit)
					return BAD("linux.resources.memory.swap: %lld is below the limit %lld", swap, limit);
				s->limits.memory_swap = swap - limit;
			} else {
				s->limits.memory_swap = LLONG_MAX / 2; /* unset or -1: no swap limit */
			}
		}
		if (rset && res > 0) {
			char *u = lc_strdup_printf("memory.low=%lld", res);
			lc_strv_push(&s->unified, u);
			free(u);
		}
	}
	json_t *cpu = json_object_get(r, "cpu");
	if (present(cpu)) {
		static const char *const cno[] = { "realtimeRuntime", "realtimePeriod", NULL };
		if (refuse(cpu, "linux.resources.cpu.", cno, err) < 0)
			return -1;
		long long shares = 0, quota = 0, period = 0, idle = 0;
		bool shset, qset, pset, iset;
		if (get_int(cpu, "shares", "linux.resources.cpu.", &shares, &shset, err) < 0 ||
		    get_int(cpu, "quota", "linux.resources.cpu.", &quota, &qset, err) < 0 ||
		    get_int(cpu, "period", "linux.resources.cpu.", &period, &pset, err) < 0 ||
		    get_int(cpu, "idle", "linux.resources.cpu.", &idle, &iset, err) < 0)
			return -1;
		/* shares are a weight among contending siblings, not a bound.
		 * Where cgroup v2 has no cpu controller (a hybrid host) there is
		 * nothing to weigh with: the container runs with its parent's
		 * share, as it would at the default (1024 = cpu.weight 100).
		 * containerd's CRI always sends shares (2 for a pod sandbox), so
		 * they are not applied, with a warning, instead of failing the
		 * pod; a quota (a bound) is still refused below. */
		if (shset && !cg_has("cpu")) {
			if (shares != 1024)
				oci_warn("linux.resources.cpu.shares %lld not applied: this host's cgroup v2 has no cpu "
					 "controller", shares);
			shset = false;
		}
		if ((shset && shares > 0) || (qset && quota != 0) || (iset && idle)) {
			if (need_controller("linux.resources.cpu", "cpu", err) < 0)
				return -1;
		}
		if (shset && shares > 0) /* runc's conversion of v1 shares to cpu.weight */
			s->limits.cpu_weight = (int)(1 + ((shares < 2 ? 2 : shares) - 2) * 9999 / 262142);
		if (qset && quota != 0) {
			char *u = quota > 0 ? lc_strdup_printf("cpu.max=%lld %lld", quota, pset && period > 0 ? period : 100000)
					    : lc_strdup_printf("cpu.max=max %lld", pset && period > 0 ? period : 100000);
			lc_strv_push(&s->unified, u);
			free(u);
		}
		if (iset && idle) {
			char *u = lc_strdup_printf("cpu.idle=%lld", idle);
			lc_strv_push(&s->unified, u);
			free(u);
		}
		const char *cpus = lc_json_str(cpu, "cpus");
		const char *mems = lc_json_str(cpu, "mems");
		if ((cpus && *cpus) || (mems && *mems)) {
			if (need_controller("linux.resources.cpu.cpus/mems", "cpuset", err) < 0)
				return -1;
			if (cpus && *cpus) {
				char *u = lc_strdup_printf("cpuset.cpus=%s", cpus);
				lc_strv_push(&s->unified, u);
				free(u);
			}
			if (mems && *mems) {
				char *u = lc_strdup_printf("cpuset.mems=%s", mems);
				lc_strv_push(&s->unified, u);
				free(u);
			}
		}
	}
	json_t *pids = json_object_get(r, "pids");
	long long plimit = 0;
	bool pset = false;
	if (json_is_object(pids) && get_int(pids, "limit", "linux.resources.pids.", &plimit, &pset, err) < 0)
		return -1;
	if (pset && plimit > 0) {
		if (need_controller("linux.resources.pids.limit", "pids", err) < 0)
			return -1;
		s->limits.pids = plimit;
	} else if (cg_has("pids")) {
		lc_strv_push(&s->unified, "pids.max=max"); /* no default limit for OCI containers */
	}
	json_t *bio = json_object_get(r, "blockIO");
	if (present(bio)) {
		static const char *const bno[] = { "leafWeight", "weightDevice", "throttleReadBpsDevice",
						   "throttleWriteBpsDevice", "throttleReadIOPSDevice",
						   "throttleWriteIOPSDevice", NULL };
		if (refuse(bio, "linux.resources.blockIO.", bno, err) < 0)
			return -1;
		long long w = 0;
		bool wset;
		if (get_int(bio, "weight", "linux.resources.blockIO.", &w, &wset, err) < 0)
			return -1;
		if (wset && w > 0) {
			if (need_controller("linux.resources.blockIO.weight", "io", err) < 0)
				return -1;
			s->limits.io_weight = (int)(1 + (w - 10) * 9999 / 990);
		}
	}
	json_t *uni = json_object_get(r, "unified");
	if (present(uni)) {
		if (!json_is_object(uni))
			return BAD("linux.resources.unified: expected an object");
		const char *k;
		json_t *v;
		json_object_foreach(uni, k, v) {
			if (!json_is_string(v))
				return BAD("linux.resources.unified.%s: expected a string", k);
			char *u = lc_strdup_printf("%s=%s", k, json_string_value(v));
			lc_strv_push(&s->unified, u);
			free(u);
		}
	}
	return 0;
}

/* Sysctls a container may set: those of the namespaces it has of its own. */
static int check_sysctl(const lc_ctr_spec_t *s, const char *key, lc_error_t **err)
{
	int need = 0;
	if (!strncmp(key, "net.", 4))
		need = CLONE_NEWNET;
	else if (!strcmp(key, "kernel.hostname") || !strcmp(key, "kernel.domainname"))
		need = CLONE_NEWUTS;
	else if (!strncmp(key, "kernel.msg", 10) || !strcmp(key, "kernel.sem") || !strncmp(key, "kernel.shm", 10) ||
		 !strncmp(key, "fs.mqueue.", 10))
		need = CLONE_NEWIPC;
	if (!need)
		return BAD("linux.sysctl.%s: not a namespaced sysctl; a container may not set it", key);
	for (size_t i = 0; i < s->n_ns; i++)
		if (s->ns[i].type == need && !s->ns[i].path)
			return 0;
	return BAD("linux.sysctl.%s: needs a %s namespace of the container's own", key,
		   need == CLONE_NEWNET ? "network" : need == CLONE_NEWUTS ? "uts" : "ipc");
}

static int parse_seccomp(json_t *sc, lc_ctr_spec_t *s, lc_error_t **err)
{
	if (!sc || json_is_null(sc))
		return 0;
	if (!json_is_object(sc))
		return BAD("linux.seccomp: expected an object");
	static const char *const no[] = { "listenerPath", "listenerMetadata", NULL };
	if (refuse(sc, "linux.seccomp.", no, err) < 0)
		return -1;
	json_t *flags = json_object_get(sc, "flags");
	if (present(flags)) {
		json_t *f = json_array_get(flags, 0);
		return BAD("linux.seccomp.flags: %s is not supported by lcrun-oci (filters are installed with no flags)",
			   json_is_string(f) ? json_string_value(f) : "(flags)");
	}
	if (!json_is_string(json_object_get(sc, "defaultAction")))
		return BAD("linux.seccomp.defaultAction: missing");
	s->seccomp = json_dumps(sc, JSON_COMPACT);
	return 0;
}

int oci_hooks_parse(json_t *h, lc_ctr_spec_t *s, lc_error_t **err)
{
	static const char *kinds[LC_HOOK_KINDS] = { "prestart", "createRuntime", "createContainer", "startContainer",
						    "poststart", "poststop" };
	if (!h || json_is_null(h))
		return 0;
	if (!json_is_object(h))
		return BAD("hooks: expected an object");
	for (int k = 0; k < LC_HOOK_KINDS; k++) {
		json_t *list = json_object_get(h, kinds[k]);
		if (!list || json_is_null(list))
			continue;
		if (!json_is_array(list))
			return BAD("hooks.%s: expected an array", kinds[k]);
		s->hooks[k] = lc_xmalloc0((json_array_size(list) + 1) * sizeof(lc_ctr_hook_t));
		size_t i;
		json_t *e;
		json_array_foreach(list, i, e) {
			char w[64];
			snprintf(w, sizeof(w), "hooks.%s[%zu].", kinds[k], i);
			lc_ctr_hook_t *hk = &s->hooks[k][s->n_hooks[k]++];
			long long to = 0;
			bool tset;
			if (get_str(e, "path", w, &hk->path, true, err) < 0 || get_strv(e, "args", w, &hk->args, err) < 0 ||
			    get_strv(e, "env", w, &hk->env, err) < 0 || get_int(e, "timeout", w, &to, &tset, err) < 0)
				return -1;
			if (hk->path[0] != '/')
				return BAD("%spath: '%s' is not an absolute path", w, hk->path);
			if (tset && to <= 0)
				return BAD("%stimeout: must be positive", w);
			hk->timeout = (int)to;
		}
	}
	return 0;
}

static int parse_linux(json_t *l, const char *id, lc_ctr_spec_t *s, lc_error_t **err)
{
	if (!l || json_is_null(l))
		return BAD("linux: missing (lcrun-oci runs Linux containers)");
	static const char *const no[] = { "intelRdt", "timeOffsets", "mountLabel", "personality", "memoryPolicy",
					   "netDevices", NULL };
	if (refuse(l, "linux.", no, err) < 0)
		return -1;
	json_t *nss = json_object_get(l, "namespaces");
	if (nss && !json_is_array(nss))
		return BAD("linux.namespaces: expected an array");
	size_t i;
	json_t *e;
	json_array_foreach(nss, i, e) {
		const char *t = lc_json_str(e, "type");
		int type = t ? ns_type(t) : 0;
		if (!type)
			return BAD("linux.namespaces[%zu].type: unknown namespace type '%s'", i, t ? t : "(missing)");
		for (size_t k = 0; k < s->n_ns; k++)
			if (s->ns[k].type == type)
				return BAD("linux.namespaces[%zu]: the %s namespace is listed twice", i, t);
		if (s->n_ns >= 8)
			return BAD("linux.namespaces: too many entries");
		lc_ctr_ns_t *n = &s->ns[s->n_ns++];
		n->type = type;
		char w[48];
		snprintf(w, sizeof(w), "linux.namespaces[%zu].", i);
		if (get_str(e, "path", w, &n->path, false, err) < 0)
			return -1;
		if (n->path && !*n->path) {
			free(n->path);
			n->path = NULL;
		}
		if (n->path && n->path[0] != '/')
			return BAD("%spath: '%s' is not an absolute path", w, n->path);
	}
	bool mnt = false, user = false;
	for (size_t k = 0; k < s->n_ns; k++) {
		mnt |= s->ns[k].type == CLONE_NEWNS;
		user |= s->ns[k].type == CLONE_NEWUSER && !s->ns[k].path;
	}
	/* No mount namespace: the container shares the runtime's, as the spec
	 * says of a type left out.  Its mounts then stand in the host's mount
	 * table under the root (delete takes them away); paths it would mask
	 * would be masked for the host too, so those are refused. */
	if (!mnt && (present(json_object_get(l, "maskedPaths")) || present(json_object_get(l, "readonlyPaths"))))
		return BAD("linux.maskedPaths/readonlyPaths: need a mount namespace of the container's own "
			   "(add {\"type\": \"mount\"} to linux.namespaces)");
	if (parse_maps(json_object_get(l, "uidMappings"), "uidMappings", &s->uid_map, err) < 0 ||
	    parse_maps(json_object_get(l, "gidMappings"), "gidMappings", &s->gid_map, err) < 0)
		return -1;
	if ((s->uid_map || s->gid_map) && !user)
		return BAD("linux.uidMappings: given without a new user namespace");
	if (user && (!s->uid_map || !s->gid_map))
		return BAD("linux.namespaces: a new user namespace needs linux.uidMappings and linux.gidMappings");
	if (parse_devices(json_object_get(l, "devices"), s, err) < 0)
		return -1;
	const char *cgp = lc_json_str(l, "cgroupsPath");
	const char *root = lc_cgroup_root(NULL);
	if (!root)
		return lc_error_set(err, LC_EXIT_RUNTIME, 0, "this host has no cgroup v2 hierarchy mounted");
	if (cgp && strchr(cgp, ':') && cgp[0] != '/')
		return BAD("linux.cgroupsPath: '%s' is a systemd slice:prefix:name path; lcrun-oci manages cgroupfs paths "
			   "only (--systemd-cgroup is not supported)", cgp);
	if (cgp && *cgp) {
		if (strstr(cgp, ".."))
			return BAD("linux.cgroupsPath: '%s' may not contain '..'", cgp);
		s->cgroup = lc_strdup_printf("%s%s%s", root, cgp[0] == '/' ? "" : "/", cgp);
	} else {
		s->cgroup = lc_strdup_printf("%s/lcrun-oci/%s", root, id);
	}
	if (parse_resources(json_object_get(l, "resources"), s, err) < 0)
		return -1;
	if (s->n_devrules) {
		/* As runc: the devices the container gets are always usable, after
		 * whatever the rules say (the default nodes, /dev/console and the
		 * pts, and linux.devices). */
		static const struct { char t; long long maj, min; } always[] = {
			{ 'c', 1, 3 }, { 'c', 1, 5 }, { 'c', 1, 7 }, { 'c', 1, 8 }, { 'c', 1, 9 }, { 'c', 5, 0 },
			{ 'c', 5, 1 }, { 'c', 5, 2 }, { 'c', 136, -1 },
		};
		size_t n = sizeof(always) / sizeof(always[0]);
		s->devrules = realloc(s->devrules, (s->n_devrules + n + s->n_devices) * sizeof(lc_ctr_devrule_t));
		for (size_t k = 0; k < n; k++)
			s->devrules[s->n_devrules++] = (lc_ctr_devrule_t){ true, always[k].t, always[k].maj, always[k].min,
									    LC_DEV_READ | LC_DEV_WRITE | LC_DEV_MKNOD };
		for (size_t k = 0; k < s->n_devices; k++)
			if (s->devices[k].type != 'p')
				s->devrules[s->n_devrules++] = (lc_ctr_devrule_t){ true, s->devices[k].type,
										    s->devices[k].major, s->devices[k].minor,
										    LC_DEV_READ | LC_DEV_WRITE | LC_DEV_MKNOD };
	}
	json_t *sys = json_object_get(l, "sysctl");
	if (present(sys)) {
		const char *k;
		json_t *v;
		json_object_foreach(sys, k, v) {
			if (!json_is_string(v))
				return BAD("linux.sysctl.%s: expected a string", k);
			if (check_sysctl(s, k, err) < 0)
				return -1;
			char *kv = lc_strdup_printf("%s=%s", k, json_string_value(v));
			lc_strv_push(&s->sysctl, kv);
			free(kv);
		}
	}
	if (parse_seccomp(json_object_get(l, "seccomp"), s, err) < 0)
		return -1;
	const char *prop = lc_json_str(l, "rootfsPropagation");
	if (prop && *prop && parse_propagation(prop, &s->rootfs_propagation) < 0)
		return BAD("linux.rootfsPropagation: unknown value '%s'", prop);
	if (get_strv(l, "maskedPaths", "linux.", &s->masked, err) < 0 ||
	    get_strv(l, "readonlyPaths", "linux.", &s->readonly, err) < 0)
		return -1;
	return 0;
}

lc_ctr_spec_t *oci_config_load(const char *bundle, const char *id, lc_error_t **err)
{
	char rb[PATH_MAX];
	if (!realpath(bundle, rb)) {
		lc_error_set(err, LC_EXIT_NOENT, errno, "bundle %s", bundle);
		return NULL;
	}
	_cleanup_free_ char *path = lc_strdup_printf("%s/config.json", rb);
	json_error_t je;
	_cleanup_json_ json_t *c = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
	if (!c) {
		if (access(path, F_OK) < 0)
			lc_error_set(err, LC_EXIT_NOENT, errno, "%s", path);
		else
			lc_error_set(err, LC_EXIT_INVALID, 0, "%s:%d:%d: invalid JSON: %s", path, je.line, je.column, je.text);
		return NULL;
	}
	_cleanup_free_ char *rp = NULL;
	lc_ctr_spec_t *s = lc_ctr_spec_new();
	s->id = strdup(id);
	s->bundle = strdup(rb);
	int r = -1;
	if (!json_is_object(c)) {
		BAD("%s: expected an object", path);
		goto out;
	}
	const char *ver = lc_json_str(c, "ociVersion");
	if (!ver) {
		BAD("ociVersion: missing");
		goto out;
	}
	if (strncmp(ver, "1.", 2)) {
		BAD("ociVersion: %s is not a 1.x runtime-spec version", ver);
		goto out;
	}
	static const char *const no[] = { "windows", "solaris", "vm", "zos", NULL };
	if (refuse(c, "", no, err) < 0)
		goto out;
	json_t *root = json_object_get(c, "root");
	if (!json_is_object(root)) {
		BAD("root: missing");
		goto out;
	}
	if (get_str(root, "path", "root.", &rp, true, err) < 0)
		goto out;
	s->rootfs = rp[0] == '/' ? strdup(rp) : lc_strdup_printf("%s/%s", rb, rp);
	struct stat st;
	if (stat(s->rootfs, &st) < 0 || !S_ISDIR(st.st_mode)) {
		lc_error_set(err, LC_EXIT_NOENT, errno ? errno : ENOTDIR, "root.path %s", s->rootfs);
		goto out;
	}
	s->rootfs_ro = json_is_true(json_object_get(root, "readonly"));
	json_t *proc = json_object_get(c, "process");
	if (!proc) {
		BAD("process: missing");
		goto out;
	}
	if (oci_process_parse(proc, &s->proc, "process", err) < 0)
		goto out;
	if (!s->proc.args || !s->proc.args[0]) {
		BAD("process.args: missing or empty");
		goto out;
	}
	if (!s->proc.cwd) {
		BAD("process.cwd: missing");
		goto out;
	}
	if (get_str(c, "hostname", "", &s->hostname, false, err) < 0 ||
	    get_str(c, "domainname", "", &s->domainname, false, err) < 0)
		goto out;
	if (s->hostname && !*s->hostname) {
		free(s->hostname);
		s->hostname = NULL;
	}
	if (s->domainname && !*s->domainname) {
		free(s->domainname);
		s->domainname = NULL;
	}
	json_t *mounts = json_object_get(c, "mounts");
	if (mounts && !json_is_array(mounts)) {
		BAD("mounts: expected an array");
		goto out;
	}
	s->mounts = lc_xmalloc0((json_array_size(mounts) + 1) * sizeof(lc_ctr_mount_t));
	size_t i;
	json_t *m;
	json_array_foreach(mounts, i, m) {
		if (parse_mount(m, i, rb, &s->mounts[s->n_mounts++], err) < 0)
			goto out;
	}
	if (parse_linux(json_object_get(c, "linux"), id, s, err) < 0)
		goto out;
	/* A uts namespace joined by path is the container's too (runc sets
	 * the name there as well); the host's is not. */
	bool uts = false;
	for (size_t k = 0; k < s->n_ns; k++)
		uts |= s->ns[k].type == CLONE_NEWUTS;
	if ((s->hostname || s->domainname) && !uts) {
		BAD("%s: setting it needs a uts namespace (linux.namespaces type \"uts\")", s->hostname ? "hostname" : "domainname");
		goto out;
	}
	if (oci_hooks_parse(json_object_get(c, "hooks"), s, err) < 0)
		goto out;
	json_t *ann = json_object_get(c, "annotations");
	if (ann && !json_is_null(ann)) {
		if (!json_is_object(ann)) {
			BAD("annotations: expected an object");
			goto out;
		}
		const char *k;
		json_t *v;
		json_object_foreach(ann, k, v)
			if (!json_is_string(v)) {
				BAD("annotations.%s: expected a string", k);
				goto out;
			}
		s->annotations = json_incref(ann);
	}
	r = 0;
out:
	if (r < 0) {
		lc_ctr_spec_free(s);
		return NULL;
	}
	return s;
}

int oci_signal_parse(const char *s)
{
	static const struct { const char *n; int sig; } sigs[] = {
		{ "HUP", SIGHUP }, { "INT", SIGINT }, { "QUIT", SIGQUIT }, { "ILL", SIGILL }, { "TRAP", SIGTRAP },
		{ "ABRT", SIGABRT }, { "IOT", SIGIOT }, { "BUS", SIGBUS }, { "FPE", SIGFPE }, { "KILL", SIGKILL },
		{ "USR1", SIGUSR1 }, { "SEGV", SIGSEGV }, { "USR2", SIGUSR2 }, { "PIPE", SIGPIPE }, { "ALRM", SIGALRM },
		{ "TERM", SIGTERM }, { "STKFLT", SIGSTKFLT }, { "CHLD", SIGCHLD }, { "CONT", SIGCONT },
		{ "STOP", SIGSTOP }, { "TSTP", SIGTSTP }, { "TTIN", SIGTTIN }, { "TTOU", SIGTTOU }, { "URG", SIGURG },
		{ "XCPU", SIGXCPU }, { "XFSZ", SIGXFSZ }, { "VTALRM", SIGVTALRM }, { "PROF", SIGPROF },
		{ "WINCH", SIGWINCH }, { "IO", SIGIO }, { "POLL", SIGPOLL }, { "PWR", SIGPWR }, { "SYS", SIGSYS },
	};
	char *end;
	long n = strtol(s, &end, 10);
	if (*s && !*end)
		return n > 0 && n < NSIG ? (int)n : -1;
	if (!strncasecmp(s, "SIG", 3))
		s += 3;
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		if (!strcasecmp(s, sigs[i].n))
			return sigs[i].sig;
	if (!strncasecmp(s, "RTMIN", 5) || !strncasecmp(s, "RTMAX", 5)) {
		long off = s[5] ? strtol(s + 5, &end, 10) : 0;
		if (s[5] && *end)
			return -1;
		int v = !strncasecmp(s, "RTMIN", 5) ? SIGRTMIN + (int)off : SIGRTMAX + (int)off;
		return v >= SIGRTMIN && v <= SIGRTMAX ? v : -1;
	}
	return -1;
}
