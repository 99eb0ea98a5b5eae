#!/usr/bin/env bats
# The test doubles of tests/fixtures (docs/hacking.md, "Test doubles"), proved as the
# workload tests will use them: each double in a network namespace of the
# test's own (or on loopback inside the agent's sandbox) driven with curl
# and git, and the real Claude Code and Codex CLIs of the agent-cli image
# editing a file through scripted tool calls.  Needs root.  The agent CLI
# tests build images/agent-cli.json (minutes the first time, cached after)
# and skip, saying why, where it cannot be built (no Debian mirror or npm).

load helpers
load doubles-lib

setup_file() {
	[ "$(id -u)" = 0 ] || skip "needs root"
	export DBL_NS=lcdbl-$$
}

setup() {
	[ "$(id -u)" = 0 ] || skip "needs root"
	# Nothing here depends on cgroup v2 controllers, and under TCG the file
	# takes minutes: the host suite runs it.
	[ -z "${LCRUN_IN_VM:-}" ] || skip "the doubles need no cgroup v2 controller; the host suite runs them"
	: "${LCRUN:=$BATS_TEST_DIRNAME/../../build/lcrun}"
	export LCRUN
	F=$DBL_FIXTURES
	W=$BATS_TEST_TMPDIR
	host_snapshot
}

teardown() {
	local f
	for f in "$BATS_TEST_TMPDIR"/*.pid; do
		[ -e "$f" ] && dbl_stop "$(basename "$f" .pid)"
	done
	dbl_netns_down
	[ ! -f "$BATS_TEST_TMPDIR/host.before" ] || assert_host_clean
}

# A double in the test's namespace, reached on loopback with curl there.
ns_curl() {
	in_ns curl -sS -m 10 "$@"
}

@test "every double and helper answers --help; a bad script is one line and exit 2" {
	for f in anthropic-double.py openai-double.py github-double.py github-webhook.py scripted-agent; do
		run "$DBL_PY" "$F/$f" --help
		[ "$status" -eq 0 ]
		[[ "${lines[0]}" == usage:* ]]
	done
	echo '[{"text": "hi", "bogus": 1}]' >"$W/bad.json"
	run "$DBL_PY" "$F/anthropic-double.py" --script "$W/bad.json"
	[ "$status" -eq 2 ]
	[ "$output" = "anthropic-double: script $W/bad.json: turn 0: unknown key(s) bogus" ]
	run "$DBL_PY" "$F/openai-double.py" --script "$W/none.json"
	[ "$status" -eq 2 ]
	[[ "$output" == "openai-double: cannot read script $W/none.json: No such file or directory" ]]
}

@test "anthropic double: SSE and JSON answers, usage, key check, failures, request log (IPv4 and IPv6)" {
	dbl_netns_up
	cat >"$W/s.json" <<'EOF'
{"turns": [
 {"text": "Let me look.", "tool_use": {"name": "Bash", "input": {"command": "echo 'a \"quoted\" line' >> notes.txt"}},
  "usage": {"input_tokens": 1200, "output_tokens": 80, "cache_read_input_tokens": 30}},
 {"text": "All done.", "usage": {"input_tokens": 1500, "output_tokens": 12}},
 {"error": {"status": 529}},
 {"error": {"status": 429, "retry_after": 7}},
 {"stall": 3, "text": "late"},
 {"text": "cut short", "cut_after_events": 3},
 {"text": "broken", "malformed": true},
 {"stream_error": {"type": "overloaded_error", "message": "Overloaded"}}
]}
EOF
	dbl_start anthropic-double.py anth --script "$W/s.json" --log "$W/req.jsonl" --api-key sk-good
	local u4=http://127.0.0.1:$DBL_PORT u6=http://[::1]:$DBL_PORT
	# a wrong key: 401 in Anthropic's shape, and no turn taken
	run ns_curl -H 'x-api-key: sk-bad' -d '{"model":"m","stream":true}' "$u4/v1/messages"
	[ "$(jq -r .error.type <<<"$output")" = authentication_error ]
	# turn 0, streamed: the events Claude Code reads, the tool input in pieces
	run ns_curl -N -H 'x-api-key: sk-good' -d '{"model":"claude-x","stream":true,"messages":[]}' "$u4/v1/messages?beta=true"
	[ "$status" -eq 0 ]
	[ "$(grep '^event:' <<<"$output" | cut -d' ' -f2 | tr '\n' ' ')" = "message_start ping content_block_start content_block_delta content_block_delta content_block_delta content_block_stop content_block_start content_block_delta content_block_delta content_block_delta content_block_stop message_delta message_stop " ]
	data=$(sed -n 's/^data: //p' <<<"$output")
	[ "$(jq -r 'select(.type=="message_start") | .message.usage | "\(.input_tokens) \(.cache_read_input_tokens) \(.output_tokens)"' <<<"$data")" = "1200 30 1" ]
	[ "$(jq -r 'select(.type=="message_start") | .message.model' <<<"$data")" = claude-x ]
	[ "$(jq -r 'select(.type=="content_block_start" and .index==1) | .content_block | "\(.type) \(.name)"' <<<"$data")" = "tool_use Bash" ]
	[ "$(jq -j 'select(.delta.type=="input_json_delta") | .delta.partial_json' <<<"$data" | jq -r .command)" = "echo 'a \"quoted\" line' >> notes.txt" ]
	[ "$(jq -j 'select(.delta.type=="text_delta") | .delta.text' <<<"$data")" = "Let me look." ]
	[ "$(jq -r 'select(.type=="message_delta") | "\(.delta.stop_reason) \(.usage.output_tokens)"' <<<"$data")" = "tool_use 80" ]
	# turn 1, not streamed, over IPv6, with the key as a bearer token
	run ns_curl -H 'Authorization: Bearer sk-good' -d '{"model":"m","messages":[]}' "$u6/v1/messages"
	[ "$(jq -r '"\(.type) \(.content[0].text) \(.stop_reason) \(.usage.input_tokens) \(.usage.output_tokens)"' <<<"$output")" = "message All done. end_turn 1500 12" ]
	# count_tokens takes no turn
	run ns_curl -H 'x-api-key: sk-good' -d '{"model":"m","messages":[{"role":"user","content":"hello"}]}' "$u4/v1/messages/count_tokens"
	[ "$(jq -r '.input_tokens | type' <<<"$output")" = number ]
	# turns 2-3: errors in Anthropic's shape, 429 with retry-after
	run ns_curl -o "$W/b" -w '%{http_code}' -H 'x-api-key: sk-good' -d '{"model":"m"}' "$u4/v1/messages"
	[ "$output" = 529 ]
	[ "$(jq -r '"\(.type) \(.error.type) \(.error.message)"' "$W/b")" = "error overloaded_error Overloaded" ]
	run ns_curl -D "$W/h" -o "$W/b" -w '%{http_code}' -H 'x-api-key: sk-good' -d '{"model":"m"}' "$u4/v1/messages"
	[ "$output" = 429 ]
	grep -qi '^retry-after: 7' "$W/h"
	[ "$(jq -r .error.type "$W/b")" = rate_limit_error ]
	# turn 4 stalls: a client with a 1 s timeout gives up (curl: 28)
	run in_ns curl -sS -m 1 -H 'x-api-key: sk-good' -d '{"model":"m"}' "$u4/v1/messages"
	[ "$status" -eq 28 ]
	# turn 5: the stream is cut after 3 events (curl: 18, partial transfer)
	run in_ns curl -sS -N -m 10 -H 'x-api-key: sk-good' -d '{"model":"m","stream":true}' "$u4/v1/messages"
	[ "$status" -eq 18 ]
	[ "$(grep -c '^event:' <<<"$output")" -eq 3 ]
	# turn 6: a body that is not JSON
	run ns_curl -H 'x-api-key: sk-good' -d '{"model":"m"}' "$u4/v1/messages"
	[ "$status" -eq 0 ]
	if jq . <<<"$output" >/dev/null 2>&1; then false; fi
	# turn 7: an error event inside a 200 stream
	run ns_curl -N -H 'x-api-key: sk-good' -d '{"model":"m","stream":true}' "$u4/v1/messages"
	[ "$(grep '^event:' <<<"$output" | tail -1)" = "event: error" ]
	# then the script is used up: 400, not a retryable status
	run ns_curl -w ' %{http_code}' -H 'x-api-key: sk-good' -d '{"model":"m"}' "$u4/v1/messages"
	[[ "$output" == *"script exhausted after 8 turns"*" 400" ]]
	# the log: every request, the key as it arrived, the turn it got
	[ "$(wc -l <"$W/req.jsonl")" -eq 11 ]
	[ "$(jq -r '.headers["x-api-key"] // .headers.authorization' "$W/req.jsonl" | LC_ALL=C sort | uniq -c | sed 's/^ *//' | tr '\n' ,)" = "1 Bearer sk-good,1 sk-bad,9 sk-good," ]
	[ "$(jq -c '[.turn]' "$W/req.jsonl" | tr -d '\n')" = "[null][0][1][null][2][3][4][5][6][7][null]" ]
	[ "$(jq -r 'select(.turn==0) | "\(.path) \(.query) \(.stream) \(.body.model)"' "$W/req.jsonl")" = "/v1/messages beta=true true claude-x" ]
}

@test "openai double: chat completions (JSON, SSE with usage chunk), responses events, failures" {
	dbl_netns_up
	cat >"$W/s.json" <<'EOF'
{"turns": [
 {"text": "{\"files\": [{\"path\": \"calculator.py\", \"content\": \"def add(a, b):\\n    return a + b\\n\"}]}",
  "usage": {"input_tokens": 900, "output_tokens": 150, "cached_tokens": 100}},
 {"text": "streamed answer", "usage": {"input_tokens": 10, "output_tokens": 3}},
 {"tool_call": {"name": "exec_command", "arguments": {"cmd": "ls"}}, "usage": {"input_tokens": 50, "output_tokens": 5}},
 {"text": "final", "usage": {"input_tokens": 60, "output_tokens": 6, "reasoning_tokens": 2}},
 {"error": {"status": 500}},
 {"garbage": true},
 {"empty_choices": true},
 {"stall": 3, "text": "late"},
 {"stream_error": {"code": "server_error", "message": "boom"}}
]}
EOF
	dbl_start openai-double.py oai --script "$W/s.json" --log "$W/req.jsonl" --api-key sk-oai
	local u=http://127.0.0.1:$DBL_PORT
	run ns_curl -w ' %{http_code}' -d '{}' "$u/v1/chat/completions"
	[[ "$output" == *'"invalid_api_key"'*" 401" ]]
	# a planner's request: the scripted JSON comes back as the message content
	run ns_curl -H 'Authorization: Bearer sk-oai' -d '{"model":"gpt-x","messages":[{"role":"user","content":"fix"}],"response_format":{"type":"json_object"}}' "$u/v1/chat/completions"
	[ "$(jq -r '"\(.object) \(.model) \(.choices[0].finish_reason) \(.usage.prompt_tokens) \(.usage.completion_tokens) \(.usage.total_tokens) \(.usage.prompt_tokens_details.cached_tokens)"' <<<"$output")" = "chat.completion gpt-x stop 900 150 1050 100" ]
	[ "$(jq -r '.choices[0].message.content | fromjson | .files[0].path' <<<"$output")" = calculator.py ]
	# streamed over IPv6, base URL without /v1: deltas, a usage chunk, [DONE]
	run ns_curl -N -H 'Authorization: Bearer sk-oai' -d '{"model":"m","stream":true,"stream_options":{"include_usage":true}}' "http://[::1]:$DBL_PORT/chat/completions"
	data=$(sed -n 's/^data: //p' <<<"$output")
	[ "$(tail -1 <<<"$data")" = "[DONE]" ]
	[ "$(grep -v DONE <<<"$data" | jq -j '.choices[0].delta.content // empty')" = "streamed answer" ]
	[ "$(grep -v DONE <<<"$data" | jq -r 'select(.choices==[]) | .usage | "\(.prompt_tokens) \(.completion_tokens)"')" = "10 3" ]
	# responses, streamed: a function_call item, then a message, with usage
	run ns_curl -N -H 'Authorization: Bearer sk-oai' -d '{"model":"m","stream":true,"input":[]}' "$u/v1/responses"
	data=$(sed -n 's/^data: //p' <<<"$output")
	[ "$(jq -r .type <<<"$data" | head -3 | tr '\n' ' ')" = "response.created response.in_progress response.output_item.added " ]
	[ "$(jq -r 'select(.type=="response.output_item.done") | .item | "\(.type) \(.name) \(.arguments)"' <<<"$data")" = 'function_call exec_command {"cmd": "ls"}' ]
	[ "$(jq -r 'select(.type=="response.completed") | .response.usage | "\(.input_tokens) \(.output_tokens)"' <<<"$data")" = "50 5" ]
	run ns_curl -H 'Authorization: Bearer sk-oai' -d '{"model":"m","input":[]}' "$u/v1/responses"
	[ "$(jq -r '"\(.output[0].content[0].text) \(.usage.output_tokens_details.reasoning_tokens)"' <<<"$output")" = "final 2" ]
	# failures: 500 in OpenAI's shape, garbage, empty choices, a stall
	run ns_curl -w ' %{http_code}' -H 'Authorization: Bearer sk-oai' -d '{"model":"m"}' "$u/v1/chat/completions"
	[[ "$output" == *'"type": "server_error"'*" 500" ]]
	run ns_curl -H 'Authorization: Bearer sk-oai' -d '{"model":"m"}' "$u/v1/chat/completions"
	if jq . <<<"$output" >/dev/null 2>&1; then false; fi
	run ns_curl -H 'Authorization: Bearer sk-oai' -d '{"model":"m"}' "$u/v1/chat/completions"
	[ "$(jq -c .choices <<<"$output")" = "[]" ]
	run in_ns curl -sS -m 1 -H 'Authorization: Bearer sk-oai' -d '{"model":"m"}' "$u/v1/chat/completions"
	[ "$status" -eq 28 ]
	run ns_curl -N -H 'Authorization: Bearer sk-oai' -d '{"model":"m","stream":true}' "$u/v1/responses"
	[ "$(sed -n 's/^data: //p' <<<"$output" | jq -r 'select(.type=="response.failed") | .response.error.message')" = boom ]
	[ "$(jq -r '.headers.authorization' "$W/req.jsonl" | LC_ALL=C sort | uniq -c | sed 's/^ *//' | tr '\n' ,)" = "9 Bearer sk-oai,1 null," ]
	[ "$(jq -r 'select(.turn==0) | .body.response_format.type' "$W/req.jsonl")" = json_object ]
}

@test "the doubles serve HTTPS with --tls-cert/--tls-key; a client that checks the certificate gets through" {
	dbl_netns_up
	openssl req -x509 -newkey rsa:2048 -nodes -keyout "$W/key.pem" -out "$W/cert.pem" -days 1 \
		-subj /CN=api.test -addext subjectAltName=DNS:api.test,IP:$DBL4 2>/dev/null
	echo '[{"text": "over TLS"}]' >"$W/s.json"
	dbl_start openai-double.py oai --listen "$DBL4" --tls-cert "$W/cert.pem" --tls-key "$W/key.pem" --script "$W/s.json"
	# from the host, through the test namespace's link
	run curl -sS -m 10 "https://$DBL4:$DBL_PORT/v1/models"
	[ "$status" -eq 60 ]
	run curl -sS -m 10 --cacert "$W/cert.pem" -d '{"model":"m"}' "https://$DBL4:$DBL_PORT/v1/chat/completions"
	[ "$(jq -r '.choices[0].message.content' <<<"$output")" = "over TLS" ]
	run curl -sS -m 10 --cacert "$W/cert.pem" --resolve "api.test:$DBL_PORT:$DBL4" "https://api.test:$DBL_PORT/v1/models"
	[ "$(jq -r '.object' <<<"$output")" = list ]
}

seed_github() {
	cat >"$W/seed.json" <<'EOF'
{"tokens": {"ghs_good_token": "coding-agent[bot]"},
 "repos": {
  "octo/demo": {"files": {"README.md": "# demo\n", "calc.py": "def add(a, b):\n    return a - b\n"},
                "issues": [{"number": 7, "title": "add() subtracts", "body": "Fix add.", "labels": ["agent"], "user": "alice"}]},
  "octo/private": {"private": true, "files": {"secret.txt": "s\n"}}}}
EOF
}

@test "github double: the REST slice, shaped as GitHub's, behind the token" {
	dbl_netns_up
	seed_github
	dbl_start github-double.py gh --state "$W/st" --seed "$W/seed.json"
	local u=http://127.0.0.1:$DBL_PORT A='Authorization: Bearer ghs_good_token'
	run ns_curl -w ' %{http_code}' "$u/repos/octo/demo"
	[[ "$output" == '{"message": "Requires authentication", "documentation_url": "https://docs.github.com/rest", "status": "401"}'*" 401" ]]
	run ns_curl -w ' %{http_code}' -H 'Authorization: token wrong' "$u/repos/octo/demo"
	[[ "$output" == *'"Bad credentials"'*" 401" ]]
	run ns_curl -H "$A" "$u/repos/octo/demo"
	[ "$(jq -r '"\(.full_name) \(.default_branch) \(.private) \(.clone_url)"' <<<"$output")" = "octo/demo main false $u/octo/demo.git" ]
	run ns_curl -H 'Authorization: token ghs_good_token' "$u/repos/octo/demo/issues/7"
	[ "$(jq -r '"\(.number) \(.title) \(.state) \(.user.login) \([.labels[].name]|join(",")) \(.html_url)"' <<<"$output")" = "7 add() subtracts open alice agent $u/octo/demo/issues/7" ]
	run ns_curl -w ' %{http_code}' -H "$A" "$u/repos/octo/nope"
	[[ "$output" == *'"Not Found"'*" 404" ]]
	# no PR for the branch yet; one cannot be opened before the branch exists
	run ns_curl -H "$A" "$u/repos/octo/demo/pulls?head=octo:agent/issue-7&state=open"
	[ "$output" = "[]" ]
	run ns_curl -w ' %{http_code}' -H "$A" -X POST -d '{"title":"t","head":"agent/issue-7","base":"main"}' "$u/repos/octo/demo/pulls"
	[[ "$output" == *'"field": "head"'*" 422" ]]
	# push the branch (as the function does), then open the PR
	git init -q "$W/wc"
	in_ns git -C "$W/wc" pull -q "$u/octo/demo.git" main
	sed -i 's/a - b/a + b/' "$W/wc/calc.py"
	git -C "$W/wc" -c user.name=t -c user.email=t@e commit -qam 'Fix add'
	in_ns git -C "$W/wc" push -q "http://x-access-token:ghs_good_token@127.0.0.1:$DBL_PORT/octo/demo.git" HEAD:refs/heads/agent/issue-7
	run ns_curl -w ' %{http_code}' -H "$A" -X POST -d '{"title":"Fix add","head":"octo:agent/issue-7","base":"main","body":"Closes #7"}' "$u/repos/octo/demo/pulls"
	[[ "$output" == *" 201" ]]
	pr=${output% 201}
	[ "$(jq -r '"\(.number) \(.state) \(.head.ref) \(.base.ref) \(.title) \(.body) \(.user.login) \(.html_url)"' <<<"$pr")" = "8 open agent/issue-7 main Fix add Closes #7 coding-agent[bot] $u/octo/demo/pull/8" ]
	[ "$(jq -r .head.sha <<<"$pr")" = "$(git -C "$W/wc" rev-parse HEAD)" ]
	# a second PR for the same head is refused as GitHub does; the list finds the first
	run ns_curl -w ' %{http_code}' -H "$A" -X POST -d '{"title":"again","head":"agent/issue-7","base":"main"}' "$u/repos/octo/demo/pulls"
	[[ "$output" == *"A pull request already exists for octo:agent/issue-7."*" 422" ]]
	run ns_curl -H "$A" "$u/repos/octo/demo/pulls?head=octo:agent/issue-7&state=open"
	[ "$(jq -r '[.[].number] | join(",")' <<<"$output")" = 8 ]
	run ns_curl -H "$A" "$u/repos/octo/demo/pulls?head=octo:agent/issue-9&state=open"
	[ "$output" = "[]" ]
	run ns_curl -H "$A" -X PATCH -d '{"body":"Closes #7\n\nTests: passed"}' "$u/repos/octo/demo/pulls/8"
	[ "$(jq -r .body <<<"$output")" = "$(printf 'Closes #7\n\nTests: passed')" ]
	# comments
	run ns_curl -w ' %{http_code}' -H "$A" -X POST -d '{"body":"No change was made."}' "$u/repos/octo/demo/issues/7/comments"
	[[ "$output" == *" 201" ]]
	[ "$(jq -r '"\(.body) \(.user.login)"' <<<"${output% 201}")" = "No change was made. coding-agent[bot]" ]
	run ns_curl -H "$A" "$u/repos/octo/demo/issues/7/comments"
	[ "$(jq -r '[.[].body] | join("|")' <<<"$output")" = "No change was made." ]
	# the PR is an issue too; the state survives a restart
	dbl_stop gh
	dbl_start github-double.py gh --state "$W/st"
	u=http://127.0.0.1:$DBL_PORT
	run ns_curl -H "$A" "$u/repos/octo/demo/issues/8"
	[ "$(jq -r '.pull_request.html_url' <<<"$output")" = "$u/octo/demo/pull/8" ]
	# the log: method, path, body, the auth verdict; never the token
	if grep -q ghs_good_token "$W/st/requests.jsonl"; then false; fi
	[ "$(jq -r 'select(.method=="POST" and .status==201 and (.path|endswith("/pulls"))) | "\(.auth) \(.login) \(.body.head) \(.headers.authorization)"' "$W/st/requests.jsonl")" = "ok coding-agent[bot] octo:agent/issue-7 Bearer <redacted>" ]
	[ "$(jq -r 'select(.status==401 and (.path|startswith("/repos/"))) | .auth' "$W/st/requests.jsonl" | tr '\n' ' ')" = "missing bad " ]
	# git asks without credentials first, then with them after the 401
	[ "$(jq -r 'select(.service=="git-receive-pack") | "\(.auth) \(.status)"' "$W/st/requests.jsonl" | tr '\n' ' ')" = "missing 401 ok 200 ok 200 " ]
}

@test "github double: git push needs the token, fetch of a private repo too; the log has the refs pushed" {
	dbl_netns_up
	seed_github
	dbl_start github-double.py gh --state "$W/st" --seed "$W/seed.json"
	local h=127.0.0.1:$DBL_PORT
	export GIT_TERMINAL_PROMPT=0
	run in_ns git clone -q "http://$h/octo/demo.git" "$W/c"
	[ "$status" -eq 0 ]
	cd "$W/c"
	echo change >>README.md
	git -c user.name=t -c user.email=t@e commit -qam change
	run in_ns git push "http://$h/octo/demo.git" HEAD:refs/heads/agent/issue-7
	[ "$status" -ne 0 ]
	[[ "$output" == *"could not read Username"* ]]
	run in_ns git push "http://x-access-token:wrong@$h/octo/demo.git" HEAD:refs/heads/agent/issue-7
	[ "$status" -ne 0 ]
	[[ "$output" == *"Authentication failed"* ]]
	if git --git-dir "$W/st/git/octo/demo.git" rev-parse -q --verify refs/heads/agent/issue-7; then false; fi
	run in_ns git push "http://x-access-token:ghs_good_token@$h/octo/demo.git" HEAD:refs/heads/agent/issue-7
	[ "$status" -eq 0 ]
	[ "$(git --git-dir "$W/st/git/octo/demo.git" rev-parse refs/heads/agent/issue-7)" = "$(git rev-parse HEAD)" ]
	# a force push (a second run for the issue) replaces the branch
	git -c user.name=t -c user.email=t@e commit -q --amend -m again
	run in_ns git push -f "http://x-access-token:ghs_good_token@$h/octo/demo.git" HEAD:refs/heads/agent/issue-7
	[ "$status" -eq 0 ]
	[ "$(git --git-dir "$W/st/git/octo/demo.git" rev-parse refs/heads/agent/issue-7)" = "$(git rev-parse HEAD)" ]
	# a private repository: no anonymous clone, a clone with the token
	run in_ns git clone -q "http://$h/octo/private.git" "$W/p1"
	[ "$status" -ne 0 ]
	run in_ns git clone -q "http://x-access-token:ghs_good_token@$h/octo/private.git" "$W/p2"
	[ "$status" -eq 0 ]
	[ "$(cat "$W/p2/secret.txt")" = s ]
	cd /
	if grep -q ghs_good_token "$W/st/requests.jsonl"; then false; fi
	[ "$(jq -r 'select(.ref_updates and .status==200) | .ref_updates[] | "\(.ref) \(.new)"' "$W/st/requests.jsonl" | tail -1)" = "refs/heads/agent/issue-7 $(git -C "$W/c" rev-parse HEAD)" ]
	[ "$(jq -r 'select(.service=="git-receive-pack" and .status==401) | .auth' "$W/st/requests.jsonl" | sort -u | tr '\n' ' ')" = "bad missing " ]
}

# A GitHub App's JWT as its documentation makes it, signed with openssl:
# KEY [IAT-OFFSET EXP-OFFSET ISS]
app_jwt() {
	local now h c
	now=$(date +%s)
	h=$(printf '{"alg":"RS256","typ":"JWT"}' | base64 -w0 | tr '+/' '-_' | tr -d =)
	c=$(printf '{"iat":%d,"exp":%d,"iss":%s}' $((now + ${2:--60})) $((now + ${3:-540})) "${4:-4242}" | base64 -w0 | tr '+/' '-_' | tr -d =)
	printf '%s.%s.%s\n' "$h" "$c" "$(printf '%s.%s' "$h" "$c" | openssl dgst -sha256 -sign "$1" -binary | base64 -w0 | tr '+/' '-_' | tr -d =)"
}

@test "github double: a GitHub App's JWT is checked (key, iss, iat, exp); its installation tokens reach their repositories with their permissions, and expire" {
	dbl_netns_up
	openssl genrsa -out "$W/app.pem" 2048 2>/dev/null
	openssl rsa -in "$W/app.pem" -pubout -out "$W/app.pub" 2>/dev/null
	openssl genrsa -out "$W/other.pem" 2048 2>/dev/null
	cat >"$W/seed.json" <<EOF
{"apps": {"4242": {"slug": "coding-agents", "public_key": "$W/app.pub",
   "installations": {"77": {"account": "octo", "repositories": ["octo/demo"]}}}},
 "repos": {"octo/demo": {"private": true, "files": {"README.md": "demo\n"}, "collaborators": {"bob": "read"}},
           "octo/other": {"private": true, "files": {"README.md": "other\n"}}}}
EOF
	dbl_start github-double.py gh --state "$W/st" --seed "$W/seed.json" --app-token-ttl 8 --app-token-prefix ghs_inst_
	local u=http://127.0.0.1:$DBL_PORT tok
	xchg() { ns_curl -X POST -H "Authorization: Bearer $1" -d "$2" "$u/api/v3/app/installations/${3:-77}/access_tokens"; }
	[ "$(xchg "$(app_jwt "$W/other.pem")" '{}' | jq -r .message)" = "A JSON web token could not be decoded" ]
	[ "$(xchg "$(app_jwt "$W/app.pem" -60 540 4243)" '{}' | jq -r .message)" = "A JSON web token could not be decoded" ]
	[[ "$(xchg "$(app_jwt "$W/app.pem" -700 -100)" '{}' | jq -r .message)" == "'Expiration time' claim ('exp') must be"* ]]
	[[ "$(xchg "$(app_jwt "$W/app.pem" 300 800)" '{}' | jq -r .message)" == "'Issued at' claim ('iat') must be"* ]]
	[[ "$(xchg "$(app_jwt "$W/app.pem" -60 1200)" '{}' | jq -r .message)" == *"too far in the future" ]]
	[ "$(xchg "$(app_jwt "$W/app.pem")" '{}' 99 | jq -r .message)" = "Not Found" ]
	[[ "$(xchg "$(app_jwt "$W/app.pem")" '{"repositories": ["other"]}' | jq -r .message)" == "There is at least one repository"* ]]
	[ "$(xchg "$(app_jwt "$W/app.pem")" '{"permissions": {"administration": "write"}}' | jq -r .message)" = "The permissions requested are not granted to this installation." ]
	out=$(xchg "$(app_jwt "$W/app.pem")" '{"repositories": ["demo"], "permissions": {"contents": "read"}}')
	echo "$out"
	tok=$(jq -r .token <<<"$out")
	[[ "$tok" == ghs_inst_* ]]
	[ "$(jq -c .permissions <<<"$out")" = '{"contents":"read","metadata":"read"}' ]
	# it reads octo/demo, as the App; writes nothing; does not see octo/other
	[ "$(ns_curl -H "Authorization: Bearer $tok" "$u/repos/octo/demo" | jq -r .full_name)" = octo/demo ]
	[ "$(ns_curl -H "Authorization: Bearer $tok" "$u/repos/octo/demo/collaborators/bob/permission" | jq -r .permission)" = read ]
	[ "$(ns_curl -X POST -H "Authorization: Bearer $tok" -d '{"body": "x"}' "$u/repos/octo/demo/issues/1/comments" | jq -r .message)" = "Resource not accessible by integration" ]
	[ "$(ns_curl -H "Authorization: Bearer $tok" "$u/repos/octo/other" | jq -r .message)" = "Not Found" ]
	export GIT_TERMINAL_PROMPT=0
	run in_ns git clone -q "http://x-access-token:$tok@127.0.0.1:$DBL_PORT/octo/demo.git" "$W/c"
	[ "$status" -eq 0 ]
	run in_ns git clone -q "http://x-access-token:$tok@127.0.0.1:$DBL_PORT/octo/other.git" "$W/o"
	[ "$status" -ne 0 ]
	# once its expires_at has passed (8 s after it was made) it is spent
	local left=$(( $(date -d "$(jq -r .expires_at <<<"$out")" +%s) - $(date +%s) + 1 ))
	[ "$left" -le 0 ] || sleep "$left"
	[ "$(ns_curl -H "Authorization: Bearer $tok" "$u/repos/octo/demo" | jq -r .message)" = "Bad credentials" ]
	# a revoked one too
	tok=$(xchg "$(app_jwt "$W/app.pem")" '{}' | jq -r .token)
	ns_curl -X DELETE -H "Authorization: Bearer $tok" "$u/installation/token" -o /dev/null -w '%{http_code}\n' | grep -qx 204
	[ "$(ns_curl -H "Authorization: Bearer $tok" "$u/repos/octo/demo" | jq -r .message)" = "Bad credentials" ]
	if grep -q ghs_inst_ "$W/st/requests.jsonl"; then false; fi
}

@test "github-webhook: signed deliveries as GitHub sends them; bad and missing signatures; one id repeated" {
	dbl_netns_up
	# A receiver that checks what lcd's webhook listener will check.
	cat >"$W/recv.py" <<'EOF'
import hashlib, hmac, http.server, json, socketserver, sys, threading
seen, lock = set(), threading.Lock()
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        sig = self.headers.get("X-Hub-Signature-256", "")
        good = "sha256=" + hmac.new(b"s3cr3t", body, hashlib.sha256).hexdigest()
        d = self.headers["X-GitHub-Delivery"]
        with lock:
            verdict = "bad" if not hmac.compare_digest(sig, good) else "dup" if d in seen else "new"
            if verdict == "new": seen.add(d)
        p = json.loads(body)
        with open(sys.argv[2], "a") as f:
            f.write(json.dumps({"v": verdict, "event": self.headers["X-GitHub-Event"], "d": d,
                                "action": p.get("action"), "label": (p.get("label") or {}).get("name"),
                                "issue": (p.get("issue") or {}).get("number"), "title": (p.get("issue") or {}).get("title"),
                                "repo": p["repository"]["full_name"], "zen": p.get("zen")}) + "\n")
        code = {"bad": 401, "dup": 200, "new": 202}[verdict]
        self.send_response(code); self.send_header("Content-Length", "0"); self.end_headers()
    def log_message(self, *a): pass
class S(http.server.ThreadingHTTPServer):
    def server_bind(self):  # no getfqdn(): no DNS query from a test
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]
s = S(("127.0.0.1", 0), H)
open(sys.argv[1], "w").write(str(s.server_address[1]))
s.serve_forever()
EOF
	ip netns exec "$DBL_NS" "$DBL_PY" "$W/recv.py" "$W/recv.port" "$W/recv.log" </dev/null >/dev/null 2>&1 3>&- &
	echo $! >"$W/recv.pid"
	for _ in $(seq 100); do [ -s "$W/recv.port" ] && break; sleep 0.05; done
	url=http://127.0.0.1:$(cat "$W/recv.port")/hooks/coding-agents/github
	hook() { in_ns "$DBL_PY" "$F/github-webhook.py" --url "$url" --repo octo/demo --issue 7 --title "add() subtracts" "$@"; }
	run hook --secret s3cr3t --event issues --action labeled --label agent --expect 202
	[ "$status" -eq 0 ]
	run hook --secret wrong --event issues --action labeled --label agent --expect 401
	[ "$status" -eq 0 ]
	run hook --secret s3cr3t --bad-signature --event issues --action labeled --label agent
	[ "$(jq -r .status <<<"$output")" = 401 ]
	run hook --no-signature --event issues --action labeled --label agent --expect 401
	[ "$status" -eq 0 ]
	# --expect fails the run when the answer differs
	run hook --no-signature --event ping --expect 202
	[ "$status" -eq 1 ]
	# one delivery id 20 times, then 5 copies at once with ids of their own
	run hook --secret s3cr3t --event issues --action labeled --label agent --delivery d-20 --repeat 20
	[ "$(jq -r .status <<<"$output" | sort | uniq -c | awk '{print $1 "x" $2}' | tr '\n' ' ')" = "19x200 1x202 " ]
	run hook --secret s3cr3t --event issues --action labeled --label agent --copies 5 --parallel --expect 202
	[ "$status" -eq 0 ]
	[ "$(jq -r .delivery <<<"$output" | sort -u | wc -l)" -eq 5 ]
	run hook --secret s3cr3t --event issue_comment --comment "please" --expect 202
	[ "$status" -eq 0 ]
	run hook --secret s3cr3t --event issues --action unlabeled --label agent --expect 202
	[ "$status" -eq 0 ]
	run hook --secret s3cr3t --event ping --expect 202
	[ "$status" -eq 0 ]
	kill "$(cat "$W/recv.pid")"
	[ "$(jq -r 'select(.v=="new") | "\(.event) \(.action) \(.label) \(.issue) \(.repo)"' "$W/recv.log" | LC_ALL=C sort | uniq -c | sed 's/^ *//' | tr '\n' '|')" = "1 issue_comment created null 7 octo/demo|7 issues labeled agent 7 octo/demo|1 issues unlabeled agent 7 octo/demo|1 ping null null null octo/demo|" ]
	[ "$(jq -r 'select(.v=="new" and .event=="issues") | .title' "$W/recv.log" | sort -u)" = "add() subtracts" ]
	# --print: the exact bytes and headers, signature included
	run "$DBL_PY" "$F/github-webhook.py" --print --secret s3cr3t --event issues --action opened --issue 3 --labels bug,agent
	[ "$(jq -r '.body.issue | "\(.number) \([.labels[].name]|join(","))"' <<<"$output")" = "3 bug,agent" ]
	[ "$(jq -r '.headers["X-GitHub-Event"]' <<<"$output")" = issues ]
	[[ "$(jq -r '.headers["X-Hub-Signature-256"]' <<<"$output")" == sha256=* ]]
}

@test "scripted-agent: edits, result object, cases by prompt, codex events, crash, exit, sleep past a timeout, no change" {
	git init -q "$W/repo"
	printf 'def add(a, b):\n    return a - b\n' >"$W/repo/calc.py"
	git -C "$W/repo" add calc.py
	git -C "$W/repo" -c user.name=t -c user.email=t@e commit -qm seed
	cat >"$W/agent.json" <<'EOF'
{"cases": [
  {"match": "issue #1\\b", "steps": [{"replace": "calc.py", "old": "a - b", "new": "a + b"}, {"write": "docs/NOTE.md", "content": "fixed\n"}],
   "result": {"result": "Fixed add()", "num_turns": 3, "total_cost_usd": 0.42, "usage": {"input_tokens": 1200, "output_tokens": 300}}},
  {"match": "issue #2\\b", "steps": [{"stdout": "{\"partial"}, {"crash": "SEGV"}]},
  {"match": "issue #3\\b", "steps": [{"sleep": 30}]},
  {"match": "issue #4\\b", "steps": [{"exit": 3}]},
  {"match": "issue #5\\b", "format": "codex", "steps": [{"run": "echo ran"}, {"append": "calc.py", "content": "# x\n"}],
   "result": {"result": "Appended", "usage": {"input_tokens": 10, "cached_input_tokens": 4, "output_tokens": 2}}},
  {"match": "issue #6\\b", "result": {"result": "Over budget", "is_error": true, "subtype": "error_max_budget_usd"}}
 ],
 "result": {"result": "Nothing to do"}}
EOF
	cd "$W/repo"
	export SCRIPTED_AGENT_SCRIPT=$W/agent.json SCRIPTED_AGENT_LOG=$W/agent.log AGENT_PROMPT_FILE=$W/prompt
	echo "Solve issue #1 in octo/demo" >"$W/prompt"
	run "$F/scripted-agent"
	[ "$status" -eq 0 ]
	[ "$(jq -r '"\(.type) \(.subtype) \(.is_error) \(.result) \(.num_turns) \(.total_cost_usd) \(.usage.input_tokens) \(.usage.output_tokens) \(.stop_reason)"' <<<"$output")" = "result success false Fixed add() 3 0.42 1200 300 end_turn" ]
	[[ "$(jq -r .session_id <<<"$output")" =~ ^[0-9a-f-]{36}$ ]]
	grep -q 'a + b' calc.py
	[ "$(cat docs/NOTE.md)" = fixed ]
	[ "$(git status --porcelain | LC_ALL=C sort | tr '\n' ' ')" = " M calc.py ?? docs/ " ]
	echo "Solve issue #2" >"$W/prompt"
	run "$F/scripted-agent"
	[ "$status" -eq 139 ]
	[ "$output" = '{"partial' ]
	# it is still asleep once it has logged its run, and a timeout ends it
	echo "Solve issue #3" >"$W/prompt"
	"$F/scripted-agent" >"$W/slow.out" 2>&1 3>&- &
	pid=$!
	for _ in $(seq 200); do [ "$(wc -l <"$W/agent.log")" -ge 3 ] && break; sleep 0.05; done
	sleep 0.5
	kill -0 "$pid"
	kill -TERM "$pid"
	st=0
	wait "$pid" || st=$?
	[ "$st" -eq 143 ]
	[ ! -s "$W/slow.out" ]
	echo "Solve issue #4" >"$W/prompt"
	run "$F/scripted-agent"
	[ "$status" -eq 3 ]
	[ -z "$output" ]
	echo "Solve issue #5" >"$W/prompt"
	run "$F/scripted-agent"
	[ "$status" -eq 0 ]
	[ "$(jq -r .type <<<"$(grep '^{' <<<"$output")" | tr '\n' ' ')" = "thread.started turn.started item.completed item.completed turn.completed " ]
	[ "$(grep '^{' <<<"$output" | jq -r 'select(.type=="turn.completed") | .usage | "\(.input_tokens) \(.cached_input_tokens) \(.output_tokens)"')" = "10 4 2" ]
	tail -1 calc.py | grep -qx '# x'
	echo "Solve issue #6" >"$W/prompt"
	run "$F/scripted-agent"
	[ "$status" -eq 1 ]
	[ "$(jq -r '"\(.is_error) \(.subtype)"' <<<"$output")" = "true error_max_budget_usd" ]
	git stash -q -u
	echo "Solve issue #99" >"$W/prompt"
	run "$F/scripted-agent"
	[ "$status" -eq 0 ]
	[ "$(jq -r .result <<<"$output")" = "Nothing to do" ]
	[ -z "$(git status --porcelain)" ]
	[ "$(jq -r .case "$W/agent.log" | tr '\n' ' ')" = "0 1 2 3 4 5 null " ]
	jq -e '.env | index("AGENT_PROMPT_FILE")' <(head -1 "$W/agent.log")
	# an edit outside the working directory is refused
	echo '{"steps": [{"write": "../escape", "content": "x"}]}' >"$W/esc.json"
	run "$F/scripted-agent" --script "$W/esc.json"
	[ "$status" -eq 2 ]
	[ "$output" = "scripted-agent: step path '../escape' leaves the working directory" ]
	[ ! -e "$W/escape" ]
}

# ---- the real agent CLIs (agent-cli image) --------------------------------

# A work dir bound into an agent sandbox at /t, writable by its agent user.
agent_workdir() {
	mkdir -p "$W/t/repo"
	printf 'hello\n' >"$W/t/repo/README.md"
	git -C "$W/t/repo" init -q
	local base
	base=$(sandbox_id_base)
	chown -R "$((base + 1000)):$((base + 1000))" "$W/t"
}

# run_agent_in_sandbox DOUBLE: /t/agent.sh (with $PORT set) as agent in an
# agent-cli sandbox without network, DOUBLE (a server of tests/fixtures)
# scripted by /t/turns.json on the sandbox's own loopback.
run_agent_in_sandbox() {
	cat >"$W/t/run.sh" <<EOF
cd /t/repo
python3 /fixtures/$1 --script /t/turns.json --log /t/req.jsonl --port-file /t/port 2>/t/double.err &
for i in \$(seq 100); do [ -s /t/port ] && break; sleep 0.05; done
PORT=\$(cat /t/port)
. /t/agent.sh </dev/null
rc=\$?
kill %1
exit \$rc
EOF
	run timeout -k 2 180 "$LCRUN" run --image agent-cli --net none --user 1000:1000 -e HOME=/home/agent \
		--ro-bind "$F:/fixtures" --bind "$W/t:/t" -- bash /t/run.sh
}

@test "agent-cli image: the agent user, claude, codex, gh, jq, tmux, python3" {
	agent_cli_image
	run "$LCRUN" run --image agent-cli --net none -- sh -c \
		'id agent; getent passwd agent | cut -d: -f6; stat -c %U /workspace; claude --version; codex --version; gh --version | head -1; jq --version; tmux -V; python3 --version; echo $IS_SANDBOX; pwd'
	echo "$output"
	[ "$status" -eq 0 ]
	[ "${lines[0]}" = "uid=1000(agent) gid=1000(agent) groups=1000(agent)" ]
	[ "${lines[1]}" = /home/agent ]
	[ "${lines[2]}" = agent ]
	[[ "${lines[3]}" == "2.1.332 (Claude Code)" ]]
	[[ "${lines[4]}" == "codex-cli 0.171.0" ]]
	[[ "${lines[5]}" == "gh version "* ]]
	[[ "${lines[6]}" == jq-* ]]
	[[ "${lines[7]}" == "tmux "* ]]
	[[ "${lines[8]}" == "Python 3."* ]]
	[ "${lines[9]}" = 1 ]
	[ "${lines[10]}" = /workspace ]
}

@test "Claude Code edits a file through a scripted Bash tool_use; its result prices the scripted usage" {
	agent_cli_image
	agent_workdir
	cat >"$W/t/turns.json" <<'EOF'
{"turns": [
 {"text": "I will append the line.", "tool_use": {"name": "Bash", "input": {"command": "echo 'edited by the agent' >> README.md"}},
  "usage": {"input_tokens": 1000, "output_tokens": 100}},
 {"text": "Appended a line to README.md.",
  "usage": {"input_tokens": 2000, "output_tokens": 10, "cache_read_input_tokens": 3000, "cache_creation_input_tokens": 400}}
]}
EOF
	cat >"$W/t/agent.sh" <<'EOF'
ANTHROPIC_BASE_URL=http://127.0.0.1:$PORT ANTHROPIC_API_KEY=sk-ant-test-key CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 \
	timeout 120 claude -p "Append a line to README.md" --output-format json --dangerously-skip-permissions \
	--model claude-sonnet-4-5 >/t/result.json 2>/t/claude.err
EOF
	run_agent_in_sandbox anthropic-double.py
	echo "$output"; cat "$W/t/claude.err" "$W/t/double.err"; cat "$W/t/result.json"
	[ "$status" -eq 0 ]
	# the real harness ran the scripted command in the repository
	[ "$(cat "$W/t/repo/README.md")" = "$(printf 'hello\nedited by the agent')" ]
	r=$W/t/result.json
	[ "$(jq -r '"\(.type) \(.subtype) \(.is_error) \(.num_turns) \(.stop_reason) \(.result)"' "$r")" = "result success false 2 end_turn Appended a line to README.md." ]
	[ "$(jq -r '.usage | "\(.input_tokens) \(.output_tokens) \(.cache_read_input_tokens) \(.cache_creation_input_tokens)"' "$r")" = "3000 110 3000 400" ]
	# priced at claude-sonnet-4-5's list rates ($3 in, $15 out, $0.30 cache read, $3.75 cache write per M)
	jq -e '(.total_cost_usd - 0.01305 | fabs) < 1e-9' "$r"
	jq -e '(.modelUsage["claude-sonnet-4-5"].costUSD - 0.01305 | fabs) < 1e-9' "$r"
	# two requests, the key as given, the second carries the tool_result
	[ "$(wc -l <"$W/t/req.jsonl")" -eq 2 ]
	[ "$(jq -r '"\(.path) \(.stream) \(.headers["x-api-key"]) \(.body.model)"' "$W/t/req.jsonl" | sort -u)" = "/v1/messages true sk-ant-test-key claude-sonnet-4-5" ]
	jq -se 'map(select(.turn==0))[0] | any(.body.tools[]; .name == "Bash")' "$W/t/req.jsonl"
	[ "$(jq -r 'select(.turn==1) | .body.messages[-1].content[] | select(.type=="tool_result") | .tool_use_id' "$W/t/req.jsonl")" = toolu_double_000_0 ]
}

@test "Claude Code reaches a double in a test netns through --net allow, and retries a 529" {
	agent_cli_image
	nft list tables >/dev/null 2>&1 || skip "this kernel has no nftables (--net allow)"
	agent_workdir
	dbl_netns_up
	cat >"$W/t/turns.json" <<'EOF'
{"turns": [
 {"error": {"status": 529}},
 {"tool_use": {"name": "Bash", "input": {"command": "printf 'via the netns\\n' > NEW.txt"}}},
 {"text": "Created NEW.txt."}
]}
EOF
	dbl_start anthropic-double.py anth --listen "$DBL4" --listen "$DBL6" --script "$W/t/turns.json" --log "$W/req.jsonl"
	run timeout -k 2 180 "$LCRUN" run --image agent-cli --net allow --allow "$DBL4/32:$DBL_PORT" --user 1000:1000 \
		-e HOME=/home/agent -e ANTHROPIC_BASE_URL="http://$DBL4:$DBL_PORT" -e ANTHROPIC_API_KEY=sk-allow \
		-e CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 --bind "$W/t:/t" -w /t/repo -- \
		sh -c 'timeout 120 claude -p "Create NEW.txt" --output-format json --dangerously-skip-permissions </dev/null'
	echo "$output"
	[ "$status" -eq 0 ]
	[ "$(cat "$W/t/repo/NEW.txt")" = "via the netns" ]
	[ "$(jq -r '"\(.is_error) \(.result)"' <<<"$(grep '^{' <<<"$output" | tail -1)")" = "false Created NEW.txt." ]
	[ "$(jq -c '[.turn]' "$W/req.jsonl" | tr -d '\n')" = "[0][1][2]" ]
	[ "$(jq -r '.headers["x-api-key"]' "$W/req.jsonl" | sort -u)" = sk-allow ]
}

@test "Codex CLI edits a file through the OpenAI double's responses API" {
	agent_cli_image
	agent_workdir
	cat >"$W/t/turns.json" <<'EOF'
{"turns": [
 {"tool_call": {"name": "exec_command", "arguments": {"cmd": "echo 'edited by codex' >> README.md"}},
  "usage": {"input_tokens": 1000, "output_tokens": 100, "cached_tokens": 200}},
 {"text": "Appended a line to README.md.", "usage": {"input_tokens": 2000, "output_tokens": 10, "cached_tokens": 1500, "reasoning_tokens": 5}}
]}
EOF
	cat >"$W/t/agent.sh" <<'EOF'
mkdir -p "$HOME/.codex"
cat >"$HOME/.codex/config.toml" <<TOML
model = "gpt-5"
model_provider = "double"
[model_providers.double]
name = "double"
base_url = "http://127.0.0.1:$PORT/v1"
env_key = "OPENAI_API_KEY"
wire_api = "responses"
[analytics]
enabled = false
TOML
OPENAI_API_KEY=sk-codex-test timeout 120 codex exec --json --dangerously-bypass-approvals-and-sandbox \
	--skip-git-repo-check "Append a line to README.md" >/t/out.jsonl 2>/t/codex.err
EOF
	run_agent_in_sandbox openai-double.py
	echo "$output"; cat "$W/t/codex.err" "$W/t/double.err" "$W/t/out.jsonl"
	[ "$status" -eq 0 ]
	[ "$(cat "$W/t/repo/README.md")" = "$(printf 'hello\nedited by codex')" ]
	o=$W/t/out.jsonl
	[ "$(jq -r 'select(.type=="item.completed" and .item.type=="command_execution") | "\(.item.exit_code) \(.item.status)"' "$o")" = "0 completed" ]
	[ "$(jq -r 'select(.type=="item.completed" and .item.type=="agent_message") | .item.text' "$o")" = "Appended a line to README.md." ]
	[ "$(jq -r 'select(.type=="turn.completed") | .usage | "\(.input_tokens) \(.cached_input_tokens) \(.output_tokens) \(.reasoning_output_tokens)"' "$o")" = "3000 1700 110 5" ]
	[ "$(wc -l <"$W/t/req.jsonl")" -eq 2 ]
	[ "$(jq -r '"\(.path) \(.stream) \(.headers.authorization)"' "$W/t/req.jsonl" | sort -u)" = "/v1/responses true Bearer sk-codex-test" ]
	[ "$(jq -r 'select(.turn==1) | .body.input[] | select(.type=="function_call_output") | .call_id' "$W/t/req.jsonl")" = call_double_000_0 ]
}

@test "agent-box image: sshd, sudoers grant agent NOPASSWD, no host keys baked in" {
	agent_cli_image
	out=$(timeout -k 2 900 "$LCRUN" image build "$BATS_TEST_DIRNAME/../../images/agent-box.json" 2>&1) ||
		skip "the agent-box image cannot be built here: $(echo "$out" | tail -1)"
	run "$LCRUN" run --image agent-box --net none -- sh -c \
		'ls /etc/ssh/ssh_host_* 2>/dev/null | wc -l; ssh-keygen -A >/dev/null && /usr/sbin/sshd -t && echo sshd-ok; rg --version 2>/dev/null | head -1; git --version; sudo -l -U agent | grep -c NOPASSWD; getent shadow agent | cut -d: -f2'
	echo "$output"
	[ "$status" -eq 0 ]
	[ "${lines[0]}" = 0 ]
	[ "${lines[1]}" = sshd-ok ]
	[[ "${lines[2]}" == "ripgrep "* ]]
	[[ "${lines[3]}" == "git version "* ]]
	[ "${lines[4]}" = 1 ]
	[ "${lines[5]}" = "*" ]
}
