#!/usr/bin/env bats
# The list of steps: every LC_FAULT("STEP") in the tree is the step of at
# least one fault test, and every step a fault test names is marked
# somewhere (a step renamed in the code would otherwise leave a test that
# checks nothing: fault_at fails on a step that is never reached, but
# only when the test runs).  Static: no root, no test build needed.

SRC="$(cd "$BATS_TEST_DIRNAME/../.." && pwd)"

@test "faults: every marked step has a fault test, every tested step is marked" {
	marked=$(grep -rhoE --include='*.c' 'LC_FAULT\("[a-z0-9-]+"\)' "$SRC/runtime" "$SRC/orchestrator" |
		sed -E 's/LC_FAULT\("(.*)"\)/\1/' | sort -u)
	# the tests name a step as the first argument of a *_case helper,
	# fault_at, start_faulty_lcd, with_sandbox or gateway_up
	named=$(grep -hvE '^\s*#' "$SRC"/tests/faults/*.bats |
		grep -oE '(_case|fault_at|start_faulty_lcd|with_sandbox|gateway_up) [a-z][a-z0-9-]*(:[0-9]+)?' |
		awk '{ print $2 }' | sed 's/:.*//' | sort -u)
	[ -n "$marked" ]
	diff <(echo "$marked") <(echo "$named")
}
