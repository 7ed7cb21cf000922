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
# Anything but CAUGHT makes the run fail.  Before the mutants, the same suites
# run once on the unmutated copy: a red baseline would make every mutant look
# caught, so it stops the run.
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
		if apply "$f" "$root" dry; then echo "ok      $(basename "$f")"
		else echo "STALE   $(basename "$f")"; bad=$((bad + 1)); fi
	done
	echo "${#files[@]} mutants, $bad stale"
	[ $bad -eq 0 ]; exit
fi

# The private PostgreSQL for the scratch copy.
if [ -z "${RP_MUTATION_PG_CONFIG:-}" ]; then
	pgdir=/tmp/rp-mutation-pg-$(id -u)
	if [ ! -x "$pgdir/usr/lib/postgresql/15/bin/pg_config" ]; then
		bash "$root/scripts/private-pg.sh" "$pgdir" >/dev/null || exit 1
	fi
	RP_MUTATION_PG_CONFIG=$pgdir/usr/lib/postgresql/15/bin/pg_config
fi
# A relocated copy finds its server headers relative to itself.
inc=$("$RP_MUTATION_PG_CONFIG" --includedir-server)
if [ ! -d "$inc" ]; then
	link=$(dirname "$(dirname "$inc")")          # .../usr/include/postgresql
	mkdir -p "$(dirname "$link")"
	rmdir "$link" 2>/dev/null
	ln -sfn "$(dirname "$(dirname "$(pg_config --includedir-server)")")" "$link"
fi
export PG_CONFIG=$RP_MUTATION_PG_CONFIG
# No LLVM bitcode: it doubles the build time of every mutant and tests nothing.
export MAKEFLAGS="with_llvm=no"

scratch=$(mktemp -d /tmp/rp-mutation.XXXXXX)
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

# Baseline: every suite any selected mutant names, unmutated.
declare -A need
for f in "${files[@]}"; do
	for s in ${RP_MUTATION_SUITES:-$(field "$f" suites)}; do
		o=${RP_MUTATION_ONLY-$(field "$f" only)}
		case $s in regress|isolation) o= ;; esac    # RP_ONLY does not apply to them
		need["$s|$o"]=1
	done
done
start=$(date +%s)
echo "baseline: the selected suites on the unmutated tree"
for k in "${!need[@]}"; do
	s=${k%%|*} o=${k#*|}
	# Timing checks on a loaded machine may fail once; three failures in a
	# row are a red suite, and every mutant would look caught.
	for try in 1 2 3; do
		run_suites "$s" "$o" "$scratch/baseline.log" && break
		echo "baseline: suites '$s' only '$o' failed (attempt $try):"
		grep -E '^ *not ok' "$scratch/baseline.log" | head -5
		if [ "$try" -eq 3 ]; then
			echo "BASELINE FAILED: suites '$s' only '$o' fail without any mutant"
			tail -40 "$scratch/baseline.log"
			exit 1
		fi
	done
done

caught=0 survived=0 stale=0 broken=0 report=()
for f in "${files[@]}"; do
	name=$(basename "$f" .mutant)
	target=$(field "$f" target)
	suites=${RP_MUTATION_SUITES:-$(field "$f" suites)}
	only=${RP_MUTATION_ONLY-$(field "$f" only)}
	t0=$(date +%s)
	cp -p "$tree/$target" "$scratch/orig"
	if ! apply "$f" "$tree" 2>"$scratch/apply.err"; then
		status=STALE; stale=$((stale + 1))
		detail=$(cat "$scratch/apply.err")
	else
		touch "$tree/$target"
		run_suites "$suites" "$only" "$scratch/$name.log"
		rc=$?
		if grep -q '^Build failed\.' "$scratch/$name.log"; then
			status=BROKEN; broken=$((broken + 1)); detail="does not build"
		elif [ $rc -ne 0 ]; then
			status=CAUGHT; caught=$((caught + 1))
			[ $rc -eq 124 ] && detail="timed out" || detail=$(grep -m3 -E '^ *not ok|FAILED|failed$' "$scratch/$name.log" | tr -s ' \t' ' ' | cut -c1-110 | paste -sd';' -)
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
echo "mutation run: ${#files[@]} mutants: $caught caught, $survived survived, $stale stale, $broken broken; wall time $(( $(date +%s) - start )) s"
[ $survived -eq 0 ] && [ $stale -eq 0 ] && [ $broken -eq 0 ]
