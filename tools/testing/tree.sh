#!/usr/bin/env bash
# The repository's top level holds only what the README documents: Package.swift, README.md, Sources/, Tests/,
# sessions/, tools/ (and .ci/, .gitignore). Anything else committed there (a stray scratch file) fails CI.
set -euo pipefail
cd "$(dirname "$0")/../.."
allowed=" .ci .gitignore Package.swift README.md Sources Tests sessions tools "
# What is committed; without a git checkout, what is there (less git's and the build's own directories).
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  top() { git ls-files | cut -d/ -f1 | sort -u; }
else
  top() { ls -A | grep -vE '^(\.git|\.build.*|\.swiftpm)$' | sort -u; }
fi
stray=()
while IFS= read -r entry; do
  case "$allowed" in *" $entry "*) ;; *) stray+=("$entry") ;; esac
done < <(top)
if [ "${#stray[@]}" -gt 0 ]; then
  echo "tree: committed at the top level but not part of the documented layout: ${stray[*]}"; exit 1
fi
echo "tree: ok (top level: $(top | tr '\n' ' '))"
