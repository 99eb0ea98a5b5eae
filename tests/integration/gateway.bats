#!/usr/bin/env bats
# lcd's model gateway (docs/design/gateway.md) as a sandbox meets it: a
# private lcd per test whose gateway talks HTTPS (a test CA, verified) to a
# model double in a network namespace of the test's own; sandboxes made with
# "model_gateway" call it with curl, the real Claude Code and the real Codex
# CLI of the agent-cli image.  Needs root, nftables and veths; the VM suite
# skips the file (nothing here needs a cgroup v2 controller).

load helpers
load lcd-lib
load doubles-lib
load gateway-lib

FIXTURES="$BATS_TEST_DIRNAME/../fixtures"

setup_file() {
	[ "$(id -u)" = 0 ] || skip "needs root"
	export DBL_NS=lcgw-$$
	export GW_CA="$BATS_FILE_TMPDIR/ca"
	gw_ca "$GW_CA"
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
	local rc=0
	stop_lcd
	local f
	for f in "$BATS_TEST_TMPDIR"/*.pid; do
		[ -e "$f" ] && dbl_stop "$(basename "$f" .pid)"
	done
	# operator sandboxes outlive lcd by design: remove what a test left
	if [ -n "${T:-}" ] && [ -d "$T/state" ]; then
		lcd_leftovers_remove || rc=1
		"$LCRUN" gc >/dev/null 2>&1 || true
	fi
	dbl_netns_down
	lcd_teardown
	[ ! -f "$BATS_TEST_TMPDIR/host.before" ] || assert_host_clean || rc=1
	return $rc
}

turns() { # the double's script, from stdin, in $W/turns.json
	cat >"$W/turns.json"
}

# claude-sonnet-4-5: $3 / $15 per M input / output, $0.30 cache read, $3.75 cache write

@test "gateway: the key is swapped at the gateway; usage and spend are recorded exactly, whole and streamed" {
	turns <<'EOF'
{"turns": [{"text": "whole", "usage": {"input_tokens": 1000, "output_tokens": 100}},
           {"text": "streamed", "usage": {"input_tokens": 2000, "output_tokens": 10, "cache_read_input_tokens": 3000, "cache_creation_input_tokens": 400}}]}
EOF
	gw_up anthropic-double.py "$W/turns.json"
	gw_sandbox --budget-usd 5
	# the sandbox's environment: the gateway on its own veth, a token of its own
	run "$LCCTL" sandbox exec "$SB" -- sh -c 'echo "$ANTHROPIC_BASE_URL $ANTHROPIC_API_KEY"'
	[ "$status" -eq 0 ]
	gwaddr=$("$LCCTL" sandbox show "$SB" | jq -r .model_gateway.base_url)
	[[ "$output" =~ ^http://10\.[0-9.]+:7071\ lcgw-[0-9a-f]{64}$ ]]
	[ "${output%% *}" = "$gwaddr" ]
	token=${output##* }

	run ask "$SB" "{\"model\": \"$S4\", \"max_tokens\": 50, \"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}"
	echo "$output"
	[ "$status" -eq 0 ]
	[ "${lines[-1]}" = 200 ]
	[ "$(echo "${lines[0]}" | jq -r '.content[0].text')" = whole ]
	run ask "$SB" "{\"model\": \"$S4\", \"stream\": true, \"messages\": []}"
	[ "${lines[-1]}" = 200 ]
	# the stream as the double sent it, event for event
	[ "$(printf '%s\n' "${lines[@]}" | grep -c '^event: ')" -eq 9 ]
	printf '%s\n' "${lines[@]}" | grep -q '^event: message_stop$'
	# count_tokens and models pass and cost nothing
	"$LCCTL" sandbox exec "$SB" -- sh -c 'curl -sf -H "x-api-key: $ANTHROPIC_API_KEY" -d "{\"model\": \"x\", \"messages\": []}" $ANTHROPIC_BASE_URL/v1/messages/count_tokens' | jq -e '.input_tokens > 0'
	"$LCCTL" sandbox exec "$SB" -- sh -c 'curl -sf -H "x-api-key: $ANTHROPIC_API_KEY" $ANTHROPIC_BASE_URL/v1/models' | jq -e '.data | length == 1'

	# the provider got the real key, never the token, and the client's own headers
	[ "$(jq -r '.headers["x-api-key"]' "$W/req.jsonl" | sort -u)" = "$REAL_KEY" ]
	if grep -q "$token" "$W/req.jsonl"; then false; fi
	if grep -q lcgw- "$W/req.jsonl"; then false; fi
	[ "$(jq -r 'select(.turn == 1) | "\(.query) \(.headers["anthropic-version"]) \(.headers["accept-encoding"])"' "$W/req.jsonl")" = " 2023-06-01 identity" ]
	[ "$(jq -s length "$W/req.jsonl")" -eq 4 ]

	# 1000 in, 100 out: $0.0045; 2000 in, 10 out, 3000 cache read, 400 write: $0.00855
	v=$("$LCCTL" sandbox show "$SB")
	echo "$v" | jq .
	[ "$(echo "$v" | jq -c .tokens)" = '{"input":3000,"output":110,"cache_read":3000,"cache_write":400}' ]
	[ "$(echo "$v" | jq -r .spend_usd)" = 0.01305 ]
	[ "$(curl -s --unix-socket "$LCD_SOCKET" "http://lcd/v1/sandboxes/$SB" | jq -r .spend_usd)" = 0.01305 ]
	echo "$v" | jq -e '.model_gateway | .provider == "anthropic" and .secret == "ANTHROPIC_API_KEY" and .budget_usd == 5 and .requests == 2 and .budget_exceeded == false'
	# one ledger row per billed request, each priced exactly
	[ "$(ledger "sandbox_id = '$SB'" | jq -r '"\(.outcome) \(.status) \(.input_tokens) \(.output_tokens) \(.cache_read_tokens) \(.cache_write_tokens) \(.cost_pusd)"' | tr '\n' ,)" = "ok 200 1000 100 0 0 4500000000,ok 200 2000 10 3000 400 8550000000," ]
	# the operator's sandbox is no task's
	ledger "sandbox_id = '$SB'" | jq -e '.task_id == null and .app == null'
	grep -q "model gateway: sandbox $SB anthropic /v1/messages model $S4: 200 ok, tokens in 2000 out 10 cache read 3000 write 400, \$0.008550" "$T/lcd.log"
}

@test "gateway: wrong, foreign and expired tokens are refused; paths, methods and models it does not serve" {
	turns <<'EOF'
{"turns": [{"text": "a"}], "loop": true}
EOF
	gw_up anthropic-double.py "$W/turns.json"
	gw_sandbox
	A=$SB
	tokA=$("$LCCTL" sandbox exec "$A" -- sh -c 'echo $ANTHROPIC_API_KEY')
	urlA=$("$LCCTL" sandbox exec "$A" -- sh -c 'echo $ANTHROPIC_BASE_URL')
	gw_sandbox
	B=$SB
	call() { # SB KEY-HEADER URL [CURL ARGS]
		local sb=$1 h=$2 u=$3
		shift 3
		"$LCCTL" sandbox exec "$sb" -- curl -sS -H "$h" -H 'content-type: application/json' "$@" "$u" -w '\n%{http_code}\n'
	}
	body='{"model": "claude-sonnet-4-5", "messages": []}'
	# no token, a wrong one, one of the right form but not live
	run call "$A" "x-other: 1" "$urlA/v1/messages" -d "$body"
	[ "${lines[-1]}" = 401 ]
	[ "$(echo "${lines[0]}" | jq -r '"\(.type) \(.error.type)"')" = "error authentication_error" ]
	run call "$A" "x-api-key: sk-ant-guess" "$urlA/v1/messages" -d "$body"
	[ "${lines[-1]}" = 401 ]
	run call "$A" "x-api-key: lcgw-$(printf '%064d' 0)" "$urlA/v1/messages" -d "$body"
	[ "${lines[-1]}" = 401 ]
	# A's token works for A, as x-api-key and as a bearer token
	run call "$A" "x-api-key: $tokA" "$urlA/v1/messages" -d "$body"
	[ "${lines[-1]}" = 200 ]
	run call "$A" "Authorization: Bearer $tokA" "$urlA/v1/messages" -d "$body"
	[ "${lines[-1]}" = 200 ]
	# ... but not from B, whether sent to A's listener or to B's own
	run call "$B" "x-api-key: $tokA" "$urlA/v1/messages" -d "$body"
	[ "${lines[-1]}" = 401 ]
	urlB=$("$LCCTL" sandbox exec "$B" -- sh -c 'echo $ANTHROPIC_BASE_URL')
	run call "$B" "x-api-key: $tokA" "$urlB/v1/messages" -d "$body"
	[ "${lines[-1]}" = 401 ]
	grep -q "refused POST /v1/messages from sandbox $A: the token of another sandbox" "$T/lcd.log"
	# paths and methods of the provider's API it does not serve; a body it cannot price
	run call "$A" "x-api-key: $tokA" "$urlA/v1/complete" -d "$body"
	[ "${lines[-1]}" = 404 ]
	[ "$(echo "${lines[0]}" | jq -r .error.type)" = not_found_error ]
	run call "$A" "x-api-key: $tokA" "$urlA/v1/messages"
	[ "${lines[-1]}" = 405 ]
	run call "$A" "x-api-key: $tokA" "$urlA/v1/messages" -d 'not json'
	[ "${lines[-1]}" = 400 ]
	[ "$(echo "${lines[0]}" | jq -r .error.type)" = invalid_request_error ]
	run call "$A" "x-api-key: $tokA" "$urlA/v1/messages" -d '{"messages": []}'
	[ "${lines[-1]}" = 400 ]
	[[ "${lines[0]}" == *"model: required"* ]]
	n=$(jq -s length "$W/req.jsonl")
	[ "$n" -eq 2 ]
	# the gateway listens on A's IPv6 host address too (its lease has one), for A only
	gw6=$(jq -r .gateway6 "$LCRUN_STATE_DIR/net/$A.json")
	[[ "$gw6" == *::1 ]]
	run call "$A" "x-api-key: $tokA" "http://[$gw6]:7071/v1/messages" -g -d "$body"
	[ "${lines[-1]}" = 200 ]
	run call "$B" "x-api-key: $tokA" "http://[$gw6]:7071/v1/messages" -g -d "$body"
	[ "${lines[-1]}" = 401 ]
	n=$(jq -s length "$W/req.jsonl")
	[ "$n" -eq 3 ]
	# A is removed: its token dies with it
	"$LCCTL" sandbox rm "$A"
	run call "$B" "x-api-key: $tokA" "$urlB/v1/messages" -d "$body"
	[ "${lines[-1]}" = 401 ]
	[ "$(sqlite3 "$LCRUN_ROOT/lcd.db" "select count(*) from gateway_sandboxes where sandbox_id = '$A'")" -eq 0 ]
	# nothing of it reached the provider
	[ "$(jq -s length "$W/req.jsonl")" -eq "$n" ]
	# a site price table without "*": a model it does not list is refused
	stop_lcd
	export LCRUN_ETC_DIR="$T/etc"
	mkdir -p "$LCRUN_ETC_DIR/policies"
	echo '{"anthropic": {"claude-sonnet-4-5": {"input": 3, "output": 15}}}' >"$LCRUN_ETC_DIR/policies/model-prices.json"
	start_lcd
	grep -q "prices $LCRUN_ETC_DIR/policies/model-prices.json" "$T/lcd.log"
	tokB=$("$LCCTL" sandbox exec "$B" -- sh -c 'echo $ANTHROPIC_API_KEY')
	run call "$B" "x-api-key: $tokB" "$urlB/v1/messages" -d '{"model": "claude-opus-9", "messages": []}'
	[ "${lines[-1]}" = 400 ]
	[[ "${lines[0]}" == *"model claude-opus-9 has no price"* ]]
	run call "$B" "x-api-key: $tokB" "$urlB/v1/messages" -d '{"model": "claude-sonnet-4-5-20250929", "messages": []}'
	[ "${lines[-1]}" = 200 ]
}

@test "gateway: OpenAI chat and responses, whole and streamed: usage metered exactly, the usage chunk asked for" {
	turns <<'EOF2'
{"turns": [{"text": "whole", "usage": {"input_tokens": 1000, "output_tokens": 200}},
           {"text": "streamed", "usage": {"input_tokens": 2000, "output_tokens": 100, "cached_tokens": 500}},
           {"text": "responses", "usage": {"input_tokens": 300, "output_tokens": 30}}]}
EOF2
	REAL_KEY="sk-proj-REAL-$RANDOM$RANDOM-never-in-a-sandbox"
	gw_up openai-double.py "$W/turns.json"
	gw_sandbox --budget-usd 1
	run "$LCCTL" sandbox exec "$SB" -- sh -c 'echo "$OPENAI_BASE_URL $OPENAI_API_KEY"'
	[[ "$output" =~ ^http://10\.[0-9.]+:7071/v1\ lcgw-[0-9a-f]{64}$ ]]
	m=gpt-4o-mini
	run ask "$SB" "{\"model\": \"$m\", \"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}"
	echo "$output"
	[ "${lines[-1]}" = 200 ]
	[ "$(echo "${lines[0]}" | jq -r '.choices[0].message.content')" = whole ]
	# the client does not ask for the usage chunk: the gateway does
	run ask "$SB" "{\"model\": \"$m\", \"stream\": true, \"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}"
	echo "$output"
	[ "${lines[-1]}" = 200 ]
	printf '%s\n' "${lines[@]}" | grep -q '^data: \[DONE\]$'
	[ "$(jq -r 'select(.turn == 1) | .body.stream_options.include_usage' "$W/req.jsonl")" = true ]
	run "$LCCTL" sandbox exec "$SB" -- sh -c 'curl -sS -N -H "Authorization: Bearer $OPENAI_API_KEY" -H "content-type: application/json" -d "{\"model\": \"gpt-4o-mini\", \"stream\": true, \"input\": \"hi\"}" "$OPENAI_BASE_URL/responses" -w "\n%{http_code}\n"'
	echo "$output"
	[ "${lines[-1]}" = 200 ]
	printf '%s\n' "${lines[@]}" | grep -q 'response.completed'
	[ "$(jq -r '.headers.authorization' "$W/req.jsonl" | sort -u)" = "Bearer $REAL_KEY" ]
	if grep -q lcgw- "$W/req.jsonl"; then false; fi
	# gpt-4o-mini: $0.15 in, $0.60 out, $0.075 cached (OpenAI counts cached inside its input)
	# 1000 in 200 out: 270000000; 1500 in 500 cached 100 out: 322500000; 300 in 30 out: 63000000
	[ "$(ledger "sandbox_id = '$SB'" | jq -r '"\(.path) \(.input_tokens) \(.output_tokens) \(.cache_read_tokens) \(.cost_pusd)"' | tr '\n' ,)" = "/v1/chat/completions 1000 200 0 270000000,/v1/chat/completions 1500 100 500 322500000,/v1/responses 300 30 0 63000000," ]
	v=$("$LCCTL" sandbox show "$SB")
	[ "$(echo "$v" | jq -c .tokens)" = '{"input":2800,"output":330,"cache_read":500,"cache_write":0}' ]
	[ "$(echo "$v" | jq -r .spend_usd)" = 0.0006555 ]
}

@test "gateway: a budget of \$0.01 spent by one answer ends a stream in flight and refuses the next request, in the provider's shape" {
	# the stream's message_start costs little; it stalls after it, while a
	# whole answer of $0.0105 (3000 in, 100 out) spends the budget
	turns <<'EOF2'
{"turns": [{"text": "long", "usage": {"input_tokens": 10, "output_tokens": 5}, "stall_at_event": 2, "stall": 20},
           {"text": "dear", "usage": {"input_tokens": 3000, "output_tokens": 100}},
           {"text": "never"}]}
EOF2
	gw_up anthropic-double.py "$W/turns.json" '{"idle_timeout": 60}'
	gw_sandbox --budget-usd 0.01
	# both fit the budget when they start (each is reserved for its
	# max_tokens): the dear one's usage, once reported, ends the other
	ask "$SB" "{\"model\": \"$S4\", \"stream\": true, \"max_tokens\": 50, \"messages\": []}" >"$W/stream.out" 2>&1 &
	spid=$!
	# the double stalls after message_start and ping
	for _ in $(seq 100); do grep -q '^event: ping' "$W/stream.out" && break; sleep 0.1; done
	grep -q '^event: message_start' "$W/stream.out"
	run ask "$SB" "{\"model\": \"$S4\", \"max_tokens\": 100, \"messages\": []}"
	echo "$output"
	[ "${lines[-1]}" = 200 ]
	[ "$(echo "${lines[0]}" | jq -r '.content[0].text')" = dear ]
	# the stream in flight ends at once, with an error event of Anthropic's shape
	wait "$spid"
	cat "$W/stream.out"
	grep -q '^event: error$' "$W/stream.out"
	grep '^data: {"type":"error"' "$W/stream.out" | sed 's/^data: //' | jq -e '.error.type == "billing_error" and (.error.message | test("budget of \\$0.01 is spent"))'
	if grep -q 'message_stop' "$W/stream.out"; then false; fi
	# the next request is refused before it reaches the provider: counted, not a ledger row
	run ask "$SB" "{\"model\": \"$S4\", \"max_tokens\": 100, \"messages\": []}"
	echo "$output"
	[ "${lines[-1]}" = 402 ]
	echo "${lines[0]}" | jq -e '.type == "error" and .error.type == "billing_error"'
	[ "$(jq -s length "$W/req.jsonl")" -eq 2 ]
	[ "$(ledger "sandbox_id = '$SB'" | jq -r '"\(.outcome) \(.status) \(.budget_exceeded)"' | sort | tr '\n' ,)" = "cut 200 1,ok 200 1," ]
	v=$("$LCCTL" sandbox show "$SB")
	echo "$v" | jq -e '.model_gateway.budget_exceeded == true and .model_gateway.refused == 1 and .spend_usd >= 0.01'
	# OpenAI's shape for the same refusal
	stop_lcd
	dbl_stop model
	REAL_KEY="sk-proj-REAL-$RANDOM"
	turns <<'EOF2'
{"turns": [{"text": "dear", "usage": {"input_tokens": 100000, "output_tokens": 100}}, {"text": "never"}]}
EOF2
	rm -f "$LCRUN_ROOT/lcd.db"* "$W/req.jsonl"
	gw_up openai-double.py "$W/turns.json"
	gw_sandbox --budget-usd 0.01
	run ask "$SB" '{"model": "gpt-4o-mini", "max_tokens": 100, "messages": []}'
	[ "${lines[-1]}" = 200 ]
	run ask "$SB" '{"model": "gpt-4o-mini", "max_tokens": 100, "messages": []}'
	echo "$output"
	[ "${lines[-1]}" = 402 ]
	echo "${lines[0]}" | jq -e '.error.type == "insufficient_quota" and .error.code == "budget_exceeded"'
}

@test "gateway: the key is nowhere in the sandbox, and the sandbox cannot reach the provider itself" {
	turns <<'EOF2'
{"turns": [{"text": "a"}], "loop": true}
EOF2
	gw_up anthropic-double.py "$W/turns.json"
	gw_sandbox -e FOO=bar
	run ask "$SB" "{\"model\": \"$S4\", \"messages\": []}"
	[ "${lines[-1]}" = 200 ]
	# every process's environment and command line, and the places a sandbox
	# writes: the key goes in on stdin only, as grep's pattern
	run sh -c "printf '%s\n' '$REAL_KEY' | '$LCCTL' sandbox exec -i '$SB' -- sh -c 'cat >/dev/shm/.k; cp /dev/shm/.k /tmp/control; sleep 5 & grep -rlsF -f /dev/shm/.k /proc/[0-9]*/environ /proc/[0-9]*/cmdline /tmp /root /home /run /etc /var/tmp; rm /dev/shm/.k /tmp/control'"
	echo "$output"
	# the control copy is found (the scan works), nothing else
	[ "$output" = /tmp/control ]
	# nor in lcd's log and state, nor in the sandbox's
	if grep -rqF "$REAL_KEY" "$T/lcd.log" "$LCRUN_STATE_DIR"; then false; fi
	# the double is routed from the host, but the sandbox's chain lets
	# only the gateway's port on the host through
	run "$LCCTL" sandbox exec "$SB" -- curl -sS -k --max-time 3 "https://$DBL4:$DBL_PORT/v1/models"
	echo "$output"
	[ "$status" -ne 0 ]
	run "$LCCTL" sandbox exec "$SB" -- sh -c 'curl -sS --max-time 3 "http://${ANTHROPIC_BASE_URL#http://}" -o /dev/null -w "%{http_code}"; h=${ANTHROPIC_BASE_URL#http://}; curl -sS --max-time 3 "http://${h%:*}:22/" -o /dev/null'
	echo "$output"
	[ "$status" -ne 0 ]
	# the provider saw requests only through the gateway, with the real key
	[ "$(jq -r '.headers["x-api-key"]' "$W/req.jsonl" | sort -u)" = "$REAL_KEY" ]
}

@test "gateway: a client gone mid-stream, a provider that stalls, breaks off or answers garbage; the gateway serves on" {
	turns <<'EOF2'
{"turns": [{"text": "slow", "stall_at_event": 2, "stall": 8, "usage": {"input_tokens": 7, "output_tokens": 1}},
           {"text": "stall", "stall": 20},
           {"text": "stall mid-stream", "stall_at_event": 3, "stall": 20},
           {"text": "cut", "cut_after_events": 3},
           {"text": "garbage", "malformed": true},
           {"text": "fine", "usage": {"input_tokens": 11, "output_tokens": 2}}]}
EOF2
	gw_up anthropic-double.py "$W/turns.json"
	gw_sandbox
	# the client hangs up while the provider is silent (after message_start and ping)
	run "$LCCTL" sandbox exec "$SB" -- sh -c 'curl -sS -N -H "x-api-key: $ANTHROPIC_API_KEY" -d "{\"model\": \"claude-sonnet-4-5\", \"stream\": true, \"messages\": []}" "$ANTHROPIC_BASE_URL/v1/messages" >/tmp/o & for i in $(seq 200); do grep -q "^event: ping" /tmp/o && break; sleep 0.05; done; kill $!; cat /tmp/o'
	echo "$output"
	[[ "$output" == *"event: message_start"* ]]
	for _ in $(seq 100); do [ "$(ledger "sandbox_id = '$SB'" | wc -l)" -ge 1 ] && break; sleep 0.1; done
	[ "$(ledger "sandbox_id = '$SB'" | jq -r '"\(.outcome) \(.input_tokens)"')" = "client_gone 7" ]
	# the provider sends nothing for idle_timeout (3 s): 504 in the provider's shape
	run ask "$SB" "{\"model\": \"$S4\", \"messages\": []}"
	echo "$output"
	[ "${lines[-1]}" = 504 ]
	echo "${lines[0]}" | jq -e '.type == "error" and .error.type == "api_error"'
	# ... or stops sending mid-stream: the stream ends with an error event
	run ask "$SB" "{\"model\": \"$S4\", \"stream\": true, \"messages\": []}"
	echo "$output"
	[ "${lines[-1]}" = 200 ]
	printf '%s\n' "${lines[@]}" | grep -q '^event: error$'
	printf '%s\n' "${lines[@]}" | grep -q 'sent nothing for 3 s'
	# ... or drops the connection mid-stream
	run ask "$SB" "{\"model\": \"$S4\", \"stream\": true, \"messages\": []}"
	echo "$output"
	printf '%s\n' "${lines[@]}" | grep -q '^event: error$'
	printf '%s\n' "${lines[@]}" | grep -q 'broke off'
	# ... or answers with a body that is not JSON: passed on as it is
	run ask "$SB" "{\"model\": \"$S4\", \"messages\": []}"
	echo "$output"
	[ "${lines[-1]}" = 200 ]
	if echo "${lines[0]}" | jq . >/dev/null 2>&1; then false; fi
	# and the gateway still serves, and counts
	run ask "$SB" "{\"model\": \"$S4\", \"messages\": []}"
	[ "${lines[-1]}" = 200 ]
	[ "$(echo "${lines[0]}" | jq -r '.content[0].text')" = fine ]
	# the garbage answer: a request recorded as unmetered (no usage, no cost), counted in the views
	[ "$(ledger "sandbox_id = '$SB'" | jq -r .outcome | tr '\n' ,)" = "client_gone,timeout,timeout,upstream_error,unmetered,ok," ]
	"$LCCTL" sandbox show "$SB" | jq -e '.model_gateway.unmetered == 1 and .model_gateway.requests == 6'
	grep -q "model gateway: sandbox $SB anthropic /v1/messages model $S4: 200 unmetered, tokens in 0 out 0" "$T/lcd.log"
	kill -0 "$LCD_PID"
}

@test "gateway: Claude Code of the agent-cli image completes a run through the gateway, metered turn by turn" {
	gw_share_images
	agent_cli_image
	turns <<'EOF2'
{"turns": [{"tool_use": {"name": "Bash", "input": {"command": "echo through-the-gateway > /tmp/out.txt"}},
            "usage": {"input_tokens": 1200, "output_tokens": 80}},
           {"text": "Done.", "usage": {"input_tokens": 1500, "output_tokens": 20, "cache_read_input_tokens": 1000}}]}
EOF2
	gw_up anthropic-double.py "$W/turns.json"
	gw_sandbox --image agent-cli -u 1000:1000 -w /home/agent --budget-usd 1
	run "$LCCTL" sandbox exec -e CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 "$SB" -- \
		claude -p "write the file" --output-format json --dangerously-skip-permissions --model "$S4"
	echo "$output"
	[ "$status" -eq 0 ]
	echo "$output" | jq -e '.is_error == false and .result == "Done."'
	[ "$("$LCCTL" sandbox exec "$SB" -- cat /tmp/out.txt)" = through-the-gateway ]
	[ "$(jq -r '.headers["x-api-key"]' "$W/req.jsonl" | sort -u)" = "$REAL_KEY" ]
	[ "$(jq -s length "$W/req.jsonl")" -eq 2 ]
	# streamed turns: 1200*3 + 80*15 = 4800 µ$; 1500*3 + 20*15 + 1000*0.3 = 5100 µ$
	[ "$(ledger "sandbox_id = '$SB'" | jq -r '"\(.outcome) \(.input_tokens) \(.output_tokens) \(.cache_read_tokens) \(.cost_pusd)"' | tr '\n' ,)" = "ok 1200 80 0 4800000000,ok 1500 20 1000 5100000000," ]
	[ "$("$LCCTL" sandbox show "$SB" | jq -r .spend_usd)" = 0.0099 ]
}

@test "gateway: a task's sandbox is held to its function's budget_usd; lcctl task show has the task's spend" {
	turns <<'EOF2'
{"turns": [{"text": "dear", "usage": {"input_tokens": 3000, "output_tokens": 100}}, {"text": "never"}]}
EOF2
	gw_up anthropic-double.py "$W/turns.json"
	# the function makes a sandbox with the gateway (no budget of its own)
	# and asks twice; the function's budget is $0.01
	cat >"$W/agent.py" <<'EOF2'
import json
from lcrun_client import Client
sb = Client().create_sandbox(model_gateway={"provider": "anthropic", "secret": "ANTHROPIC_API_KEY"})
cmd = ('curl -sS -o /dev/null -w "%{http_code}" -H "x-api-key: $ANTHROPIC_API_KEY" -H "content-type: application/json" '
       '-d \'{"model": "claude-sonnet-4-5", "max_tokens": 100, "messages": []}\' "$ANTHROPIC_BASE_URL/v1/messages"')
codes = [sb.run(cmd).stdout for _ in range(2)]
json.dump({"sandbox": sb.id, "codes": codes}, open("/run/task/result.json", "w"))
sb.destroy()
EOF2
	jq -n --rawfile s "$W/agent.py" '{name: "gwa", functions: {agent: {command: ["/usr/bin/python3", "-c", $s],
		timeout: 120, secrets: ["ANTHROPIC_API_KEY"], budget_usd: 0.01}}, sandboxes: {max: 2, model_gateway: true}}' >"$W/app.json"
	"$LCCTL" deploy "$W/app.json"
	t=$("$LCCTL" run --detach gwa:agent)
	wait_state "$t" succeeded 120
	v=$("$LCCTL" task show "$t")
	echo "$v" | jq .
	echo "$v" | jq -e '.result.codes == ["200", "402"]'
	[ "$(echo "$v" | jq -r .spend_usd)" = 0.0105 ]
	echo "$v" | jq -e '.tokens.input == 3000 and .tokens.output == 100 and .model_requests == 1 and .model_refused == 1 and .budget_exceeded == true'
	sb=$(echo "$v" | jq -r .result.sandbox)
	[ "$(ledger "task_id = '$t'" | jq -r '"\(.sandbox_id) \(.app) \(.outcome) \(.budget_exceeded)"' | tr '\n' ,)" = "$sb gwa ok 1," ]
	grep -q "model gateway: sandbox $sb task $t anthropic /v1/messages model claude-sonnet-4-5: 402 refused (budget): the task's model budget of \$0.01 is spent" "$T/lcd.log"
	[ "$(jq -s length "$W/req.jsonl")" -eq 1 ]
}

@test "gateway: Codex CLI of the agent-cli image completes a run through the gateway (a provider block at OPENAI_BASE_URL)" {
	gw_share_images
	agent_cli_image
	turns <<'EOF2'
{"turns": [
 {"tool_call": {"name": "exec_command", "arguments": {"cmd": "echo codex-through-the-gateway > /tmp/out.txt"}},
  "usage": {"input_tokens": 1000, "output_tokens": 100, "cached_tokens": 200}},
 {"text": "Done with codex.", "usage": {"input_tokens": 2000, "output_tokens": 10, "cached_tokens": 1500}}]}
EOF2
	REAL_KEY="sk-proj-REAL-$RANDOM$RANDOM"
	gw_up openai-double.py "$W/turns.json"
	gw_sandbox --image agent-cli -u 1000:1000 -w /home/agent
	# codex reads its base URL from a provider block, not from OPENAI_BASE_URL;
	# its web search is a tool the provider runs, which the gateway refuses unpriced
	run "$LCCTL" sandbox exec "$SB" -- sh -c 'mkdir -p "$HOME/.codex" && printf "model_provider = \"lcrun\"\nmodel = \"gpt-5\"\nweb_search = \"disabled\"\n[model_providers.lcrun]\nname = \"lcrun\"\nbase_url = \"%s\"\nenv_key = \"OPENAI_API_KEY\"\nwire_api = \"responses\"\n[analytics]\nenabled = false\n" "$OPENAI_BASE_URL" >"$HOME/.codex/config.toml" && codex exec --json --dangerously-bypass-approvals-and-sandbox --skip-git-repo-check "write the file" </dev/null'
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"Done with codex."* ]]
	[ "$("$LCCTL" sandbox exec "$SB" -- cat /tmp/out.txt)" = codex-through-the-gateway ]
	[ "$(jq -r '"\(.path) \(.headers.authorization) \(.body.model)"' "$W/req.jsonl" | sort -u)" = "/v1/responses Bearer $REAL_KEY gpt-5" ]
	# gpt-5: 800 in, 200 cached, 100 out; 500 in, 1500 cached, 10 out
	[ "$(ledger "sandbox_id = '$SB'" | jq -r '"\(.path) \(.input_tokens) \(.cache_read_tokens) \(.output_tokens) \(.cost_pusd)"' | tr '\n' ,)" = "/v1/responses 800 200 100 2025000000,/v1/responses 500 1500 10 912500000," ]
	[ "$("$LCCTL" sandbox show "$SB" | jq -r .spend_usd)" = 0.0029375 ]
}
