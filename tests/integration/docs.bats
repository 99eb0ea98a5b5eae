#!/usr/bin/env bats
# The man pages (man/*.md) document every verb the programs' usage names
# and every key lcd's configuration parser takes.  The verbs are read from
# the binaries' --help, the keys from the parser's source (config_load,
# lcd_gateway_config, the upstreams' parser, the pool's): a verb or key
# added without its page fails here.
#
# A page documents a verb with a term line, "**lcrun VERB** …" (its
# sub-verbs as words of such lines: "**lcrun image ls** …", "**lcctl
# devbox** *NAME* **ssh**"), an lcd option with "**--OPTION** …", and a
# key with "**KEY**" ("**gateway.KEY**", "**gateway.upstreams.P.KEY**")
# on a line that starts with "**".
load helpers

setup() {
	TOP=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
	BIN=$(dirname "$LCRUN")
	MAN=$TOP/man
	LCD_SRC=$TOP/orchestrator/lcd
}

# The term lines of PAGE for PROG VERB: lines that start "**PROG VERB**" or
# "**PROG VERB ".
terms() { # PAGE PROG VERB
	grep -E "^\*\*$2 $3(\*\*| )" "$1" || true
}

# Prints what PAGE lacks of PROG's verbs, given as "VERB" or "VERB SUB"
# lines on stdin; fails when anything is missing.
check_verbs() { # PAGE PROG
	local verb sub missing=0
	while read -r verb sub; do
		[ -n "$verb" ] || continue
		if [ -z "$(terms "$1" "$2" "$verb")" ]; then
			echo "$(basename "$1"): no term line for '$2 $verb${sub:+ $sub}'"
			missing=1
		elif [ -n "$sub" ] && ! terms "$1" "$2" "$verb" | grep -qw -- "$sub"; then
			echo "$(basename "$1"): no term line for '$2 $verb $sub'"
			missing=1
		fi
	done
	return $missing
}

# Prints what PAGE lacks of the keys on stdin ("**KEY**" on a term line).
check_keys() { # PAGE
	local key missing=0
	while read -r key; do
		[ -n "$key" ] || continue
		if ! grep -E '^\*\*' "$1" | grep -qF -- "**$key**"; then
			echo "$(basename "$1"): '$key' is not documented"
			missing=1
		fi
	done
	return $missing
}

# The first column of the lines of a usage text indented by exactly two
# spaces: the verbs.
usage_verbs() {
	sed -n 's/^  \([a-z][a-z-]*\)\( .*\)\{0,1\}$/\1/p'
}

lcrun_verbs() {
	"$BIN/lcrun" --help | usage_verbs
	"$BIN/lcrun" image --help | usage_verbs | sed 's/^/image /'
	"$BIN/lcrun" seccomp --help | sed -n 's/^usage: lcrun seccomp \([a-z]*\) .*/seccomp \1/p'
}

lcrun_oci_verbs() {
	"$BIN/lcrun-oci" --help | usage_verbs
}

# lcctl's usage: each line indented by two spaces is a synopsis (up to the
# first run of two spaces) whose first word is the verb; its other
# lower-case words (split on blanks, "|" and ",") are sub-verbs:
# "map get|del APP/MAP KEY | map set …" gives map get, map del, map set.
lcctl_verbs() {
	"$BIN/lcctl" --help | awk '
		/^  [a-z]/ {
			syn = substr($0, 3)
			sub(/  .*/, "", syn)
			n = split(syn, w, /[ |,]+/)
			print w[1]
			for (i = 2; i <= n; i++)
				if (w[i] ~ /^[a-z][a-z-]*$/ && w[i] != w[1])
					print w[1], w[i]
		}' | sort -u
}

# The body of the C function NAME (from its definition to the first "}"
# at the start of a line) in the file under DIR that defines it.
c_function() { # DIR NAME
	local f
	f=$(grep -rlE "^(static )?int $2\(" "$1" --include='*.c' | head -1)
	[ -n "$f" ] || return 1
	awk -v fn="$2" '$0 ~ "^(static )?int " fn "\\(" { on = 1 } on { print } on && /^}/ { exit }' "$f"
}

# The string literals a function compares VAR with: strcmp(VAR, "KEY").
compared_keys() { # VAR
	grep -oE "strcmp\\($1, \"[a-z_0-9]+\"\\)" | sed -E 's/.*"(.*)".*/\1/' | sort -u
}

lcd_json_keys() { # LCD_SRC
	c_function "$1" config_load | compared_keys key
	c_function "$1" lcd_gateway_config | compared_keys k | sed 's/^/gateway./'
}

@test "docs: every lcrun verb (lcrun --help, image --help, seccomp) has its term in lcrun(1)" {
	n=$(lcrun_verbs | wc -l)
	[ "$n" -ge 25 ] # the usage still lists verbs the way this test reads them
	lcrun_verbs | check_verbs "$MAN/lcrun.1.md" lcrun
}

@test "docs: every lcrun-oci verb has its term in lcrun-oci(8)" {
	n=$(lcrun_oci_verbs | wc -l)
	[ "$n" -ge 13 ]
	lcrun_oci_verbs | check_verbs "$MAN/lcrun-oci.8.md" lcrun-oci
}

@test "docs: every lcctl verb and sub-verb of its usage has its term in lcctl(1)" {
	n=$(lcctl_verbs | wc -l)
	[ "$n" -ge 40 ]
	lcctl_verbs | check_verbs "$MAN/lcctl.1.md" lcctl
}

@test "docs: every lcd option of its usage is in lcd(8)" {
	opts=$("$BIN/lcd" --help | sed -n 's/^  \(--[a-z-]*\) .*/\1/p')
	[ "$(echo "$opts" | wc -l)" -ge 3 ]
	echo "$opts" | check_keys "$MAN/lcd.8.md"
}

@test "docs: every key of lcd's config parser and the gateway's is in lcd.json(5)" {
	keys=$(lcd_json_keys "$LCD_SRC")
	# config_load and lcd_gateway_config still compare keys one by one
	[ "$(echo "$keys" | grep -vc '^gateway\.')" -ge 25 ]
	[ "$(echo "$keys" | grep -c '^gateway\.')" -ge 8 ]
	echo "$keys" | check_keys "$MAN/lcd.json.5.md"
}

@test "docs: every key of a gateway upstream is in lcd.json(5)" {
	keys=$(c_function "$LCD_SRC" cfg_upstream | compared_keys k)
	[ "$(echo "$keys" | wc -l)" -ge 4 ]
	for k in $keys; do
		grep -E '^\*\*gateway\.upstreams\.' "$MAN/lcd.json.5.md" | grep -qF ".$k**" ||
			{ echo "lcd.json.5.md: upstream key '$k' is not documented"; false; }
	done
}

@test "docs: every key of a sandbox_pool entry is in lcd.json(5)'s SANDBOX POOL" {
	keys=$(c_function "$LCD_SRC" lcd_pool_config | grep -oE '(json_object_get|lc_json_str)\(e, "[a-z_]+"\)' |
		sed -E 's/.*"(.*)".*/\1/' | sort -u)
	[ "$(echo "$keys" | wc -l)" -ge 3 ]
	section=$(sed -n '/^## SANDBOX POOL/,/^## /p' "$MAN/lcd.json.5.md")
	for k in $keys; do
		grep -qF "\`$k\`" <<<"$section" || { echo "lcd.json.5.md: sandbox_pool key '$k' is not documented"; false; }
	done
}

# The checks above can fail: a page that lost a term, and a parser that
# gained a key, are both reported by name.
@test "docs: the check names a verb whose term is gone from the page" {
	cp "$MAN/lcrun.1.md" "$BATS_TEST_TMPDIR/lcrun.1.md"
	sed -i '/^\*\*lcrun snapshot\*\*/d; /^\*\*lcrun image prune\*\*/d' "$BATS_TEST_TMPDIR/lcrun.1.md"
	run check_verbs "$BATS_TEST_TMPDIR/lcrun.1.md" lcrun < <(lcrun_verbs)
	[ "$status" -eq 1 ]
	[[ "$output" == *"no term line for 'lcrun snapshot'"* ]]
	[[ "$output" == *"no term line for 'lcrun image prune'"* ]]
	[ "$(echo "$output" | wc -l)" -eq 2 ]
}

@test "docs: the check names an lcd.json key the parser takes and the page does not" {
	mkdir -p "$BATS_TEST_TMPDIR/src"
	cp -r "$LCD_SRC"/. "$BATS_TEST_TMPDIR/src/"
	f=$(grep -rlE '^static int config_load\(' "$BATS_TEST_TMPDIR/src" --include='*.c')
	sed -i 's/if (!strcmp(key, "socket"))/if (!strcmp(key, "socket_backlog_probe"))\n\t\t\tn = \&c->max_body;\n\t\telse if (!strcmp(key, "socket"))/' "$f"
	grep -q '"socket_backlog_probe"' "$f"
	run check_keys "$MAN/lcd.json.5.md" < <(lcd_json_keys "$BATS_TEST_TMPDIR/src")
	[ "$status" -eq 1 ]
	[ "$output" = "lcd.json.5.md: 'socket_backlog_probe' is not documented" ]
	cp "$MAN/lcd.json.5.md" "$BATS_TEST_TMPDIR/lcd.json.5.md"
	sed -i '/^\*\*gateway\.max_inflight\*\*/d' "$BATS_TEST_TMPDIR/lcd.json.5.md"
	run check_keys "$BATS_TEST_TMPDIR/lcd.json.5.md" < <(lcd_json_keys "$LCD_SRC")
	[ "$status" -eq 1 ]
	[ "$output" = "lcd.json.5.md: 'gateway.max_inflight' is not documented" ]
}
