#!/usr/bin/env bash
# Idempotent set-up: Debian packages, the virtual environment, the project with its extras.
# `setup.sh run` installs what the zkcoord command needs (the demo: ZooKeeper, Spark); `setup.sh test` (the
# default) adds what the tests need (kcat, Burrow, Prometheus, kafka-node, the test extra). Fast when everything
# is already there: a stamp of pyproject.toml and the installed extras skips pip.
set -euo pipefail
cd "$(dirname "$0")/.."

PURPOSE=${1:-test}
case "$PURPOSE" in
  run) APT_PACKAGES=(zookeeper); DEFAULT_EXTRAS=spark ;;
  # prometheus: the metrics test scrapes a live node with it; kcat, burrow: real peers of the e2e tests
  test) APT_PACKAGES=(zookeeper kcat burrow prometheus); DEFAULT_EXTRAS=test,spark ;;
  *) echo "usage: setup.sh [run|test]" >&2; exit 2 ;;
esac
VENV=${ZKCOORD_VENV:-.venv}
EXTRAS=${ZKCOORD_EXTRAS:-$DEFAULT_EXTRAS}

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
# (listed in .gitignore), skipped when the pinned version is already there. It installs beside pip (both wait on
# the network and the disk more than on a core), and the script waits for it at the end.
KAFKA_NODE_VERSION=2.6.1
npm_pid=""
if [ "$PURPOSE" = test ] && ! grep -qs "\"version\": \"$KAFKA_NODE_VERSION\"" .npm/node_modules/kafka-node/package.json; then
  command -v npm >/dev/null || { echo "setup: npm (node) is required for kafka-node" >&2; exit 1; }
  echo "setup: installing kafka-node $KAFKA_NODE_VERSION into .npm/"
  npm install --prefix .npm --no-audit --no-fund --silent "kafka-node@$KAFKA_NODE_VERSION" >/dev/null &
  npm_pid=$!
fi

if [ ! -x "$VENV/bin/python" ]; then
  echo "setup: creating $VENV"
  python3 -m venv "$VENV"
fi

# The stamp holds pyproject.toml's hash and the extras installed with it; a run asking for extras already there
# installs nothing, one asking for more installs the union.
stamp="$VENV/.zkcoord-stamp"
hash="$(sha256sum pyproject.toml | cut -c1-16)"
have_hash="" have_extras=""
[ -f "$stamp" ] && read -r have_hash have_extras < <(tr '-' ' ' <"$stamp") || true
wanted=$(tr ',' '\n' <<<"$EXTRAS" | sed '/^$/d' | sort -u)
installed=""
[ "$have_hash" = "$hash" ] && installed=$(tr ',' '\n' <<<"$have_extras" | sed '/^$/d' | sort -u)
if [ -n "$(comm -23 <(echo "$wanted") <(echo "$installed") | sed '/^$/d')" ]; then
  union=$(printf '%s\n%s\n' "$wanted" "$installed" | sed '/^$/d' | sort -u | paste -sd, -)
  echo "setup: installing zkcoord[$union] into $VENV"
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check -e ".[$union]"
  echo "$hash-$union" >"$stamp"
fi

if [ -n "$npm_pid" ]; then
  wait "$npm_pid" || { echo "setup: npm install of kafka-node failed" >&2; exit 1; }
fi
