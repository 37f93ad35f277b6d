#!/usr/bin/env bash
# System packages some tests need, installed when missing (Debian):
#   bubblewrap                            the job sandbox (bwrap); without it jobs run unsandboxed, with a warning
#   chromium                              the website's browser test
#   groovy                                parses main.nf and nextflow.config and runs main.nf's helper functions
#   r-base-core r-bioc-limma r-bioc-edger r-cran-statmod   the agreement test of the limma-voom port with R
# Without root or apt-get (a user's machine) it says what is missing and goes on: those tests skip
# with the reason (and jobs run without a sandbox). As root, a failed install is an error.
set -euo pipefail
need=()
command -v bwrap >/dev/null 2>&1 || need+=(bubblewrap)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v groovy >/dev/null 2>&1 || need+=(groovy)
if ! command -v Rscript >/dev/null 2>&1 || ! Rscript -e "suppressMessages({library(limma); library(edgeR); library(statmod)})" >/dev/null 2>&1; then
  need+=(r-base-core r-bioc-limma r-bioc-edger r-cran-statmod)
fi
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "openpert: not installing ${need[*]} (needs root and apt-get); the tests that use them will skip" >&2
  exit 0
fi
echo "openpert: installing ${need[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
