#!/bin/sh
# Install the Debian packages zrfs needs to build, test and benchmark.
# Idempotent: installs only what is missing; does nothing (and needs no
# network) when everything is present. Run as root or with sudo available.
#
#   packaging/deps.sh            build + test dependencies
#   packaging/deps.sh --bench    also the benchmark peers (squashfs, hyperfine)
set -eu

BUILD="cmake make gcc pkg-config libfuse3-dev fuse3 zlib1g-dev libjansson-dev \
liburing-dev libcriterion-dev"
TEST="python3 python3-numpy git rsync patch ed zip unzip xz-utils vim-tiny groff-base \
python3-torch python3-torchvision python3-pil clang \
sqlite3 libclang-rt-14-dev valgrind fio stress-ng glusterfs-server glusterfs-client iproute2 \
python3-venv python3-pip python3-setuptools dpkg-dev lintian"
BENCH="squashfs-tools squashfuse hyperfine"

want="$BUILD $TEST"
case "${1:-}" in
--bench) want="$want $BENCH" ;;
"") ;;
-h | --help)
	sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'
	exit 0
	;;
*)
	echo "deps.sh: unknown option '$1' (try --help)" >&2
	exit 2
	;;
esac

missing=""
for p in $want; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
		missing="$missing $p"
	fi
done
[ -z "$missing" ] && exit 0

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "deps.sh: installing:$missing" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
