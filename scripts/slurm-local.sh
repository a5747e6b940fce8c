#!/usr/bin/env bash
# A real single-node SLURM on this machine, for the SLURM-profile tests and for trying the
# cluster path on a laptop:  bash scripts/slurm-local.sh start|stop|status
#
# start  brings up munge, MariaDB, slurmdbd (accounting, so the Snakemake plugin's sacct status
#        polling sees jobs finish), slurmctld and slurmd, by hand (no systemd); idempotent:
#        daemons already answering are left alone and not adopted.
# stop   ends exactly the daemons this script started (pids recorded in the state dir) and
#        leaves the dormant config (below).
# dormant writes the dormant config unless the controller started here is running (bootstrap.sh
#        calls it after installing the packages).
# status prints what runs and whether the node takes jobs (exit 1 when it does not).
#
# Why a dormant config: snakemake-executor-plugin-slurm runs `scontrol show config` when it is
# imported, i.e. at every `snakemake` start, local runs included. With our config and no
# controller scontrol retries for ~9 s; with no slurm.conf at all it looks for a configless
# controller for ~59 s. The dormant config names the same cluster with MessageTimeout=1, which
# makes scontrol fail at once, so a stopped local cluster costs nothing.
#
# Needs root and the Debian 12 packages munge slurmctld slurmd slurm-client slurmdbd
# mariadb-server (scripts/bootstrap.sh installs them). Writes /etc/slurm/slurm.conf and
# slurmdbd.conf (marked as managed here; a foreign slurm.conf is never overwritten).
# The cluster is "ctxpolicy", one partition "ctxpolicy", account "ctxpolicy".
set -euo pipefail

STATE=${CTXPOLICY_SLURM_STATE:-/var/lib/ctxpolicy-slurm}
CLUSTER=ctxpolicy
ACCOUNT=ctxpolicy
PARTITION=ctxpolicy
MARKER="# managed by ctxpolicy scripts/slurm-local.sh"
DB_PASS=ctxpolicy-local
SLURM_CONF=${SLURM_CONF:-/etc/slurm/slurm.conf}  # the variable scontrol reads too
DBD_CONF=/etc/slurm/slurmdbd.conf
MYSQL_SOCK=/run/mysqld/mysqld.sock

log() { echo "slurm-local: $*" >&2; }
die() { log "$*"; exit 1; }

wait_for() {  # wait_for SECONDS WHAT COMMAND...
  local limit=$1 what=$2; shift 2
  for ((i = 0; i < limit * 5; i++)); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.2
  done
  die "$what did not come up within ${limit}s (logs: $STATE/log)"
}

alive() {  # alive NAME: the recorded pid of NAME runs NAME's program
  local pidfile=$STATE/pids/$1
  [ -f "$pidfile" ] || return 1
  local pid; pid=$(cat "$pidfile")
  [ -d "/proc/$pid" ] && grep -qa "$2" "/proc/$pid/cmdline" 2>/dev/null
}

record() { mkdir -p "$STATE/pids"; echo "$2" >"$STATE/pids/$1"; }

pid_from_file() {  # pid_from_file FILE SECONDS
  for ((i = 0; i < $2 * 5; i++)); do
    [ -s "$1" ] && { cat "$1"; return 0; }
    sleep 0.2
  done
  return 1
}

ours_or_absent() {
  [ ! -f "$SLURM_CONF" ] || grep -qF "$MARKER" "$SLURM_CONF"
}

write_slurm_conf() {  # write_slurm_conf active|dormant
  ours_or_absent || die "$SLURM_CONF exists and is not managed by this script; refusing to overwrite it"
  mkdir -p "$STATE"/{log,spool/ctld,spool/d,pids} "$(dirname "$SLURM_CONF")"
  local node cpus mem timeout=""
  node=$(hostname -s)
  cpus=$(nproc)
  mem=$(awk '/MemTotal/ {print int($2 / 1024 * 0.8)}' /proc/meminfo)
  if [ "$1" = dormant ]; then
    timeout="# dormant: no controller runs; clients (scontrol at every snakemake start) fail at once
MessageTimeout=1"
  fi
  cat >"$SLURM_CONF.tmp" <<EOF
$MARKER
$timeout
ClusterName=$CLUSTER
SlurmctldHost=$node(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$STATE/spool/ctld
SlurmdSpoolDir=$STATE/spool/d
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd.pid
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd.log
# no cgroups here (no systemd): track processes by parent pid
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
# without a default each job takes the node's whole memory and jobs run one at a time
DefMemPerCPU=1000
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
JobCompType=jobcomp/none
ReturnToService=2
MinJobAge=600
SchedulerType=sched/backfill
MpiDefault=none
NodeName=$node NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=$PARTITION Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF
  mv "$SLURM_CONF.tmp" "$SLURM_CONF"
}

write_configs() {
  write_slurm_conf active
  umask 077
  cat >"$DBD_CONF.tmp" <<EOF
$MARKER
AuthType=auth/munge
DbdHost=localhost
SlurmUser=root
PidFile=$STATE/slurmdbd.pid
LogFile=$STATE/log/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=localhost
StoragePort=3306
StorageUser=slurm
StoragePass=$DB_PASS
StorageLoc=slurm_acct_db
EOF
  mv "$DBD_CONF.tmp" "$DBD_CONF"
  umask 022
}

start_munge() {
  if munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1; then return; fi
  [ -s /etc/munge/munge.key ] || { mungekey --create >/dev/null 2>&1 || dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 2>/dev/null; }
  chown munge:munge /etc/munge/munge.key && chmod 400 /etc/munge/munge.key
  mkdir -p /run/munge && chown munge:munge /run/munge
  rm -f /run/munge/munged.pid
  runuser -u munge -- /usr/sbin/munged --pid-file=/run/munge/munged.pid
  record munge "$(pid_from_file /run/munge/munged.pid 10)"
  wait_for 10 munge bash -c 'munge -n </dev/null | unmunge'
}

start_mariadb() {
  if mariadb-admin --socket="$MYSQL_SOCK" ping >/dev/null 2>&1; then return; fi
  mkdir -p /run/mysqld && chown mysql:mysql /run/mysqld
  [ -d /var/lib/mysql/mysql ] || mariadb-install-db --user=mysql --datadir=/var/lib/mysql >"$STATE/log/mariadb-install.log" 2>&1
  nohup /usr/sbin/mariadbd --user=mysql --datadir=/var/lib/mysql --socket="$MYSQL_SOCK" \
    --bind-address=127.0.0.1 --pid-file=/run/mysqld/mariadbd.pid >"$STATE/log/mariadb.log" 2>&1 &
  record mariadb $!
  wait_for 60 MariaDB mariadb_up "$!"
}

mariadb_up() {  # fails fast once the server process has died
  [ -d "/proc/$1" ] || die "MariaDB exited (log: $STATE/log/mariadb.log)"
  mariadb-admin --socket="$MYSQL_SOCK" ping
}

setup_database() {
  mariadb --socket="$MYSQL_SOCK" -u root <<EOF
CREATE DATABASE IF NOT EXISTS slurm_acct_db;
CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY '$DB_PASS';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';
FLUSH PRIVILEGES;
EOF
}

start_slurmdbd() {
  if ! alive slurmdbd slurmdbd && ! sacctmgr -n show cluster >/dev/null 2>&1; then
    rm -f "$STATE/slurmdbd.pid"
    /usr/sbin/slurmdbd
    record slurmdbd "$(pid_from_file "$STATE/slurmdbd.pid" 30)"
  fi
  wait_for 60 slurmdbd sacctmgr -n show cluster
  sacctmgr -i -Q add cluster "$CLUSTER" >/dev/null 2>&1 || true
  sacctmgr -i -Q add account "$ACCOUNT" Cluster="$CLUSTER" Description=ctxpolicy Organization=ctxpolicy >/dev/null 2>&1 || true
  sacctmgr -i -Q add user root Account="$ACCOUNT" Cluster="$CLUSTER" >/dev/null 2>&1 || true
}

start_slurmctld() {
  if ! alive slurmctld slurmctld && ! scontrol ping 2>/dev/null | grep -q UP; then
    rm -f "$STATE/slurmctld.pid"
    /usr/sbin/slurmctld
    record slurmctld "$(pid_from_file "$STATE/slurmctld.pid" 30)"
  fi
  wait_for 60 slurmctld bash -c 'scontrol ping | grep -q UP'
}

start_slurmd() {
  if ! alive slurmd slurmd && ! pgrep -x slurmd >/dev/null; then
    rm -f "$STATE/slurmd.pid"
    /usr/sbin/slurmd
    record slurmd "$(pid_from_file "$STATE/slurmd.pid" 30)"
  fi
  local node; node=$(hostname -s)
  wait_for 60 "node $node" bash -c "sinfo -h -n $node -o %T | grep -Eq '^(idle|mixed|allocated|drain|down)'"
  if sinfo -h -n "$node" -o %T | grep -Eq 'drain|down'; then
    scontrol update NodeName="$node" State=RESUME
  fi
  wait_for 30 "node $node idle" bash -c "sinfo -h -n $node -o %T | grep -Eq '^(idle|mixed|allocated)'"
}

start() {
  [ "$(id -u)" = 0 ] || die "start needs root"
  local t0=$SECONDS
  write_configs
  start_munge
  start_mariadb
  setup_database
  start_slurmdbd
  start_slurmctld
  start_slurmd
  log "up in $((SECONDS - t0))s: partition $PARTITION, account $ACCOUNT ($(sinfo -h -o '%D node(s), %c CPUs, %m MB'))"
}

stop() {
  local name pid
  for name in slurmd slurmctld slurmdbd mariadb munge; do
    [ -f "$STATE/pids/$name" ] || continue
    pid=$(cat "$STATE/pids/$name")
    local program=$name; [ "$name" = munge ] && program=munged; [ "$name" = mariadb ] && program=mariadbd
    if alive "$name" "$program"; then
      kill "$pid" 2>/dev/null || true
      for ((i = 0; i < 150; i++)); do [ -d "/proc/$pid" ] || break; sleep 0.2; done
      [ -d "/proc/$pid" ] && kill -9 "$pid" 2>/dev/null || true
      log "stopped $name ($pid)"
    fi
    rm -f "$STATE/pids/$name"
  done
  dormant
}

dormant() {  # a running controller started here keeps its config; a foreign config is left alone
  if alive slurmctld slurmctld; then return; fi
  if ours_or_absent; then write_slurm_conf dormant; else log "$SLURM_CONF is not managed here: left as it is"; fi
}

status() {
  local name ok=0
  for name in munge mariadb slurmdbd slurmctld slurmd; do
    if [ -f "$STATE/pids/$name" ]; then echo "$name: started here, pid $(cat "$STATE/pids/$name")"; else echo "$name: not started here"; fi
  done
  if scontrol ping 2>/dev/null | grep -q UP && sinfo -h -o %T 2>/dev/null | grep -Eq 'idle|mixed|allocated'; then
    echo "node: $(sinfo -h -o '%N %T %c CPUs %m MB')"
  else
    echo "node: not taking jobs"; ok=1
  fi
  return $ok
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  dormant) dormant ;;
  status) status ;;
  *) echo "usage: $0 start|stop|dormant|status" >&2; exit 2 ;;
esac
