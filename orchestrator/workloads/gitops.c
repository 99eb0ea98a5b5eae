/* gitops.c — a patch committed and pushed from a fresh clone (gitops.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent.h"
#include "gitops.h"
#include "util.h"

#define GIT_MAX_OUT (64 << 20)

static void append(char **b, size_t *n, const char *d, size_t len)
{
	if (*n + len > GIT_MAX_OUT)
		return;
	char *p = realloc(*b, *n + len + 1);
	if (!p)
		return;
	memcpy(p + *n, d, len);
	*n += len;
	p[*n] = '\0';
	*b = p;
}

int gitops_git(const char *dir, const char *const *args, const char *token_env, char **out, lc_error_t **err)
{
	int po[2], pe[2];
	if (pipe2(po, O_CLOEXEC) < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "pipe");
	if (pipe2(pe, O_CLOEXEC) < 0) {
		close(po[0]);
		close(po[1]);
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "pipe");
	}
	pid_t pid = fork();
	if (pid < 0) {
		int e = errno;
		close(po[0]), close(po[1]), close(pe[0]), close(pe[1]);
		return lc_error_set(err, LC_EXIT_RUNTIME, e, "fork");
	}
	if (pid == 0) {
		int null = open("/dev/null", O_RDONLY);
		dup2(null, 0);
		dup2(po[1], 1);
		dup2(pe[1], 2);
		if (dir && chdir(dir) < 0)
			_exit(127);
		setenv("GIT_TERMINAL_PROMPT", "0", 1);
		setenv("GIT_CONFIG_NOSYSTEM", "1", 1);
		setenv("GIT_CONFIG_GLOBAL", "/dev/null", 1);
		unsetenv("GIT_DIR");
		unsetenv("GIT_WORK_TREE");
		if (token_env) {
			/* the helper reads the token from the environment:
			 * it is in no argv, URL or file */
			_cleanup_free_ char *helper = lc_strdup_printf(
				"!f() { test \"$1\" = get || exit 0; echo username=x-access-token; echo \"password=$%s\"; }; f",
				token_env);
			setenv("GIT_CONFIG_COUNT", "1", 1);
			setenv("GIT_CONFIG_KEY_0", "credential.helper", 1);
			setenv("GIT_CONFIG_VALUE_0", helper, 1);
		}
		size_t n = 0;
		while (args[n])
			n++;
		const char **argv = calloc(n + 2, sizeof(*argv));
		argv[0] = "git";
		for (size_t i = 0; i < n; i++)
			argv[i + 1] = args[i];
		execvp("git", (char *const *)argv);
		fprintf(stderr, "cannot run git: %s\n", strerror(errno));
		_exit(127);
	}
	close(po[1]);
	close(pe[1]);
	char *ob = NULL, *eb = NULL;
	size_t on = 0, en = 0;
	struct pollfd fds[2] = { { .fd = po[0], .events = POLLIN }, { .fd = pe[0], .events = POLLIN } };
	int open_fds = 2;
	while (open_fds > 0) {
		if (poll(fds, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		for (int i = 0; i < 2; i++) {
			if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			char buf[65536];
			ssize_t r = read(fds[i].fd, buf, sizeof(buf));
			if (r <= 0) {
				close(fds[i].fd);
				fds[i].fd = -1;
				open_fds--;
				continue;
			}
			if (i == 0)
				append(&ob, &on, buf, (size_t)r);
			else
				append(&eb, &en, buf, (size_t)r);
		}
	}
	for (int i = 0; i < 2; i++)
		if (fds[i].fd >= 0)
			close(fds[i].fd);
	int st = 0;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	_cleanup_free_ char *errtext = eb;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		free(ob);
		_cleanup_free_ char *tail = agent_tail(errtext, en, 1);
		return lc_error_set(err, LC_EXIT_RUNTIME, 0, "git %s: %s", args[0],
				    *tail ? tail : WIFEXITED(st) ? "failed" : "killed");
	}
	if (out)
		*out = ob ? ob : strdup("");
	else
		free(ob);
	return 0;
}

static int git(const char *dir, const char *token_env, lc_error_t **err, ...)
{
	const char *args[32];
	size_t n = 0;
	va_list ap;
	va_start(ap, err);
	const char *a;
	while ((a = va_arg(ap, const char *)) && n < 31)
		args[n++] = a;
	va_end(ap);
	args[n] = NULL;
	return gitops_git(dir, args, token_env, NULL, err);
}

int gitops_push_patch(const gitops_push_t *p, char **sha, lc_error_t **err)
{
	char tmpl[] = "/tmp/lc-agents-git.XXXXXX";
	if (!mkdtemp(tmpl))
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot make a directory for the clone");
	_cleanup_free_ char *patch = lc_strdup_printf("%s/agent.patch", tmpl);
	_cleanup_free_ char *repo = lc_strdup_printf("%s/repo", tmpl);
	_cleanup_free_ char *baseref = lc_strdup_printf("+refs/heads/%s:refs/remotes/origin/%s", p->base, p->base);
	_cleanup_free_ char *dst = lc_strdup_printf("HEAD:refs/heads/%s", p->branch);
	const char *name_end = strchr(p->author, '<');
	_cleanup_free_ char *aname = name_end ? strndup(p->author, (size_t)(name_end - p->author)) : strdup(p->author);
	for (size_t n = strlen(aname); n > 0 && aname[n - 1] == ' ';)
		aname[--n] = '\0';
	_cleanup_free_ char *amail = name_end ? strndup(name_end + 1, strcspn(name_end + 1, ">")) : strdup("");
	_cleanup_free_ char *cname = lc_strdup_printf("user.name=%s", aname);
	_cleanup_free_ char *cmail = lc_strdup_printf("user.email=%s", amail);
	int r = -1;
	if (lc_write_file_atomic(patch, p->patch, p->patch_len, 0600, err) < 0)
		goto out;
	if (git(NULL, p->token_env, err, "init", "-q", repo, NULL) < 0 ||
	    git(repo, p->token_env, err, "remote", "add", "origin", p->url, NULL) < 0)
		goto out;
	if (git(repo, p->token_env, err, "fetch", "-q", "--no-tags", "origin", baseref, NULL) < 0) {
		lc_error_wrap(err, "cannot fetch %s from %s", p->base, p->url);
		goto out;
	}
	if (git(repo, p->token_env, err, "checkout", "-q", "-b", p->branch, p->commit, NULL) < 0) {
		/* the commit left the branch (a force push): fetch it by id */
		lc_error_free(*err);
		*err = NULL;
		if (git(repo, p->token_env, err, "fetch", "-q", "--no-tags", "origin", p->commit, NULL) < 0 ||
		    git(repo, p->token_env, err, "checkout", "-q", "-b", p->branch, p->commit, NULL) < 0) {
			lc_error_wrap(err, "cannot check out the snapshot's commit %s", p->commit);
			goto out;
		}
	}
	if (git(repo, NULL, err, "apply", "--index", "--whitespace=nowarn", patch, NULL) < 0) {
		lc_error_wrap(err, "the agent's patch does not apply to %s", p->commit);
		goto out;
	}
	if (git(repo, NULL, err, "-c", cname, "-c", cmail, "commit", "-q", "--no-verify", "-m", p->message, NULL) < 0)
		goto out;
	if (git(repo, p->token_env, err, "push", "-q", "--force", "origin", dst, NULL) < 0) {
		lc_error_wrap(err, "cannot push %s", p->branch);
		goto out;
	}
	const char *rev[] = { "rev-parse", "HEAD", NULL };
	char *o = NULL;
	if (gitops_git(repo, rev, NULL, &o, err) < 0)
		goto out;
	o[strcspn(o, "\n")] = '\0';
	*sha = o;
	r = 0;
out:;
	lc_error_t *e2 = NULL;
	if (lc_rm_rf(tmpl, &e2) < 0)
		lc_error_free(e2);
	return r;
}
