#!/usr/bin/env bash
# Refresh the copy of three.js the office page ships (the page has no build step; people who
# install firm never run a JavaScript tool). Only the maintainer runs this, with npm at hand:
#   ./scripts/vendor-three.sh            the pinned version
#   ./scripts/vendor-three.sh 0.170.0    another one (it must still ship build/three.module.min.js)
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION=${1:-0.170.0}
DEST=src/firm/server/static/vendor/three
ADDONS=(controls/OrbitControls.js renderers/CSS2DRenderer.js)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "three@$VERSION" >/dev/null)
tar -xzf "$work"/three-*.tgz -C "$work"
pkg="$work/package"
if [[ ! -f "$pkg/build/three.module.min.js" ]]; then
    echo "vendor-three: three@$VERSION has no build/three.module.min.js; pick another version" >&2
    exit 1
fi

rm -rf "$DEST"
mkdir -p "$DEST/addons"
cp "$pkg/build/three.module.min.js" "$pkg/LICENSE" "$DEST/"
# The add-ons import the bare name 'three'. Resolving it needs an import map, and an inline
# import map is an inline script the page's Content-Security-Policy (script-src 'self') forbids;
# so the copies name the module by its path instead.
for addon in "${ADDONS[@]}"; do
    sed "s#from 'three'#from '../three.module.min.js'#" "$pkg/examples/jsm/$addon" \
        > "$DEST/addons/$(basename "$addon")"
done
echo "$VERSION" > "$DEST/VERSION"
echo "three.js $VERSION vendored into $DEST:"
ls -l "$DEST" "$DEST/addons"
