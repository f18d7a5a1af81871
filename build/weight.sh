#!/usr/bin/env bash
# What a program that imports the limiter and memorystore downloads, and
# one that also imports llmhttp (`make weight` calls it, from the
# repository root):
#
#   MAX_ZIPS=15 MAX_MB=30 weight.sh
#
# It writes each program into a temporary directory, with a replace of this
# checkout, and runs `go mod tidy` there with an empty module cache, through
# the module proxy `go env GOPROXY` names. go mod tidy loads the packages the
# program imports, the packages they import, and the tests of all of them:
# so a test dependency of the root package is downloaded by every user. It
# prints the module zips downloaded, their number, their size and the size
# of the module cache, and fails above MAX_ZIPS zips or MAX_MB megabytes of
# module cache (each program on its own), or when a Redis module (go-redis)
# was downloaded. It also checks that redisstore does not import the limiter.
set -euo pipefail

max_zips=${MAX_ZIPS:-15}
max_mb=${MAX_MB:-30}
root=$(pwd)
tmp=$(mktemp -d)
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT

# weigh NAME MAIN_GO: writes the program MAIN_GO into $tmp/NAME, runs go mod
# tidy and go build there on an empty module cache of its own, prints the
# module zips downloaded, and fails (sets fail) above the limits or when a
# Redis module (go-redis, redis_rate) was downloaded: only redisstore needs
# one, and the program does not import it.
fail=0
weigh() {
	local name=$1 src=$2
	local dir="$tmp/$name" cache="$tmp/$name-modcache"
	mkdir -p "$dir" "$cache"
	cat >"$dir/go.mod" <<GOMOD
module example.com/user

go $(sed -n 's/^go //p' "$root/go.mod")

require github.com/zaelimiter/limiter v0.0.0

replace github.com/zaelimiter/limiter => $root
GOMOD
	printf '%s\n' "$src" >"$dir/main.go"
	local start=$SECONDS
	(cd "$dir" && GOMODCACHE="$cache" GOFLAGS=-mod=mod go mod tidy 2>&1 | grep -v "^go: downloading" || true)
	(cd "$dir" && GOMODCACHE="$cache" GOFLAGS=-mod=mod go build -o /dev/null .)
	local secs=$((SECONDS - start))
	local dl="$cache/cache/download"
	echo "weight ($name): module zips that go mod tidy downloaded (GOPROXY=$(go env GOPROXY)):"
	find "$dl" -name '*.zip' -printf '%s %P\n' | sort -k2 |
		awk '{ sub(/\/@v\//, " ", $2); sub(/\.zip$/, "", $2); printf "  %6.2f MB  %s\n", $1 / 1e6, $2 }'
	local zips zip_mb cache_mb
	zips=$(find "$dl" -name '*.zip' | wc -l)
	zip_mb=$(find "$dl" -name '*.zip' -printf '%s\n' | awk '{ s += $1 } END { printf "%.1f", s / 1e6 }')
	cache_mb=$(du -sk "$cache" | awk '{ printf "%.1f", $1 / 1024 }')
	echo "weight ($name): $zips module zips, $zip_mb MB of zips, $cache_mb MB of module cache, in $secs s (limits: $max_zips zips, $max_mb MB)"
	if ((zips > max_zips)); then
		echo "FAIL ($name): $zips module zips, more than $max_zips" >&2
		fail=1
	fi
	if awk -v a="$cache_mb" -v b="$max_mb" 'BEGIN { exit !(a > b) }'; then
		echo "FAIL ($name): $cache_mb MB of module cache, more than $max_mb MB" >&2
		fail=1
	fi
	if find "$dl" -name '*.zip' -path '*redis*' | grep -q .; then
		echo "FAIL ($name): a Redis module was downloaded: $(find "$dl" -name '*.zip' -path '*redis*' -printf '%P ')" >&2
		fail=1
	else
		echo "weight ($name): no Redis module downloaded"
	fi
}

weigh memorystore 'package main

import (
	"context"
	"fmt"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/memorystore"
)

func main() {
	rl := limiter.New(memorystore.New())
	defer rl.Close()
	lease, err := rl.Acquire(context.Background(), "user-1", "api", limiter.Consume{"rpm": 1},
		limiter.WithLimits(limiter.PerMinute("rpm", 10)))
	if err != nil {
		panic(err)
	}
	fmt.Println(lease.Commit(context.Background()))
}'

weigh llmhttp 'package main

import (
	"net/http"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/llmhttp"
	"github.com/zaelimiter/limiter/memorystore"
)

func main() {
	rl := limiter.New(memorystore.New())
	defer rl.Close()
	client := &http.Client{Transport: llmhttp.NewTransport(rl, nil, func(o *llmhttp.Options) { o.CostLimit = "usd" })}
	_ = client
}'

if go list -deps ./redisstore | grep -qx 'github.com/zaelimiter/limiter'; then
	echo "FAIL: go list -deps ./redisstore lists the root package github.com/zaelimiter/limiter" >&2
	fail=1
else
	echo "weight: redisstore builds on store alone: go list -deps ./redisstore has no github.com/zaelimiter/limiter"
fi
exit $fail
