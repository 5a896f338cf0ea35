#!/usr/bin/env bash
# A single-node Slurm cluster on this machine, for the tests and for trying profiles/slurm.
#
#   tools/slurm-cluster.sh start    install Debian's packages if missing, start munge, slurmctld, slurmd
#   tools/slurm-cluster.sh status   is it up? (sinfo, squeue); exit 0 when up, 1 when not
#   tools/slurm-cluster.sh stop     cancel every job, stop exactly the daemons `start` started
#
# Needs root (the daemons run as root; munged as munge) and Debian 12's packages (Slurm 22.05):
# no systemd, no cgroups, no accounting database. Both start and stop are idempotent.
# The configuration goes to /etc/slurm/slurm.conf, where every Slurm command looks (SLURM_CONF
# does not do: the executor plugin strips SLURM_* variables before its srun inside a job). A
# slurm.conf that this script did not write is never overwritten (exit 1).
#
# Environment:
#   HARDEX_SLURM_DIR   state dir (config, pids, spool, logs)       [/tmp/hardex-slurm]
#   HARDEX_SLURM_PORT  slurmctld port; slurmd uses the next one    [6817]
#   HARDEX_SLURM_GPUS  GPUs the node declares (gres gpu, a count with no devices behind it: for
#                      checking what GPU jobs ask for and get)         [0]
#
# Exit codes: 0 ok; 1 failure (see the message); 3 cannot run here (not root, or the packages
# cannot be installed) -- callers such as tests/workflow/test_slurm.py skip on 3.
set -euo pipefail

STATE=${HARDEX_SLURM_DIR:-/tmp/hardex-slurm}
PORT=${HARDEX_SLURM_PORT:-6817}
GPUS=${HARDEX_SLURM_GPUS:-0}
CONF=/etc/slurm/slurm.conf
GRES_CONF=/etc/slurm/gres.conf
MARKER="# Written by tools/slurm-cluster.sh"
PIDS=$STATE/pids
PARTITION=debug
NODE=localhost
PACKAGES=(slurmctld slurmd slurm-client munge)
COMMANDS=(slurmctld slurmd sbatch sinfo squeue scancel scontrol srun munged munge unmunge)
unset SLURM_CONF
export PATH="$PATH:/usr/sbin:/sbin"

say() { echo "slurm-cluster: $*" >&2; }
die() { say "$2"; exit "$1"; }

# ---- packages -------------------------------------------------------------------------------
missing_commands() {
    local c
    for c in "${COMMANDS[@]}"; do command -v "$c" >/dev/null 2>&1 || echo "$c"; done
}

install_packages() {
    [ -z "$(missing_commands)" ] && return 0
    [ "$(id -u)" = 0 ] || die 3 "Slurm is not installed and we are not root: cannot install ${PACKAGES[*]}"
    command -v apt-get >/dev/null 2>&1 || die 3 "Slurm is not installed and there is no apt-get to install ${PACKAGES[*]}"
    say "installing ${PACKAGES[*]} (apt-get)"
    local apt=(env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${PACKAGES[@]}")
    if ! "${apt[@]}" >"$STATE/apt.log" 2>&1; then
        apt-get update -q >>"$STATE/apt.log" 2>&1 || true
        "${apt[@]}" >>"$STATE/apt.log" 2>&1 ||
            die 3 "cannot install ${PACKAGES[*]} with apt-get (log: $STATE/apt.log): $(tail -n 3 "$STATE/apt.log" | tr '\n' ' ')"
    fi
    [ -z "$(missing_commands)" ] || die 3 "installed ${PACKAGES[*]} but still missing: $(missing_commands | tr '\n' ' ')"
}

# ---- pids: only what we recorded, checked by name --------------------------------------------
# alive NAME: the recorded pid of NAME runs (not a zombie) under that name.
recorded_pid() { [ -s "$PIDS/$1" ] && cat "$PIDS/$1" || true; }
alive() {
    local pid comm st
    pid=$(recorded_pid "$1")
    [ -n "$pid" ] && [ -r "/proc/$pid/comm" ] || return 1
    comm=$(cat "/proc/$pid/comm" 2>/dev/null) || return 1
    [ "$comm" = "$1" ] || return 1
    st=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) || return 1
    [ "$st" != Z ] && [ "$st" != X ]
}

stop_recorded() { # NAME: TERM, wait, KILL; only the recorded pid and only while its name matches
    local name=$1 pid i
    pid=$(recorded_pid "$name")
    if [ -n "$pid" ] && alive "$name"; then
        say "stopping $name (pid $pid)"
        kill -TERM "$pid" 2>/dev/null || true
        for i in $(seq 1 50); do alive "$name" || break; sleep 0.2; done
        if alive "$name"; then
            say "$name (pid $pid) ignored SIGTERM; sending SIGKILL"
            kill -KILL "$pid" 2>/dev/null || true
            for i in $(seq 1 25); do alive "$name" || break; sleep 0.2; done
        fi
        alive "$name" && die 1 "$name (pid $pid) is still running"
    elif [ -n "$pid" ]; then
        say "$name (pid $pid) is not running (anymore)"
    fi
    rm -f "$PIDS/$name"
}

record_from_pidfile() { # NAME PIDFILE: wait for the daemon's pid file, record the pid
    local name=$1 file=$2 i
    for i in $(seq 1 50); do [ -s "$file" ] && break; sleep 0.2; done
    [ -s "$file" ] || die 1 "$name did not write $file; see $STATE/log/"
    tr -dc '0-9' <"$file" >"$PIDS/$name"
    alive "$name" || die 1 "$name exited right after starting; see $STATE/log/$name.log"
}

# conf_is_ours: written by this script (any state dir); conf_is_mine: for this state dir
conf_is_ours() { [ -f "$CONF" ] && head -n 1 "$CONF" | grep -qF "$MARKER"; }
conf_is_mine() { [ -f "$CONF" ] && head -n 1 "$CONF" | grep -qF "$MARKER (state: $STATE)"; }

cluster_up() { alive slurmctld && alive slurmd && scontrol ping >/dev/null 2>&1; }

# ---- config ---------------------------------------------------------------------------------
write_conf() {
    local cpus mem
    cpus=$(nproc)
    mem=$(awk '/^MemTotal:/ {print int($2 / 1024)}' /proc/meminfo)
    mkdir -p "$(dirname "$CONF")"
    cat >"$CONF" <<EOF
$MARKER (state: $STATE); removed by its stop.
# One node (this machine), one partition, no accounting.
ClusterName=hardex
SlurmctldHost=localhost
SlurmctldPort=$PORT
SlurmdPort=$((PORT + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# no cgroups on this kind of machine
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
# else a job without --mem takes the whole node
DefMemPerCPU=500
# else an oversized job waits forever instead of failing at submission
EnforcePartLimits=ALL
# squeue keeps finished jobs for an hour: the executor plugin reads their states there (no
# sacct without accounting; it needs MinJobAge >= 3 x its init seconds), and so do the tests
MinJobAge=3600
ReturnToService=2
# else a node declaring more CPUs/memory than are detected is invalid
SlurmdParameters=config_overrides
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
KillWait=5
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/spool
SlurmctldPidFile=$STATE/run/slurmctld.pid
SlurmdPidFile=$STATE/run/slurmd.pid
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
$( [ "$GPUS" -gt 0 ] && echo "GresTypes=gpu" || true )
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem $( [ "$GPUS" -gt 0 ] && echo "Gres=gpu:$GPUS" || true ) State=UNKNOWN
PartitionName=$PARTITION Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
    rm -f "$GRES_CONF"
    if [ "$GPUS" -gt 0 ]; then
        # slurmd counts a node's GPUs by their device files: plain files stand in for them here
        mkdir -p "$STATE/gpus"
        local i
        for i in $(seq 0 $((GPUS - 1))); do : >"$STATE/gpus/gpu$i"; done
        printf '%s\nAutoDetect=off\nNodeName=%s Name=gpu File=%s/gpus/gpu[0-%s]\n' \
            "$MARKER (state: $STATE)" "$NODE" "$STATE" "$((GPUS - 1))" >"$GRES_CONF"
    fi
}

# ---- munge ----------------------------------------------------------------------------------
munge_works() { munge -n 2>/dev/null | unmunge >/dev/null 2>&1; }

start_munge() {
    if munge_works; then
        alive munged || say "using the munged that is already running (not started here, will not be stopped)"
        return 0
    fi
    install -d -o munge -g munge -m 0755 /run/munge
    install -d -o munge -g munge -m 0700 /var/lib/munge /var/log/munge
    if [ ! -s /etc/munge/munge.key ]; then
        say "creating /etc/munge/munge.key"
        install -d -o munge -g munge -m 0700 /etc/munge
        (umask 077 && dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none)
        chown munge:munge /etc/munge/munge.key
        chmod 0400 /etc/munge/munge.key
    fi
    rm -f /run/munge/munged.pid
    runuser -u munge -- munged || die 1 "munged failed to start; see /var/log/munge/munged.log"
    record_from_pidfile munged /run/munge/munged.pid
    local i
    for i in $(seq 1 50); do munge_works && return 0; sleep 0.2; done
    die 1 "munged runs but credentials do not verify; see /var/log/munge/munged.log"
}

# ---- commands -------------------------------------------------------------------------------
cmd_start() {
    mkdir -p "$STATE" "$PIDS"
    if cluster_up; then
        say "already running (state: $STATE)"
        return 0
    fi
    # a half-started or crashed cluster: stop what is left of it first
    if alive slurmctld || alive slurmd; then
        say "a previous start left daemons behind; stopping them first"
        cmd_stop
        mkdir -p "$STATE" "$PIDS"
    fi
    [ "$(id -u)" = 0 ] || die 3 "must run as root (the daemons run as root and munged as munge)"
    install_packages
    if [ -e "$CONF" ] && ! conf_is_ours; then
        die 1 "$CONF exists and was not written by this script: not touching a real Slurm setup"
    fi
    if conf_is_ours && scontrol ping 2>/dev/null | grep -q UP; then
        die 1 "a cluster from another state dir is running ($(head -n 1 "$CONF")): stop it first"
    fi
    # from here on, a failed start stops whatever it had started
    trap 'rc=$?; trap - EXIT; if [ "$rc" != 0 ]; then say "start failed; stopping what it started"; cmd_stop || true; fi; exit "$rc"' EXIT
    rm -rf "$STATE/ctld" "$STATE/spool" "$STATE/run"
    mkdir -p "$STATE/ctld" "$STATE/spool" "$STATE/run" "$STATE/log"
    write_conf
    start_munge

    slurmctld -c -f "$CONF" || die 1 "slurmctld failed to start; see $STATE/log/slurmctld.log"
    record_from_pidfile slurmctld "$STATE/run/slurmctld.pid"
    slurmd -N "$NODE" -f "$CONF" || die 1 "slurmd failed to start; see $STATE/log/slurmd.log"
    record_from_pidfile slurmd "$STATE/run/slurmd.pid"

    local i state=""
    for i in $(seq 1 150); do
        state=$(sinfo -h -N -n "$NODE" -o %t 2>/dev/null || true)
        case $state in idle*) break ;; esac
        sleep 0.2
    done
    case $state in
        idle*) ;;
        *) die 1 "node $NODE is '${state:-unknown}' instead of idle after 30 s; see $STATE/log/" ;;
    esac
    say "up: partition $PARTITION, node $NODE ($(nproc) CPUs); config $CONF, state in $STATE"
    trap - EXIT
}

cmd_stop() {
    [ -d "$STATE" ] || { say "not running (no $STATE)"; return 0; }
    if alive slurmctld && conf_is_mine; then
        local jobs i
        jobs=$(squeue -h -o %A 2>/dev/null | tr '\n' ' ' || true)
        if [ -n "${jobs// /}" ]; then
            say "cancelling jobs: $jobs"
            # shellcheck disable=SC2086
            scancel $jobs 2>/dev/null || true
            for i in $(seq 1 75); do
                [ -z "$(squeue -h -t R,CG,PD,CF,S -o %A 2>/dev/null)" ] && break
                sleep 0.2
            done
        fi
    fi
    stop_recorded slurmd
    stop_recorded slurmctld
    stop_recorded munged
    rm -rf "$STATE/ctld" "$STATE/spool" "$STATE/run" "$PIDS"
    if conf_is_mine; then rm -f "$CONF" "$GRES_CONF"; fi
    say "stopped (logs kept in $STATE/log)"
}

cmd_status() {
    if cluster_up; then
        echo "running: config $CONF, state $STATE"
        echo "pids: slurmctld $(recorded_pid slurmctld), slurmd $(recorded_pid slurmd), munged $(recorded_pid munged || true)"
        sinfo
        squeue
        return 0
    fi
    echo "not running (state $STATE)"
    local n
    for n in munged slurmctld slurmd; do alive "$n" && echo "left over: $n pid $(recorded_pid "$n")"; done
    return 1
}

case ${1:-} in
    start) cmd_start ;;
    stop) cmd_stop ;;
    status) cmd_status ;;
    *)
        echo "usage: $0 start|stop|status" >&2
        exit 2
        ;;
esac
