#!/usr/bin/env bats
# Attacks on lcd's webhook listener by whoever reaches its port: a signed
# body captured once and replayed under fresh delivery ids, a payload that
# is not what its event header says, one address holding every
# connection.  A private lcd whose webhook_listen is on 127.0.0.1 (the
# test's deliveries never leave this host).  Needs root.

FIXTURES="$BATS_TEST_DIRNAME/../fixtures/lcd"
PAYLOAD="$FIXTURES/webhook-issues-labeled.json"

load ../integration/lcd-lib

setup() {
	lcd_setup
	command -v openssl >/dev/null || skip "needs openssl"
	HOOK_SECRET="whsec-$RANDOM-$RANDOM"
	PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	echo "{\"webhook_listen\": \"127.0.0.1:$PORT\"}" >"$T/lcd.json"
	start_lcd
	printf '%s' "$HOOK_SECRET" | "$LCCTL" secret set HOOK_SECRET
	"$LCCTL" deploy "$FIXTURES/webhook-app.json" >/dev/null
	URL="http://127.0.0.1:$PORT"
}

teardown() {
	lcd_teardown
}

deliver() { # EVENT ID FILE: the status
	local sig
	sig="sha256=$(openssl dgst -sha256 -hmac "$HOOK_SECRET" "$3" | sed 's/.*= //')"
	curl -s --max-time 15 -o "$T/answer" -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
		-H "X-GitHub-Event: $1" -H "X-GitHub-Delivery: $2" -H "X-Hub-Signature-256: $sig" \
		--data-binary "@$3" "$URL/hooks/hooks/github"
}

tasks() { "$LCCTL" task list --app hooks --json | jq length; }

@test "security/webhook: a signed body replayed under fresh delivery ids starts nothing" {
	[ "$(deliver issues "$(cat /proc/sys/kernel/random/uuid)" "$PAYLOAD")" = 202 ]
	first=$(jq -r .task "$T/answer")
	# the same bytes, the same valid signature, new ids: before, each was a task
	for i in $(seq 10); do
		[ "$(deliver issues "$(cat /proc/sys/kernel/random/uuid)" "$PAYLOAD")" = 200 ]
		jq -e --arg t "$first" '.status == "duplicate" and .task == $t' "$T/answer"
	done
	[ "$(tasks)" -eq 1 ]
	# ... also after a restart
	stop_lcd
	start_lcd
	[ "$(deliver issues replayed-after-restart "$PAYLOAD")" = 200 ]
	[ "$(tasks)" -eq 1 ]
	# another body is another delivery
	jq '.issue.updated_at = "2030-01-01T00:00:00Z"' "$PAYLOAD" >"$T/other.json"
	[ "$(deliver issues other-1 "$T/other.json")" = 202 ]
	[ "$(tasks)" -eq 2 ]
}

@test "security/webhook: a payload that is not what X-GitHub-Event says is refused" {
	# an issues event without an issue, an issue_comment without a comment
	jq 'del(.issue)' "$PAYLOAD" >"$T/noissue.json"
	[ "$(deliver issues s-1 "$T/noissue.json")" = 400 ]
	jq -e '.error | test("X-GitHub-Event issues, but the payload has no issue")' "$T/answer"
	[ "$(deliver issue_comment s-2 "$PAYLOAD")" = 400 ]
	jq -e '.error | test("no comment")' "$T/answer"
	jq 'del(.action)' "$PAYLOAD" >"$T/noaction.json"
	[ "$(deliver issues s-3 "$T/noaction.json")" = 400 ]
	[ "$(tasks)" -eq 0 ]
	grep -q 'webhook hooks/github delivery s-1 event issues.labeled from 127.0.0.1: 400' "$T/lcd.log"
	# the shape it says is taken
	[ "$(deliver issues s-4 "$PAYLOAD")" = 202 ]
	[ "$(tasks)" -eq 1 ]
}

@test "security/webhook: one address holds 16 connections at most; the listener serves on" {
	python3 - "$PORT" >"$T/held" <<'EOF' &
import socket, sys, time
port = int(sys.argv[1])
socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(24)]
time.sleep(1)
def closed(s):
    s.setblocking(False)
    try:
        return s.recv(1) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True
print(sum(closed(s) for s in socks), flush=True)
time.sleep(3)
EOF
	held=$!
	for _ in $(seq 50); do [ -s "$T/held" ] && break; sleep 0.1; done
	# past 16, closed at once (before: held, 64 in all for every sender)
	[ "$(cat "$T/held")" = 8 ]
	wait "$held"
	[ "$(deliver issues c-1 "$PAYLOAD")" = 202 ]
}
