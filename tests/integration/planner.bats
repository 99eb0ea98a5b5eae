#!/usr/bin/env bats
# The sandboxed-coding-agent app (contrib/apps/sandboxed-coding-agent) as a
# user runs it: deployed with its configure script (secrets from the
# environment), a private lcd, the OpenAI-compatible double in a network
# namespace of the test's own at 192.0.2.10, reached by plan-patch through a
# site policy (LCRUN_ETC_DIR) that allows that address and port only
# (MODEL_ACCESS=direct), or through lcd's model gateway, which talks HTTPS
# to the double with a test CA (MODEL_ACCESS=gateway, the app's default;
# gateway-lib.bash).
# Needs root.  Nothing here needs a cgroup v2 controller: the VM suite skips
# the file.

bats_require_minimum_version 1.5.0

load helpers
load lcd-lib
load doubles-lib
load gateway-lib

APPDIR="$BATS_TEST_DIRNAME/../../contrib/apps/sandboxed-coding-agent"
SEED="$APPDIR/seed"
APP=sandboxed-coding-agent

setup() {
	[ "$(id -u)" = 0 ] || skip "needs root"
	[ -z "${LCRUN_IN_VM:-}" ] || skip "no cgroup v2 controller needed: the host suite runs the planner's tests"
	command -v /usr/bin/python3 >/dev/null || skip "needs /usr/bin/python3"
	nft list tables >/dev/null 2>&1 || skip "needs nftables (--net allow)"
	host_snapshot
	lcd_setup
	LCRUN="${LCRUN:-$BIN/lcrun}"
	export LCRUN_ETC_DIR="$T/etc"
	mkdir -p "$LCRUN_ETC_DIR/policies/net"
	# an address pool of the file's own: a sandbox another suite left in
	# the default pool cannot shadow the routes of these
	echo '{"net_pool": "10.231.0.0/16", "net_pool6": "fd6c:6372:e7::/48"}' >"$LCRUN_ETC_DIR/lcrun.json"
	W=$BATS_TEST_TMPDIR
	KEY="sk-test-$RANDOM$RANDOM$RANDOM-planner-key"
	SEED_SUM=$(cd "$SEED" && find . -type f | sort | xargs sha256sum; stat -c '%n %a %Y' "$SEED"/*)
	export DBL_NS=lcpl-$$
	dbl_netns_up
	start_lcd
}

teardown() {
	stop_lcd
	for f in "$BATS_TEST_TMPDIR"/*.pid; do
		[ -e "$f" ] && dbl_stop "$(basename "$f" .pid)"
	done
	dbl_netns_down
	lcd_teardown
	[ ! -f "$BATS_TEST_TMPDIR/host.before" ] || assert_host_clean
}

# ---- helpers ----

patch_json() { # PATH CONTENT [PATH CONTENT]...: {"files": [...]} as compact JSON
	local args=() i=0
	while [ $# -gt 0 ]; do
		args+=(--arg "p$i" "$1" --arg "c$i" "$2")
		shift 2
		i=$((i + 1))
	done
	local expr='[' k
	for ((k = 0; k < i; k++)); do
		expr+="{path: \$p$k, content: \$c$k}"
		[ $k -lt $((i - 1)) ] && expr+=','
	done
	jq -cn "${args[@]}" "{files: $expr]}"
}

good_calc() { sed '0,/return a - b/s//return a + b/' "$SEED/calculator.py"; }

text_turn() { jq -cn --arg t "$1" '{text: $t, usage: {input_tokens: 900, output_tokens: 150}}'; }

double_up() { # TURN...: the double with these turns; the site policy for it; the app deployed
	printf '%s\n' "$@" | jq -s . >"$W/script.json"
	dbl_start openai-double.py openai --listen "$DBL4" --port "${PORT:-0}" --script "$W/script.json" --log "$W/openai.log"
	printf '{"mode": "allow", "allow": [{"cidr": "%s/32", "ports": [%s]}]}\n' "$DBL4" "$DBL_PORT" \
		>"$LCRUN_ETC_DIR/policies/net/planner-double.json"
	deploy
}

deploy() { # [--config K=V]...: MODEL_ACCESS=direct, the double through the site policy
	CODING_AGENT_BASE_URL="http://$DBL4:$DBL_PORT/v1" CODING_AGENT_MODEL=gpt-test CODING_AGENT_API_KEY="$KEY" \
		LCCTL="$LCCTL" "$APPDIR/configure" --config MODEL_ACCESS=direct --config PLANNER_NET_POLICY=planner-double \
		--config PLANNER_RETRY_BACKOFF_MS=200 "$@" >/dev/null
}

gw_planner_up() { # TURN...: the double over TLS, a private lcd whose gateway points at it, the app deployed
	# with its defaults (MODEL_ACCESS=gateway, PLANNER_NET_POLICY=none); more deploy arguments in DEPLOY_ARGS
	printf '%s\n' "$@" | jq -s . >"$W/script.json"
	stop_lcd
	export GW_CA="$BATS_FILE_TMPDIR/ca"
	gw_ca "$GW_CA"
	REAL_KEY=$KEY
	gw_up openai-double.py "$W/script.json"
	CODING_AGENT_BASE_URL=https://provider.invalid/v1 CODING_AGENT_MODEL=gpt-4.1-mini CODING_AGENT_API_KEY="$KEY" \
		LCCTL="$LCCTL" "$APPDIR/configure" "${DEPLOY_ARGS[@]}" >/dev/null
}

gw_requests() { [ -f "$W/req.jsonl" ] && wc -l <"$W/req.jsonl" || echo 0; }

auth_of() { # the Authorization header of each request the double received
	jq -r '.headers | to_entries | map(select(.key | ascii_downcase == "authorization")) | .[0].value' "$W/req.jsonl"
}

# Python: reach(host, port) is "reached" or "blocked (WHY)"
PY_REACH='def reach(host, port):
    try:
        socket.create_connection((host, port), timeout=2).close()
        return "reached"
    except OSError as e:
        return "blocked (%s)" % type(e).__name__'

no_lease_left() { [ -z "$(ls "$LCRUN_STATE_DIR/net/" 2>/dev/null | grep '\.json$')" ] || { ls -l "$LCRUN_STATE_DIR/net/"; return 1; }; }

requests() { [ -f "$W/openai.log" ] && wc -l <"$W/openai.log" || echo 0; }

run_agent() { # [JSON-ARGS]: lcctl run …:run-agent --json; sets status, output (the task), stderr
	run --separate-stderr "$LCCTL" run --json "$APP:run-agent" "${1:-{\}}"
}

no_sandbox_left() {
	[ "$("$LCRUN" ps --json | jq length)" -eq 0 ] || { "$LCRUN" ps >&2; return 1; }
	# lcd's record: every sandbox the app made has ended
	api GET "/sandboxes?app=$APP&history=1&limit=1000" | head -n -1 |
		jq -e 'all(.sandboxes[]; .state == "terminated")' >/dev/null
}

made_sandboxes() { # how many sandboxes the app's tasks ever made (lcd's history)
	api GET "/sandboxes?app=$APP&history=1&limit=1000" | head -n -1 | jq '.sandboxes | length'
}

seed_unchanged() {
	[ "$(cd "$SEED" && find . -type f | sort | xargs sha256sum; stat -c '%n %a %Y' "$SEED"/*)" = "$SEED_SUM" ]
}

# ---- tests ----

@test "planner: a good patch passes the unit test in the test-patch sandbox; the key only in the Authorization header" {
	double_up "$(text_turn "$(patch_json calculator.py "$(good_calc)")")"
	run_agent '{"instruction": "Fix calculator.add so that add(2, 3) is 5. Do not change the tests."}'
	[ "$status" -eq 0 ] || { echo "$output"; cat "$T/lcd.log"; false; }
	task=$output
	r=$(echo "$task" | jq .result)
	echo "$r" | jq -e '.tests_passed == true and .test_exit_code == 0 and .test_timed_out == false'
	echo "$r" | jq -e '.changed_paths == ["calculator.py"]'
	echo "$r" | jq -e '(.sandbox_id | test("^[0-9a-f]+$")) and (.planner_task_id | length > 0)'
	echo "$r" | jq -e '.test_command == "python3 -m unittest -v"'
	echo "$r" | jq -r .test_output | grep -q '^test_add (test_calculator.CalculatorTest'
	echo "$r" | jq -r .test_output | grep -qx 'OK'
	# the planner's task: succeeded, its result the validated patch
	pt=$(echo "$r" | jq -r .planner_task_id)
	"$LCCTL" task show "$pt" | jq -e '.state == "succeeded" and .function == "plan-patch"'
	"$LCCTL" task show "$pt" | jq -e --arg c "$(good_calc)" '.result.files == [{path: "calculator.py", content: $c}]'
	"$LCCTL" task show "$pt" | jq -e '.result.model == "gpt-test" and .result.usage.prompt_tokens == 900'
	# one request: the instruction, the seed files, response_format, the key as a bearer token only
	[ "$(requests)" -eq 1 ]
	req=$(head -1 "$W/openai.log")
	echo "$req" | jq -e '.path == "/v1/chat/completions" and .body.model == "gpt-test"'
	echo "$req" | jq -e --arg k "Bearer $KEY" '.headers | to_entries | map(select(.key | ascii_downcase == "authorization")) | .[0].value == $k'
	echo "$req" | jq -e '.body.response_format.type == "json_schema" and .body.response_format.json_schema.schema.required == ["files"]'
	echo "$req" | jq -e '.body.messages[1].content | contains("add(2, 3) is 5") and contains("def add(a, b):\\n    return a - b") and contains("test_calculator.py")'
	[ "$(echo "$req" | jq -c '.body' | grep -c -- "$KEY")" -eq 0 ]
	# the key is nowhere else: lcd's log, the tasks' logs, results and records
	if grep -q -- "$KEY" "$T/lcd.log"; then false; fi
	for id in $(echo "$task" | jq -r .id) "$pt"; do
		if "$LCCTL" task logs "$id" | grep -q -- "$KEY"; then false; fi
		if "$LCCTL" task show "$id" | grep -q -- "$KEY"; then false; fi
	done
	# the test sandbox: made once, removed, its record kept
	no_sandbox_left
	api GET "/sandboxes?app=$APP&history=1" | head -n -1 | jq -e --arg id "$(echo "$r" | jq -r .sandbox_id)" \
		'.sandboxes | length == 1 and .[0].id == $id and .[0].labels.role == "test-patch" and .[0].function == "run-agent"'
	seed_unchanged
}

@test "planner: a patch that does not fix add fails the test: tests_passed false, lcctl exits 1, the sandbox removed" {
	double_up "$(text_turn "$(patch_json calculator.py "$(sed 's/return a - b/return a * b/' "$SEED/calculator.py")")")"
	run_agent
	[ "$status" -eq 1 ]
	r=$(echo "$output" | jq .result)
	echo "$r" | jq -e '.tests_passed == false and .test_exit_code == 1 and .changed_paths == ["calculator.py"]'
	echo "$r" | jq -r .test_output | grep -q 'FAILED (failures='
	echo "$output" | jq -e '.state == "failed"'
	# the default instruction went to the model
	jq -e '.body.messages[1].content | contains("Fix the deliberately broken calculator.add")' "$W/openai.log"
	no_sandbox_left
	[ "$(made_sandboxes)" -eq 1 ]
	seed_unchanged
}

@test "planner: each contract rule broken by a crafted answer is refused by name; no sandbox is made" {
	local big
	big=$(head -c 12001 /dev/zero | tr '\0' x)
	# RULE, then the model's message content
	cases=(
		path-absolute "$(patch_json /etc/calculator.py x)"
		path-parent "$(patch_json sub/../calculator.py x)"
		path-escapes "$(patch_json ../calculator.py x)"
		not-allowed "$(patch_json other.py x)"
		test-file "$(patch_json test_calculator.py x)"
		duplicate "$(patch_json ./calculator.py x calculator.py y)"
		control-char "$(patch_json calculator.py "$(printf 'a\033[2Jb')")"
		nul '{"files": [{"path": "calculator.py", "content": "a\u0000b"}]}'
		not-json '{"files": [{"path": "calculator.py", "content": "\udc80 a lone surrogate: not UTF-8"}]}'
		bidi-control "$(patch_json calculator.py "$(printf 'x = 1 # \u202e')")"
		too-many-files "$(patch_json calculator.py a calculator2.py b calculator3.py c calculator4.py d)"
		too-large "$(patch_json calculator.py "$big")"
		no-files '{"files": []}'
		shape '{"files": [{"path": "calculator.py"}]}'
		no-patch 'I would rather not.'
		not-json '```json
{"files": [}
```'
		ambiguous "$(printf '```json\n%s\n```\n```json\n%s\n```' "$(patch_json calculator.py a)" "$(patch_json calculator.py b)")"
	)
	turns=()
	for ((ci = 1; ci < ${#cases[@]}; ci += 2)); do turns+=("$(text_turn "${cases[$ci]}")"); done
	double_up "${turns[@]}"
	# allow another file so that not-allowed, too-many-files and duplicate are what they say
	deploy --config 'ALLOWED_PATHS=calculator.py calculator2.py calculator3.py calculator4.py'
	local ci # not i: bats's run uses it
	for ((ci = 0; ci < ${#cases[@]}; ci += 2)); do
		rule=${cases[$ci]}
		run_agent
		echo "case $((ci / 2)) ($rule): exit $status: $(echo "$output" | jq -c .result)"
		[ "$status" -eq 3 ]
		echo "$output" | jq -e --arg r "$rule" '.result.rule == $r and (.result.error | contains($r + ": "))'
		echo "$output" | jq -e '.result.planner_task_id | length > 0'
		echo "$output" | jq -e '.result | has("sandbox_id") | not'
		pt=$(echo "$output" | jq -r .result.planner_task_id)
		"$LCCTL" task show "$pt" | jq -e --arg r "$rule" '.state == "failed" and .exit_code == 3 and .result.rule == $r'
	done
	# the path is named where there is one
	"$LCCTL" task list --app "$APP" --json | jq -e '[.[] | select(.function == "run-agent") | .result.error] |
		any(contains("path-absolute: files[0] \"/etc/calculator.py\"")) and
		any(contains("test-file: files[0] \"test_calculator.py\"")) and
		any(contains("duplicate: files[1] \"calculator.py\""))'
	[ "$(requests)" -eq $((${#cases[@]} / 2)) ]
	[ "$(made_sandboxes)" -eq 0 ]
	no_sandbox_left
	seed_unchanged
}

@test "planner: provider 500 (retried once), 429 then an answer, a stall past the timeout, garbage, empty choices, 401: the task fails clearly, no sandbox" {
	double_up \
		'{"error": {"status": 500}}' '{"error": {"status": 500}}' \
		'{"error": {"status": 429, "retry_after": 1}}' "$(text_turn "$(patch_json calculator.py "$(good_calc)")")" \
		'{"stall": 8, "text": "late"}' \
		'{"garbage": true}' \
		'{"empty_choices": true}' \
		'{"error": {"status": 401, "message": "Incorrect API key provided: '"${KEY:0:9}"'*********'"${KEY: -8}"'."}}'
	deploy --config PLANNER_TIMEOUT_SECONDS=3
	# 500 twice: one retry, then the provider's status and message
	run_agent
	[ "$status" -eq 2 ]
	echo "$output" | jq -e '.result.status == 500 and .result.attempts == 2'
	echo "$output" | jq -e '.result.error | contains("the provider answered 500: The server had an error while processing your request (server_error) (2 attempts)")'
	[ "$(requests)" -eq 2 ]
	# 429 with Retry-After: 1, then a good answer: the patch is tested
	run_agent
	[ "$status" -eq 0 ]
	echo "$output" | jq -e '.result.tests_passed == true'
	pt=$(echo "$output" | jq -r .result.planner_task_id)
	"$LCCTL" task show "$pt" | jq -e '.result.attempts == 2'
	"$LCCTL" task logs "$pt" | grep -q 'the provider answered 429; retrying in 1000 ms'
	[ "$(requests)" -eq 4 ]
	# a stall longer than PLANNER_TIMEOUT_SECONDS; meanwhile no process shows the key in its argv or environment
	"$LCCTL" run --detach "$APP:run-agent" >"$W/id"
	sleep 1.5
	for p in /proc/[0-9]*; do
		if grep -qa -- "$KEY" "$p/cmdline" 2>/dev/null; then false; fi
		! grep -qa -- "$KEY" "$p/environ" 2>/dev/null || { echo "key in $p/environ: $(tr '\0' ' ' <"$p/cmdline")"; false; }
	done
	wait_state "$(cat "$W/id")" failed 30
	t=$("$LCCTL" task show "$(cat "$W/id")")
	echo "$t" | jq -e '.exit_code == 2 and (.result.error | contains("the provider did not answer within 3 s"))'
	# garbage, empty choices
	run_agent
	[ "$status" -eq 2 ]
	echo "$output" | jq -e '.result.error | contains("the provider answered 200 with a body that is not a JSON object")'
	run_agent
	[ "$status" -eq 2 ]
	echo "$output" | jq -e '.result.error | contains("the provider answered 200 with no choices (\"choices\": [])")'
	# 401 that quotes the key masked: no run of it in the message
	run_agent
	[ "$status" -eq 2 ]
	echo "$output" | jq -e '.result.status == 401 and .result.attempts == 1 and (.result.error | contains("the provider answered 401: Incorrect API key provided: ***"))'
	if echo "$output" | grep -q -- "${KEY: -8}"; then false; fi
	if grep -q -- "${KEY: -8}" "$T/lcd.log"; then false; fi
	# only the 429 run made a sandbox
	[ "$(made_sandboxes)" -eq 1 ]
	no_sandbox_left
}

@test "planner: the test-patch sandbox reaches no test host: not the provider double, not the host, no interface but lo" {
	# calculator.py that probes the network at import, then adds correctly
	probe=$(cat <<EOF
import socket, os
$PY_REACH
print("PROBE double", reach("$DBL4", PORT_HERE))
print("PROBE host", reach("198.18.7.1", 22))
print("PROBE public", reach("1.1.1.1", 443))
print("PROBE ifaces", sorted(os.listdir("/sys/class/net")))
EOF
	)
	# the double's netns is the test's own: any port is free there
	PORT=18080
	double_up "$(text_turn "$(patch_json calculator.py "${probe//PORT_HERE/$PORT}
$(good_calc)")")"
	run_agent
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	out=$(echo "$output" | jq -r .result.test_output)
	echo "$out" | grep -E "^PROBE double blocked \(" 
	echo "$out" | grep -E "^PROBE host blocked \("
	echo "$out" | grep -E "^PROBE public blocked \("
	echo "$out" | grep -Fx "PROBE ifaces ['lo']"
	# the double heard from the planner only
	[ "$(requests)" -eq 1 ]
	no_sandbox_left
}

@test "planner: run-agent validates the planner's result again: a planner function that writes a test file gets no sandbox" {
	double_up "$(text_turn "$(patch_json calculator.py "$(good_calc)")")"
	# the same app with a stand-in planner (no model) whose result breaks the contract
	jq --arg r "$(patch_json test_calculator.py 'import os')" \
		'.functions["fake-plan"] = {"command": ["/bin/sh", "-c", "printf %s \"$FAKE\" > $LC_TASK_RESULT"]} | .config.FAKE = $r' \
		"$APPDIR/app.json" >"$W/app.json"
	"$LCCTL" deploy "$W/app.json" --config MODEL_ACCESS=direct --config PLANNER_NET_POLICY=planner-double --config PLANNER_FUNCTION=fake-plan >/dev/null
	run_agent
	[ "$status" -eq 3 ]
	echo "$output" | jq -e '.result.rule == "test-file" and (.result.error | startswith("the planner'"'"'s result is refused: test-file: files[0] \"test_calculator.py\""))'
	[ "$(requests)" -eq 0 ]
	[ "$(made_sandboxes)" -eq 0 ]
	no_sandbox_left
	seed_unchanged
}

@test "planner: inspect-sandboxes lists the app's last N sandboxes, all terminated, with their times" {
	double_up "$(text_turn "$(patch_json calculator.py "$(good_calc)")")" \
		"$(text_turn "$(patch_json calculator.py "$(sed 's/return a - b/return b/' "$SEED/calculator.py")")")" \
		"$(text_turn "$(patch_json calculator.py "$(good_calc)")")"
	for _ in 1 2 3; do run_agent; done
	ids=$("$LCCTL" task list --app "$APP" --json | jq -c '[.[] | select(.function == "run-agent") | .result.sandbox_id]')
	run "$LCCTL" run "$APP:inspect-sandboxes" '{"n": 20}'
	[ "$status" -eq 0 ]
	echo "$output" | jq -e '.app == "sandboxed-coding-agent" and .not_terminated == 0 and (.sandboxes | length) == 3'
	echo "$output" | jq -e --argjson ids "$ids" '[.sandboxes[].id] == $ids'   # newest first, as task list
	echo "$output" | jq -e 'all(.sandboxes[]; .state == "terminated" and .function == "run-agent" and .terminated >= .created
		and .created > 1700000000000 and .end_reason == "deleted" and .labels.role == "test-patch" and .image == "host")'
	run "$LCCTL" run "$APP:inspect-sandboxes" '{"n": 1}'
	echo "$output" | jq -e --argjson ids "$ids" '(.sandboxes | length) == 1 and .sandboxes[0].id == $ids[0]'
	run --separate-stderr "$LCCTL" run "$APP:inspect-sandboxes" '{"n": 0}'
	[ "$status" -eq 4 ]
	[[ "$output" == *'"error": "args.n: expected a number from 1 to 1000"'* ]]
	# the API's bounds
	run api GET "/sandboxes?app=$APP&history=1&limit=0"
	[ "${lines[-1]}" = 400 ]
}

@test "planner: bad configuration and input: unknown policy, a net key not in config, missing secrets, bad instruction" {
	echo '[]' >"$W/script.json"
	dbl_start openai-double.py openai --listen "$DBL4" --script "$W/script.json"
	# the policy named by PLANNER_NET_POLICY must exist at deploy
	run "$LCCTL" deploy "$APPDIR/app.json" --config PLANNER_NET_POLICY=no-such-policy
	[ "$status" -eq 120 ]
	[[ "$output" == "lcctl: functions.plan-patch.net: "*"no-such-policy"* ]]
	run "$LCCTL" deploy "$APPDIR/app.json" --config PLANNER_NET_POLICY=Bad/Name
	[ "$status" -eq 121 ]
	[ "$output" = "lcctl: functions.plan-patch.net: config.PLANNER_NET_POLICY: expected \"none\" or a network policy name, not 'Bad/Name'" ]
	jq 'del(.config.PLANNER_NET_POLICY)' "$APPDIR/app.json" >"$W/app.json"
	run "$LCCTL" deploy "$W/app.json"
	[ "$status" -eq 121 ]
	[ "$output" = 'lcctl: functions.plan-patch.net: $PLANNER_NET_POLICY is not a key of config' ]
	# the configure script wants the three variables
	run env -u CODING_AGENT_API_KEY CODING_AGENT_BASE_URL=x CODING_AGENT_MODEL=y LCCTL="$LCCTL" "$APPDIR/configure"
	[ "$status" -eq 123 ]
	[ "$output" = "configure: set CODING_AGENT_API_KEY in the environment first" ]
	# the default MODEL_ACCESS=gateway on an lcd without a gateway: one line, nothing deployed
	run "$LCCTL" deploy "$APPDIR/app.json"
	[ "$status" -eq 117 ]
	[ "$output" = 'lcctl: functions.plan-patch.model_gateway: this lcd serves no model gateway: configure "gateway" in lcd.json, or deploy with --config MODEL_ACCESS=direct' ]
	run "$LCCTL" app list --json
	[ "$(echo "$output" | jq length)" -eq 0 ]
	run "$LCCTL" deploy "$APPDIR/app.json" --config MODEL_ACCESS=proxy
	[ "$status" -eq 121 ]
	[ "$output" = "lcctl: functions.plan-patch.model_gateway.access: config.MODEL_ACCESS: expected gateway or direct, not 'proxy'" ]
	# deployed without secrets: the planner task cannot start, run-agent says so
	"$LCCTL" deploy "$APPDIR/app.json" --config MODEL_ACCESS=direct >/dev/null
	run_agent
	[ "$status" -eq 5 ]
	echo "$output" | jq -e '.result.error | contains("secret CODING_AGENT_BASE_URL (declared by plan-patch) is not set")'
	run_agent '{"instruction": 5}'
	[ "$status" -eq 4 ]
	echo "$output" | jq -e '.result.error == "args.instruction: expected a non-empty string of at most 16384 bytes"'
	# MODEL_ACCESS=gateway for a plan-patch whose function has no model_gateway: one line, exit 4
	for v in CODING_AGENT_BASE_URL CODING_AGENT_MODEL CODING_AGENT_API_KEY; do echo x | "$LCCTL" secret set "$v"; done
	jq 'del(.functions["plan-patch"].model_gateway)' "$APPDIR/app.json" >"$W/app.json"
	"$LCCTL" deploy "$W/app.json" >/dev/null
	run_agent
	[ "$status" -eq 4 ]
	echo "$output" | jq -e '.result.error | contains("MODEL_ACCESS=gateway, but this task has no model gateway (OPENAI_BASE_URL is not set): give its function \"model_gateway\", or deploy with MODEL_ACCESS=direct")'
	[ "$(made_sandboxes)" -eq 0 ]
	no_sandbox_left
}

# gpt-4.1-mini: $0.40 / $1.60 per M input / output: 900 in, 150 out is $0.0006

@test "planner through the gateway (the default): run-agent passes; the double gets the key, the planner a token; the task's spend is the usage priced" {
	DEPLOY_ARGS=()
	gw_planner_up "$(text_turn "$(patch_json calculator.py "$(good_calc)")")"
	run_agent '{"instruction": "Fix calculator.add so that add(2, 3) is 5. Do not change the tests."}'
	[ "$status" -eq 0 ] || { echo "$output"; cat "$T/lcd.log"; false; }
	r=$(echo "$output" | jq .result)
	echo "$r" | jq -e '.tests_passed == true and .changed_paths == ["calculator.py"]'
	pt=$(echo "$r" | jq -r .planner_task_id)
	t=$("$LCCTL" task show "$pt")
	echo "$t" | jq -e '.state == "succeeded" and .result.model == "gpt-4.1-mini" and .result.usage.prompt_tokens == 900'
	# lcd's record of the planner task: what the gateway metered
	echo "$t" | jq -e '.model_requests == 1 and .budget_exceeded == false'
	[ "$(echo "$t" | jq -c .tokens)" = '{"input":900,"output":150,"cache_read":0,"cache_write":0}' ]
	[ "$(echo "$t" | jq -r .spend_usd)" = 0.0006 ]
	[ "$(ledger "task_id = '$pt'" | jq -r '"\(.outcome) \(.status) \(.input_tokens) \(.output_tokens) \(.cost_pusd) \(.app) \(.sandbox_id)"')" = \
		"ok 200 900 150 600000000 $APP $(echo "$t" | jq -r .sandbox_id)" ]
	# the provider got the real key, never the token; one request
	[ "$(gw_requests)" -eq 1 ]
	[ "$(auth_of)" = "Bearer $KEY" ]
	if grep -q lcgw- "$W/req.jsonl"; then false; fi
	jq -e '.path == "/v1/chat/completions" and .body.model == "gpt-4.1-mini"' "$W/req.jsonl"
	grep -q "model gateway: sandbox $(echo "$t" | jq -r .sandbox_id) task $pt openai /v1/chat/completions model gpt-4.1-mini: 200 ok, tokens in 900 out 150 " "$T/lcd.log"
	# the key is in no log or record; the task's token died with it: no lease, no sandbox left
	if grep -q -- "$KEY" "$T/lcd.log"; then false; fi
	if "$LCCTL" task logs "$pt" | grep -q -- "$KEY"; then false; fi
	[ "$(sqlite3 "$LCRUN_ROOT/lcd.db" 'SELECT count(*) FROM gateway_sandboxes')" -eq 0 ]
	no_lease_left
	no_sandbox_left
	seed_unchanged
}

@test "planner through the gateway: the function's sandbox has the gateway's URL and a token, no key in its env or /proc, and cannot reach the provider" {
	DEPLOY_ARGS=()
	gw_planner_up "$(text_turn ok)"
	# a function of the app with plan-patch's model_gateway and secrets that
	# reports what its sandbox holds, and calls the gateway with its token
	{
		echo "import glob, json, os, socket, urllib.request"
		echo "$PY_REACH"
		cat <<'PY'
procs = []
for p in sorted(glob.glob("/proc/[0-9]*/environ") + glob.glob("/proc/[0-9]*/cmdline")):
    try:
        procs.append(open(p, "rb").read().decode("latin-1").replace("\0", "\n"))
    except OSError:
        pass
req = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions",
                             data=json.dumps({"model": os.environ["CODING_AGENT_MODEL"], "messages": []}).encode(),
                             headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"],
                                      "Content-Type": "application/json"})
answer = json.load(urllib.request.urlopen(req, timeout=10))
json.dump({"env": dict(os.environ), "proc": "\n".join(procs), "direct": reach(os.environ["DOUBLE"], int(os.environ["DOUBLE_PORT"])),
           "answer": answer["choices"][0]["message"]["content"]}, open(os.environ["LC_TASK_RESULT"], "w"))
PY
	} >"$W/probe.py"
	jq --rawfile code "$W/probe.py" --arg d "$DBL4" --arg p "$DBL_PORT" '.functions.probe = {command: ["/usr/bin/python3", "-c", $code],
		net: "$PLANNER_NET_POLICY", secrets: .functions["plan-patch"].secrets, model_gateway: .functions["plan-patch"].model_gateway}
		| .config.DOUBLE = $d | .config.DOUBLE_PORT = $p' "$APPDIR/app.json" >"$W/app.json"
	"$LCCTL" deploy "$W/app.json" >/dev/null
	run --separate-stderr "$LCCTL" run --json "$APP:probe"
	"$LCCTL" task logs "$(echo "$output" | jq -r .id)"
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	res=$(echo "$output" | jq .result)
	echo "$res" | jq -e '.answer == "ok"'
	echo "$res" | jq -e '.env.OPENAI_BASE_URL | test("^http://10\\.231\\.[0-9]+\\.[0-9]+:7071/v1$")'
	echo "$res" | jq -e '.env.OPENAI_API_KEY | test("^lcgw-[0-9a-f]{64}$")'
	echo "$res" | jq -e '.env | has("CODING_AGENT_API_KEY") | not'
	echo "$res" | jq -e '.env.CODING_AGENT_MODEL == "gpt-4.1-mini"'
	echo "$res" | jq -e '.direct | startswith("blocked (")'
	# the key: nowhere in the sandbox's environment, its processes' or their command lines
	if echo "$res" | grep -q -- "$KEY"; then false; fi
	[ "$(echo "$res" | jq -r .proc | grep -c lcgw-)" -ge 1 ] # the probe saw its own environment
	[ "$(auth_of)" = "Bearer $KEY" ]
	# the token is dead once the task ended
	tok=$(echo "$res" | jq -r .env.OPENAI_API_KEY)
	[ "$(sqlite3 "$LCRUN_ROOT/lcd.db" 'SELECT count(*) FROM gateway_sandboxes')" -eq 0 ]
	grep -q "model gateway: sandbox $(echo "$output" | jq -r .sandbox_id) task $(echo "$output" | jq -r .id) openai /v1/chat/completions" "$T/lcd.log"
	if grep -q -- "$tok" "$T/lcd.log"; then false; fi
	no_lease_left
	no_sandbox_left
}

@test "planner through the gateway: a budget without room for a request, or spent, is a 402 reported as the planner's provider failure; nothing is tested" {
	# PLANNER_MAX_BUDGET_USD=0.0001: no room for the request's reservation
	# (its max_tokens at the model's output price), refused before the provider
	DEPLOY_ARGS=(--config PLANNER_MAX_BUDGET_USD=0.0001)
	dear='{text: $t, usage: {input_tokens: 200000, output_tokens: 150}}' # $0.08024 at gpt-4.1-mini's prices
	turn=$(jq -cn --arg t "$(patch_json calculator.py "$(good_calc)")" "$dear")
	gw_planner_up "$turn" "$turn"
	run_agent
	echo "$output" | jq .
	[ "$status" -eq 2 ]
	echo "$output" | jq -e '.result.status == 402 and (.result.error | contains("the sandbox'"'"'s model budget of $0.0001 has no room for this request") and contains("lower max_tokens"))'
	pt=$(echo "$output" | jq -r .result.planner_task_id)
	"$LCCTL" task show "$pt" | jq -e '.state == "failed" and .exit_code == 2 and .spend_usd == 0 and .model_requests == 0'
	[ "$(gw_requests)" -eq 0 ]
	# $0.1 has room for it: the answer comes, and its usage spends more than
	# the app's daily $0.06, which then refuses the next planner task's request
	jq '.budget = {daily_usd: 0.06}' "$APPDIR/app.json" >"$W/app.json"
	"$LCCTL" deploy "$W/app.json" --config PLANNER_MAX_BUDGET_USD=0.1 >/dev/null
	run_agent
	[ "$status" -eq 0 ]
	pt=$(echo "$output" | jq -r .result.planner_task_id)
	"$LCCTL" task show "$pt" | jq -e '.spend_usd == 0.08024 and .model_requests == 1'
	run_agent
	echo "$output" | jq .
	[ "$status" -eq 2 ]
	echo "$output" | jq -e '.result.status == 402 and .result.attempts == 1'
	echo "$output" | jq -e '.result.error | contains("the provider answered 402: the app (daily)'"'"'s model budget of $0.06 is spent (lcd model gateway)")'
	echo "$output" | jq -e '.result | has("sandbox_id") | not'
	pt=$(echo "$output" | jq -r .result.planner_task_id)
	"$LCCTL" task show "$pt" | jq -e '.state == "failed" and .exit_code == 2 and .budget_exceeded == true and .spend_usd == 0'
	# the double heard one request in all; one test sandbox was made
	[ "$(gw_requests)" -eq 1 ]
	[ "$(made_sandboxes)" -eq 1 ]
	no_lease_left
	no_sandbox_left
}
