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
# mmdebstrap, from which the tests of runtime images build their images,
# for the programs of desktop boxes (xvfb, openbox, x11vnc, xdotool,
# imagemagick's import, and novnc for the viewer), and, from npm, the agent CLIs whose harnesses the tests drive against a
# scripted model server: Claude Code, Codex and OpenCode, at the versions
# below, and the Chrome DevTools MCP server that boxd gives the agent of a
# browser box (boxes see the host's /usr, so the one installed here is
# theirs; without it the box fetches it with npx).
set -euo pipefail

agent_clis=(@anthropic-ai/claude-code@2.1.197 @openai/codex@0.169.0 opencode-ai@1.18.33 chrome-devtools-mcp@1.11.0)

need=()
need_npm=()
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
	command -v Xvfb >/dev/null 2>&1 || need+=(xvfb)
	command -v openbox >/dev/null 2>&1 || need+=(openbox)
	command -v x11vnc >/dev/null 2>&1 || need+=(x11vnc)
	command -v xdotool >/dev/null 2>&1 || need+=(xdotool)
	command -v import >/dev/null 2>&1 || need+=(imagemagick)
	[ -f /usr/share/novnc/vnc.html ] || need+=(novnc)
	for pkg in "${agent_clis[@]}"; do
		name=${pkg%@*}
		version=${pkg##*@}
		bin=$(case $name in @anthropic-ai/claude-code) echo claude ;; @openai/codex) echo codex ;; chrome-devtools-mcp) echo chrome-devtools-mcp ;; *) echo opencode ;; esac)
		# Installed at that version, or installed anew.
		command -v "$bin" >/dev/null 2>&1 && "$bin" --version 2>/dev/null | grep -q "$version" || need_npm+=("$pkg")
	done
fi
[ ${#need[@]} -eq 0 ] && [ ${#need_npm[@]} -eq 0 ] && exit 0

if [ "$(id -u)" = 0 ]; then
	sudo=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
	sudo=(sudo -n)
else
	echo "deps: missing ${need[*]} ${need_npm[*]}; install them (apt-get install ${need[*]}; npm install -g ${need_npm[*]}) or run as root" >&2
	exit 0
fi
if [ ${#need[@]} -gt 0 ]; then
	if ! command -v apt-get >/dev/null 2>&1; then
		echo "deps: missing ${need[*]} and no apt-get here; install them with your package manager" >&2
	else
		echo "deps: installing ${need[*]}"
		export DEBIAN_FRONTEND=noninteractive
		"${sudo[@]}" apt-get update -qq
		"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
	fi
fi
if [ ${#need_npm[@]} -gt 0 ]; then
	echo "deps: installing ${need_npm[*]} from npm"
	"${sudo[@]}" npm install -g --no-fund --no-audit --loglevel=error "${need_npm[@]}" >/dev/null
fi
