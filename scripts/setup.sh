#!/usr/bin/env bash
# Idempotent set-up: Debian packages, the virtual environment, the project with its extras.
# `setup.sh run` installs what the zkcoord command needs (the demo: ZooKeeper, Spark); `setup.sh test` (the
# default) adds what the tests need (kcat, Burrow, Prometheus, kafka-node, kafkajs, a sarama member built from
# Debian's Go packages, the test extra). Fast when everything is already there: a stamp of pyproject.toml and the
# installed extras skips pip, npm is skipped when the pinned versions are installed, Go when the peer's source
# has not changed since its build.
set -euo pipefail
cd "$(dirname "$0")/.."

PURPOSE=${1:-test}
case "$PURPOSE" in
  run) APT_PACKAGES=(zookeeper); DEFAULT_EXTRAS=spark ;;
  # prometheus: the metrics test scrapes a live node with it; kcat, burrow: real peers of the e2e tests
  # golang-go, golang-github-shopify-sarama-dev (1.22.1 in bookworm): the sarama peer of the mixed-group e2e test
  test) APT_PACKAGES=(zookeeper kcat burrow prometheus golang-go golang-github-shopify-sarama-dev)
        DEFAULT_EXTRAS=test,spark ;;
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

# Real JavaScript clients for the e2e tests, into the project-local .npm/ folder (listed in .gitignore), each skipped
# when its pinned version is already there: kafka-node 2.x (a 0.8/0.10-era client, the old-clients tests) and
# kafkajs 2.2.4 (a mixed-group member with its default RoundRobinAssigner). npm installs beside pip (both wait on
# the network and the disk more than on a core), and the script waits for it at the end.
NPM_PACKAGES=(kafka-node@2.6.1 kafkajs@2.2.4)
need_npm=()
for spec in "${NPM_PACKAGES[@]}"; do
  grep -qs "\"version\": \"${spec##*@}\"" ".npm/node_modules/${spec%@*}/package.json" || need_npm+=("$spec")
done
npm_pid=""
if [ "$PURPOSE" = test ] && ((${#need_npm[@]})); then
  command -v npm >/dev/null || { echo "setup: npm (node) is required for ${need_npm[*]}" >&2; exit 1; }
  echo "setup: installing ${need_npm[*]} into .npm/"
  npm install --prefix .npm --no-audit --no-fund --silent "${need_npm[@]}" >/dev/null &
  npm_pid=$!
fi

# The sarama consumer-group member (tests/e2e/clients/sarama_member), built offline in GOPATH mode against
# Debian's packaged sarama into .peers/ (git-ignored); rebuilt only when its source's hash changes. In parallel too.
SARAMA_SRC=tests/e2e/clients/sarama_member
go_pid=""
if [ "$PURPOSE" = test ]; then
  mkdir -p .peers
  go_hash="$(cat "$SARAMA_SRC"/*.go | sha256sum | cut -c1-16)"
  if [ ! -x .peers/sarama-member ] || [ "$(cat .peers/sarama-member.stamp 2>/dev/null)" != "$go_hash" ]; then
    echo "setup: building .peers/sarama-member (Go, GOPATH=/usr/share/gocode, no network)"
    env GOPATH=/usr/share/gocode GO111MODULE=off GOPROXY=off GOFLAGS= GOCACHE="$PWD/.peers/go-cache" \
      CGO_CFLAGS="-O2 -Wno-deprecated-declarations" \
      sh -c "go build -o .peers/sarama-member ./$SARAMA_SRC && echo $go_hash > .peers/sarama-member.stamp" &
    go_pid=$!
  fi
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
  wait "$npm_pid" || { echo "setup: npm install of ${need_npm[*]} failed" >&2; exit 1; }
fi
if [ -n "$go_pid" ]; then
  wait "$go_pid" || { echo "setup: go build of $SARAMA_SRC failed" >&2; exit 1; }
fi
