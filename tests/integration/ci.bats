#!/usr/bin/env bats
# lcrun as a CI test harness: the sandbox commands of the CI recipe (docs/guides/ci.md)
# and of contrib/ci/*.yml, taken from those files as they are, run a small
# project's test suite (tests/fixtures/ci-project): no network, a writable
# checkout whose files stay its owner's, the exit code passed through, a
# JUnit report readable on the host, a timeout.

load helpers

bats_require_minimum_version 1.5.0

TOP=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)

setup() {
	[ "$(id -u)" = 0 ] || skip "needs root"
	host_snapshot
	BIN="$BATS_TEST_TMPDIR/bin"
	mkdir -p "$BIN"
	ln -s "$LCRUN" "$BIN/lcrun"
	# CI runs the command with sudo; here we are root already
	printf '#!/bin/sh\nexec "$@"\n' >"$BIN/sudo"
	chmod +x "$BIN/sudo"
}

teardown() {
	assert_host_clean
}

# The shell a CI service runs for the sandbox step.
github_step() {
	python3 -c 'import sys, yaml
d = yaml.safe_load(open(sys.argv[1]))
print(next(s["run"] for s in d["jobs"]["test"]["steps"] if s.get("name") == "Tests in a sandbox"))' \
		"$TOP/contrib/ci/github-actions.yml"
}
gitlab_script() {
	python3 -c 'import sys, yaml
print("\n".join(yaml.safe_load(open(sys.argv[1]))["test"]["script"]))' "$TOP/contrib/ci/gitlab-ci.yml"
}
# The shell block that follows the marker line in docs/guides/ci.md.
guide_recipe() {
	awk '/^<!-- ci-recipe: tested by tests\/integration\/ci.bats -->$/ { m = 1; next }
		m == 1 && /^```sh$/ { m = 2; next }
		m == 2 && /^```$/ { exit }
		m == 2 { print }' "$TOP/docs/guides/ci.md"
}

# A checkout of the fixture project owned by UID:GID.
checkout() { # DIR UID:GID
	cp -r "$TOP/tests/fixtures/ci-project" "$1"
	chown -R "$2" "$1"
}

# Run a CI step's shell the way the service would: in the checkout, its
# variables set.
ci_run() { # SCRIPT CHECKOUT
	run env PATH="$BIN:$PATH" GITHUB_WORKSPACE="$2" CI_PROJECT_DIR="$2" CHECKOUT="$2" \
		bash -ec "cd \"\$CHECKOUT\"; $1"
	echo "$output"
}

check_green() { # CHECKOUT UID:GID
	[ "$status" -eq 0 ]
	grep -q '^ok 2 no-network$' "$1/test-results/report.tap"
	grep -q '<testsuite name="ci-project" tests="3" failures="0">' "$1/test-results/report.xml"
	[ "$(cat "$1/test-results/written-by")" = 0 ] # root inside
	[ -x "$1/build/hello" ]
	[ -z "$(find "$1" \( ! -uid "${2%%:*}" -o ! -gid "${2##*:}" \) -print)" ]
}

# A CI step's shell on a fresh checkout owned by UID:GID: a green suite.
green_suite() { # SCRIPT UID:GID
	[[ "$1" == *"lcrun run --net none"* ]]
	co="$BATS_TEST_TMPDIR/checkout"
	checkout "$co" "$2"
	ci_run "$1" "$co"
	check_green "$co" "$2"
}

@test "ci: the GitHub Actions step runs a green suite; report on the host, owned by the runner's user" {
	green_suite "$(github_step)" 1001:1001
}

@test "ci: the GitLab CI script runs a green suite on a root-owned checkout" {
	green_suite "$(gitlab_script)" 0:0
}

@test "ci: the guide's recipe: a failing test fails the step with make's status; the report says which" {
	script=$(guide_recipe)
	[[ "$script" == *"lcrun run"* ]]
	co="$BATS_TEST_TMPDIR/co"
	checkout "$co" 1000:1000
	ci_run "$script" "$co"
	check_green "$co" 1000:1000
	touch "$co/fail-me"
	ci_run "$script" "$co"
	[ "$status" -eq 2 ] # make's status for a failed recipe, passed through
	grep -q '^not ok 3 writes$' "$co/test-results/report.tap"
	grep -q 'tests="3" failures="1"' "$co/test-results/report.xml"
	[ "$(stat -c %u "$co/test-results/report.xml")" = 1000 ]
}

@test "ci: a suite that hangs is stopped at --timeout (124), daemons included" {
	# the GitHub step with its 30-minute timeout cut to 3 s
	script=$(github_step | sed 's/--timeout 1800/--timeout 3/')
	[[ "$script" == *"--timeout 3 "* ]]
	co="$BATS_TEST_TMPDIR/ws"
	checkout "$co" 1001:1001
	touch "$co/hang-me"
	start=$SECONDS
	ci_run "$script" "$co"
	[ "$status" -eq 124 ]
	[ $((SECONDS - start)) -lt 30 ]
	if pgrep -f "sleep 3600" >/dev/null; then false; fi
}
