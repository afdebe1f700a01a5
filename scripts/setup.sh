#!/usr/bin/env bash
# Idempotent set-up: Debian packages, the virtual environment, the project with its extras.
# Fast when everything is already there (a stamp of pyproject.toml skips pip).
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${ZKCOORD_VENV:-.venv}
EXTRAS=${ZKCOORD_EXTRAS:-test,spark}
APT_PACKAGES=(zookeeper kcat burrow prometheus)  # prometheus: the metrics test scrapes a live node with it

need_apt=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || need_apt+=("$pkg")
done
if ((${#need_apt[@]})); then
  echo "setup: installing Debian packages: ${need_apt[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi
command -v java >/dev/null || { echo "setup: java (17) is required on PATH" >&2; exit 1; }

# kafka-node 2.x, a real 0.8/0.10-era client, for the old-clients e2e tests: into the project-local .npm/ folder
# (listed in .gitignore), skipped when the pinned version is already there.
KAFKA_NODE_VERSION=2.6.1
if ! grep -qs "\"version\": \"$KAFKA_NODE_VERSION\"" .npm/node_modules/kafka-node/package.json; then
  command -v npm >/dev/null || { echo "setup: npm (node) is required for kafka-node" >&2; exit 1; }
  echo "setup: installing kafka-node $KAFKA_NODE_VERSION into .npm/"
  npm install --prefix .npm --no-audit --no-fund --silent "kafka-node@$KAFKA_NODE_VERSION" >/dev/null
fi

if [ ! -x "$VENV/bin/python" ]; then
  echo "setup: creating $VENV"
  python3 -m venv "$VENV"
fi

stamp="$VENV/.zkcoord-stamp"
want="$(sha256sum pyproject.toml | cut -c1-16)-$EXTRAS"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "setup: installing zkcoord[$EXTRAS] into $VENV"
  "$VENV/bin/python" -m pip install -q --upgrade pip >/dev/null
  "$VENV/bin/python" -m pip install -q -e ".[$EXTRAS]"
  echo "$want" > "$stamp"
fi
