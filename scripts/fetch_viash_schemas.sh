#!/usr/bin/env bash
# Fetch Viash's published JSON schemas (the release openpert lints against) into a folder, and check
# them against the checksums below. Used where the project's shared folder is not beside the checkout
# (GitHub's runners); point OPENPERT_VIASH_SCHEMAS at the folder's parent afterwards. The harness
# downloads the same files on first use by itself (openpert.config.viash_schema, same pins); this
# script is for machines where that download fails, and for CI, which fetches before any check.
#
# Usage: scripts/fetch_viash_schemas.sh DEST_PARENT
#   writes DEST_PARENT/0.9.4/{config,package}.schema.json
# VIASH_SCHEMAS_URL overrides where they come from (default: the viash-schemas repository, pinned).
set -euo pipefail
version=0.9.4
dest="${1:?usage: fetch_viash_schemas.sh DEST_PARENT}/$version"
base="${VIASH_SCHEMAS_URL:-https://raw.githubusercontent.com/viash-io/viash-schemas/8d0519c/json_schemas}/$version"
declare -A sha256=(
  [config.schema.json]=36ae2050cf60505703231b754a86ca725639821a3f405595ab0144ea02055106
  [package.schema.json]=9d523becaa6c6fae3bfe5d299191c5359e68ef5e6e30b3fca7016371aa7a7250
)
mkdir -p "$dest"
for name in config.schema.json package.schema.json; do
  tmp="$(mktemp "$dest/.$name.XXXXXX")"
  if ! curl -fsSL --retry 3 -o "$tmp" "$base/$name"; then
    rm -f "$tmp"
    echo "fetch_viash_schemas.sh: could not download $base/$name" >&2
    exit 1
  fi
  got="$(sha256sum "$tmp" | cut -d' ' -f1)"
  if [ "$got" != "${sha256[$name]}" ]; then
    rm -f "$tmp"
    echo "fetch_viash_schemas.sh: $base/$name has sha256 $got, expected ${sha256[$name]}" >&2
    exit 1
  fi
  mv "$tmp" "$dest/$name"
done
echo "Viash $version schemas in $dest"
