#!/usr/bin/env bats
# The coding-agents app's nightly eval and best-of-N (orchestrator/
# workloads/lc-eval) end to end: a private lcd per test on one image store
# per file (the agent-cli image copied in once), tests/fixtures/
# scripted-agent as AGENT_COMMAND (one case per eval task or attempt), the
# GitHub double in a network namespace of the test's own for the report's
# comment and for best-of-N's repo snapshot (made by the repo-builder in
# setup_file).  The eval tasks are the five shipped ones, copied with the
# scripted agent into their repositories, in an apps_dir of the test's own
# (lcd binds it at /run/lcd/apps).  Needs root and the agent-cli image
# (tests that need it skip, saying why, where it cannot be built).

load helpers
load doubles-lib
load lcd-lib
load agents-lib

APP=$BATS_TEST_DIRNAME/../../contrib/apps/coding-agents/app.json
SHIPPED=$BATS_TEST_DIRNAME/../../contrib/apps/coding-agents/eval
GH_TOKEN_VALUE=ghs_lcsecret_$$_evaltest

# The scripted agent's cases: calc-add, fizzbuzz and roman solved, slugify
# changed wrongly (the check fails), word-freq crashes; best-of-N's
# attempt 2 of 4 fixes calc.py, attempt 1 changes nothing, attempt 3 breaks
# mul, attempt 4 crashes.
AGENT_SCRIPT='{"format": "claude",
 "cases": [
  {"match": "# add\\(\\) subtracts", "steps": [{"replace": "calc.py", "old": "a - b", "new": "a + b"}],
   "result": {"result": "Fixed add().", "num_turns": 3, "total_cost_usd": 0.25}},
  {"match": "fizzbuzz\\(\\) is wrong", "steps": [{"write": "fizzbuzz.py", "content": "def fizzbuzz(n):\n    out = []\n    for i in range(1, n + 1):\n        if i % 15 == 0:\n            out.append(\"FizzBuzz\")\n        elif i % 3 == 0:\n            out.append(\"Fizz\")\n        elif i % 5 == 0:\n            out.append(\"Buzz\")\n        else:\n            out.append(str(i))\n    return out\n"}],
   "result": {"result": "Fixed fizzbuzz().", "num_turns": 2, "total_cost_usd": 0.125}},
  {"match": "to_int\\(\\) gets", "steps": [{"write": "roman.py", "content": "VALUES = {\"I\": 1, \"V\": 5, \"X\": 10, \"L\": 50, \"C\": 100, \"D\": 500, \"M\": 1000}\n\n\ndef to_int(s):\n    total = 0\n    for i, c in enumerate(s):\n        v = VALUES[c]\n        if i + 1 < len(s) and VALUES[s[i + 1]] > v:\n            total -= v\n        else:\n            total += v\n    return total\n"}],
   "result": {"result": "Fixed to_int().", "num_turns": 4, "total_cost_usd": 0.5}},
  {"match": "slugify\\(\\) keeps", "steps": [{"write": "slug.py", "content": "def slugify(s):\n    return s.lower()\n"}],
   "result": {"result": "Lowercased.", "num_turns": 1, "total_cost_usd": 0.0625}},
  {"match": "top_words\\(\\) counts", "steps": [{"stderr": "segfaulting now"}, {"crash": "SEGV"}]},
  {"match": "attempt 1 of 4", "result": {"result": "Nothing to do.", "num_turns": 1, "total_cost_usd": 0.01}},
  {"match": "attempt 2 of 4", "steps": [{"replace": "calc.py", "old": "a - b", "new": "a + b"}],
   "result": {"result": "Fixed add().", "num_turns": 2, "total_cost_usd": 0.02}},
  {"match": "attempt 3 of 4", "steps": [{"replace": "calc.py", "old": "a * b", "new": "a * b + 1"}],
   "result": {"result": "Changed mul().", "num_turns": 2, "total_cost_usd": 0.03}},
  {"match": "attempt 4 of 4", "steps": [{"crash": "SEGV"}]}
 ],
 "result": {"result": "No case for this prompt."}}'

# The repository best-of-N works on: coding-agents.bats's calculator.
make_source_repo() {
	local d=$1
	mkdir -p "$d/tools"
	printf 'def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n' >"$d/calc.py"
	cat >"$d/test_calc.py" <<'EOF'
import unittest

from calc import add, mul


class TestCalc(unittest.TestCase):
    def test_add(self):
        self.assertEqual(add(2, 3), 5)

    def test_mul(self):
        self.assertEqual(mul(2, 3), 6)
EOF
	cp "$DBL_FIXTURES/scripted-agent" "$d/tools/scripted-agent"
	echo "$AGENT_SCRIPT" >"$d/tools/agent.json"
	git -C "$d" init -q -b main
	git -C "$d" add -A
	GIT_AUTHOR_DATE=2026-01-01T00:00:00Z GIT_COMMITTER_DATE=2026-01-01T00:00:00Z \
		git -C "$d" -c user.name=octocat -c user.email=octocat@example.com commit -q -m "A calculator"
}

# The eval tasks as shipped, each repository with the scripted agent in
# tools/; $1/coding-agents/eval (all five) and eval-one (calc-add only).
make_apps_dir() {
	local a=$1/coding-agents t
	mkdir -p "$a/eval" "$a/eval-one"
	cp -a "$SHIPPED/." "$a/eval/"
	for t in "$a"/eval/*/; do
		mkdir -p "$t/repo/tools"
		cp "$DBL_FIXTURES/scripted-agent" "$t/repo/tools/scripted-agent"
		echo "$AGENT_SCRIPT" >"$t/repo/tools/agent.json"
	done
	cp -a "$a/eval/calc-add" "$a/eval-one/"
}

write_policies() { # GHPORT
	local p=$LCRUN_ETC_DIR/policies/net
	mkdir -p "$p"
	printf '{"mode": "allow", "allow": [{"cidr": "%s/32", "ports": [%s]}], "hosts": {"github.com": "%s", "api.github.com": "%s"}}\n' \
		"$DBL4" "$1" "$DBL4" "$DBL4" >"$p/github.json"
	# the model API: port 9 of the double's address, where nothing listens
	# (the scripted agent needs none; an agent that tried would fail)
	printf '{"mode": "allow", "allow": [{"cidr": "%s/32", "ports": [9]}], "hosts": {"api.anthropic.com": "%s"}}\n' \
		"$DBL4" "$DBL4" >"$p/model-api.json"
	printf '{"mode": "allow", "allow": [{"cidr": "%s/32", "ports": [%s]}]}\n' "$DBL4" "$1" >"$p/open.json"
}

# lcd (the build tree's workloads, the test's apps_dir), the GitHub double,
# the app deployed with KEY=VALUE… on top of the file's config.
start_world() {
	dbl_netns_up
	cat >"$W/seed.json" <<EOF
{"tokens": {"$GH_TOKEN_VALUE": "coding-agent[bot]"},
 "repos": {"octo/demo": {"private": false, "default_branch": "main", "source": "$SRC",
   "issues": [{"number": 40, "title": "Nightly eval reports", "body": "The eval posts here.", "labels": [], "user": "alice"}]}}}
EOF
	dbl_start github-double.py gh --listen "$DBL4" --state "$W/gh" --seed "$W/seed.json"
	GHPORT=$DBL_PORT
	write_policies "$GHPORT"
	# a model gateway (the app's default MODEL_ACCESS): the scripted agent
	# asks no model, so its upstream is port 9, where nothing listens
	printf '{"workloads_dir": "%s", "apps_dir": "%s", "gateway": {"upstreams": {"anthropic": "https://%s:9"}}}\n' \
		"$WORKLOADS" "$BATS_FILE_TMPDIR/apps" "$DBL4" >"$T/lcd.json"
	start_lcd
	printf '%s' "$GH_TOKEN_VALUE" | "$LCCTL" secret set GITHUB_TOKEN
	printf '%s' sk-ant-test-key | "$LCCTL" secret set ANTHROPIC_API_KEY
	local cfg=(--config "REPOSITORY=http://$DBL4:$GHPORT/octo/demo.git" --config "GITHUB_API_URL=http://$DBL4:$GHPORT"
		--config "AGENT_COMMAND=python3 tools/scripted-agent --script tools/agent.json"
		--config "AGENT_MODEL=claude-sonnet-4-5" --config "AGENT_TIMEOUT_SECONDS=120"
		--config "TEST_COMMAND=python3 -m unittest -q" --config EVAL_LIMITS_BEST_EFFORT=true)
	local kv
	for kv in "$@"; do cfg+=(--config "$kv"); done
	"$LCCTL" deploy "$APP" "${cfg[@]}" >/dev/null
}

# The sandboxes the app made (live and ended) with one label's value.
history() { # LABEL VALUE
	api GET "/sandboxes?app=coding-agents&history=1&limit=100" | head -1 |
		jq -c --arg k "$1" --arg v "$2" '[.sandboxes[] | select(.labels[$k] == $v)]'
}

comments() { curl -s "http://$DBL4:$GHPORT/repos/octo/demo/issues/$1/comments" -H "Authorization: Bearer $GH_TOKEN_VALUE"; }

setup_file() {
	[ "$(id -u)" = 0 ] || skip "needs root"
	[ -z "${LCRUN_IN_VM:-}" ] || skip "nothing here needs a cgroup v2 controller; the host suite runs it"
	: "${LCRUN:=$BATS_TEST_DIRNAME/../../build/lcrun}"
	export LCRUN
	export DBL_NS=lcev-$$
	local F=$BATS_FILE_TMPDIR out
	export SRC=$F/src
	make_source_repo "$SRC"
	make_apps_dir "$F/apps"
	agents_file_store || return 0
	BATS_TEST_TMPDIR=$F/snap
	mkdir -p "$BATS_TEST_TMPDIR"
	W=$BATS_TEST_TMPDIR
	file_world_setup
	# what the snapshot's world leaves is checked too: nothing of it may
	# reach the file's tests
	LCRUN_LIB=$LCRUN_ROOT LCRUN_RUN=$LCRUN_STATE_DIR
	host_snapshot
	if start_world && out=$("$LCCTL" run coding-agents:snapshot 2>&1); then
		echo "$out" | jq -c '{image, commit, branch, created, repository, repo_dir}' >"$F/snapshot.json"
	else
		echo "the repo-builder failed in setup_file: $out $(tail -5 "$T/lcd.log")" >"$F/snapshot.skip"
	fi
	world_teardown
	assert_host_clean
}

setup() {
	[ "$(id -u)" = 0 ] || skip "needs root"
	[ -z "${LCRUN_IN_VM:-}" ] || skip "nothing here needs a cgroup v2 controller; the host suite runs it"
	W=$BATS_TEST_TMPDIR
	file_world_setup
	host_snapshot
}

teardown() {
	# bats reads a teardown's last status only: keep each failure
	local rc=0
	world_teardown || rc=1
	[ ! -f "$BATS_TEST_TMPDIR/host.before" ] || assert_host_clean || rc=1
	return $rc
}

@test "eval: five tasks, three solved, one failed, one crashed → 3/5, every report field, kept under eval:DATE" {
	need_agent_image
	start_world
	local t0=$SECONDS
	run "$LCCTL" run coding-agents:nightly-eval
	echo "$output"
	[ "$status" -eq 0 ]
	echo "# the eval of five tasks took $((SECONDS - t0)) s" >&3
	r=$output
	# SWE-bench's report
	[ "$(jq -c '[.total_instances, .submitted_instances, .completed_instances, .resolved_instances, .unresolved_instances, .error_instances, .empty_patch_instances]' <<<"$r")" = "[5,5,5,3,1,1,0]" ]
	[ "$(jq -c .resolved_ids <<<"$r")" = '["calc-add","fizzbuzz","roman"]' ]
	[ "$(jq -c .unresolved_ids <<<"$r")" = '["slugify"]' ]
	[ "$(jq -c .error_ids <<<"$r")" = '["word-freq"]' ]
	[ "$(jq -c .submitted_ids <<<"$r")" = '["calc-add","fizzbuzz","roman","slugify","word-freq"]' ]
	[ "$(jq -c .incomplete_ids <<<"$r")" = '[]' ]
	# and ours: pass rate, spend (0.25 + 0.125 + 0.5 + 0.0625; the crash spent nothing known), model
	[ "$(jq -r '"\(.pass_rate) \(.total_spend_usd) \(.model) \(.agent)"' <<<"$r")" = "0.6 0.9375 claude-sonnet-4-5 AGENT_COMMAND" ]
	[[ "$(jq -r .date <<<"$r")" == "$(date -u +%Y-%m-%d)" ]]
	[ "$(jq -r .map_key <<<"$r")" = "eval:$(date -u +%Y-%m-%d)" ]
	jq -e '.wall_time_s > 0' <<<"$r"
	# per task
	[ "$(jq -r '.tasks[] | "\(.id) \(.status) \(.passed) \(.turns) \(.spend_usd) \(.agent_status) \(.check_exit_code)"' <<<"$r")" = "$(printf '%s\n' \
		"calc-add resolved true 3 0.25 ok 0" \
		"fizzbuzz resolved true 2 0.125 ok 0" \
		"roman resolved true 4 0.5 ok 0" \
		"slugify unresolved false 1 0.0625 ok 1" \
		"word-freq error false null null crashed 1")" ]
	jq -e '[.tasks[] | .wall_time_s > 0 and (.sandbox_id | test("^[0-9a-f]{12,}$")) and (.task_id | length > 0)] | all' <<<"$r"
	[ "$(jq -r '.tasks[4].error' <<<"$r")" = "the agent was killed by signal 11 and printed no result" ]
	# the Markdown for people
	md=$(jq -r .markdown <<<"$r")
	echo "$md"
	[[ "$md" == "## Nightly eval, $(date -u +%Y-%m-%d)"* ]]
	[[ "$md" == *"pass rate **3/5 (60%)** · spend \$0.9375"* ]]
	[[ "$md" == *"| roman | ✅ resolved | 4 | \$0.5000 |"* ]]
	[[ "$md" == *"| slugify | ❌ unresolved | 1 |"* ]]
	[[ "$md" == *"| word-freq | ❌ error: "* ]]
	# kept in the map, the same report
	"$LCCTL" map get coding-agents/coding-agents "eval:$(date -u +%Y-%m-%d)" | jq -e '.resolved_instances == 3 and .pass_rate == 0.6'
	# each eval-task's sandbox: the eval limits, ended; none is left
	[ "$(tasks eval-task | jq -r '[.[] | .result.limits | "\(.cpus) \(.memory)"] | unique | join(",")')" = "0.5 1G" ]
	[ "$(history coding-agents eval | jq -r '[.[].state] | join(" ")')" = "terminated terminated terminated terminated terminated" ]
	[ "$("$LCCTL" sandbox ls --json | jq length)" = 0 ]
	# the crash is a failed task only in the report: every eval-task ran to its verdict
	[ "$(tasks eval-task | jq -r '[.[].state] | unique | join(" ")')" = succeeded ]
}

@test "eval: a model per run; the report posted as a comment on EVAL_REPORT_ISSUE; a failed eval-task is an error, never lost" {
	need_agent_image
	start_world "EVAL_REPORT_ISSUE=octo/demo#40" EVAL_DIR=/run/lcd/apps/coding-agents/eval-one
	run "$LCCTL" run coding-agents:eval '{"model": "claude-opus-4-1"}'
	echo "$output"
	[ "$status" -eq 0 ]
	[ "$(jq -r '"\(.model) \(.resolved_instances)/\(.total_instances) \(.map_key)"' <<<"$output")" = "claude-opus-4-1 1/1 null" ]
	[[ "$(jq -r .comment_url <<<"$output")" == "http://$DBL4:$GHPORT/octo/demo/issues/40#issuecomment-"* ]]
	c=$(comments 40 | jq -r '.[0].body')
	echo "$c"
	[[ "$c" == "## Nightly eval, "*"Model \`claude-opus-4-1\` (AGENT_COMMAND) · pass rate **1/1 (100%)**"* ]]
	[[ "$c" == *"| calc-add | ✅ resolved | 3 | \$0.2500 |"* ]]
	# the eval-task ran with that model
	[ "$(tasks eval-task | jq -r '.[0].args.model')" = claude-opus-4-1 ]
	# an eval-task that cannot run (its image is missing) fails; the report counts it as an error
	"$LCCTL" deploy "$APP" --config "REPOSITORY=http://$DBL4:$GHPORT/octo/demo.git" --config "GITHUB_API_URL=http://$DBL4:$GHPORT" \
		--config EVAL_DIR=/run/lcd/apps/coding-agents/eval-one --config EVAL_IMAGE=no-such-image --config EVAL_LIMITS_BEST_EFFORT=true \
		--config "AGENT_COMMAND=python3 tools/scripted-agent --script tools/agent.json" >/dev/null
	run "$LCCTL" run coding-agents:eval
	echo "$output"
	[ "$status" -eq 0 ]
	[ "$(jq -c '[.total_instances, .completed_instances, .resolved_instances, .error_instances, .pass_rate]' <<<"$output")" = "[1,0,0,1,0]" ]
	[ "$(jq -c .error_ids <<<"$output")" = '["calc-add"]' ]
	[[ "$(jq -r '.tasks[0].error' <<<"$output")" == "the eval-task "*" failed: "*"no-such-image"* ]]
	[ "$(tasks eval-task | jq -r '.[0].state')" = failed ]
	[ "$("$LCCTL" sandbox ls --json | jq length)" = 0 ]
}

@test "nightly-eval fires at 06:00 UTC by the test clock; deployment stop pauses only the eval" {
	need_agent_image
	CLOCK=$T/clock
	echo 2030-01-01T05:59:50Z >"$CLOCK"
	start_world EVAL_DIR=/run/lcd/apps/coding-agents/eval-one
	"$LCCTL" deployment ls --json | jq -e '.[] | select(.name == "nightly-eval") | (.paused | not) and .cron == "0 6 * * *"'
	sleep 1
	[ "$(tasks eval | jq length)" = 0 ]
	echo 2030-01-01T06:00:20Z >"$CLOCK"
	for _ in $(seq 100); do [ "$(tasks eval | jq length)" -ge 1 ] && break; sleep 0.1; done
	[ "$(tasks eval | jq -r '.[0].schedule')" = nightly-eval ]
	id=$(tasks eval | jq -r '.[0].id')
	for _ in $(seq 1200); do [ "$(tasks eval | jq -r '.[0].state')" = succeeded ] && break; sleep 0.1; done
	tasks eval | jq -e '.[0].schedule == "nightly-eval" and .[0].state == "succeeded"'
	"$LCCTL" task show "$id" | jq -e '.result.resolved_instances == 1 and .result.total_instances == 1'
	[ "$("$LCCTL" task show "$id" | jq -r .result.map_key)" = "eval:$(date -u +%Y-%m-%d)" ]
	# paused: the next night fires nothing
	"$LCCTL" deployment stop nightly-eval
	"$LCCTL" deployment ls --json | jq -e '[.[] | select(.name == "nightly-eval")][0].paused'
	echo 2030-01-02T06:00:20Z >"$CLOCK"
	sleep 2
	[ "$(tasks eval | jq length)" = 1 ]
	# the app is untouched: run APP:SCHEDULE still runs the eval now (a
	# second report that day, under its own key)
	run "$LCCTL" run coding-agents:nightly-eval
	echo "$output"
	[ "$status" -eq 0 ]
	[ "$(jq -r .map_key <<<"$output")" = "eval:$(date -u +%Y-%m-%d).2" ]
	[ "$(tasks eval | jq length)" = 2 ]
	[ "$("$LCCTL" sandbox ls --json | jq length)" = 0 ]
}

@test "best-of-N: 4 forks of the snapshot, one passes and wins with its diff, every fork terminated" {
	need_agent_image
	start_world
	use_snapshot
	local t0=$SECONDS
	run "$LCCTL" run coding-agents:best-of-n '{"prompt": "Fix add() in calc.py.", "n": 4}'
	echo "$output"
	[ "$status" -eq 0 ]
	echo "# best-of-N with 4 attempts took $((SECONDS - t0)) s" >&3
	r=$output
	[ "$(jq -r '"\(.n) \(.winner) \(.snapshot.commit)"' <<<"$r")" = "4 2 $(git -C "$SRC" rev-parse HEAD)" ]
	[ "$(jq -r '.attempts[] | "\(.attempt) \(.passed) \(.agent_status // "-")"' <<<"$r")" = "$(printf '%s\n' "1 false ok" "2 true ok" "3 false ok" "4 false crashed")" ]
	# the winning diff: the fix, and nothing else
	d=$(jq -r .winning_diff <<<"$r")
	echo "$d"
	[[ "$d" == *"diff --git a/calc.py b/calc.py"* ]]
	[[ "$d" == *"-    return a - b"*"+    return a + b"* ]]
	[ "$(grep -c '^diff --git' <<<"$d")" = 1 ]
	# each attempt has its sandbox, its diff's size, its test's verdict
	jq -e '[.attempts[] | (.sandbox_id | test("^[0-9a-f]{12,}$"))] | all' <<<"$r"
	[ "$(jq -r '.attempts[] | "\(.diff_lines) \(.check_exit_code)"' <<<"$r")" = "$(printf '%s\n' "0 1" "2 0" "2 1" "0 1")" ]
	jq -e '(.total_spend_usd - 0.06 | fabs) < 1e-9' <<<"$r"
	# four attempt tasks, four sandboxes of the snapshot, all ended
	[ "$(tasks best-of-n-attempt | jq length)" = 4 ]
	[ "$(history coding-agents best-of-n | jq -r '[.[].state] | join(" ")')" = "terminated terminated terminated terminated" ]
	[ "$(history coding-agents best-of-n | jq -r '[.[].image] | unique | join(" ")')" = "$(jq -r .image "$BATS_FILE_TMPDIR/snapshot.json")" ]
	[ "$("$LCCTL" sandbox ls --json | jq length)" = 0 ]
	# bad arguments: one line, nothing started
	run "$LCCTL" run coding-agents:best-of-n '{"prompt": "x", "n": 40}'
	[ "$status" -ne 0 ]
	[[ "$output" == *"args.n: expected a number from 1 to 16"* ]]
	[ "$(tasks best-of-n-attempt | jq length)" = 4 ]
}
