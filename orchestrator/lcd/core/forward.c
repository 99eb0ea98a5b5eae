/* forward.c — lcd as a client of the other nodes (forward.h).  A small
 * HTTP/1.1 client over a blocking TCP socket, one request per connection
 * (Connection: close), so a node's answer is read as it comes. */
#include <ctype.h>
#include <errno.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "forward.h"
#include "json.h"
#include "nodes.h"
#include "util.h"

#define CONNECT_TIMEOUT_S 5

json_t *lcd_node_row(lcd_t *lcd, const char *node, lc_error_t **err)
{
	_cleanup_json_ json_t *row = lcd_db_query_one(
		lcd->db, err, "node", node,
		"SELECT name, address, stopped_at, lcd_now_ms() - heartbeat_at AS silent FROM nodes WHERE name = ?", "s",
		node);
	if (!row)
		return NULL;
	if (!json_is_null(json_object_get(row, "stopped_at")) ||
	    json_integer_value(json_object_get(row, "silent")) > LCD_NODE_DEAD_MS) {
		lc_error_set(err, LC_EXIT_BUSY, 0, "node %s is down (%s): what it holds cannot be reached until it is back",
			     node, json_is_null(json_object_get(row, "stopped_at")) ? "no heartbeat" : "stopped");
		return NULL;
	}
	if (!json_is_string(json_object_get(row, "address"))) {
		lc_error_set(err, LC_EXIT_STATE, 0, "node %s has no address (node_address or listen in its lcd.json)", node);
		return NULL;
	}
	return json_incref(row);
}

/* "HOST:PORT" or "[V6]:PORT" */
static int dial(const char *node, const char *addr, lc_error_t **err)
{
	_cleanup_free_ char *host = NULL;
	const char *port;
	if (addr[0] == '[') {
		const char *end = strchr(addr, ']');
		if (!end || end[1] != ':')
			return lc_error_set(err, LC_EXIT_INVALID, 0, "node %s: bad address %s", node, addr);
		host = strndup(addr + 1, (size_t)(end - addr - 1));
		port = end + 2;
	} else {
		const char *colon = strrchr(addr, ':');
		if (!colon)
			return lc_error_set(err, LC_EXIT_INVALID, 0, "node %s: bad address %s", node, addr);
		host = strndup(addr, (size_t)(colon - addr));
		port = colon + 1;
	}
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV }, *res = NULL;
	int rc = getaddrinfo(host, port, &hints, &res);
	if (rc != 0)
		return lc_error_set(err, LC_EXIT_BUSY, 0, "node %s: %s: %s", node, addr, gai_strerror(rc));
	int fd = -1, e = 0;
	for (struct addrinfo *a = res; a && fd < 0; a = a->ai_next) {
		fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
		if (fd < 0)
			continue;
		struct timeval tv = { .tv_sec = CONNECT_TIMEOUT_S };
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
		if (connect(fd, a->ai_addr, a->ai_addrlen) < 0) {
			e = errno;
			close(fd);
			fd = -1;
			continue;
		}
		tv.tv_sec = 0; /* then: as long as the answer takes (a stream) */
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	}
	freeaddrinfo(res);
	if (fd < 0)
		return lc_error_set(err, LC_EXIT_BUSY, e, "node %s: cannot connect to %s", node, addr);
	return fd;
}

int lcd_node_open(lcd_t *lcd, const char *node, const char *method, const char *target, const char *auth,
		  char *const *headers, long long length, lc_error_t **err)
{
	_cleanup_json_ json_t *row = lcd_node_row(lcd, node, err);
	if (!row)
		return -1;
	const char *token = lcd_node_token(lcd);
	if (!auth && !token)
		return lc_error_set(err, LC_EXIT_STATE, 0,
				    "node %s cannot be asked: this node has no cluster token (cluster_token_file or "
				    "token_file in lcd.json)",
				    node);
	int fd = dial(node, lc_json_str(row, "address"), err);
	if (fd < 0)
		return -1;
	_cleanup_free_ char *authline = auth ? lc_strdup_printf("Authorization: %s\r\n", auth)
					     : lc_strdup_printf("Authorization: Bearer %s\r\n", token);
	_cleanup_free_ char *len = length > 0    ? lc_strdup_printf("Content-Length: %lld\r\n", length)
				   : length < 0 ? strdup("Transfer-Encoding: chunked\r\n")
						: strdup("");
	size_t extra = 0;
	for (size_t i = 0; headers && headers[i]; i++)
		extra += strlen(headers[i]) + 2;
	char *more = lc_xmalloc0(extra + 1);
	for (size_t i = 0; headers && headers[i]; i++) {
		strcat(more, headers[i]);
		strcat(more, "\r\n");
	}
	_cleanup_free_ char *head = lc_strdup_printf("%s %s HTTP/1.1\r\nHost: %s\r\n%s%s: %s\r\nConnection: close\r\n%s%s\r\n",
						     method, target, node, authline, LCD_FORWARDED_HEADER,
						     lcd_db_node(lcd->db), len, more);
	free(more);
	explicit_bzero(authline, strlen(authline));
	int r = lc_write_all(fd, head, strlen(head));
	explicit_bzero(head, strlen(head));
	if (r < 0) {
		close(fd);
		return lc_error_set(err, LC_EXIT_BUSY, errno, "node %s: cannot send the request", node);
	}
	return fd;
}

int lcd_http_chunk(int fd, const void *data, size_t len)
{
	char size[32];
	int n = snprintf(size, sizeof(size), "%zx\r\n", len);
	if (lc_write_all(fd, size, (size_t)n) < 0)
		return -1;
	if (len && lc_write_all(fd, data, len) < 0)
		return -1;
	return lc_write_all(fd, "\r\n", 2) < 0 ? -1 : 0;
}

/* Fill the buffer if it is empty: bytes in it, 0 at EOF, -1 on error. */
static ssize_t fill(lcd_http_t *h)
{
	if (h->pos < h->len)
		return (ssize_t)(h->len - h->pos);
	if (h->eof)
		return 0;
	ssize_t n;
	do
		n = read(h->fd, h->buf, sizeof(h->buf));
	while (n < 0 && errno == EINTR);
	if (n <= 0) {
		h->eof = true;
		return n;
	}
	h->pos = 0;
	h->len = (size_t)n;
	return n;
}

/* One line (without CRLF) into line; -1 at EOF or when too long. */
static int read_line(lcd_http_t *h, char *line, size_t max)
{
	size_t n = 0;
	for (;;) {
		if (fill(h) <= 0)
			return -1;
		char c = h->buf[h->pos++];
		if (c == '\n')
			break;
		if (n + 1 >= max)
			return -1;
		line[n++] = c;
	}
	if (n && line[n - 1] == '\r')
		n--;
	line[n] = '\0';
	return 0;
}

int lcd_http_read_head(lcd_http_t *h, int fd, lc_error_t **err)
{
	memset(h, 0, sizeof(*h));
	h->fd = fd;
	h->left = -1;
	h->chunk = -1;
	h->headers = json_object();
	char line[8192];
	if (read_line(h, line, sizeof(line)) < 0 || strncmp(line, "HTTP/1.", 7) || strlen(line) < 12)
		return lc_error_set(err, LC_EXIT_BUSY, 0, "the node's answer is not HTTP (or it closed)");
	h->status = atoi(line + 9);
	for (;;) {
		if (read_line(h, line, sizeof(line)) < 0)
			return lc_error_set(err, LC_EXIT_BUSY, 0, "the node's answer ended in its head");
		if (!line[0])
			break;
		char *colon = strchr(line, ':');
		if (!colon)
			continue;
		*colon = '\0';
		char *v = colon + 1;
		while (*v == ' ' || *v == '\t')
			v++;
		for (char *k = line; *k; k++)
			*k = (char)tolower((unsigned char)*k);
		if (!strcmp(line, "transfer-encoding")) {
			h->chunked = strcasestr(v, "chunked") != NULL;
			continue;
		}
		if (!strcmp(line, "content-length")) {
			h->left = strtoll(v, NULL, 10);
			continue;
		}
		if (!strcmp(line, "connection") || !strcmp(line, "keep-alive"))
			continue;
		json_object_set_new(h->headers, line, json_string(v));
	}
	if (h->chunked)
		h->left = -1;
	return 0;
}

ssize_t lcd_http_read(lcd_http_t *h, void *out, size_t max)
{
	if (h->chunked) {
		if (h->chunk == 0)
			return 0;
		if (h->chunk < 0 || h->chunk == -2) {
			char line[64];
			if (h->chunk == -2 && (read_line(h, line, sizeof(line)) < 0 || line[0]))
				return -1; /* the CRLF after a chunk */
			if (read_line(h, line, sizeof(line)) < 0)
				return -1;
			h->chunk = strtoll(line, NULL, 16);
			if (h->chunk == 0)
				return 0;
		}
	} else if (h->left == 0) {
		return 0;
	}
	ssize_t have = fill(h);
	if (have <= 0)
		return h->chunked || h->left > 0 ? -1 : 0;
	size_t n = (size_t)have < max ? (size_t)have : max;
	if (h->chunked && (long long)n > h->chunk)
		n = (size_t)h->chunk;
	if (!h->chunked && h->left > 0 && (long long)n > h->left)
		n = (size_t)h->left;
	memcpy(out, h->buf + h->pos, n);
	h->pos += n;
	if (h->chunked) {
		h->chunk -= (long long)n;
		if (h->chunk == 0)
			h->chunk = -2; /* its CRLF, then the next size */
	} else if (h->left > 0) {
		h->left -= (long long)n;
	}
	return (ssize_t)n;
}

void lcd_http_close(lcd_http_t *h)
{
	if (h->fd >= 0)
		close(h->fd);
	h->fd = -1;
	json_decref(h->headers);
	h->headers = NULL;
}

int lcd_node_call(lcd_t *lcd, const char *node, const char *method, const char *path, json_t *body, json_t **out,
		  lc_error_t **err)
{
	*out = NULL;
	_cleanup_free_ char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
	char *ct[] = { "Content-Type: application/json", NULL };
	_cleanup_free_ char *target = lc_strdup_printf("/v1%s", path);
	int fd = lcd_node_open(lcd, node, method, target, NULL, text ? ct : NULL, text ? (long long)strlen(text) : 0, err);
	if (fd < 0)
		return -1;
	if (text && lc_write_all(fd, text, strlen(text)) < 0) {
		close(fd);
		return lc_error_set(err, LC_EXIT_BUSY, errno, "node %s: cannot send the request", node);
	}
	lcd_http_t h;
	if (lcd_http_read_head(&h, fd, err) < 0) {
		lcd_http_close(&h);
		return lc_error_wrap(err, "node %s", node);
	}
	size_t cap = 4096, len = 0;
	char *buf = lc_xmalloc0(cap);
	ssize_t n;
	while ((n = lcd_http_read(&h, buf + len, cap - len - 1)) > 0) {
		len += (size_t)n;
		if (cap - len < 1024) {
			cap *= 2;
			buf = realloc(buf, cap);
			if (!buf)
				abort();
		}
	}
	int status = h.status;
	lcd_http_close(&h);
	if (n < 0) {
		free(buf);
		return lc_error_set(err, LC_EXIT_BUSY, 0, "node %s: its answer broke off", node);
	}
	*out = len ? json_loadb(buf, len, 0, NULL) : NULL;
	free(buf);
	return status;
}
