#!/usr/bin/env bash
# Makes this machine ready for `npm test`: the servers the suite talks to (PostgreSQL, MariaDB, Redis, RabbitMQ with
# its management plugin, NATS with JetStream, ClickHouse), headless Chromium and certutil. Starts or installs what is missing where it can (as root,
# with apt-get); otherwise prints one line naming what is missing and the command that fixes it, and exits 1.
# Quiet when everything is there already, so that `npm test` on a ready machine costs a few port checks.
set -uo pipefail
# the servers' tools live in sbin, which a user's PATH often lacks
PATH=$PATH:/usr/sbin:/sbin

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

wait_port() {
  for _ in $(seq 1 120); do
    port_open "$1" && return 0
    sleep 0.5
  done
  return 1
}

is_root() { [ "$(id -u)" = 0 ]; }

# an executable on PATH (bash's `command -v` names a file it found even when it cannot run it)
has() {
  local found
  found=$(command -v "$1" 2>/dev/null) && [ -x "$found" ]
}

# the arguments after the first, joined by the first: `joined ", " a b` is "a, b"
joined() {
  local separator=$1 out=$2
  shift 2
  for item in "$@"; do out+="$separator$item"; done
  printf '%s' "$out"
}

missing=()
fixes=()
lack() {
  missing+=("$1")
  fixes+=("$2")
}

# name, port, the executable that shows it is installed, its Debian package, the command that starts it (as root)
server() {
  local name=$1 port=$2 binary=$3 package=$4 start=$5
  port_open "$port" && return 0
  if ! has "$binary"; then
    # installing is not enough: the tests log in without passwords (see docs/development.md), which a fresh install does not
    # allow, so that is left to whoever knows the machine
    lack "$name (not installed)" "apt-get install -y $package, let the tests' users in as docs/development.md says, then $start"
    return 0
  fi
  if ! is_root; then
    lack "$name (not running on 127.0.0.1:$port)" "sudo $start"
    return 0
  fi
  echo "prepare-test: starting $name"
  bash -c "$start" >/dev/null 2>&1
  wait_port "$port" || lack "$name (did not open port $port after: $start)" "$start, and see its log"
}

# Debian keeps one folder per installed major version: the first is the cluster the tests use
pg_version=$(ls /etc/postgresql 2>/dev/null | head -n 1)
server PostgreSQL 5432 pg_ctlcluster postgresql "pg_ctlcluster --skip-systemctl-redirect ${pg_version:-15} main start"
server MariaDB 3306 /usr/sbin/mariadbd mariadb-server \
  'start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd'
server Redis 6379 redis-server redis-server \
  'redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no --dir /var/lib/redis --logfile /var/log/redis/ci.log'
server RabbitMQ 5672 rabbitmq-server rabbitmq-server 'rabbitmq-server -detached'

# servers whose Debian package is ready for the tests as installed (no password to set): installed when missing, as
# root, then started like the others; where that cannot be done, one line says what to run
installed_server() {
  local name=$1 port=$2 binary=$3 package=$4 start=$5 install
  if ! port_open "$port" && ! has "$binary"; then
    install="apt-get install -y --no-install-recommends $package"
    if ! is_root || ! has apt-get; then
      lack "$name (not installed)" "sudo $install && sudo $start"
      return 0
    fi
    echo "prepare-test: installing $package"
    export DEBIAN_FRONTEND=noninteractive
    # a fresh machine's package lists may be missing or stale: update only when the install needs it
    $install >/dev/null 2>&1 || { apt-get update >/dev/null 2>&1 && $install >/dev/null 2>&1; }
    if ! has "$binary"; then
      lack "$name (apt-get failed)" "apt-get update && $install && $start"
      return 0
    fi
  fi
  server "$name" "$port" "$binary" "$package" "$start"
}

installed_server NATS 4222 /usr/sbin/nats-server nats-server \
  'mkdir -p /var/lib/nats-server && start-stop-daemon --start --oknodo --background --exec /usr/sbin/nats-server -- -a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server -l /var/log/nats-server.log'
# no systemd here: the server runs as its own user, from its data folder, with Debian's configuration (HTTP on 8123)
installed_server ClickHouse 8123 /usr/sbin/clickhouse-server clickhouse-server \
  'start-stop-daemon --start --oknodo --background --chuid clickhouse:clickhouse --chdir /var/lib/clickhouse --exec /usr/sbin/clickhouse-server -- --config-file=/etc/clickhouse-server/config.xml'

# the rabbitmq adapter manages vhosts through the management API; a node takes plugin changes only once booted
if ! port_open 15672; then
  enable='rabbitmqctl await_startup && rabbitmq-plugins enable rabbitmq_management'
  if ! is_root; then
    lack "RabbitMQ's management plugin (nothing on 127.0.0.1:15672)" \
      "sudo rabbitmqctl await_startup && sudo rabbitmq-plugins enable rabbitmq_management"
  elif port_open 5672; then
    echo "prepare-test: enabling RabbitMQ's management plugin"
    bash -c "$enable" >/dev/null 2>&1
    wait_port 15672 || lack "RabbitMQ's management plugin (port 15672 stayed closed)" "$enable"
  fi
fi

# headless Chromium (driven by playwright-core) and certutil (NSS trust stores) for the browser and trust tests, and
# zsh and fish for the completion tests, tmux (a real terminal for berth dash) and iproute2 (network namespaces, the
# cluster tests' hosts): what is missing, and the Debian packages that bring it
browser_tools() {
  tools=()
  packages=()
  [ -x /usr/bin/chromium ] || { tools+=("Chromium (/usr/bin/chromium)") && packages+=(chromium); }
  has certutil || { tools+=(certutil) && packages+=(libnss3-tools); }
  has zsh || { tools+=(zsh) && packages+=(zsh); }
  has fish || { tools+=(fish) && packages+=(fish); }
  has tmux || { tools+=(tmux) && packages+=(tmux); }
  has ip || { tools+=("ip (iproute2: the cluster tests' hosts)") && packages+=(iproute2); }
}
browser_tools
if [ ${#packages[@]} -gt 0 ]; then
  install="apt-get install -y --no-install-recommends ${packages[*]}"
  if is_root && has apt-get; then
    echo "prepare-test: installing ${packages[*]}"
    export DEBIAN_FRONTEND=noninteractive
    # a fresh machine's package lists may be missing or stale: update only when the install needs it
    $install >/dev/null 2>&1 || { apt-get update >/dev/null 2>&1 && $install >/dev/null 2>&1; }
    browser_tools
    [ ${#tools[@]} -eq 0 ] || lack "$(joined ", " "${tools[@]}") (apt-get failed)" "apt-get update && $install"
  elif has apt-get; then
    lack "$(joined ", " "${tools[@]}")" "sudo $install"
  else
    lack "$(joined ", " "${tools[@]}") (no apt-get here)" "install them from packages like Debian's ${packages[*]}"
  fi
fi

if [ ${#missing[@]} -gt 0 ]; then
  echo "prepare-test: missing $(joined ", " "${missing[@]}"); fix: $(joined " && " "${fixes[@]}")" >&2
  exit 1
fi
