#!/usr/bin/env bats
# The manifest's config object: strings every function of the app gets as
# environment, shown by `lcctl app show`, overridden by `lcctl deploy
# --config KEY=VALUE`.  A private lcd (lcd-lib.bash), tasks run for real.
# Needs root.

FIXTURES="$BATS_TEST_DIRNAME/../fixtures/lcd"
APP="$FIXTURES/config-app.json"

load lcd-lib

setup() {
	lcd_setup
	start_lcd
	echo "tok-$RANDOM-$RANDOM" | "$LCCTL" secret set CONFIG_TEST_TOKEN
}

teardown() {
	lcd_teardown
}

@test "config: every function sees the config as environment, values byte for byte" {
	"$LCCTL" deploy "$APP"
	run "$LCCTL" run configured:env
	[ "$status" -eq 0 ]
	echo "$output" >"$T/env.json"
	jq -e '.REPOSITORY == "https://git.example.test/octo-org/widgets.git"' "$T/env.json"
	jq -e '.LABEL == "agent" and .EMPTY == ""' "$T/env.json"
	jq -e --arg want "pip install -e . && echo 'ready' \"\$HOME\"; exit 0" '.SETUP_COMMAND == $want' "$T/env.json"
	# lcd's own variables and the declared secret are still there
	jq -e '.LC_TASK_ID and .LC_TASK_ARGS == "/run/task/args.json" and (.CONFIG_TEST_TOKEN | startswith("tok-"))' "$T/env.json"
	# another function of the app, which declares no secret
	run "$LCCTL" run configured:other
	[ "$status" -eq 0 ]
	[ "$(echo "$output" | jq -r .label)" = agent ]
	[ "$(echo "$output" | jq -r .repo)" = https://git.example.test/octo-org/widgets.git ]
}

@test "config: lcctl deploy --config overrides or adds a key; app show shows it; a plain redeploy restores the file's" {
	run "$LCCTL" deploy "$APP" --config LABEL=bug --config NEW_KEY='a=b c' --config EMPTY=
	[ "$status" -eq 0 ]
	"$LCCTL" app show configured | jq -e '.config.LABEL == "bug" and .config.NEW_KEY == "a=b c" and .config.EMPTY == ""'
	"$LCCTL" app show configured | jq -e '.config.REPOSITORY == "https://git.example.test/octo-org/widgets.git"'
	# not a secret: shown, but the secret's value is not
	if "$LCCTL" app show configured | grep -q 'tok-'; then false; fi
	run "$LCCTL" run configured:env
	[ "$status" -eq 0 ]
	echo "$output" | jq -e '.LABEL == "bug" and .NEW_KEY == "a=b c" and .EMPTY == ""'
	"$LCCTL" deploy "$APP"
	"$LCCTL" app show configured | jq -e '.config.LABEL == "agent" and (.config | has("NEW_KEY") | not)'
	run "$LCCTL" run configured:other
	[ "$(echo "$output" | jq -r .label)" = agent ]
}

@test "config: bad keys and values are refused with their JSON path; bad --config is a usage error" {
	run "$LCCTL" deploy "$APP" --config 'BAD-NAME=x'
	[ "$status" -eq 121 ]
	[[ "$output" == "lcctl: config.BAD-NAME: bad name (an environment variable name: letters, digits, '_'; not starting with a digit)" ]]
	run "$LCCTL" deploy "$APP" --config CONFIG_TEST_TOKEN=x
	[ "$status" -eq 121 ]
	[[ "$output" == "lcctl: config.CONFIG_TEST_TOKEN: also a secret of functions.env (config is not secret)" ]]
	run "$LCCTL" deploy "$APP" --config LC_TASK_ID=x
	[ "$status" -eq 121 ]
	[[ "$output" == *"config.LC_TASK_ID: names starting with LC_TASK_ or LCD_ are set by lcd"* ]]
	run "$LCCTL" deploy "$APP" --config NOEQUALS
	[ "$status" -eq 123 ]
	[[ "$output" == "lcctl: --config: expected KEY=VALUE, got 'NOEQUALS'" ]]
	run "$LCCTL" deploy "$APP" --config =x
	[ "$status" -eq 123 ]
	run "$LCCTL" app list --config A=b
	[ "$status" -eq 123 ]
	[[ "$output" == "lcctl: app list does not take --config" ]]
	jq '.config.LABEL = 3' "$APP" >"$T/bad.json"
	run "$LCCTL" deploy "$T/bad.json"
	[ "$status" -eq 121 ]
	[[ "$output" == "lcctl: config.LABEL: expected a string" ]]
	# nothing was deployed by any of these
	run "$LCCTL" app show configured
	[ "$status" -eq 120 ]
}
