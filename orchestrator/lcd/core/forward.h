/* forward.h — lcd as a client of the other nodes of its cluster
 * (forward.c): an HTTP/1.1 connection to a node's TCP listener, carrying
 * the cluster token and X-Lcd-Forwarded (the node answers itself, never
 * passes it on), read as it comes: streams stay streams. */
#ifndef LCD_FORWARD_H
#define LCD_FORWARD_H

#include <stdbool.h>
#include <sys/types.h>
#include <jansson.h>

#include "lcd.h"

#define LCD_FORWARDED_HEADER "X-Lcd-Forwarded"

/* The node's row: NULL (and *err) when there is no such node, or it is
 * not up (stopped, or silent for LCD_NODE_DEAD_MS). */
json_t *lcd_node_row(lcd_t *lcd, const char *node, lc_error_t **err);

/* An answer being read. */
typedef struct lcd_http {
	int fd;
	int status;
	json_t *headers; /* {lowercased name: value}, hop-by-hop ones left out */
	bool chunked;
	long long left;  /* body bytes still to come (Content-Length), -1: until the end */
	long long chunk; /* of the current chunk */
	bool eof;
	char buf[16384];
	size_t pos, len;
} lcd_http_t;

/* Connect to node's listener and send a request head: method, target
 * (path and query, as sent), the caller's Authorization value (NULL: the
 * cluster token, the operator), extra "Name: value" lines, the body's
 * length (-1: chunked, written with lcd_http_chunk; 0: none).  -1 with
 * *err (LC_EXIT_BUSY: the node cannot be reached). */
int lcd_node_open(lcd_t *lcd, const char *node, const char *method, const char *target, const char *auth,
		  char *const *headers, long long length, lc_error_t **err);
/* A piece of a chunked body; len 0 ends it. */
int lcd_http_chunk(int fd, const void *data, size_t len);
/* Read the answer's head from fd (which it then owns). */
int lcd_http_read_head(lcd_http_t *h, int fd, lc_error_t **err);
/* The next bytes of the body: >0, 0 at its end, -1 on an error. */
ssize_t lcd_http_read(lcd_http_t *h, void *out, size_t max);
void lcd_http_close(lcd_http_t *h);

/* One JSON call to node as the operator: the status (or -1 with *err);
 * *out the answer's JSON (NULL when none). */
int lcd_node_call(lcd_t *lcd, const char *node, const char *method, const char *path, json_t *body, json_t **out,
		  lc_error_t **err);

#endif
