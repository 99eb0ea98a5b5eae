/* patch_contract.h — what a model's patch must be before any of it is
 * written: {"files": [{"path": "...", "content": "..."}, ...]}, complete
 * UTF-8 contents of at most PC_MAX_FILES files, PC_MAX_TOTAL_BYTES in all,
 * for allowed paths only, never a test file.  Pure: no I/O, no globals;
 * safe on any input (it has a libFuzzer target, tests/fuzz/).
 *
 * Every refusal names a rule (a stable id below), the file's place in the
 * document and its path:
 *   path-parent: files[0] "a/../b": ".." is not allowed in a path
 *
 * Paths are compared after normalising: empty and "." components are
 * dropped ("./a//b/" is "a/b"), and a path is refused if it is absolute,
 * leaves the tree, or has a ".." component at all.  What the contract
 * cannot see is the tree itself: whoever writes the files must still
 * refuse to follow a symbolic link on the way (openat2 RESOLVE_BENEATH
 * or O_NOFOLLOW per component). */
#ifndef PATCH_CONTRACT_H
#define PATCH_CONTRACT_H

#include <stdbool.h>
#include <stddef.h>
#include <jansson.h>

#define PC_MAX_FILES 3
#define PC_MAX_TOTAL_BYTES 12000 /* the files' contents, added up, in bytes */
#define PC_MAX_PATH 1024         /* bytes of a path as given */
#define PC_MAX_MESSAGE (1 << 20) /* a message's content, for pc_extract */

/* Rule ids: stable, for tests and for callers that count refusals. */
#define PC_RULE_NOT_JSON "not-json"             /* the message's JSON does not parse */
#define PC_RULE_NO_PATCH "no-patch"             /* no {"files": ...} in the message */
#define PC_RULE_AMBIGUOUS "ambiguous"           /* more than one {"files": ...} in the message */
#define PC_RULE_SHAPE "shape"                   /* not {"files": [{"path": S, "content": S}]} (other top-level members are ignored) */
#define PC_RULE_NO_FILES "no-files"             /* "files" is empty */
#define PC_RULE_TOO_MANY_FILES "too-many-files" /* more than PC_MAX_FILES */
#define PC_RULE_TOO_LARGE "too-large"           /* more than PC_MAX_TOTAL_BYTES (or message) */
#define PC_RULE_PATH_EMPTY "path-empty"         /* "", ".", "./" */
#define PC_RULE_PATH_TOO_LONG "path-too-long"   /* over PC_MAX_PATH, or a component over 255 */
#define PC_RULE_PATH_ABSOLUTE "path-absolute"   /* starts with "/" */
#define PC_RULE_PATH_ESCAPES "path-escapes"     /* leaves the tree once normalised ("../x", "a/../../x") */
#define PC_RULE_PATH_PARENT "path-parent"       /* has a ".." component, even one that stays inside */
#define PC_RULE_TEST_FILE "test-file"           /* a test file: never writable */
#define PC_RULE_NOT_ALLOWED "not-allowed"       /* not one of the allowed paths */
#define PC_RULE_DUPLICATE "duplicate"           /* the same path twice, once normalised */
#define PC_RULE_NUL "nul"                       /* a NUL byte (path or content) */
#define PC_RULE_INVALID_UTF8 "invalid-utf8"     /* overlong, surrogate, > U+10FFFF, truncated, stray byte */
#define PC_RULE_CONTROL_CHAR "control-char"     /* C0 but \t \n \r, DEL, C1 (in a path: \t \n \r too) */
#define PC_RULE_BIDI_CONTROL "bidi-control"     /* U+202A-202E, U+2066-2069: text that reads other than it runs */

typedef struct pc_file {
	char *path;    /* normalised */
	char *content; /* NUL-terminated copy; len bytes */
	size_t len;
} pc_file_t;

typedef struct pc_patch {
	pc_file_t *files;
	size_t n;
	size_t total; /* bytes of content */
} pc_patch_t;

typedef struct pc_refusal {
	const char *rule; /* a PC_RULE_* string */
	char *path;       /* the offending path as given, escaped to printable text; NULL if none */
	char *message;    /* one line: "RULE: WHERE "PATH": what is wrong" */
} pc_refusal_t;

/* allowed: a NULL-terminated list; an entry names one file, or, ending in
 * "/", every file below a directory.  Entries are normalised like paths;
 * one that cannot be ("../x", "/etc/") allows nothing.
 * Returns 0 and *out (free with pc_patch_free), or -1 and *why (clear with
 * pc_refusal_clear). */
int pc_validate(json_t *doc, const char *const *allowed, pc_patch_t **out, pc_refusal_t *why);

/* The patch document in a model's message content: the whole content (less
 * surrounding white space) when it starts with "{", else the one fenced
 * block (``` or ~~~, info string "json" or none) holding a JSON object with
 * a "files" member.  Returns 0 and *doc, or -1 and *why. */
int pc_extract(const char *content, size_t len, json_t **doc, pc_refusal_t *why);

/* pc_extract, then pc_validate. */
int pc_parse_message(const char *content, size_t len, const char *const *allowed, pc_patch_t **out,
		     pc_refusal_t *why);

/* {"files": [{"path", "content"}]} of a validated patch (normalised paths). */
json_t *pc_patch_json(const pc_patch_t *p);

/* The allowed list from a configuration string ("calculator.py, src/":
 * commas or white space between entries); NULL-terminated, free with
 * pc_strv_free.  An empty string gives an empty list. */
char **pc_allowed_parse(const char *spec);
void pc_strv_free(char **v);

/* The normalised form of path, or NULL and *rule when it is refused (one
 * of the path-* rules; only the shape of the path is looked at). */
char *pc_normalise(const char *path, const char **rule);
/* Is this normalised path a test file: a component test/, tests/,
 * __tests__/, __snapshots__/, spec/, specs/, testdata/; a name test_*,
 * *_test, *_test.*, *.test.*, *_spec.*, *.spec.*, test.* or tests.*
 * (any case); *Test.* or *Tests.* (as written); conftest.py, pytest.ini,
 * tox.ini. */
bool pc_is_test_file(const char *path);
/* The offset of the first byte that is not well-formed UTF-8, or len. */
size_t pc_utf8_valid_prefix(const unsigned char *s, size_t len);

void pc_patch_free(pc_patch_t *p);
void pc_refusal_clear(pc_refusal_t *why);

#endif
