#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The checks a run must print: tools/testing/expected-checks.txt holds, for
# each label (a boot's label such as xen-p0-b512, or a host step: cargo
# test, style, fuzz TARGET, build), the number of results it printed in the
# last complete run. A run that prints fewer for a label lost checks (a
# boot that vanished, a script that stopped early, a suite that failed to
# start); a label the manifest does not know is a new boot to add.
#
#   manifest.sh check RESULTS [--host-only]  "fail ..." lines on stdout, then
#                                          "expected N, ran M" on the last line
#   manifest.sh write RESULTS              rewrites expected-checks.txt from a
#                                          complete run's results
#
# A result line is "pass|fail|skip LABEL: name"; its label is the text before
# the first ": " (every check of the harness has one).
set -uo pipefail
MANIFEST=$(cd "$(dirname "$0")" && pwd)/expected-checks.txt
# The labels --host-only runs in full ("build" is mostly the module build
# against the test kernel, which --host-only skips).
HOST_RE='^(cargo test|style|dom0-hotplug|fuzz( .*)?)$'

counts() { # RESULTS: "count<TAB>label", one line per label
    sed -n 's/^\(pass\|fail\|skip\) \([^:]*\): .*/\2/p' "$1" | sort | uniq -c |
        sed 's/^ *\([0-9]*\) /\1\t/'
}

case ${1:-} in
    write)
        {
            echo "# Checks each label printed in a complete run of run-tests.sh"
            echo "# (tools/testing/manifest.sh write RESULTS). A run that prints"
            echo "# fewer for a label fails. Columns: count, label."
            counts "$2" | awk -F'\t' '$2 != "manifest"' | sort -t$'\t' -k2
        } > "$MANIFEST"
        ;;
    check)
        results=$2 host_only=${3:-}
        declare -A want got
        while IFS=$'\t' read -r n label; do
            [[ $n == \#* || -z $n ]] && continue
            want[$label]=$n
        done < "$MANIFEST"
        while IFS=$'\t' read -r n label; do got[$label]=$n; done < <(counts "$results")
        expected=0 ran=0
        for label in "${!want[@]}"; do
            [ "$host_only" = --host-only ] && ! [[ $label =~ $HOST_RE ]] && continue
            n=${got[$label]:-0}
            expected=$((expected + want[$label]))
            ran=$((ran + (n < want[$label] ? n : want[$label])))
            ((n >= want[$label])) ||
                echo "fail manifest: $label printed $n checks, $((want[$label])) expected (tools/testing/expected-checks.txt)"
        done
        for label in "${!got[@]}"; do
            [ -n "${want[$label]+x}" ] && continue
            [[ $label == manifest ]] && continue
            echo "fail manifest: $label printed ${got[$label]} checks and is not in tools/testing/expected-checks.txt (a new boot or step: tools/testing/manifest.sh write)"
        done
        echo "expected $expected, ran $ran"
        ;;
    *)
        echo "usage: $0 check RESULTS [--host-only] | write RESULTS" >&2
        exit 2
        ;;
esac
