#!/bin/sh
# expand-includes.sh -- print a Lua or SQL source with its include lines
# replaced by the text they name, so that text shared by several shipped
# files is written once.
#
#   sh scripts/expand-includes.sh DIR FILE
#
# Both languages comment with "--", so one directive serves both:
#
#   -- #include NAME              the whole of DIR/NAME
#   -- #include NAME BLOCK        the lines of DIR/NAME between
#                                 "-- #begin BLOCK" and "-- #end BLOCK"
#   -- #include NAME BLOCK or-replace
#                                 the same, with each "CREATE FUNCTION" that
#                                 starts a line made "CREATE OR REPLACE
#                                 FUNCTION" (an upgrade script replacing a
#                                 function the older version already has)
#
# Every other line, #begin/#end markers included, passes through unchanged.
# The one thing to know before editing: what this prints is what Redis and
# PostgreSQL run (and, for Lua, what the SHA1 is computed from), so it never
# guesses: a missing file or block, an unterminated or repeated block, an
# unknown option, an include inside included text or a directive written
# any other way (spaced, tabbed, indented) is an error, and make stops
# (test/scenarios/expand_includes.sh).  Includes do not nest.
set -eu
[ $# -eq 2 ] || { echo "usage: $0 DIR FILE" >&2; exit 2; }
dir=$1 file=$2

# One pass: each directive line is replaced by the text part() reads from
# the named file with getline, checking the file and block as it goes.
awk -v dir="$dir" -v src="$file" '
function fail(msg) { printf "%s:%d: %s\n", src, FNR, msg > "/dev/stderr"; failed = 1; exit 1 }
function part(name, block, opt,    path, line, n, inside, seen, out) {
	path = dir "/" name
	if ((getline line < path) < 0) fail("cannot read " path)
	close(path)
	out = ""; inside = 0; seen = 0; n = 0
	while ((getline line < path) > 0) {
		n++
		if (line ~ directive)
			fail(path ":" n ": an included file includes another (includes do not nest)")
		if (block != "" && line == "-- #begin " block) {
			if (seen) fail("block " block " appears twice in " path)
			inside = 1; seen = 1; continue
		}
		if (block != "" && line == "-- #end " block) {
			if (!inside) fail("-- #end " block " without its #begin in " path)
			inside = 0; continue
		}
		if (block == "" || inside) {
			if (opt == "or-replace") sub(/^CREATE FUNCTION /, "CREATE OR REPLACE FUNCTION ", line)
			out = out line "\n"
		}
	}
	close(path)
	if (block != "" && !seen) fail("no block " block " in " path)
	if (inside) fail("block " block " in " path " has no -- #end " block)
	if (out == "") fail("nothing to include from " path (block != "" ? " block " block : ""))
	return out
}
# Anything that looks like a directive is one: a near miss (spaced, tabbed,
# indented, no space) passed through as a comment would ship a script
# without the text it names.
BEGIN { directive = "^[ \t]*--[ \t]*#[ \t]*include([ \t]|$)" }
$0 ~ directive && $0 !~ /^-- #include( |$)/ {
	fail("write the directive as \"-- #include NAME [BLOCK [or-replace]]\": one space after --, none before")
}
/^-- #include( |$)/ {
	n = split($0, w, " ")
	if (n < 3 || n > 5) fail("expected: -- #include NAME [BLOCK [or-replace]]")
	if (n == 5 && w[5] != "or-replace") fail("unknown option " w[5] " (only or-replace)")
	printf "%s", part(w[3], n >= 4 ? w[4] : "", n == 5 ? w[5] : "")
	next
}
{ print }
END { if (failed) exit 1 }
' "$file"
