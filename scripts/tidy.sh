#!/usr/bin/env bash
# Runs go mod tidy in every module of this repository (tools/ aside, whose
# go.mod pins the generator and is kept by hand).
#
# The modules require one another at the placeholder version
# v0.0.0-00010101000000-000000000000, which no proxy serves; go.work
# points each at its directory. go mod tidy ignores go.work, so this
# script gives each module the same replace directives for the length of
# its tidy, and takes them away again.
set -euo pipefail
cd "$(dirname "$0")/.."

# The modules of go.work (tools/ is not one), as directory and path.
root=$(pwd)
declare -A path
dirs=()
while read -r dir mod; do
	dirs+=("$dir")
	path[$dir]=$mod
done < <(go list -m -f '{{.Dir}} {{.Path}}')

for d in "${dirs[@]}"; do
	replaces=()
	for o in "${dirs[@]}"; do
		[ "$o" = "$d" ] && continue
		rel=$(realpath --relative-to="$d" "$o")
		[ "${rel#.}" = "$rel" ] && rel=./$rel
		replaces+=("-replace=${path[$o]}=$rel")
	done
	drops=()
	for o in "${dirs[@]}"; do
		[ "$o" = "$d" ] && continue
		drops+=("-dropreplace=${path[$o]}")
	done
	(
		cd "$d"
		go mod edit "${replaces[@]}"
		trap 'go mod edit "${drops[@]}"' EXIT
		echo "tidy: ${d#"$root"}/"
		GOWORK=off GOFLAGS=-mod=mod go mod tidy
	)
done
