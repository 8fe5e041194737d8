#!/usr/bin/env bash
# The project's C++ sources follow .clang-format (Google style, 100 columns): prints the files
# and lines that do not and fails, or says how many files were checked. `tools/check_format.sh
# --fix` rewrites them in place. Run by the test command (meson test `format`).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang-format >/dev/null || { echo "check_format: clang-format is missing (tools/setup.sh --with-tests installs it)" >&2; exit 1; }
# The project's own sources: every .h/.cc of the source folders (build trees are not inside them).
mapfile -t files < <(find cache cluster conf control daemon fs slurm tests tools -name '*.h' -o -name '*.cc' 2>/dev/null | sort)
if [ "${1:-}" = "--fix" ]; then
  clang-format -i "${files[@]}"
  echo "check_format: ${#files[@]} files formatted"
  exit 0
fi
if ! clang-format --dry-run --Werror "${files[@]}"; then
  echo "check_format: the files above differ from .clang-format (fix: tools/check_format.sh --fix)" >&2
  exit 1
fi
echo "check_format: ${#files[@]} files follow .clang-format"
