#!/usr/bin/env bash
# System packages the slow test tier needs: headless Chromium for the HTML report tests, and a CJK font
# (Noto CJK) so the Chinese report renders every glyph (tests/report/test_report_browser.py checks it).
set -euo pipefail
need=()
command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || need+=(chromium)
fc-list :lang=zh 2>/dev/null | grep -q . || need+=(fonts-noto-cjk)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing ${need[*]} (Debian packages) for the browser tests" >&2
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
else
  echo "${need[*]} missing and cannot be installed here; browser tests will be skipped or fail on glyphs" >&2
fi
