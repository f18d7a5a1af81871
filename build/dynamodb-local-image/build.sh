#!/usr/bin/env bash
# Builds the DynamoDB Local image the tests' testcontainers path runs, offline
# (`make docker-image` calls it):
#
#   build.sh IMAGE DYNAMODB_LOCAL_DIR CONTEXT_DIR
#
# The image is FROM scratch: the jar that `make dynamodb-local` put in
# DYNAMODB_LOCAL_DIR, the Java runtime of this machine ($JAVA_HOME, else java
# on $PATH; Java 17 or newer) and every shared library that java, the JVM's
# own libraries and libsqlite4java link to (found with ldd), each at the path
# it has here, so it runs on the machine that built it and on others like
# it. CONTEXT_DIR (under .cache/, ignored by git) is filled anew for each
# build. An IMAGE already built from the same jar, Java and files, or pulled
# from a registry, is left alone, unless FORCE=1.
set -euo pipefail

image=${1:?usage: build.sh IMAGE DYNAMODB_LOCAL_DIR CONTEXT_DIR}
local_dir=${2:?usage: build.sh IMAGE DYNAMODB_LOCAL_DIR CONTEXT_DIR}
ctx=${3:?usage: build.sh IMAGE DYNAMODB_LOCAL_DIR CONTEXT_DIR}
here=$(cd "$(dirname "$0")" && pwd)
label=io.github.zaelimiter.offline-build

die() { echo "docker-image: $*" >&2; exit 1; }

command -v docker >/dev/null || die "no docker command (install Docker, e.g. apt-get install docker.io)"
docker version --format '{{.Server.Version}}' >/dev/null 2>&1 \
	|| die "no Docker daemon answers (start dockerd, or set DOCKER_HOST)"

jar=$(compgen -G "$local_dir/*/DynamoDBLocal.jar" | sort | tail -n 1) \
	|| die "no */DynamoDBLocal.jar in $local_dir (run \`make dynamodb-local\`)"
dist=$(dirname "$jar")

if [[ -n ${JAVA_HOME:-} && -x $JAVA_HOME/bin/java ]]; then
	java=$JAVA_HOME/bin/java
else
	java=$(command -v java) || die "no java (DynamoDB Local needs Java 17 or newer)"
fi
java=$(readlink -f "$java")
jre=$(dirname "$(dirname "$java")")
major=$("$java" -version 2>&1 | sed -nE '1s/.*version "([0-9]+).*/\1/p')
[[ -n $major && $major -ge 17 ]] || die "$java is Java ${major:-?}; DynamoDB Local needs 17 or newer"

case $(uname -m) in
x86_64) sqlite=libsqlite4java-linux-amd64.so ;;
aarch64 | arm64) sqlite=libsqlite4java-linux-aarch64.so ;;
*) die "no libsqlite4java for $(uname -m)" ;;
esac
[[ -f $dist/DynamoDBLocal_lib/$sqlite ]] || die "no $sqlite in $dist/DynamoDBLocal_lib"

# What the image is made of; its label holds this. An image of that name
# without the label came from a registry: keep it. One with the same
# label is up to date.
fingerprint=$( (echo "$jar $java"; "$java" -version 2>&1; cat "$here/Dockerfile" "$here/build.sh") | sha256sum | cut -c1-16)
if [[ ${FORCE:-} != 1 ]] && have=$(docker image inspect --format "{{index .Config.Labels \"$label\"}}" "$image" 2>/dev/null); then
	if [[ -z $have ]]; then
		echo "docker-image: $image is present and was not built here (pulled?); keeping it (FORCE=1 rebuilds)"
		exit 0
	elif [[ $have == "$fingerprint" ]]; then
		echo "docker-image: $image is up to date (FORCE=1 rebuilds)"
		exit 0
	fi
fi

rm -rf "$ctx"
root=$ctx/rootfs
mkdir -p "$root/home/dynamodblocal" "$root$jre/bin" "$root$jre/lib" "$root/usr/bin" "$root/tmp"
chmod 1777 "$root/tmp"

# DynamoDB Local: the jar, its libraries, its licences.
cp -R "$dist/." "$root/home/dynamodblocal/"

# The Java runtime, without what only a JDK needs. Symbolic links (into
# /etc/java-17-openjdk and the like) are copied as the files they name.
cp -L "$java" "$root$jre/bin/java"
[[ -f $jre/release ]] && cp -L "$jre/release" "$root$jre/"
[[ -d $jre/conf ]] && cp -RL "$jre/conf" "$root$jre/"
for f in "$jre"/lib/*; do
	[[ -e $f ]] || continue # a dangling link, such as src.zip
	case ${f##*/} in ct.sym | src.zip) continue ;; esac
	cp -RL "$f" "$root$jre/lib/"
done
ln -s "$jre/bin/java" "$root/usr/bin/java"

# The shared libraries they link to, at the same paths, and the dynamic
# loader. A library ldd cannot find (the X11 ones of libawt_xawt, say) is
# one a headless JVM never loads.
mapfile -t objs < <(find "$root$jre" -name '*.so' -type f; echo "$root$jre/bin/java"; echo "$root/home/dynamodblocal/DynamoDBLocal_lib/$sqlite")
for obj in "${objs[@]}"; do
	ldd "$obj" 2>/dev/null || true
done | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' | sort -u |
	while read -r lib; do
		case $lib in "$root"*) continue ;; esac # the runtime's own libraries, already copied
		mkdir -p "$root$(dirname "$lib")"
		cp -L "$lib" "$root$lib"
	done

cp "$here/Dockerfile" "$ctx/Dockerfile"
echo "docker-image: building $image from $jar and $jre ($(du -sh "$root" | cut -f1))"
# The output only on failure: a new docker CLI warns that the legacy
# builder is deprecated, which changes nothing here.
if ! out=$(docker build --label "$label=$fingerprint" --tag "$image" "$ctx" 2>&1); then
	echo "$out" >&2
	die "docker build failed"
fi
echo "docker-image: $image built ($(docker image inspect --format '{{.Size}}' "$image" | awk '{printf "%d MB", $1 / 1e6}'))"
