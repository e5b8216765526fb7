#!/usr/bin/env bash
# Installs what boxd and the tests need on a Debian machine, when it is
# missing and this user may install packages (root, or password-less sudo):
#   bubblewrap  the sandbox every box runs in
#   python3     for exec.code with lang python (node comes with the machine)
# With --tests it also checks for node and npm, which the conformance test
# against the official JS SDK needs, and for chromium and ffmpeg, which the
# browser tests need (boxes with a browser run Debian's Chromium; ffmpeg
# encodes their recordings), for openssh-client, whose ssh, scp and
# sftp the tests of boxd's SSH server drive, and for busybox-static and
# mmdebstrap, from which the tests of runtime images build their images.
set -euo pipefail

need=()
command -v bwrap >/dev/null 2>&1 || need+=(bubblewrap)
[ -x /usr/bin/python3 ] || need+=(python3)
if [ "${1:-}" = "--tests" ]; then
	command -v node >/dev/null 2>&1 || need+=(nodejs)
	command -v npm >/dev/null 2>&1 || need+=(npm)
	[ -x /usr/lib/chromium/chromium ] || need+=(chromium)
	command -v ffmpeg >/dev/null 2>&1 || need+=(ffmpeg)
	command -v sftp >/dev/null 2>&1 || need+=(openssh-client)
	[ -x /bin/busybox ] || need+=(busybox-static)
	command -v mmdebstrap >/dev/null 2>&1 || need+=(mmdebstrap)
fi
[ ${#need[@]} -eq 0 ] && exit 0

if [ "$(id -u)" = 0 ]; then
	sudo=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
	sudo=(sudo -n)
else
	echo "deps: missing ${need[*]}; install them (apt-get install ${need[*]}) or run as root" >&2
	exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
	echo "deps: missing ${need[*]} and no apt-get here; install them with your package manager" >&2
	exit 0
fi
echo "deps: installing ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
