#!/usr/bin/env bash
# Installs Debian's chromium for the live view's browser test
# (cmd/sidecar/ui_browser_test.go, ui_live_test.go). Idempotent: does nothing
# when /usr/bin/chromium exists. Needs root (CI and the project's machines
# run as root) or sudo.
set -euo pipefail

if [ -x /usr/bin/chromium ]; then
	echo "install-chromium: $(/usr/bin/chromium --version 2>/dev/null || echo chromium) already installed"
	exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
	echo "install-chromium: no apt-get here; install Chromium yourself and set PHASEGATE_CHROMIUM to its path" >&2
	exit 1
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
	sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq chromium >/dev/null
echo "install-chromium: $(/usr/bin/chromium --version 2>/dev/null || echo chromium) installed"
