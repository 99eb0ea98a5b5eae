/* seccomp.c — seccomp profiles in the OCI/moby JSON form, compiled with
 * libseccomp to classic BPF, cached by the profile's bytes, installed in the
 * sandbox child right before execve.
 *
 * Profile errors name the file and, where the raw text allows it, the line
 * and column (jansson for syntax; our own scan of the text for names that
 * libseccomp does not know); type errors name the JSON path. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>
#include <linux/seccomp.h>

#define LC_SECCOMP_WANT_LIBSECCOMP /* see seccomp.h */
#include <seccomp.h>
#include <sys/capability.h>

#include "lcrun.h"
#include "seccomp.h"
#include "util.h"

#define LC_SECCOMP_MAGIC "LCBPF\0v1"

/* Header of a sandbox's own copy of its program; the instructions follow. */
struct cache_header {
	char magic[8];
	uint32_t n_insns;
	uint32_t reserved;
	unsigned char digest[32]; /* unused (the cache's files had a SHA-256 here) */
};

/* State of one compilation. */
struct pctx {
	const char *file;  /* for messages */
	const char *text;  /* the raw profile, to find positions */
	size_t len;
	uint64_t caps;
	uint32_t native;
	scmp_filter_ctx f;
	uint32_t def_action;
	bool skip_unknown; /* LC_SECCOMP_SKIP_UNKNOWN */
};

static void seccomp_releasep(scmp_filter_ctx *f)
{
	if (*f)
		seccomp_release(*f);
}

/* ---- messages ------------------------------------------------------------ */

static const char *json_kind(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT: return "an object";
	case JSON_ARRAY: return "an array";
	case JSON_STRING: return "a string";
	case JSON_INTEGER: return "an integer";
	case JSON_REAL: return "a real number";
	case JSON_TRUE:
	case JSON_FALSE: return "a boolean";
	default: return "null";
	}
}

/* 1-based line and column (in characters, as jansson counts them) of byte
 * offset off in the raw text. */
static void offset_to_linecol(const struct pctx *c, size_t off, int *line, int *col)
{
	*line = 1;
	*col = 1;
	for (size_t i = 0; i < off && i < c->len; i++) {
		unsigned char ch = (unsigned char)c->text[i];
		if (ch == '\n') {
			(*line)++;
			*col = 1;
		} else if ((ch & 0xC0) != 0x80) {
			(*col)++;
		}
	}
}

/* Find the first JSON string token in the raw text whose raw content is
 * exactly s and which is a value (not an object key).  Returns its byte
 * offset (the opening quote) or -1. */
static long find_string_value(const struct pctx *c, const char *s)
{
	size_t n = strlen(s);
	for (size_t i = 0; i < c->len; i++) {
		if (c->text[i] != '"')
			continue;
		size_t start = i++;
		while (i < c->len && c->text[i] != '"')
			i += c->text[i] == '\\' ? 2 : 1;
		if (i >= c->len)
			return -1;
		size_t after = i + 1;
		while (after < c->len && isspace((unsigned char)c->text[after]))
			after++;
		bool is_key = after < c->len && c->text[after] == ':';
		if (!is_key && i - start - 1 == n && memcmp(c->text + start + 1, s, n) == 0)
			return (long)start;
	}
	return -1;
}

/* "FILE:LINE:COL: path: message" where value can be found in the text,
 * "FILE: path: message" otherwise.  Always LC_EXIT_INVALID. */
static int __attribute__((format(printf, 5, 6)))
err_at(const struct pctx *c, lc_error_t **err, const char *value, const char *path, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	_cleanup_free_ char *msg = NULL;
	if (vasprintf(&msg, fmt, ap) < 0)
		msg = NULL;
	va_end(ap);
	long off = value ? find_string_value(c, value) : -1;
	if (off >= 0) {
		int line, col;
		offset_to_linecol(c, (size_t)off, &line, &col);
		return lc_error_set(err, LC_EXIT_INVALID, 0, "%s:%d:%d: %s: %s", c->file, line, col, path,
				    msg ? msg : "invalid");
	}
	return lc_error_set(err, LC_EXIT_INVALID, 0, "%s: %s: %s", c->file, path, msg ? msg : "invalid");
}

static int type_error(const struct pctx *c, lc_error_t **err, const char *path, const char *want, const json_t *v)
{
	return lc_error_set(err, LC_EXIT_INVALID, 0, "%s: %s: expected %s, got %s", c->file, path, want,
			    json_kind(v));
}

/* Member key of obj as type t; *out NULL when absent (or JSON null, which
 * the OCI form allows for optional fields). */
static int get_member(const struct pctx *c, json_t *obj, const char *path, const char *key, json_type t,
		      bool required, json_t **out, lc_error_t **err)
{
	static const char *const want[] = {
		[JSON_OBJECT] = "an object", [JSON_ARRAY] = "an array", [JSON_STRING] = "a string",
		[JSON_INTEGER] = "an integer",
	};
	char p[256];
	snprintf(p, sizeof(p), "%s%s%s", path, *path ? "." : "", key);
	json_t *v = json_object_get(obj, key);
	*out = NULL;
	if (!v || json_is_null(v)) {
		if (required)
			return lc_error_set(err, LC_EXIT_INVALID, 0, "%s: %s: missing", c->file, p);
		return 0;
	}
	if (json_typeof(v) != t)
		return type_error(c, err, p, want[t], v);
	*out = v;
	return 0;
}

/* ---- names ----------------------------------------------------------------- */

/* "SCMP_ARCH_X86_64", "x86_64" or a Go name ("amd64") → libseccomp token, 0 if unknown. */
static uint32_t arch_resolve(const char *name)
{
	static const struct { const char *go, *scmp; } go_names[] = {
		{ "amd64", "x86_64" }, { "arm64", "aarch64" }, { "386", "x86" },
		{ "mips64le", "mipsel64" }, { "mipsle", "mipsel" },
	};
	char buf[64];
	if (!strncmp(name, "SCMP_ARCH_", 10))
		name += 10;
	for (size_t i = 0; i < sizeof(go_names) / sizeof(go_names[0]); i++)
		if (!strcmp(name, go_names[i].go))
			name = go_names[i].scmp;
	size_t i = 0;
	for (; name[i] && i < sizeof(buf) - 1; i++)
		buf[i] = (char)tolower((unsigned char)name[i]);
	buf[i] = '\0';
	return seccomp_arch_resolve_name(buf);
}

static int parse_action(const struct pctx *c, const char *name, json_t *errno_ret, const char *path,
			uint32_t *out, lc_error_t **err)
{
	json_int_t data = EPERM; /* OCI: SCMP_ACT_ERRNO without errnoRet is EPERM */
	if (errno_ret) {
		data = json_integer_value(errno_ret);
		if (data < 0 || data > 4095)
			return lc_error_set(err, LC_EXIT_INVALID, 0, "%s: %s: errno %lld is outside 0..4095", c->file,
					    path, (long long)data);
	}
	if (!strcmp(name, "SCMP_ACT_ALLOW"))
		*out = SCMP_ACT_ALLOW;
	else if (!strcmp(name, "SCMP_ACT_ERRNO"))
		*out = SCMP_ACT_ERRNO((uint32_t)data);
	else if (!strcmp(name, "SCMP_ACT_KILL") || !strcmp(name, "SCMP_ACT_KILL_THREAD"))
		*out = SCMP_ACT_KILL_THREAD;
	else if (!strcmp(name, "SCMP_ACT_KILL_PROCESS"))
		*out = SCMP_ACT_KILL_PROCESS;
	else if (!strcmp(name, "SCMP_ACT_TRAP"))
		*out = SCMP_ACT_TRAP;
	else if (!strcmp(name, "SCMP_ACT_TRACE"))
		*out = SCMP_ACT_TRACE((uint32_t)data);
	else if (!strcmp(name, "SCMP_ACT_LOG"))
		*out = SCMP_ACT_LOG;
	else if (!strcmp(name, "SCMP_ACT_NOTIFY"))
		return err_at(c, err, name, path, "SCMP_ACT_NOTIFY is not supported (lcrun runs no listener)");
	else
		return err_at(c, err, name, path, "unknown action \"%s\"", name);
	return 0;
}

static int parse_op(const struct pctx *c, const char *name, const char *path, enum scmp_compare *out,
		    lc_error_t **err)
{
	static const struct { const char *name; enum scmp_compare op; } ops[] = {
		{ "SCMP_CMP_NE", SCMP_CMP_NE }, { "SCMP_CMP_LT", SCMP_CMP_LT },
		{ "SCMP_CMP_LE", SCMP_CMP_LE }, { "SCMP_CMP_EQ", SCMP_CMP_EQ },
		{ "SCMP_CMP_GE", SCMP_CMP_GE }, { "SCMP_CMP_GT", SCMP_CMP_GT },
		{ "SCMP_CMP_MASKED_EQ", SCMP_CMP_MASKED_EQ },
	};
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
		if (!strcmp(name, ops[i].name)) {
			*out = ops[i].op;
			return 0;
		}
	return err_at(c, err, name, path, "unknown comparison \"%s\"", name);
}

/* ---- includes / excludes --------------------------------------------------- */

static int kernel_at_least(const char *want, const struct pctx *c, const char *path, bool *ok, lc_error_t **err)
{
	unsigned wmaj, wmin, kmaj, kmin;
	struct utsname u;
	if (sscanf(want, "%u.%u", &wmaj, &wmin) != 2)
		return err_at(c, err, want, path, "\"%s\" is not a kernel version (X.Y)", want);
	if (uname(&u) < 0 || sscanf(u.release, "%u.%u", &kmaj, &kmin) != 2)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot read the kernel version");
	*ok = kmaj > wmaj || (kmaj == wmaj && kmin >= wmin);
	return 0;
}

/* Does a string array (caps or arches) hold a match?  all: every entry must
 * match (includes.caps); otherwise any entry (the rest). */
static int list_matches(const struct pctx *c, json_t *list, const char *path, bool is_caps, bool all,
			bool *out, lc_error_t **err)
{
	size_t i;
	json_t *v;
	bool any = false, every = true;
	json_array_foreach(list, i, v) {
		char p[256];
		snprintf(p, sizeof(p), "%s[%zu]", path, i);
		if (!json_is_string(v))
			return type_error(c, err, p, "a string", v);
		const char *s = json_string_value(v);
		bool m;
		if (is_caps) {
			char low[64];
			size_t k = 0;
			for (; s[k] && k < sizeof(low) - 1; k++)
				low[k] = (char)tolower((unsigned char)s[k]);
			low[k] = '\0';
			cap_value_t cv;
			if (cap_from_name(low, &cv) < 0 || cv < 0 || cv > 63)
				return err_at(c, err, s, p, "unknown capability \"%s\"", s);
			m = (c->caps >> cv) & 1;
		} else {
			m = arch_resolve(s) == c->native;
		}
		any |= m;
		every &= m;
	}
	*out = all ? every : any;
	return 0;
}

/* Should the rule group at path apply on this host for these caps? */
static int group_applies(const struct pctx *c, json_t *group, const char *path, bool *applies, lc_error_t **err)
{
	*applies = true;
	for (int inc = 1; inc >= 0; inc--) {
		const char *key = inc ? "includes" : "excludes";
		json_t *cond, *caps, *arches, *mink;
		char p[256];
		snprintf(p, sizeof(p), "%s.%s", path, key);
		if (get_member(c, group, path, key, JSON_OBJECT, false, &cond, err) < 0)
			return -1;
		if (!cond)
			continue;
		if (get_member(c, cond, p, "caps", JSON_ARRAY, false, &caps, err) < 0 ||
		    get_member(c, cond, p, "arches", JSON_ARRAY, false, &arches, err) < 0 ||
		    get_member(c, cond, p, "minKernel", JSON_STRING, false, &mink, err) < 0)
			return -1;
		char sub[320];
		bool m;
		if (caps && json_array_size(caps)) {
			snprintf(sub, sizeof(sub), "%s.caps", p);
			if (list_matches(c, caps, sub, true, inc, &m, err) < 0)
				return -1;
			if (inc ? !m : m)
				*applies = false;
		}
		if (arches && json_array_size(arches)) {
			snprintf(sub, sizeof(sub), "%s.arches", p);
			if (list_matches(c, arches, sub, false, false, &m, err) < 0)
				return -1;
			if (inc ? !m : m)
				*applies = false;
		}
		if (mink) {
			snprintf(sub, sizeof(sub), "%s.minKernel", p);
			if (kernel_at_least(json_string_value(mink), c, sub, &m, err) < 0)
				return -1;
			if (inc ? !m : m)
				*applies = false;
		}
	}
	return 0;
}

/* ---- rules ------------------------------------------------------------------ */

static int parse_args(const struct pctx *c, json_t *args, const char *path, struct scmp_arg_cmp *cmp,
		      unsigned *n, lc_error_t **err)
{
	size_t i;
	json_t *a;
	*n = 0;
	if (json_array_size(args) > 6)
		return lc_error_set(err, LC_EXIT_INVALID, 0, "%s: %s: at most 6 argument conditions", c->file, path);
	json_array_foreach(args, i, a) {
		char p[256];
		snprintf(p, sizeof(p), "%s[%zu]", path, i);
		if (!json_is_object(a))
			return type_error(c, err, p, "an object", a);
		json_t *index, *value, *value2, *op;
		if (get_member(c, a, p, "index", JSON_INTEGER, true, &index, err) < 0 ||
		    get_member(c, a, p, "value", JSON_INTEGER, false, &value, err) < 0 ||
		    get_member(c, a, p, "valueTwo", JSON_INTEGER, false, &value2, err) < 0 ||
		    get_member(c, a, p, "op", JSON_STRING, true, &op, err) < 0)
			return -1;
		json_int_t idx = json_integer_value(index);
		if (idx < 0 || idx > 5)
			return lc_error_set(err, LC_EXIT_INVALID, 0, "%s: %s.index: %lld is outside 0..5", c->file, p,
					    (long long)idx);
		char op_path[300];
		snprintf(op_path, sizeof(op_path), "%s.op", p);
		enum scmp_compare o = SCMP_CMP_EQ;
		if (parse_op(c, json_string_value(op), op_path, &o, err) < 0)
			return -1;
		cmp[i] = (struct scmp_arg_cmp){
			.arg = (unsigned)idx,
			.op = o,
			.datum_a = value ? (scmp_datum_t)json_integer_value(value) : 0,
			.datum_b = value2 ? (scmp_datum_t)json_integer_value(value2) : 0,
		};
		(*n)++;
	}
	return 0;
}

/* Names of a group: "names" (OCI) or the older single "name". */
static int group_names(const struct pctx *c, json_t *group, const char *path, json_t **names, json_t **single,
		       lc_error_t **err)
{
	if (get_member(c, group, path, "names", JSON_ARRAY, false, names, err) < 0 ||
	    get_member(c, group, path, "name", JSON_STRING, false, single, err) < 0)
		return -1;
	if (!*names && !*single)
		return lc_error_set(err, LC_EXIT_INVALID, 0, "%s: %s.names: missing", c->file, path);
	return 0;
}

static int add_rule(struct pctx *c, const char *name, const char *path, uint32_t action, bool apply,
		    const struct scmp_arg_cmp *cmp, unsigned n_cmp, lc_error_t **err)
{
	int nr = seccomp_syscall_resolve_name(name);
	if (nr == __NR_SCMP_ERROR && c->skip_unknown)
		return 0;
	if (nr == __NR_SCMP_ERROR)
		return err_at(c, err, name, path, "unknown syscall \"%s\" (libseccomp %u.%u.%u does not know it)",
			      name, seccomp_version()->major, seccomp_version()->minor, seccomp_version()->micro);
	/* libseccomp refuses a rule that repeats the default action; it is a no-op anyway. */
	if (!apply || action == c->def_action)
		return 0;
	int r = seccomp_rule_add_array(c->f, action, nr, n_cmp, cmp);
	if (r < 0)
		return lc_error_set(err, LC_EXIT_INVALID, -r, "%s: %s: libseccomp refused the rule for \"%s\"",
				    c->file, path, name);
	return 0;
}

static int add_group(struct pctx *c, json_t *group, size_t gi, lc_error_t **err)
{
	char path[64];
	snprintf(path, sizeof(path), "syscalls[%zu]", gi);
	if (!json_is_object(group))
		return type_error(c, err, path, "an object", group);
	json_t *names, *single, *action, *errno_ret, *args;
	if (group_names(c, group, path, &names, &single, err) < 0 ||
	    get_member(c, group, path, "action", JSON_STRING, true, &action, err) < 0 ||
	    get_member(c, group, path, "errnoRet", JSON_INTEGER, false, &errno_ret, err) < 0 ||
	    get_member(c, group, path, "args", JSON_ARRAY, false, &args, err) < 0)
		return -1;
	char p[128];
	snprintf(p, sizeof(p), "%s.action", path);
	uint32_t act;
	if (parse_action(c, json_string_value(action), errno_ret, p, &act, err) < 0)
		return -1;
	struct scmp_arg_cmp cmp[6];
	unsigned n_cmp = 0;
	snprintf(p, sizeof(p), "%s.args", path);
	if (args && parse_args(c, args, p, cmp, &n_cmp, err) < 0)
		return -1;
	bool apply;
	if (group_applies(c, group, path, &apply, err) < 0)
		return -1;
	if (single) {
		snprintf(p, sizeof(p), "%s.name", path);
		return add_rule(c, json_string_value(single), p, act, apply, cmp, n_cmp, err);
	}
	size_t i;
	json_t *n;
	json_array_foreach(names, i, n) {
		snprintf(p, sizeof(p), "%s.names[%zu]", path, i);
		if (!json_is_string(n))
			return type_error(c, err, p, "a string", n);
		if (add_rule(c, json_string_value(n), p, act, apply, cmp, n_cmp, err) < 0)
			return -1;
	}
	return 0;
}

static int add_arch(struct pctx *c, json_t *v, const char *path, lc_error_t **err)
{
	if (!json_is_string(v))
		return type_error(c, err, path, "a string", v);
	const char *name = json_string_value(v);
	uint32_t a = arch_resolve(name);
	if (!a)
		return err_at(c, err, name, path, "unknown architecture \"%s\"", name);
	int r = seccomp_arch_add(c->f, a);
	if (r < 0 && r != -EEXIST)
		return lc_error_set(err, LC_EXIT_INVALID, -r, "%s: %s: cannot add architecture %s", c->file, path, name);
	return 0;
}

static int add_arches(struct pctx *c, json_t *root, lc_error_t **err)
{
	json_t *list, *map, *v;
	size_t i;
	if (get_member(c, root, "", "architectures", JSON_ARRAY, false, &list, err) < 0 ||
	    get_member(c, root, "", "archMap", JSON_ARRAY, false, &map, err) < 0)
		return -1;
	char p[128];
	if (list)
		json_array_foreach(list, i, v) {
			snprintf(p, sizeof(p), "architectures[%zu]", i);
			if (add_arch(c, v, p, err) < 0)
				return -1;
		}
	if (!map)
		return 0;
	/* moby's form: the entry for the native architecture lists the others. */
	json_array_foreach(map, i, v) {
		snprintf(p, sizeof(p), "archMap[%zu]", i);
		if (!json_is_object(v))
			return type_error(c, err, p, "an object", v);
		json_t *arch, *subs, *s;
		size_t k;
		if (get_member(c, v, p, "architecture", JSON_STRING, true, &arch, err) < 0 ||
		    get_member(c, v, p, "subArchitectures", JSON_ARRAY, false, &subs, err) < 0)
			return -1;
		if (arch_resolve(json_string_value(arch)) != c->native || !subs)
			continue;
		json_array_foreach(subs, k, s) {
			char sp[320];
			snprintf(sp, sizeof(sp), "%s.subArchitectures[%zu]", p, k);
			if (add_arch(c, s, sp, err) < 0)
				return -1;
		}
	}
	return 0;
}

/* Export the filter as BPF through a memfd. */
static int export_bpf(struct pctx *c, lc_seccomp_prog_t *prog, lc_error_t **err)
{
	_cleanup_close_ int fd = lc_memfd_noexec("lcrun-seccomp");
	if (fd < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot create a memfd for the seccomp filter");
	int r = seccomp_export_bpf(c->f, fd);
	if (r < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, -r, "%s: cannot export the seccomp filter", c->file);
	struct stat st;
	if (fstat(fd, &st) < 0 || lseek(fd, 0, SEEK_SET) < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot read back the seccomp filter");
	size_t n = (size_t)st.st_size / sizeof(struct sock_filter);
	if (n == 0 || (size_t)st.st_size % sizeof(struct sock_filter))
		return lc_error_set(err, LC_EXIT_RUNTIME, 0, "%s: libseccomp exported %lld bytes, not whole BPF instructions",
				    c->file, (long long)st.st_size);
	uint32_t tree = 0;
	if (n > BPF_MAXINSNS && seccomp_attr_get(c->f, SCMP_FLTATR_CTL_OPTIMIZE, &tree) == 0 && tree == 2 &&
	    seccomp_attr_set(c->f, SCMP_FLTATR_CTL_OPTIMIZE, 1) == 0)
		return export_bpf(c, prog, err); /* the tree is longer than the list: a list, then */
	if (n > BPF_MAXINSNS)
		return lc_error_set(err, LC_EXIT_INVALID, 0, "%s: the filter needs %zu BPF instructions, the kernel takes %d",
				    c->file, n, BPF_MAXINSNS);
	_cleanup_free_ struct sock_filter *insns = lc_xmalloc0(n * sizeof(*insns));
	if (lc_read_all(fd, insns, n * sizeof(*insns)) != (ssize_t)(n * sizeof(*insns)))
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot read back the seccomp filter");
	prog->filter = lc_steal(insns);
	prog->len = (unsigned short)n;
	prog->unconfined = false;
	return 0;
}

/* Parse text (the content of file) and compile it into prog. */
static int compile_buf(const char *file, const char *text, size_t len, uint64_t caps, unsigned flags,
		       lc_seccomp_prog_t *prog, lc_error_t **err)
{
	struct pctx c = { .file = file, .text = text, .len = len, .caps = caps, .native = seccomp_arch_native(),
			  .skip_unknown = flags & LC_SECCOMP_SKIP_UNKNOWN };
	json_error_t je;
	_cleanup_json_ json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
	if (!root)
		return lc_error_set(err, LC_EXIT_INVALID, 0, "%s:%d:%d: invalid JSON: %s", file, je.line, je.column,
				    je.text);
	if (!json_is_object(root))
		return type_error(&c, err, "(top level)", "an object", root);

	json_t *def, *def_errno, *syscalls, *g;
	if (get_member(&c, root, "", "defaultAction", JSON_STRING, true, &def, err) < 0 ||
	    get_member(&c, root, "", "defaultErrnoRet", JSON_INTEGER, false, &def_errno, err) < 0 ||
	    get_member(&c, root, "", "syscalls", JSON_ARRAY, false, &syscalls, err) < 0)
		return -1;
	if (parse_action(&c, json_string_value(def), def_errno, "defaultAction", &c.def_action, err) < 0)
		return -1;

	__attribute__((cleanup(seccomp_releasep))) scmp_filter_ctx f = seccomp_init(c.def_action);
	if (!f)
		return lc_error_set(err, LC_EXIT_RUNTIME, 0, "%s: libseccomp cannot start a filter", file);
	c.f = f;
	/* A syscall of an architecture the profile does not list ends the process. */
	seccomp_attr_set(f, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
	/* A binary tree of the syscall numbers, not a list: the kernel's
	 * attach (it checks the filter, translates it and runs it for every
	 * syscall number to fill its cache) takes 0.39 ms instead of 0.88 ms
	 * for the default profile, on every run and exec; each syscall then
	 * walks log(n) comparisons, not n. */
	seccomp_attr_set(f, SCMP_FLTATR_CTL_OPTIMIZE, 2);
	if (add_arches(&c, root, err) < 0)
		return -1;
	size_t i;
	if (syscalls)
		json_array_foreach(syscalls, i, g)
			if (add_group(&c, g, i, err) < 0)
				return -1;
	return export_bpf(&c, prog, err);
}

int lc_seccomp_compile_file(const char *path, lc_seccomp_prog_t *prog, lc_error_t **err)
{
	_cleanup_free_ char *text = NULL;
	size_t len;
	*prog = (lc_seccomp_prog_t){ 0 };
	if (lc_read_file(path, &text, &len, err) < 0)
		return lc_error_wrap(err, "seccomp profile");
	return compile_buf(path, text, len, 0, 0, prog, err);
}

/* ---- cache ------------------------------------------------------------------
 *
 * lc_lib_dir()/seccomp/<index>.bpf, the directory root's (or the rootless
 * user's) and 0700.  The index is a fast 64-bit hash of the key: the
 * profile's bytes, a newline and everything else the compiled output
 * depends on.  The file holds the whole key, compared byte for byte on
 * load, so two keys with one index only cost a recompile (the later one
 * replaces the earlier), never a wrong filter; no libcrypto is loaded for
 * it.  A 64-bit check of the instructions catches a damaged file. */

#define LC_SECCOMP_CACHE_MAGIC "LCBPF\0k3"

struct cache_key_header {
	char magic[8];
	uint32_t n_insns;
	uint32_t key_len;
	uint64_t check; /* lc_hash64 of the instructions, seeded with key_len */
};

/* The key for buf under caps and flags; *klen set. */
static char *cache_key(const void *buf, size_t len, uint64_t caps, unsigned flags, size_t *klen, lc_error_t **err)
{
	/* Everything the compiled output depends on besides the profile. */
	const struct scmp_version *v = seccomp_version();
	struct utsname u;
	if (uname(&u) < 0) {
		lc_error_set(err, LC_EXIT_RUNTIME, errno, "uname");
		return NULL;
	}
	_cleanup_free_ char *env = lc_strdup_printf("lcrun-seccomp-v3 libseccomp=%u.%u.%u arch=%08x kernel=%s caps=%016llx%s",
						    v->major, v->minor, v->micro, seccomp_arch_native(), u.release,
						    (unsigned long long)caps, flags & LC_SECCOMP_SKIP_UNKNOWN ? " skip-unknown" : "");
	size_t elen = strlen(env);
	char *key = lc_xmalloc0(len + 1 + elen);
	memcpy(key, buf, len);
	key[len] = '\n';
	memcpy(key + len + 1, env, elen);
	*klen = len + 1 + elen;
	return key;
}

static char *cache_path(const char *key, size_t klen)
{
	return lc_strdup_printf("%s/seccomp/%016llx.bpf", lc_lib_dir(), (unsigned long long)lc_hash64(key, klen, 0));
}

char *lc_seccomp_cache_path(const void *buf, size_t len, uint64_t caps, lc_error_t **err)
{
	size_t klen;
	_cleanup_free_ char *key = cache_key(buf, len, caps, 0, &klen, err);
	return key ? cache_path(key, klen) : NULL;
}

/* Only a file we wrote ourselves may turn into a filter. */
static bool ours(int fd, struct stat *st)
{
	return fstat(fd, st) == 0 && S_ISREG(st->st_mode) && st->st_uid == geteuid() && !(st->st_mode & 022);
}

/* The checks of cache_load on the file's content (1: prog filled). */
static int cache_check(const char *buf, size_t size, const char *key, size_t klen, lc_seccomp_prog_t *prog)
{
	struct cache_key_header h;
	memcpy(&h, buf, sizeof(h));
	size_t bytes = (size_t)h.n_insns * sizeof(struct sock_filter);
	if (memcmp(h.magic, LC_SECCOMP_CACHE_MAGIC, 8) || h.n_insns == 0 || h.n_insns > BPF_MAXINSNS ||
	    h.key_len != klen || size != sizeof(h) + klen + bytes || memcmp(buf + sizeof(h), key, klen))
		return 0;
	const char *insns = buf + sizeof(h) + klen;
	if (lc_hash64(insns, bytes, klen) != h.check)
		return 0;
	prog->filter = lc_xmalloc0(bytes);
	memcpy(prog->filter, insns, bytes);
	prog->len = (unsigned short)h.n_insns;
	prog->unconfined = false;
	return 1;
}

/* 1 when path holds the program for key (prog filled), 0 otherwise. */
static int cache_load(const char *path, const char *key, size_t klen, lc_seccomp_prog_t *prog)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	struct cache_key_header h;
	if (fd < 0 || !ours(fd, &st) || (size_t)st.st_size < sizeof(h) ||
	    (size_t)st.st_size > sizeof(h) + klen + BPF_MAXINSNS * sizeof(struct sock_filter))
		return 0;
	/* Mapped, not read into fresh heap: the page cache's pages, a few
	 * faults for the whole file instead of one each 4 KiB.  The file is
	 * only ever replaced by a rename (cache_store), never cut short
	 * under a reader. */
	size_t size = (size_t)st.st_size;
	void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (map == MAP_FAILED)
		return 0;
	int r = cache_check(map, size, key, klen, prog);
	munmap(map, size);
	return r;
}

static int cache_store(const char *path, const char *key, size_t klen, const lc_seccomp_prog_t *prog,
		       lc_error_t **err)
{
	/* The lib dir is shared with the rest of lcrun: only ours is private. */
	_cleanup_free_ char *dir = strdup(path);
	*strrchr(dir, '/') = '\0';
	if (lc_lib_dir_hold(err) < 0)
		return -1;
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot create directory %s", dir);
	if (chmod(dir, 0700) < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot make %s private", dir);
	size_t bytes = (size_t)prog->len * sizeof(struct sock_filter);
	struct cache_key_header h = { .n_insns = prog->len, .key_len = (uint32_t)klen,
				      .check = lc_hash64(prog->filter, bytes, klen) };
	memcpy(h.magic, LC_SECCOMP_CACHE_MAGIC, 8);
	size_t size = sizeof(h) + klen + bytes;
	_cleanup_free_ char *buf = lc_xmalloc0(size);
	memcpy(buf, &h, sizeof(h));
	memcpy(buf + sizeof(h), key, klen);
	memcpy(buf + sizeof(h) + klen, prog->filter, bytes);
	return lc_write_file_atomic(path, buf, size, 0600, err);
}

/* ---- a sandbox's own copy ---------------------------------------------------
 *
 * What its execs get: the program the sandbox was created with, whatever
 * became of the profile since, read back without hashing anything.  The
 * file lives in the sandbox's private (0700) state directory, written
 * whole by a rename at create: unlike the shared, long-lived cache it
 * needs no key or check to be trusted, only the checks that it is ours
 * and well formed.  The format is the one of sandboxes made before the
 * cache changed (a header of no instructions stands for "unconfined"; its
 * digest field is unused). */

/* The saved copy's bytes (header and instructions), *size set; NULL
 * without a prepared program. */
static char *saved_bytes(const lc_seccomp_prog_t *prog, size_t *size, lc_error_t **err)
{
	if (!prog->unconfined && (!prog->filter || !prog->len)) {
		lc_error_set(err, LC_EXIT_RUNTIME, EINVAL, "no seccomp filter was prepared");
		return NULL;
	}
	size_t n = prog->unconfined ? 0 : prog->len;
	size_t bytes = n * sizeof(struct sock_filter);
	struct cache_header h = { .n_insns = (uint32_t)n };
	memcpy(h.magic, LC_SECCOMP_MAGIC, 8);
	char *buf = lc_xmalloc0(sizeof(h) + bytes);
	memcpy(buf, &h, sizeof(h));
	if (bytes)
		memcpy(buf + sizeof(h), prog->filter, bytes);
	*size = sizeof(h) + bytes;
	return buf;
}

int lc_seccomp_save(const lc_seccomp_prog_t *prog, const char *path, lc_error_t **err)
{
	size_t size;
	_cleanup_free_ char *buf = saved_bytes(prog, &size, err);
	return buf ? lc_write_file_atomic(path, buf, size, 0600, err) : -1;
}

int lc_seccomp_memfd(const lc_seccomp_prog_t *prog, lc_error_t **err)
{
	size_t size;
	_cleanup_free_ char *buf = saved_bytes(prog, &size, err);
	if (!buf)
		return -1;
	int fd = lc_memfd_noexec("lcrun-seccomp");
	if (fd < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot create a memfd for the seccomp filter");
	if (lc_write_all(fd, buf, size) < 0) {
		int e = errno;
		close(fd);
		return lc_error_set(err, LC_EXIT_RUNTIME, e, "cannot write the seccomp filter to a memfd");
	}
	return fd;
}

/* A saved copy of size bytes on fd, read from its start: 1 and prog
 * filled, or 0. */
static int read_saved(int fd, size_t size, lc_seccomp_prog_t *prog)
{
	struct cache_header h;
	if (size < sizeof(h) || pread(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h))
		return 0;
	if (memcmp(h.magic, LC_SECCOMP_MAGIC, 8) || h.n_insns > BPF_MAXINSNS ||
	    size != sizeof(h) + h.n_insns * sizeof(struct sock_filter))
		return 0;
	if (h.n_insns == 0) {
		*prog = (lc_seccomp_prog_t){ .unconfined = true };
		return 1;
	}
	size_t bytes = h.n_insns * sizeof(struct sock_filter);
	_cleanup_free_ struct sock_filter *insns = lc_xmalloc0(bytes);
	if (pread(fd, insns, bytes, sizeof(h)) != (ssize_t)bytes)
		return 0;
	prog->filter = lc_steal(insns);
	prog->len = (unsigned short)h.n_insns;
	return 1;
}

int lc_seccomp_load_saved(const char *path, lc_seccomp_prog_t *prog)
{
	*prog = (lc_seccomp_prog_t){ 0 };
	_cleanup_close_ int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || !ours(fd, &st))
		return 0;
	return read_saved(fd, (size_t)st.st_size, prog);
}

int lc_seccomp_load_fd(int fd, lc_seccomp_prog_t *prog)
{
	*prog = (lc_seccomp_prog_t){ 0 };
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return 0;
	return read_saved(fd, (size_t)st.st_size, prog);
}

/* ---- public ---------------------------------------------------------------- */

int lc_seccomp_prepare_buf(const char *name, const char *text, size_t len, uint64_t caps, unsigned flags,
			   lc_seccomp_prog_t *prog, lc_error_t **err)
{
	*prog = (lc_seccomp_prog_t){ 0 };
	size_t klen;
	_cleanup_free_ char *key = cache_key(text, len, caps, flags, &klen, err);
	if (!key)
		return -1;
	_cleanup_free_ char *cache = cache_path(key, klen);
	if (cache_load(cache, key, klen, prog))
		return 0;
	if (compile_buf(name, text, len, caps, flags, prog, err) < 0)
		return -1;
	/* The cache only saves time: a read-only or foreign lib dir is no error. */
	_cleanup_error_ lc_error_t *ignored = NULL;
	cache_store(cache, key, klen, prog, &ignored);
	return 0;
}

int lc_seccomp_prepare_caps(const char *profile, uint64_t caps, lc_seccomp_prog_t *prog, lc_error_t **err)
{
	*prog = (lc_seccomp_prog_t){ 0 };
	if (profile && !strcmp(profile, "unconfined")) {
		prog->unconfined = true;
		return 0;
	}
	_cleanup_free_ char *def = profile ? NULL : lc_strdup_printf("%s/default.json", lc_policy_dir());
	const char *path = profile ? profile : def;
	_cleanup_free_ char *text = NULL;
	size_t len;
	if (lc_read_file(path, &text, &len, err) < 0)
		return lc_error_wrap(err, "seccomp profile");
	return lc_seccomp_prepare_buf(path, text, len, caps, 0, prog, err);
}

int lc_seccomp_prepare(const char *profile, lc_seccomp_prog_t *prog, lc_error_t **err)
{
	return lc_seccomp_prepare_caps(profile, 0, prog, err);
}

int lc_seccomp_install(const lc_seccomp_prog_t *prog, lc_error_t **err)
{
	if (prog->unconfined)
		return 0;
	if (!prog->filter || !prog->len)
		return lc_error_set(err, LC_EXIT_RUNTIME, EINVAL, "no seccomp filter was prepared");
	struct sock_fprog fp = { .len = prog->len, .filter = prog->filter };
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fp) < 0) {
		int e = errno;
		return lc_error_set(err, LC_EXIT_RUNTIME, e, "cannot install the seccomp filter%s",
				    e == EACCES ? " (no_new_privs is not set)" : "");
	}
	return 0;
}

void lc_seccomp_prog_free(lc_seccomp_prog_t *prog)
{
	if (!prog)
		return;
	free(prog->filter);
	*prog = (lc_seccomp_prog_t){ 0 };
}
