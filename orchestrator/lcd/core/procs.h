/* procs.h — the commands the E2B listener's envd runs in sandboxes
 * (process.Process).  Each is lcd's own: lc_sandbox_exec in a child of
 * lcd's runner, started by a request but not bound to it, so a client may
 * disconnect and connect again (Connect) while it runs; its output goes
 * to every client connected at the time.  A command ends by itself, when
 * killed (SendSignal), at its timeout, when its sandbox goes, or when lcd
 * stops; then it is forgotten, as envd forgets it. */
#ifndef LCD_PROCS_H
#define LCD_PROCS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <jansson.h>

#include "lcd.h"

typedef struct lcd_proc_cfg {
	char **argv;          /* the command as it runs */
	char **env;           /* K=V on top of the sandbox's own */
	const char *workdir;  /* NULL: the sandbox's */
	bool user_set;        /* run as uid:gid, not as the sandbox's user */
	uid_t uid;
	gid_t gid;
	bool stdin_open;      /* stdin is a pipe that input is written to (else /dev/null) */
	bool pty;             /* a terminal of cols x rows, its output one stream */
	unsigned cols, rows;
	const char *tag;      /* a name to select it by, or NULL */
	long long timeout_ms; /* killed once it has run this long; 0: never */
	json_t *config;       /* what a listing shows of it ({cmd, args, envs, cwd}); referenced */
} lcd_proc_cfg_t;

/* Which command: by pid, or by tag when tag is set. */
typedef struct lcd_proc_sel {
	unsigned pid;
	const char *tag;
} lcd_proc_sel_t;

enum { LCD_PROC_START, LCD_PROC_STDOUT, LCD_PROC_STDERR, LCD_PROC_PTY, LCD_PROC_END };
typedef struct lcd_proc_ev {
	int kind;
	unsigned pid;             /* START */
	unsigned char *data;      /* STDOUT, STDERR, PTY */
	size_t len;
	int exit_code;            /* END: the exit status, -1 when a signal ended it */
	int signal;               /* END: that signal, else 0 */
	char *error;              /* END: why it could not run at all, else NULL */
	struct lcd_proc_ev *next;
} lcd_proc_ev_t;

/* A client's view of one command: the events from when it attached. */
typedef struct lcd_proc_sub lcd_proc_sub_t;

/* The table (lcd->procs), and its end: every command is killed and waited
 * for (at most a few seconds).  Streams must have ended before. */
void lcd_procs_init(lcd_t *lcd);
void lcd_procs_stop(lcd_t *lcd);

/* Start cfg in sandbox (running: checked by the caller) and attach *sub,
 * whose first event is START. */
int lcd_proc_start(lcd_t *lcd, const char *sandbox, const lcd_proc_cfg_t *cfg, lcd_proc_sub_t **sub,
		   lc_error_t **err);
/* Attach to a running command (its START event first, then what it
 * prints from now on).  LC_EXIT_UNKNOWN when there is none. */
lcd_proc_sub_t *lcd_proc_connect(lcd_t *lcd, const char *sandbox, const lcd_proc_sel_t *sel, lc_error_t **err);
/* Readable while events wait; the next one (lcd_proc_ev_free it) or NULL. */
int lcd_proc_sub_fd(const lcd_proc_sub_t *s);
lcd_proc_ev_t *lcd_proc_sub_next(lcd_proc_sub_t *s);
/* The client read too slowly: events were dropped (the stream must end). */
bool lcd_proc_sub_overflowed(const lcd_proc_sub_t *s);
void lcd_proc_ev_free(lcd_proc_ev_t *e);
/* Kill the command (its timeout, as its first client saw it, is up). */
void lcd_proc_sub_kill(lcd_proc_sub_t *s);
/* Detach (the command runs on). */
void lcd_proc_sub_free(lcd_proc_sub_t *s);

/* The sandbox's running commands: [{pid, tag, pty, config}]. */
json_t *lcd_proc_list(lcd_t *lcd, const char *sandbox);
/* Write data to the command's stdin (pty false) or terminal (pty true). */
int lcd_proc_input(lcd_t *lcd, const char *sandbox, const lcd_proc_sel_t *sel, const void *data, size_t len, bool pty,
		   lc_error_t **err);
int lcd_proc_close_stdin(lcd_t *lcd, const char *sandbox, const lcd_proc_sel_t *sel, lc_error_t **err);
/* SIGKILL ends it with its children; other signals go to it alone. */
int lcd_proc_signal(lcd_t *lcd, const char *sandbox, const lcd_proc_sel_t *sel, int sig, lc_error_t **err);
int lcd_proc_resize(lcd_t *lcd, const char *sandbox, const lcd_proc_sel_t *sel, unsigned cols, unsigned rows,
		    lc_error_t **err);
/* The sandbox is going: kill its commands. */
void lcd_procs_drop(lcd_t *lcd, const char *sandbox);

#endif
