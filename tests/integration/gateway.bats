#!/usr/bin/env bats
# lcd's model gateway (README "The model gateway") as a sandbox meets it: a
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
	stop_lcd
	local f
	for f in "$BATS_TEST_TMPDIR"/*.pid; do
		[ -e "$f" ] && dbl_stop "$(basename "$f" .pid)"
	done
	# operator sandboxes outlive lcd by design: remove what a test left
	if [ -n "${T:-}" ] && [ -d "$T/state" ]; then
		for id in $("$LCRUN" ps --json 2>/dev/null | jq -r '.[].id'); do "$LCRUN" rm -f "$id" >/dev/null 2>&1 || true; done
		"$LCRUN" gc >/dev/null 2>&1 || true
	fi
	dbl_netns_down
	lcd_teardown
	[ ! -f "$BATS_TEST_TMPDIR/host.before" ] || assert_host_clean
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
	! grep -q "$token" "$W/req.jsonl"
	! grep -q lcgw- "$W/req.jsonl"
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
