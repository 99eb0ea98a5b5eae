#!/usr/bin/env bats
# lcd's webhook listener as GitHub (and anyone else) reaches it: a private
# lcd whose webhook_listen is a free port on 127.0.0.1 (traffic stays on
# this host's loopback), the app in tests/fixtures/lcd/webhook-app.json,
# deliveries signed with openssl as GitHub signs them, tasks run for real.
# Needs root.

FIXTURES="$BATS_TEST_DIRNAME/../fixtures/lcd"
PAYLOAD="$FIXTURES/webhook-issues-labeled.json"

load lcd-lib

setup() {
	lcd_setup
	command -v openssl >/dev/null || skip "needs openssl"
	HOOK_SECRET="whsec-$RANDOM-$RANDOM-$RANDOM"
	PORT=$(free_port)
	write_config
	start_lcd
	printf '%s' "$HOOK_SECRET" | "$LCCTL" secret set HOOK_SECRET
	"$LCCTL" deploy "$FIXTURES/webhook-app.json"
	URL="http://127.0.0.1:$PORT"
	CURL_TLS=()
}

teardown() {
	lcd_teardown
}

free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

write_config() { # [EXTRA JSON members]
	echo "{\"webhook_listen\": \"127.0.0.1:$PORT\", \"webhook_max_body\": 65536${1:+, $1}}" >"$T/lcd.json"
}

sign() { # FILE [SECRET]: the X-Hub-Signature-256 value
	echo "sha256=$(openssl dgst -sha256 -hmac "${2:-$HOOK_SECRET}" "$1" | sed 's/.*= //')"
}

# deliver HOOK EVENT DELIVERY FILE [SIGNATURE|-] [curl args…]: POST as
# GitHub does to /hooks/hooks/HOOK (HOOK with a "/": /hooks/HOOK), "-": no
# signature header.  The answer's body goes to $ANSWER (default
# $T/answer); prints "STATUS SECONDS".
deliver() {
	local hook=$1 event=$2 id=$3 file=$4 sig=${5:-}
	[[ $hook == */* ]] || hook="hooks/$hook"
	shift 4
	[ $# -gt 0 ] && shift
	[ -n "$sig" ] || sig=$(sign "$file")
	local hdr=(-H 'Content-Type: application/json' -H "X-GitHub-Event: $event" -H "X-GitHub-Delivery: $id"
		-H 'User-Agent: GitHub-Hookshot/044aadd')
	[ "$sig" = - ] || hdr+=(-H "X-Hub-Signature-256: $sig")
	curl -s "${CURL_TLS[@]}" --max-time 15 -o "${ANSWER:-$T/answer}" -w '%{http_code} %{time_total}\n' -X POST "${hdr[@]}" \
		--data-binary "@$file" "$@" "$URL/hooks/$hook"
}

status_of() { deliver "$@" | cut -d' ' -f1; }

# variant N [JQ]: another delivery's body (lcd takes a body seen before as
# a duplicate, whatever its id): $PAYLOAD with a member of its own, or
# JQ's result; prints the file's name
variant() {
	jq --arg n "$1" "${2:-.} + {variant: \$n}" "$PAYLOAD" >"$T/variant.$1.json"
	echo "$T/variant.$1.json"
}

tasks() { "$LCCTL" task list --app hooks --json | jq length; }

@test "webhook: a signed delivery spawns the hook's function with {event, delivery, payload}; one log line, no secret" {
	id=$(cat /proc/sys/kernel/random/uuid)
	read -r st secs < <(deliver github issues "$id" "$PAYLOAD")
	[ "$st" = 202 ]
	echo "# answered 202 in ${secs}s" >&3
	jq -e '.status == "accepted" and (.task | test("^[0-9a-f]+$"))' "$T/answer"
	task=$(jq -r .task "$T/answer")
	wait_state "$task" succeeded
	"$LCCTL" task show "$task" | jq -e '.function == "receive"'
	# the args, exactly: the event, the delivery id, the payload as sent
	"$LCCTL" task show "$task" | jq -S .args >"$T/args"
	jq -S -n --arg id "$id" --slurpfile p "$PAYLOAD" '{event: "issues", delivery: $id, payload: $p[0]}' >"$T/want"
	diff "$T/want" "$T/args"
	# ... and the task saw them in its args.json (its result is a copy)
	"$LCCTL" task show "$task" | jq -S .result | diff "$T/want" -
	# one log line for the delivery, naming it; never the secret or the signature
	[ "$(grep -c "webhook hooks/github delivery $id" "$T/lcd.log")" -eq 1 ]
	grep -q "webhook hooks/github delivery $id event issues.labeled from 127.0.0.1: 202 task $task" "$T/lcd.log"
	sig=$(sign "$PAYLOAD")
	if grep -q -- "$HOOK_SECRET" "$T/lcd.log"; then false; fi
	if grep -q -- "${sig#sha256=}" "$T/lcd.log"; then false; fi
	if grep -rq -- "$HOOK_SECRET" "$LCRUN_ROOT/lcd/logs"; then false; fi
	if lcd_sql_dump tasks | grep -q -- "$HOOK_SECRET"; then false; fi
	[ "$(tasks)" -eq 1 ]
}

@test "webhook: a missing or wrong signature is 401 and spawns nothing" {
	printf '%s' '{"action": "labeled"}' >"$T/other.json"
	# no signature header
	[ "$(status_of github issues d-1 "$PAYLOAD" -)" = 401 ]
	jq -e '.error | test("signature")' "$T/answer"
	# signed with another secret
	[ "$(status_of github issues d-2 "$PAYLOAD" "$(sign "$PAYLOAD" not-the-secret)")" = 401 ]
	# the signature of another body
	[ "$(status_of github issues d-3 "$PAYLOAD" "$(sign "$T/other.json")")" = 401 ]
	# one hex digit changed, one short, not hex, another algorithm's prefix
	good=$(sign "$PAYLOAD")
	last=${good: -1}; [ "$last" = 0 ] && flip=1 || flip=0
	[ "$(status_of github issues d-4 "$PAYLOAD" "${good%?}$flip")" = 401 ]
	[ "$(status_of github issues d-5 "$PAYLOAD" "${good%?}")" = 401 ]
	[ "$(status_of github issues d-6 "$PAYLOAD" "sha256=$(printf 'z%.0s' $(seq 64))")" = 401 ]
	[ "$(status_of github issues d-7 "$PAYLOAD" "sha1=${good#sha256=}")" = 401 ]
	[ "$(status_of github issues d-8 "$PAYLOAD" "sha256=")" = 401 ]
	# GitHub's older SHA-1 header alone is not enough
	[ "$(status_of github issues d-9 "$PAYLOAD" - -H "X-Hub-Signature: sha1=$(openssl dgst -sha1 -hmac "$HOOK_SECRET" "$PAYLOAD" | sed 's/.*= //')")" = 401 ]
	# the signature is checked before the event and the body are looked at
	[ "$(status_of github ping d-10 "$FIXTURES/webhook-ping.json" -)" = 401 ]
	[ "$(status_of github issues d-11 "$T/other.json" - -H 'X-GitHub-Event;')" = 401 ]
	# a hook whose secret is not set refuses every delivery
	[ "$(status_of unset issues d-12 "$PAYLOAD" "$(sign "$PAYLOAD" anything)")" = 401 ]
	grep -q 'secret NEVER_SET is not set' "$T/lcd.log"
	[ "$(tasks)" -eq 0 ]
	[ "$(lcd_sql 'SELECT count(*) FROM webhook_deliveries')" -eq 0 ]
	[ "$(grep -c 'webhook hooks/.* 401 ' "$T/lcd.log")" -eq 12 ]
	if grep -q -- "$HOOK_SECRET" "$T/lcd.log"; then false; fi
}

@test "webhook: 20 deliveries of one id, at once and after a restart, start one task; old ids expire" {
	id=$(cat /proc/sys/kernel/random/uuid)
	pids=()
	for i in $(seq 20); do
		ANSWER="$T/answer.$i" deliver github issues "$id" "$PAYLOAD" >"$T/st.$i" &
		pids+=($!)
	done
	wait "${pids[@]}"
	[ "$(cut -d' ' -f1 "$T"/st.* | grep -c '^202$')" -eq 1 ]
	[ "$(cut -d' ' -f1 "$T"/st.* | grep -c '^200$')" -eq 19 ]
	[ "$(tasks)" -eq 1 ]
	task=$("$LCCTL" task list --app hooks --json | jq -r '.[0].id')
	wait_state "$task" succeeded
	# a duplicate names the task the first delivery started
	[ "$(status_of github issues "$id" "$PAYLOAD")" = 200 ]
	jq -e --arg t "$task" '.status == "duplicate" and .task == $t' "$T/answer"
	# the record survives a restart
	stop_lcd
	start_lcd
	[ "$(status_of github issues "$id" "$PAYLOAD")" = 200 ]
	[ "$(tasks)" -eq 1 ]
	# a new id of a new body is a new delivery; a new id of the same body is not
	[ "$(status_of github issues "$id-3" "$PAYLOAD")" = 200 ]
	jq -e --arg t "$task" '.status == "duplicate" and .task == $t' "$T/answer"
	[ "$(status_of github issues "$id-2" "$(variant 2)")" = 202 ]
	[ "$(tasks)" -eq 2 ]
	# ids older than 7 days are forgotten: the same id is handed on again
	stop_lcd
	lcd_sql "UPDATE webhook_deliveries SET received_at = received_at - 8 * 86400 * 1000 WHERE delivery = '$id'"
	start_lcd
	[ "$(status_of github issues "$id" "$PAYLOAD")" = 202 ]
	[ "$(tasks)" -eq 3 ]
	grep -q 'forgot 1 delivery ids older than 7 days' "$T/lcd.log"
}

@test "webhook: ping is 200; events the hook does not take are 200 and ignored; bad headers and bodies are 400" {
	read -r st _ < <(deliver github ping p-1 "$FIXTURES/webhook-ping.json")
	[ "$st" = 200 ]
	jq -e '.status == "pong"' "$T/answer"
	[ "$(status_of github push p-2 "$PAYLOAD")" = 200 ]
	jq -e '.status == "ignored" and .event == "push"' "$T/answer"
	grep -q 'webhook hooks/github delivery p-2 event push.labeled from 127.0.0.1: 200 ignored' "$T/lcd.log"
	# issue_comment is one of its events
	[ "$(status_of github issue_comment p-3 "$(variant 3 '. + {comment: {id: 1, body: "hi"}}')")" = 202 ]
	# a hook without "events" takes every event ("full" runs a gated task: release it)
	[ "$(status_of full push p-4 "$(variant 4 '{ref: "refs/heads/main", repository: .repository, commits: []}')")" = 202 ]
	gated=$(jq -r .task "$T/answer")
	wait_state "$gated" running
	touch "$LCRUN_ROOT/lcd/tasks/$gated/go"
	wait_state "$gated" succeeded
	# signed, but no event, a bad delivery id, a body that is not a JSON object
	printf '%s' 'payload=%7B%7D' >"$T/form"
	printf '%s' '[1, 2]' >"$T/array"
	[ "$(status_of github 'Issues Event' p-5 "$PAYLOAD")" = 400 ]
	[ "$(status_of github issues 'p 6' "$PAYLOAD")" = 400 ]
	[ "$(status_of github issues p-7 "$T/form")" = 400 ]
	jq -e '.error | test("application/json")' "$T/answer"
	[ "$(status_of github issues p-8 "$T/array")" = 400 ]
	[ "$(tasks)" -eq 2 ]
}

@test "webhook: unknown app or hook 404; only POST /hooks/APP/NAME is served; the API serves no /hooks and the webhook port no /v1" {
	[ "$(status_of nope/github issues u-2 "$PAYLOAD")" = 404 ]
	[ "$(status_of hooks/nope issues u-3 "$PAYLOAD")" = 404 ]
	[ "$(status_of hooks/github/extra issues u-4 "$PAYLOAD")" = 404 ]
	[ "$(status_of hooks/ issues u-5 "$PAYLOAD")" = 404 ]
	[ "$(curl -s -o /dev/null -w '%{http_code}' -X POST --data '{}' "$URL/hooks/hooks")" = 404 ]
	[ "$(curl -s -o /dev/null -w '%{http_code}' -X POST --data '{}' "$URL/hooks")" = 404 ]
	[ "$(curl -s -o /dev/null -w '%{http_code}' -X POST --data '{}' "$URL/")" = 404 ]
	[ "$(curl -s -D "$T/headers" -o /dev/null -w '%{http_code}' "$URL/hooks/hooks/github")" = 405 ]
	grep -qi '^Allow: POST' "$T/headers"
	# the webhook port is not the API
	[ "$(curl -s -o /dev/null -w '%{http_code}' "$URL/v1/health")" = 404 ]
	[ "$(curl -s -o /dev/null -w '%{http_code}' "$URL/v1/apps")" = 404 ]
	[ "$(curl -s -o /dev/null -w '%{http_code}' -X POST -H "X-Hub-Signature-256: $(sign "$PAYLOAD")" \
		--data-binary "@$PAYLOAD" "$URL/v1/apps/hooks/functions/receive/spawn")" = 404 ]
	[ "$(curl -s -o /dev/null -w '%{http_code}' -X PUT --data '{"value": "x"}' "$URL/v1/secrets/HOOK_SECRET")" = 404 ]
	# the API socket is not the webhook listener
	[ "$(curl -s -o /dev/null -w '%{http_code}' --unix-socket "$LCD_SOCKET" -X POST -H 'X-GitHub-Event: issues' \
		-H 'X-GitHub-Delivery: u-6' -H "X-Hub-Signature-256: $(sign "$PAYLOAD")" --data-binary "@$PAYLOAD" \
		http://lcd/hooks/hooks/github)" = 404 ]
	[ "$(tasks)" -eq 0 ]
	# the secret was not changed through the webhook port: deliveries still verify with it
	[ "$(status_of github ping u-7 "$FIXTURES/webhook-ping.json")" = 200 ]
}

@test "webhook: a body over webhook_max_body is 413, with or without Content-Length, and spawns nothing" {
	python3 -c 'import json; print(json.dumps({"action": "labeled", "pad": "x" * 70000}))' >"$T/big.json"
	read -r st _ < <(deliver github issues b-1 "$T/big.json")
	[ "$st" = 413 ]
	read -r st _ < <(deliver github issues b-2 "$T/big.json" "" -H 'Transfer-Encoding: chunked')
	[ "$st" = 413 ]
	[ "$(tasks)" -eq 0 ]
	# just under the limit is fine
	python3 -c 'import json, sys; p = json.load(open(sys.argv[1])); p["pad"] = "x" * 60000; print(json.dumps(p))' \
		"$PAYLOAD" >"$T/ok.json"
	[ "$(status_of github issues b-3 "$T/ok.json")" = 202 ]
	[ "$(tasks)" -eq 1 ]
}

@test "webhook: a full queue is answered 503 with Retry-After at once, logged, and a redelivery is taken once there is room" {
	[ "$(status_of full issues q-1 "$PAYLOAD")" = 202 ]
	first=$(jq -r .task "$T/answer")
	wait_state "$first" running
	q2=$(variant q2)
	read -r st secs < <(deliver full issues q-2 "$q2" "" -D "$T/headers")
	[ "$st" = 503 ]
	grep -qi '^Retry-After: 60' "$T/headers"
	jq -e '.error | test("is full")' "$T/answer"
	grep -q 'webhook hooks/full delivery q-2 event issues.labeled from 127.0.0.1: 503 not handed on: hooks:gated is full' "$T/lcd.log"
	[ "$(tasks)" -eq 1 ]
	touch "$LCRUN_ROOT/lcd/tasks/$first/go"
	wait_state "$first" succeeded
	# GitHub's "Redeliver" sends the same id again: it was not recorded, so it is taken now
	[ "$(status_of full issues q-2 "$q2")" = 202 ]
	second=$(jq -r .task "$T/answer")
	wait_state "$second" running
	touch "$LCRUN_ROOT/lcd/tasks/$second/go"
	wait_state "$second" succeeded
	[ "$(tasks)" -eq 2 ]
}

@test "webhook: answered within 10 s while another process holds the database's write lock; handed on once" {
	# lcd's statements wait up to 5 s each for a locked database; the
	# connection waits at most 8 s for them: 503 if the delivery was not
	# taken yet, 202 if it was being queued (the outcome is logged later)
	(echo 'BEGIN EXCLUSIVE;'; sleep 9; echo 'COMMIT;') | sqlite3 "$LCRUN_ROOT/lcd.db" &
	locker=$!
	sleep 1
	read -r st secs < <(deliver github issues l-1 "$PAYLOAD")
	echo "# answered $st in ${secs}s with the database locked" >&3
	awk -v s="$secs" 'BEGIN { exit !(s < 10) }'
	[ "$st" = 503 ] || [ "$st" = 202 ]
	wait "$locker"
	then=
	if [ "$st" = 202 ] && jq -e .task "$T/answer" >/dev/null; then
		then=202 # it was queued in time
	elif [ "$st" = 202 ]; then
		jq -e '.note == "still being queued"' "$T/answer"
		# the late outcome, one more line
		for _ in $(seq 150); do
			then=$(sed -n 's/.*webhook hooks\/github delivery l-1 event issues.labeled from 127.0.0.1: then \([0-9]*\) .*/\1/p' "$T/lcd.log")
			[ -n "$then" ] && break
			sleep 0.1
		done
		[ -n "$then" ]
	fi
	# GitHub's redelivery: a duplicate if it was taken, else taken now
	again=$(status_of github issues l-1 "$PAYLOAD")
	if [ "$st" = 503 ] || [ "$then" != 202 ]; then [ "$again" = 202 ]; else [ "$again" = 200 ]; fi
	[ "$(tasks)" -eq 1 ]
}

@test "webhook: TLS with the configured certificate and key; plain HTTP and TLS 1.1 are refused" {
	stop_lcd
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 -subj /CN=127.0.0.1 \
		-addext subjectAltName=IP:127.0.0.1 -keyout "$T/key.pem" -out "$T/cert.pem" 2>/dev/null
	chmod 600 "$T/key.pem"
	write_config "\"webhook_tls_cert\": \"$T/cert.pem\", \"webhook_tls_key\": \"$T/key.pem\""
	start_lcd
	grep -q "webhooks served on https://127.0.0.1:$PORT" "$T/lcd.log"
	URL="https://127.0.0.1:$PORT"
	CURL_TLS=(--cacert "$T/cert.pem")
	read -r st secs < <(deliver github issues t-1 "$PAYLOAD")
	[ "$st" = 202 ]
	echo "# answered 202 over TLS in ${secs}s" >&3
	[ "$(status_of github issues t-2 "$PAYLOAD" -)" = 401 ]
	[ "$(tasks)" -eq 1 ]
	# the certificate is the one configured
	openssl s_client -connect "127.0.0.1:$PORT" -CAfile "$T/cert.pem" -verify_return_error </dev/null 2>/dev/null |
		grep -q 'Verify return code: 0 (ok)'
	# no plain HTTP on the TLS port, no TLS older than 1.2
	run curl -s --max-time 5 -o /dev/null -w '%{http_code}' -X POST --data '{}' "http://127.0.0.1:$PORT/hooks/hooks/github"
	[ "$output" = 000 ]
	if curl -s --max-time 5 --cacert "$T/cert.pem" --tlsv1.1 --tls-max 1.1 -o /dev/null "$URL/hooks/hooks/github"; then false; fi
	# a certificate without its key, or a key that is not PEM, is refused at start
	stop_lcd
	write_config "\"webhook_tls_cert\": \"$T/cert.pem\""
	run "$LCD" --socket "$LCD_SOCKET" --config "$T/lcd.json"
	[ "$status" -eq 123 ]
	[[ "$output" == *"webhook TLS needs both webhook_tls_cert and webhook_tls_key"* ]]
	echo garbage >"$T/bad.pem"
	write_config "\"webhook_tls_cert\": \"$T/cert.pem\", \"webhook_tls_key\": \"$T/bad.pem\""
	run "$LCD" --socket "$LCD_SOCKET" --config "$T/lcd.json"
	[ "$status" -eq 121 ]
	[[ "$output" == *"webhook_tls_key $T/bad.pem: not a PEM file"* ]]
}

@test "webhook: lcd refuses a bad webhook_listen or a port in use, with one line" {
	stop_lcd
	echo '{"webhook_listen": "127.0.0.1"}' >"$T/lcd.json"
	run "$LCD" --socket "$LCD_SOCKET" --config "$T/lcd.json"
	[ "$status" -eq 123 ]
	[[ "$output" == *"webhook_listen '127.0.0.1': expected HOST:PORT"* ]]
	python3 -c 'import socket, time, sys; s = socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(); time.sleep(30)' "$PORT" &
	holder=$!
	# listening before lcd tries (a fixed wait lost that race on a slow
	# machine: lcd took the port and ran on, and the test never ended)
	for _ in $(seq 200); do ss -Hltn "sport = :$PORT" | grep -q . && break; sleep 0.05; done
	ss -Hltn "sport = :$PORT" | grep -q .
	write_config
	run timeout 30 "$LCD" --socket "$LCD_SOCKET" --config "$T/lcd.json"
	kill "$holder"
	[ "$status" -eq 125 ]
	[[ "$output" == *"webhook_listen 127.0.0.1:$PORT: cannot listen: Address already in use"* ]]
	echo "{\"webhook_tls_key\": \"$T/x.pem\"}" >"$T/lcd.json"
	run "$LCD" --socket "$LCD_SOCKET" --config "$T/lcd.json"
	[ "$status" -eq 123 ]
	[[ "$output" == *"need webhook_listen"* ]]
}
