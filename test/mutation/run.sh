#!/usr/bin/env bash
# test/mutation/run.sh -- the mutation runner (`make mutation`, `make mutation-sample`).
#
# Each file in test/mutation/mutants/*.mutant breaks one rule of the
# extension: it names a target file, an exact snippet to find there and its
# replacement, and the suites that must notice.  The runner copies the work
# tree to a scratch folder, applies one mutant at a time, runs only the
# suites the mutant names (scripts/test.sh with RP_SUITES/RP_ONLY), restores
# the file, and reports each mutant:
#   CAUGHT    the suites failed (or timed out) with the mutant in place
#   SURVIVED  every suite passed: a missing test
#   STALE     the snippet is not in the target exactly once (the source moved
#             on): refresh the mutant
#   BROKEN    the mutated tree does not build: fix the mutant
#   NOTEST    a suite it names runs no test file (its "only" matches none:
#             the test moved or was renamed): fix the suites line
#   UNCLEAR   the suites failed, but no check failed and nothing timed out
#             (a script died, a server did not start): read the log kept in
#             test/mutation/logs/ -- a crash is not a catch
#   BASELINE  a suite it names fails on the unmutated copy (three tries):
#             it would make the mutant look caught, so the mutant is not run
# Anything but CAUGHT makes the run fail.  Each (suite, only) runs once on
# the unmutated copy, before the first mutant that needs it.
#
# Before editing, know this: the scratch copy installs into its own private
# PostgreSQL (scripts/private-pg.sh, kept under /tmp between runs, or
# RP_MUTATION_PG_CONFIG), never into the one your work tree tests against.
#
#   bash test/mutation/run.sh                 every mutant
#   bash test/mutation/run.sh --sample        the mutants marked "sample: yes"
#   bash test/mutation/run.sh 03 fence        mutants whose file name matches
#   bash test/mutation/run.sh --check         only check that every snippet applies
#   RP_MUTATION_SUITES=scenarios RP_MUTATION_ONLY=xact bash test/mutation/run.sh 18
#                                             other suites than the mutants name
#                                             (to show one check sees one bug)
set -uo pipefail
# The whole script is one compound command: bash reads it entirely before
# running it, so editing this file during a long run cannot derail that run.
{
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
mutants_dir=$here/mutants
per_mutant_timeout=${RP_MUTATION_TIMEOUT:-600}

sample=0 check_only=0 patterns=()
for a in "$@"; do
	case $a in
		--sample) sample=1 ;;
		--check) check_only=1 ;;
		*) patterns+=("$a") ;;
	esac
done

# field FILE NAME: the value of a "name: value" header line.
field() { sed -n "s/^$2:[[:space:]]*//p" "$1" | head -1; }

# untested MUTANT: print each suite the mutant names that would run no test
# file (scripts/test.sh runs nothing and passes: the mutant would "survive"
# and, worse, the baseline would pass vacuously).  Same matching as
# scripts/test.sh: RP_ONLY is a glob inside the file's path.
untested() {
	local s o f n
	o=${RP_MUTATION_ONLY-$(field "$1" only)}
	for s in ${RP_MUTATION_SUITES:-$(field "$1" suites)}; do
		case $s in
			regress) set -- "$root"/test/sql/*.sql ;;
			isolation) set -- "$root"/test/isolation/specs/*.spec ;;
			pgtap) set -- "$root"/test/pgtap/*.sql ;;
			scenarios) set -- "$root"/test/scenarios/*.sh ;;
			tap) set -- "$root"/test/t/*.pl ;;
			timing) set -- "$root"/test/timing/*.sql "$root"/test/timing/*.sh "$root"/test/timing/*.pl ;;
			*) echo "$s (no such suite)"; continue ;;
		esac
		n=0
		for f in "$@"; do
			[ -e "$f" ] || continue
			case $s in regress|isolation) ;; *)
				[ -n "$o" ] && [[ "${f#"$root"/}" != *${o}* ]] && continue ;;
			esac
			n=$((n + 1))
		done
		[ $n -gt 0 ] || echo "$s${o:+ only=$o}"
	done
}

# apply MUTANT TREE [dry]: replace the snippet in TREE/target; exit 3 when the
# snippet occurs zero or several times.  Snippets are exact text (tabs and
# all), between "@@ find" / "@@ replace" / "@@ end" lines.
apply() {
	perl -e '
		my ($mutant, $tree, $dry) = @ARGV;
		open(my $m, "<", $mutant) or die "cannot read $mutant\n";
		local $/; my $text = <$m>; close $m;
		my ($target) = $text =~ /^target:\s*(\S+)\s*$/m or die "$mutant: no target\n";
		my ($find, $repl) = $text =~ /^\@\@ find\n(.*?)^\@\@ replace\n(.*?)^\@\@ end$/ms
			or die "$mutant: no \@\@ find / \@\@ replace / \@\@ end blocks\n";
		# The block ends at its last newline; a snippet may end mid-line.
		$find =~ s{\n\z}{}; $repl =~ s{\n\z}{};
		open(my $f, "<", "$tree/$target") or do { print STDERR "target $target missing\n"; exit 3 };
		my $src = <$f>; close $f;
		my $n = () = $src =~ /\Q$find\E/g;
		if ($n != 1) { print STDERR "snippet found $n times in $target\n"; exit 3 }
		exit 0 if $dry;
		$src =~ s/\Q$find\E/$repl/;
		open(my $o, ">", "$tree/$target") or die; print $o $src; close $o;
	' "$1" "$2" "${3:-}"
}

files=()
for f in "$mutants_dir"/*.mutant; do
	name=$(basename "$f" .mutant)
	if [ ${#patterns[@]} -gt 0 ]; then
		hit=0
		for p in "${patterns[@]}"; do [[ $name == *"$p"* ]] && hit=1; done
		[ $hit -eq 1 ] || continue
	fi
	[ $sample -eq 1 ] && [ "$(field "$f" sample)" != yes ] && continue
	files+=("$f")
done
[ ${#files[@]} -gt 0 ] || { echo "no mutants selected"; exit 1; }

if [ $check_only -eq 1 ]; then
	bad=0
	for f in "${files[@]}"; do
		none=$(untested "$f" | paste -sd, -)
		if ! apply "$f" "$root" dry; then echo "STALE   $(basename "$f")"; bad=$((bad + 1))
		elif [ -n "$none" ]; then echo "NOTEST  $(basename "$f"): no test file for $none"; bad=$((bad + 1))
		else echo "ok      $(basename "$f")"; fi
	done
	echo "${#files[@]} mutants, $bad stale or untested"
	[ $bad -eq 0 ]; exit
fi

# The private PostgreSQL for the scratch copy: a copy of PG_CONFIG's
# installation (default: pg_config on PATH, Debian's 15).
src_pg_config=${PG_CONFIG:-pg_config}
if [ -z "${RP_MUTATION_PG_CONFIG:-}" ]; then
	# One per work tree and installation: engineers share a uid, and two
	# runs installing into one copy would test each other's mutants.
	pgbin=$("$src_pg_config" --bindir)
	pgdir=/tmp/rp-mutation-pg-$(id -u)-$(printf '%s' "$root$pgbin" | md5sum | cut -c1-8)
	if [ ! -x "$pgdir$pgbin/pg_config" ]; then
		PG_CONFIG=$src_pg_config bash "$root/scripts/private-pg.sh" "$pgdir" >/dev/null || exit 1
	fi
	RP_MUTATION_PG_CONFIG=$pgdir$pgbin/pg_config
fi
# A relocated copy finds its server headers relative to itself.
inc=$("$RP_MUTATION_PG_CONFIG" --includedir-server)
if [ ! -d "$inc" ]; then
	link=$(dirname "$(dirname "$inc")")          # .../usr/include/postgresql
	mkdir -p "$(dirname "$link")"
	rmdir "$link" 2>/dev/null
	ln -sfn "$(dirname "$(dirname "$("$src_pg_config" --includedir-server)")")" "$link"
fi
export PG_CONFIG=$RP_MUTATION_PG_CONFIG
# No LLVM bitcode: it doubles the build time of every mutant and tests nothing.
export MAKEFLAGS="with_llvm=no"

scratch=$(mktemp -d /tmp/rp-mutation.XXXXXX)
# The tap suite runs as postgres (rp_as_pg) and reads the tree.
chmod 755 "$scratch"
# timeout puts the suites in a process group of their own: on our exit, stop
# them (scripts/test.sh then stops its servers) before removing the copy.
suite_pid=
cleanup() {
	if [ -n "$suite_pid" ]; then
		kill -TERM -- "-$suite_pid" 2>/dev/null
		wait "$suite_pid" 2>/dev/null
	fi
	rm -rf "$scratch"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
tree=$scratch/tree
mkdir -p "$tree"
( cd "$root" && tar --exclude=.git --exclude=results --exclude=output_iso \
	--exclude='*.o' --exclude='*.bc' --exclude='*.so' -cf - . ) | tar -C "$tree" -xf -

# run_suites SUITES ONLY LOG: scripts/test.sh in the scratch tree.
run_suites() {
	local rc
	( cd "$tree" && RP_SUITES="$1" RP_ONLY="$2" RP_ALLOW_SKIP="" \
		exec timeout -k 10 "$per_mutant_timeout" bash scripts/test.sh ) >"$3" 2>&1 &
	suite_pid=$!
	wait "$suite_pid"; rc=$?
	suite_pid=
	return $rc
}

# baseline SUITE ONLY: the suites on the unmutated tree, once per (suite,
# only), just before the first mutant that needs them, so a long run reports
# its first mutants early.  A red baseline would make every mutant look
# caught: timing checks on a loaded machine may fail once, three failures in
# a row are a red suite, and the mutants that need it are not run (BASELINE).
declare -A base
baseline() {
	local s=$1 o=$2 try
	case $s in regress|isolation) o= ;; esac    # RP_ONLY does not apply to them
	if [ -z "${base["$s|$o"]:-}" ]; then
		base["$s|$o"]=red
		for try in 1 2 3; do
			if run_suites "$s" "$o" "$scratch/baseline.log"; then
				base["$s|$o"]=green; break
			fi
			echo "baseline: suites '$s' only '$o' failed (attempt $try):"
			grep -E '^ *not ok' "$scratch/baseline.log" | head -5
		done
		if [ "${base["$s|$o"]}" = red ]; then
			echo "BASELINE FAILED: suites '$s' only '$o' fail without any mutant"
			tail -20 "$scratch/baseline.log"
		fi
	fi
	[ "${base["$s|$o"]}" = green ]
}
baselines() {  # SUITES ONLY: every one green
	local s
	for s in $1; do baseline "$s" "$2" || return 1; done
}
start=$(date +%s)

caught=0 survived=0 stale=0 broken=0 notest=0 unclear=0 red=0 report=()
for f in "${files[@]}"; do
	name=$(basename "$f" .mutant)
	target=$(field "$f" target)
	suites=${RP_MUTATION_SUITES:-$(field "$f" suites)}
	only=${RP_MUTATION_ONLY-$(field "$f" only)}
	t0=$(date +%s)
	cp -p "$tree/$target" "$scratch/orig"
	none=$(untested "$f" | paste -sd, -)
	if [ -n "$none" ]; then
		status=NOTEST; notest=$((notest + 1))
		detail="no test file for $none"
	elif ! apply "$f" "$tree" dry 2>"$scratch/apply.err"; then
		status=STALE; stale=$((stale + 1))
		detail=$(cat "$scratch/apply.err")
	elif ! baselines "$suites" "$only"; then
		status=BASELINE; red=$((red + 1))
		detail="a suite it needs fails without the mutant"
	else
		apply "$f" "$tree"
		touch "$tree/$target"
		run_suites "$suites" "$only" "$scratch/$name.log"
		rc=$?
		if grep -q '^Build failed\.' "$scratch/$name.log"; then
			status=BROKEN; broken=$((broken + 1)); detail="does not build"
		elif [ $rc -eq 124 ]; then
			status=CAUGHT; caught=$((caught + 1)); detail="timed out"
		elif [ $rc -ne 0 ] && grep -qE '^ *not ok [0-9]|\.\.\. FAILED' "$scratch/$name.log"; then
			status=CAUGHT; caught=$((caught + 1))
			detail=$(grep -m3 -E '^ *not ok [0-9]|\.\.\. FAILED' "$scratch/$name.log" | tr -s ' \t' ' ' | cut -c1-110 | paste -sd';' -)
		elif [ $rc -ne 0 ]; then
			status=UNCLEAR; unclear=$((unclear + 1))
			detail="failed without a failing check: $(grep -m2 -E 'Dubious|Bad plan|No plan|exit status|ERROR|FATAL' "$scratch/$name.log" | tr -s ' \t' ' ' | cut -c1-110 | paste -sd';' -)"
			mkdir -p "$root/test/mutation/logs" && cp "$scratch/$name.log" "$root/test/mutation/logs/"
		else
			status=SURVIVED; survived=$((survived + 1))
			detail=$(tail -1 "$scratch/$name.log")
			mkdir -p "$root/test/mutation/logs" && cp "$scratch/$name.log" "$root/test/mutation/logs/"
		fi
	fi
	cp -p "$scratch/orig" "$tree/$target"; touch "$tree/$target"
	line=$(printf '%-9s %-40s %4ss  [%s]  %s' "$status" "$name" $(( $(date +%s) - t0 )) "$suites${only:+ only=$only}" "$detail")
	echo "$line"
	report+=("$line")
done

echo
echo "mutation run: ${#files[@]} mutants: $caught caught, $survived survived, $stale stale, $broken broken, $notest untested, $unclear unclear, $red with a red baseline; wall time $(( $(date +%s) - start )) s"
[ $caught -eq ${#files[@]} ]
exit
}
