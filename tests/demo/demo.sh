#!/usr/bin/env bash
# The end-to-end demonstration. STUB: grows into the awf run demo.
set -euo pipefail
echo "demo: not built yet"
