/* oci_features.c — lcrun-oci features: what this runtime supports (the
 * runtime-spec's features document). */
#include <stdio.h>
#include <stdlib.h>

#include "caps.h"
#include "oci.h"
#include "util.h"

static json_t *strs(const char *const *v)
{
	json_t *a = json_array();
	for (size_t i = 0; v[i]; i++)
		json_array_append_new(a, json_string(v[i]));
	return a;
}

int oci_cmd_features(int argc, char **argv)
{
	(void)argv;
	if (argc != 1)
		return oci_failf("usage: lcrun-oci features");
	static const char *const hooks[] = { "prestart", "createRuntime", "createContainer", "startContainer",
					     "poststart", "poststop", NULL };
	static const char *const mopts[] = {
		"async", "atime", "bind", "dev", "diratime", "dirsync", "exec", "iversion", "lazytime", "loud",
		"mand", "noatime", "nodev", "nodiratime", "noexec", "noiversion", "nolazytime", "nomand",
		"norelatime", "nostrictatime", "nosuid", "private", "rbind", "relatime", "remount", "ro", "rprivate",
		"rshared", "rslave", "runbindable", "rw", "shared", "silent", "slave", "strictatime", "suid",
		"sync", "unbindable", "rro", "rnosuid", "rnodev", "rnoexec", "rnoatime", "rnodiratime", NULL };
	static const char *const ns[] = { "cgroup", "ipc", "mount", "network", "pid", "user", "uts", "time", NULL };
	static const char *const actions[] = { "SCMP_ACT_ALLOW", "SCMP_ACT_ERRNO", "SCMP_ACT_KILL",
					       "SCMP_ACT_KILL_PROCESS", "SCMP_ACT_KILL_THREAD", "SCMP_ACT_LOG",
					       "SCMP_ACT_TRACE", "SCMP_ACT_TRAP", NULL };
	static const char *const ops[] = { "SCMP_CMP_EQ", "SCMP_CMP_GE", "SCMP_CMP_GT", "SCMP_CMP_LE",
					   "SCMP_CMP_LT", "SCMP_CMP_MASKED_EQ", "SCMP_CMP_NE", NULL };
	static const char *const arches[] = { "SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32", NULL };
	json_t *caps = json_array();
	for (int c = 0; c < 64; c++) {
		char name[64];
		if (lc_cap_name(c, name, sizeof(name)) == 0)
			json_array_append_new(caps, json_string(name));
	}
	static const char *const none[] = { NULL };
	/* seccomp flags: known to the spec, none applied (linux.seccomp.flags is refused) */
	static const char *const sflags[] = { "SECCOMP_FILTER_FLAG_TSYNC", "SECCOMP_FILTER_FLAG_LOG",
					      "SECCOMP_FILTER_FLAG_SPEC_ALLOW",
					      "SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV", NULL };
	json_t *lx = json_pack("{s:o, s:o, s:{s:b, s:b, s:b, s:b, s:b}, s:{s:b, s:o, s:o, s:o, s:o, s:o}, s:{s:b}, "
			       "s:{s:b}, s:{s:b}, s:{s:{s:b}}}",
			       "namespaces", strs(ns), "capabilities", caps,
			       "cgroup", "v1", 0, "v2", 1, "systemd", 0, "systemdUser", 0, "rdma", 0,
			       "seccomp", "enabled", 1, "actions", strs(actions), "operators", strs(ops),
			       "archs", strs(arches), "knownFlags", strs(sflags), "supportedFlags", strs(none),
			       "apparmor", "enabled", 0, "selinux", "enabled", 0, "intelRdt", "enabled", 0,
			       "mountExtensions", "idmap", "enabled", 0);
	json_t *j = json_pack("{s:s, s:s, s:o, s:o, s:o, s:{s:s}}", "ociVersionMin", "1.0.0", "ociVersionMax", "1.1.0",
			      "hooks", strs(hooks), "mountOptions", strs(mopts), "linux", lx, "annotations",
			      "org.lcrun.version", PACKAGE_VERSION);
	char *s = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	printf("%s\n", s);
	free(s);
	json_decref(j);
	return 0;
}
