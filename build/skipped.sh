#!/usr/bin/env bash
# Lists the tests skipped for want of a tool, from the file that
# internal/skiplog appends to ($ZAEL_SKIP_LOG; `make test` calls it):
#
#   skipped.sh SKIP_LOG
#
# One line per tool and package: how many tests, and the first one's reason.
set -euo pipefail
log=${1:?usage: skipped.sh SKIP_LOG}
if [[ ! -s $log ]]; then
	echo "make test: no test skipped for want of a tool"
	exit 0
fi
echo "make test: tests skipped for want of a tool:"
awk -F'\t' -v root="$PWD/" '
	{
		dir = $2
		if (index(dir, root) == 1) dir = "./" substr(dir, length(root) + 1)
		key = $1 "\t" dir
		if (!(key in n)) { order[++keys] = key; why[key] = $4 }
		n[key]++
	}
	END {
		for (i = 1; i <= keys; i++) {
			split(order[i], k, "\t")
			printf "  %s: %d in %s: %s\n", k[1], n[order[i]], k[2], why[order[i]]
		}
	}
' "$log" | sort
