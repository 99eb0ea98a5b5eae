/* devfilter.c — linux.resources.devices on cgroup v2: a BPF program of type
 * BPF_PROG_TYPE_CGROUP_DEVICE attached to the container's cgroup.
 *
 * cgroup v1's devices controller applied rules in order to a list that
 * starts out allowing everything; the same verdict comes from checking the
 * rules last to first and taking the first that matches (an allow rule
 * matches when it covers every access asked for, a deny rule when it
 * covers any), and allowing when none does. */
#include <errno.h>
#include <linux/bpf.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "container.h"
#include "util.h"

#define INSN(c, d, s, o, i) ((struct bpf_insn){ .code = (c), .dst_reg = (d), .src_reg = (s), .off = (o), .imm = (i) })
#define LDX_W(d, s, o) INSN(BPF_LDX | BPF_MEM | BPF_W, d, s, o, 0)
#define ALU32_IMM(op, d, i) INSN(BPF_ALU | (op) | BPF_K, d, 0, 0, i)
#define MOV64_IMM(d, i) INSN(BPF_ALU64 | BPF_MOV | BPF_K, d, 0, 0, i)
#define MOV32_REG(d, s) INSN(BPF_ALU | BPF_MOV | BPF_X, d, s, 0, 0)
#define JMP_IMM(op, d, i, o) INSN(BPF_JMP | (op) | BPF_K, d, 0, o, i)
#define EXIT() INSN(BPF_JMP | BPF_EXIT, 0, 0, 0, 0)

int lc_devfilter_attach(int cgroup_fd, const lc_ctr_devrule_t *rules, size_t n, lc_error_t **err)
{
	if (!n)
		return 0;
	size_t cap = 8 + n * 12;
	_cleanup_free_ struct bpf_insn *p = lc_xmalloc0(cap * sizeof(*p));
	size_t k = 0;
	/* r2 = type, r3 = access, r4 = major, r5 = minor */
	p[k++] = LDX_W(2, 1, offsetof(struct bpf_cgroup_dev_ctx, access_type));
	p[k++] = ALU32_IMM(BPF_AND, 2, 0xffff);
	p[k++] = LDX_W(3, 1, offsetof(struct bpf_cgroup_dev_ctx, access_type));
	p[k++] = ALU32_IMM(BPF_RSH, 3, 16);
	p[k++] = LDX_W(4, 1, offsetof(struct bpf_cgroup_dev_ctx, major));
	p[k++] = LDX_W(5, 1, offsetof(struct bpf_cgroup_dev_ctx, minor));
	bool decided = false; /* a rule that matches everything ends the program */
	for (size_t i = n; i-- > 0 && !decided;) {
		const lc_ctr_devrule_t *r = &rules[i];
		struct bpf_insn blk[12];
		size_t b = 0;
		/* Each check jumps past the end of this block when it fails. */
		if (r->type == 'c' || r->type == 'b')
			blk[b++] = JMP_IMM(BPF_JNE, 2, r->type == 'c' ? BPF_DEVCG_DEV_CHAR : BPF_DEVCG_DEV_BLOCK, 0);
		unsigned acc = r->access & 7;
		if (acc != 7) {
			blk[b++] = MOV32_REG(1, 3);
			if (r->allow) {
				/* every access asked for is in the rule */
				blk[b++] = ALU32_IMM(BPF_AND, 1, (int)(~acc & 7));
				blk[b++] = JMP_IMM(BPF_JNE, 1, 0, 0);
			} else {
				/* some access asked for is in the rule */
				blk[b++] = ALU32_IMM(BPF_AND, 1, (int)acc);
				blk[b++] = JMP_IMM(BPF_JEQ, 1, 0, 0);
			}
		}
		if (r->major >= 0)
			blk[b++] = JMP_IMM(BPF_JNE, 4, (int)r->major, 0);
		if (r->minor >= 0)
			blk[b++] = JMP_IMM(BPF_JNE, 5, (int)r->minor, 0);
		decided = b == 0;
		blk[b++] = MOV64_IMM(0, r->allow ? 1 : 0);
		blk[b++] = EXIT();
		for (size_t j = 0; j < b; j++) {
			if (BPF_CLASS(blk[j].code) == BPF_JMP && BPF_OP(blk[j].code) != BPF_EXIT)
				blk[j].off = (short)(b - j - 1);
			p[k++] = blk[j];
		}
	}
	if (!decided) {
		p[k++] = MOV64_IMM(0, 1);
		p[k++] = EXIT();
	}

	char log[4096] = "";
	union bpf_attr a;
	memset(&a, 0, sizeof(a));
	a.prog_type = BPF_PROG_TYPE_CGROUP_DEVICE;
	a.insns = (uint64_t)(uintptr_t)p;
	a.insn_cnt = (uint32_t)k;
	a.license = (uint64_t)(uintptr_t)"GPL";
	a.log_buf = (uint64_t)(uintptr_t)log;
	a.log_size = sizeof(log);
	a.log_level = 1;
	int fd = (int)syscall(SYS_bpf, BPF_PROG_LOAD, &a, sizeof(a));
	if (fd < 0) {
		/* retry without the log: some kernels refuse a log for small programs */
		a.log_buf = 0;
		a.log_size = 0;
		a.log_level = 0;
		fd = (int)syscall(SYS_bpf, BPF_PROG_LOAD, &a, sizeof(a));
	}
	char *nl = strchr(log, '\n');
	if (nl)
		*nl = '\0';
	if (fd < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "linux.resources.devices: the kernel refused the "
				    "device filter program%s%s", log[0] ? ": " : "", log);
	memset(&a, 0, sizeof(a));
	a.target_fd = (uint32_t)cgroup_fd;
	a.attach_bpf_fd = (uint32_t)fd;
	a.attach_type = BPF_CGROUP_DEVICE;
	a.attach_flags = BPF_F_ALLOW_MULTI;
	int r = (int)syscall(SYS_bpf, BPF_PROG_ATTACH, &a, sizeof(a));
	int e = errno;
	close(fd);
	if (r < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, e, "linux.resources.devices: cannot attach the device filter "
				    "to the container's cgroup");
	return 0;
}
