#!/usr/bin/env bash
# expand_includes.sh -- scripts/expand-includes.sh, which joins the Lua
# scripts and the upgrade script at build time, prints exactly what its
# directives name, and stops the build on any directive it cannot follow:
# a missing file or block must never ship a script without that text.
#
# The naive twin is a directive written a little differently (two spaces,
# a tab, indented): the first version took it for a comment and passed it
# through, so the build succeeded and shipped the script without the text.
# The built files must hold no directive either (the install script is
# joined by cat, not by this script).
source "$(dirname "$0")/tap.bash"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
plan 7

d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
printf 'one\n-- #begin B\nCREATE FUNCTION f\n-- #end B\n' >"$d/part.sql"
printf -- '-- #begin E\n-- #end E\n' >"$d/empty.sql"
printf -- '-- #begin U\nx\n' >"$d/open.sql"
printf -- '-- #begin R\nx\n-- #end R\n-- #begin R\n-- #end R\n' >"$d/twice.sql"
printf -- '-- #include part.sql\n' >"$d/nest.sql"
# expand DIRECTIVE: the joined text of a file that has it between two lines.
expand() { printf 'top\n%s\nend\n' "$1" >"$d/top.sql"; sh "$ROOT/scripts/expand-includes.sh" "$d" "$d/top.sql" 2>/dev/null; }

is "$(expand '-- #include part.sql' | tr '\n' '|')" "top|one|-- #begin B|CREATE FUNCTION f|-- #end B|end|" \
	"a whole file is included as it is, markers and all"
is "$(expand '-- #include part.sql B' | tr '\n' '|')" "top|CREATE FUNCTION f|end|" "a block is included without its markers"
is "$(expand '-- #include part.sql B or-replace' | tr '\n' '|')" "top|CREATE OR REPLACE FUNCTION f|end|" \
	"or-replace makes CREATE FUNCTION CREATE OR REPLACE FUNCTION"

# Each must fail (exit status not 0).
refused=""
for bad in '-- #include missing.sql' '-- #include part.sql C' '-- #include empty.sql E' \
	'-- #include open.sql U' '-- #include twice.sql R' '-- #include nest.sql' '-- #include' \
	'-- #include part.sql B or-else'; do
	expand "$bad" >/dev/null || refused="$refused+"
done
is "$refused" "++++++++" "a missing file or block, an empty, unterminated or repeated block, a nested include, no name, an unknown option: each fails"
refused=""
for near in '--  #include part.sql' '--#include part.sql' "-- #include	part.sql" '  -- #include part.sql' '-- # include part.sql'; do
	expand "$near" >/dev/null || refused="$refused+"
done
is "$refused" "+++++" "a directive written another way (two spaces, none, a tab, indented, '# include') fails, never passes as a comment"

# What the build made: no directive left in the shipped upgrade script or in
# the embedded Lua (there each line is a C string).
directive='^[[:space:]]*"?--[[:space:]]*#[[:space:]]*include'
# (The install script is src/sql/*.sql joined by cat: a directive there
# would ship as a comment too.)
n=$(ls "$ROOT"/redis_primitives--*.sql 2>/dev/null | wc -l)
! grep -Eq "$directive" "$ROOT"/redis_primitives--*.sql /dev/null && [ "$n" -gt 1 ]
ok $? "the built install and upgrade scripts ($n) hold no include directive"
grep -q 'local function reply' "$ROOT/src/rp_scripts.h" && ! grep -Eq "$directive" "$ROOT/src/rp_scripts.h"
ok $? "the embedded Lua holds the shared text and no include directive"

finish
