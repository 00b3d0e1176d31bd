#!/usr/bin/env bash
# The digest of what makes .upstream/ (prepare.sh, its refs and shims, spec init and the spec's inputs), from the
# repository root: prepare.sh writes it to .upstream/STAMP, run.sh compares it with this checkout's.
set -euo pipefail
cd "$(dirname "$0")/../../.."  # the repository root (no git needed: the GPU machine may have none)
H=evidence/gpu/h200-upstream
cat "$H/prepare.sh" "$H"/refs/*.py "$H"/shims/*.py patterns/specinit.py patterns/core/userspec.py | sha256sum | cut -c1-16
