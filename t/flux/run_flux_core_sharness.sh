#!/bin/sh
# Run flux-core's own scheduler sharness tests with sched-py in place of
# sched-simple / sched-fifo / sched-backfill.  Not part of the pytest suite.
#
#   t/flux/run_flux_core_sharness.sh /path/to/built/flux-core [TEST...]
#
# For each test, a copy with the scheduler module names replaced by sched-py
# (and "module load/reload sched-backfill" by "... sched-py queue-policy=easy") is written next to
# the original as tNNNN-...-sched-py-PID.t (PID of this run, so that runs from
# several checkouts at once do not clash), run with the build tree's harness,
# and removed.  sched-py is made the instance's default scheduler through a
# modprobe TOML with a high priority, so rc1 loads it instead of sched-simple.
# A test personality with its own rc1 file (t/rc/rc1-job.py) gets a twin
# rc1-job-sched-py-PID.py for the duration of the run, also removed after.
# Results go to stdout as "TEST: N passed, M failed" plus the failing titles.
#
# SCHED_PY_ARGS="policy=worstfit" adds module options to every load of
# sched-py (by rc1 through the modprobe TOML, and by the tests' own
# "module load/reload"); worstfit is sched-simple's placement.
set -u
SRC=${1:?usage: $0 FLUX_CORE_BUILD_DIR [TEST...]}
shift
REPO=$(cd "$(dirname "$0")/../.." && pwd)
TESTS=${*:-"t2300-sched-simple t2302-sched-simple-up-down t2303-sched-hello t2304-sched-simple-alloc-check t2305-sched-slow t2306-sched-fifo t2307-sched-backfill t2206-job-manager-annotate"}
WORK=$(mktemp -d)
SUF=sched-py-$$
mkdir -p "$WORK/modprobe.d"
ARGS=${SCHED_PY_ARGS:-}
sed -e 's/^priority = .*/priority = 1000/' "$REPO/fluxsched_py/flux/modprobe.d/sched-py.toml" > "$WORK/modprobe.d/sched-py.toml"
if test -n "$ARGS"; then
    echo "args = [$(printf '"%s",' $ARGS | sed 's/,$//')]" >> "$WORK/modprobe.d/sched-py.toml"
fi
SITE=$(python3 -c 'import sys; print(":".join(p for p in sys.path if p.endswith("site-packages")))')
export FLUX_PYTHONPATH_PREPEND="$REPO:$SITE"
export FLUX_MODULE_PATH_PREPEND="$REPO/fluxsched_py/flux/modules"
export FLUX_MODPROBE_PATH_APPEND="$WORK"
cd "$SRC/t" || exit 1
for t in $TESTS; do
    copy="$t-$SUF.t"
    # A personality with its own rc1 (e.g. "job") loads sched-simple by name:
    # give it a sched-py twin (its sched-simple debug-bit task becomes a no-op).
    p=$(sed -n 's/^test_under_flux [0-9]* \([a-z]*\).*/\1/p' "$t.t" | head -1)
    psub=""
    sed -e 's/sched-simple/sched-py/g' -e 's/sched-fifo/sched-py/g' -e 's/sched-backfill/sched-py/g' \
        "$t.t" > "$copy"
    case $t in
    *backfill*) sed -i -e 's/\(module \(re\)*load\( -f\)* sched-py\)/\1 queue-policy=easy/g' "$copy" ;;
    esac
    if test -n "$ARGS"; then
        sed -i -e "s/\(module \(re\)*load\( -f\)* sched-py\)/\1 $ARGS/g" "$copy"
    fi
    if test -n "$p" && test -f "rc/rc1-$p.py"; then
        psub=yes
        sed -e 's/context.rpc("sched-simple.debug".*/pass/' -e 's/sched-simple/sched-py/g' \
            "rc/rc1-$p.py" > "rc/rc1-$p-$SUF.py"
        sed -i -e "s/^\(test_under_flux [0-9]*\) $p\b/\1 $p-$SUF/" "$copy"
    fi
    chmod +x "$copy"
    timeout 600 "./$copy" > "$WORK/$t.log" 2>&1
    pass=$(grep -c '^ok ' "$WORK/$t.log")
    fail=$(grep -c '^not ok ' "$WORK/$t.log")
    echo "$t: $pass passed, $fail failed"
    grep '^not ok ' "$WORK/$t.log" | sed 's/^/    /'
    rm -f "$copy"
    test -n "$psub" && rm -f "rc/rc1-$p-$SUF.py"
    rm -rf "trash-directory.$t-$SUF" "$t-$SUF.broker.log"
done
echo "logs in $WORK"
