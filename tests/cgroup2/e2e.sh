#!/usr/bin/env bash
# One bounded query through `awf run`. STUB until the broker lands.
echo "e2e: not wired yet"; exit 1
