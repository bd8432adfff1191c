#!/usr/bin/env bash
# slurm_local.sh: a throw-away SLURM cluster on this machine (munged, slurmctld and one slurmd per
# emulated node, all on localhost) for the tests of `parallel.env: slurm` and of srun launches.
#
#   scripts/slurm_local.sh install | up | down | status | env   [-d DIR] [-n NODES]
#
# DIR (default $SLURM_LOCAL_DIR, else /tmp/espnet3-slurm) holds everything: slurm.conf, the munge
# key and socket, spool and state folders, logs, and the PID of each daemon this script started
# ("PID STARTTIME", so a reused PID is never taken for ours). Only those processes are signalled.
# NODES (default $SLURM_LOCAL_NODES, else 1): 1 gives node "localhost"; 2 gives n1 and n2, two
# slurmd on localhost with their own ports (NodeHostname=localhost), so multi-node jobs run here.
# Ports: $SLURM_LOCAL_PORT (slurmctld; slurmd i uses PORT+i), else a free range is picked at `up`.
# `env` prints the `export SLURM_CONF=...` line clients need. Needs root (the daemons run as root).
set -euo pipefail
set +m # no job control: `setsid cmd &` then execs in place and $! is the daemon itself

PACKAGES="slurmctld slurmd slurm-client munge slurm-wlm-basic-plugins libpmix-dev"
CMD=${1:-status}
shift || true
DIR=${SLURM_LOCAL_DIR:-/tmp/espnet3-slurm}
NODES=${SLURM_LOCAL_NODES:-1}
while (($#)); do
    case $1 in
        -d) DIR=$2; shift 2 ;;
        -n) NODES=$2; shift 2 ;;
        *) echo "slurm_local.sh: unknown argument '$1'" >&2; exit 64 ;;
    esac
done
WAIT_S=${SLURM_LOCAL_TIMEOUT:-30}

say() { printf 'slurm_local.sh: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

[[ $NODES =~ ^[12]$ ]] || die "-n/SLURM_LOCAL_NODES must be 1 or 2, got '$NODES'"

if [[ $CMD == install ]]; then
    missing=()
    for p in $PACKAGES; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    ((${#missing[@]} == 0)) && exit 0
    [[ $(id -u) == 0 ]] || die "need root to install ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    exit 0
fi

[[ $DIR != *[[:space:]\'\"#=]* ]] || die "the state folder '$DIR' must not hold spaces, quotes, # or = (slurm.conf cannot)"
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd -P)
CONF=$DIR/slurm.conf
RUN=$DIR/run
SOCK=$DIR/munge/munge.socket
export SLURM_CONF=$CONF

# ---- our processes: "PID STARTTIME" records (field 22 of /proc/PID/stat; zombies count as gone)
start_time() {
    local s
    s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    s=${s##*) }
    set -- $s
    [[ $1 != [ZX] ]] || return 1
    echo "${20}"
}
remember() { echo "$2 $(start_time "$2")" >"$RUN/$1.pid"; }
running() {
    local pid st
    # an empty start time: the daemon had already exited when it was remembered
    [[ -f $RUN/$1.pid ]] && read -r pid st <"$RUN/$1.pid" && [[ -n $pid && -n $st && "$(start_time "$pid")" == "$st" ]]
}
stop() {
    local pid st i
    if running "$1"; then
        read -r pid st <"$RUN/$1.pid"
        kill -TERM "$pid" 2>/dev/null || true
        for ((i = 0; i < 100; i++)); do running "$1" || break; sleep 0.1; done
        running "$1" && kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -f "$RUN/$1.pid"
}
port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
node_list() { if ((NODES == 1)); then echo localhost; else echo n1 n2; fi; }

pick_port() {
    local base i ok lo span
    if [[ -n ${SLURM_LOCAL_PORT:-} ]]; then echo "$SLURM_LOCAL_PORT"; return; fi
    # Below the kernel's ephemeral range: an outgoing connection's local port cannot take ours.
    read -r lo _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || lo=32768
    span=$((lo - 10000 - NODES - 1))
    ((span >= 1000)) || span=20000
    for _ in $(seq 50); do
        base=$((10000 + (RANDOM * 32768 + RANDOM) % span)) ok=1
        for ((i = 0; i <= NODES; i++)); do port_in_use $((base + i)) && ok=0; done
        ((ok)) && { echo "$base"; return; }
    done
    die "no free port range found (set SLURM_LOCAL_PORT)"
}

write_conf() {
    local port=$1 mem i=0 n cpus
    cpus=$(nproc)
    mem=$(($(awk '/MemTotal/ {print int($2 / 1024)}' /proc/meminfo) / NODES))
    {
        echo "# written by scripts/slurm_local.sh: a cluster on localhost, state in $DIR"
        cat <<EOF
ClusterName=espnet3local
SlurmctldHost=localhost
SlurmctldPort=$port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$SOCK,cred_expire=10
StateSaveLocation=$DIR/ctld
SlurmdSpoolDir=$DIR/spool/%n
TmpFS=$DIR/tmp/%n
SlurmctldPidFile=$DIR/ctld/slurmctld.pid
SlurmdPidFile=$DIR/spool/%n/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
MpiDefault=none
ReturnToService=2
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
MinJobAge=300
KillWait=2
Waittime=0
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0,sched_interval=2
CommunicationParameters=NoInAddrAny
EOF
        for n in $(node_list); do
            i=$((i + 1))
            echo "NodeName=$n NodeHostname=localhost NodeAddr=127.0.0.1 Port=$((port + i)) CPUs=$cpus RealMemory=$mem State=UNKNOWN"
        done
        echo "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
    } >"$CONF.tmp"
    mv "$CONF.tmp" "$CONF"
}

conf_port() { sed -n 's/^SlurmctldPort=//p' "$CONF"; }

wait_for() { # wait_for WHAT COMMAND...: retries COMMAND for WAIT_S seconds; status 99 = a daemon died
    local what=$1 i rc
    shift
    for ((i = 0; i < WAIT_S * 10; i++)); do
        rc=0
        "$@" || rc=$?
        ((rc != 99)) || return 99
        ((rc != 0)) || return 0
        sleep 0.1
    done
    die "$what did not come up in ${WAIT_S}s (logs in $DIR/log)"
}
# Why a daemon ended (the last lines of its log and of its stderr), kept in EXITED for up's retry or its
# error; returns 99 (wait_for's "died"). exited WHAT LOGNAME: LOGNAME.log and LOGNAME.out under $DIR/log.
exited() {
    EXITED="$1 exited (see $DIR/log/$2.log: $(tail -q -n 3 "$DIR/log/$2.log" "$DIR/log/$2.out" 2>/dev/null | tr '\n' ' '))"
    return 99
}
munge_ok() { munge -S "$SOCK" -n </dev/null 2>/dev/null | unmunge -S "$SOCK" >/dev/null 2>&1; }
ctld_ok() { running slurmctld || exited slurmctld slurmctld || return; scontrol ping 2>/dev/null | grep -q 'is UP'; }
nodes_ok() {
    local n states
    for n in $(node_list); do running "slurmd-$n" || exited "slurmd $n" "slurmd-$n" || return; done
    states=$(sinfo -h -N -o '%N %T' 2>/dev/null) || return 1
    [[ $(wc -l <<<"$states") -ge $NODES ]] && ! awk '$2 !~ /^(idle|mixed|allocated|completing)$/ {bad=1} END {exit !bad}' <<<"$states"
}

# Starts slurmctld and a slurmd per node on the conf's ports; 99 when one of them died on the way.
start_slurm() {
    local n i=0 port
    port=$(conf_port)
    port_in_use "$port" && die "port $port is in use (set SLURM_LOCAL_PORT)"
    # -c: a cold start without the jobs of an earlier cluster in this folder
    setsid slurmctld -D -i -c -f "$CONF" </dev/null >>"$DIR/log/slurmctld.out" 2>&1 9>&- &
    remember slurmctld $!
    wait_for slurmctld ctld_ok || return
    for n in $(node_list); do
        i=$((i + 1))
        port_in_use $((port + i)) && die "port $((port + i)) is in use (set SLURM_LOCAL_PORT)"
        mkdir -p "$DIR/spool/$n" "$DIR/tmp/$n"
        setsid slurmd -D -N "$n" -f "$CONF" </dev/null >>"$DIR/log/slurmd-$n.out" 2>&1 9>&- &
        remember "slurmd-$n" $!
    done
    wait_for nodes nodes_ok
}
stop_slurm() {
    local f
    for f in "$RUN"/slurmd-*.pid; do [[ -e $f ]] && { f=${f##*/}; stop "${f%.pid}"; }; done
    stop slurmctld
}

up() {
    local b attempt rc
    for b in munged munge unmunge slurmctld slurmd sinfo scontrol squeue sbatch scancel srun; do
        command -v "$b" >/dev/null || die "$b is missing (scripts/slurm_local.sh install installs: $PACKAGES)"
    done
    [[ $(id -u) == 0 ]] || die "must run as root (the daemons run as SlurmUser=root)"
    compgen -G '/usr/lib/*/pmix*/lib/libpmix.so' >/dev/null || say "warning: libpmix-dev is missing: srun --mpi=pmix will fail"
    if running munged && running slurmctld && [[ -f $CONF ]]; then
        say "already up"
        wait_for nodes nodes_ok || die "$EXITED"
        return 0
    fi
    mkdir -p "$RUN" "$DIR/munge" "$DIR/log" "$DIR/ctld" "$DIR/spool" "$DIR/tmp"
    chmod 755 "$DIR" "$DIR/munge" # munged wants its socket folder reachable by all
    write_conf "$(pick_port)"
    trap 'say "up failed; stopping what was started"; down' EXIT
    if ! running munged; then
        rm -f "$SOCK" "$SOCK.lock"
        [[ -s $DIR/munge/munge.key ]] || { head -c 1024 /dev/urandom >"$DIR/munge/munge.key"; chmod 400 "$DIR/munge/munge.key"; }
        setsid munged -F --force --key-file="$DIR/munge/munge.key" --socket="$SOCK" \
            --pid-file="$DIR/munge/munged.pid" --seed-file="$DIR/munge/munged.seed" \
            --log-file="$DIR/log/munged.log" </dev/null >>"$DIR/log/munged.out" 2>&1 9>&- &
        remember munged $!
        wait_for munged munge_ok
    fi
    # A daemon that dies while starting (say, a port taken between the check and its bind) is
    # started again on fresh ports, twice; the message gives its log's last lines either way.
    for attempt in 1 2 3; do
        rc=0
        start_slurm || rc=$?
        ((rc != 0)) || break
        ((rc == 99)) || die "slurmctld or slurmd did not start (status $rc; logs in $DIR/log)"
        ((attempt < 3)) || die "$EXITED"
        say "$EXITED; starting again on other ports"
        stop_slurm
        write_conf "$(pick_port)"
    done
    trap - EXIT
    say "up: $(sinfo -h -N -o '%N:%T' | tr '\n' ' ')(state in $DIR)"
}

# A slurmstepd of this cluster (its log is under DIR) that outlived its slurmd.
kill_orphan_stepds() {
    local d fd
    for d in /proc/[0-9]*; do
        [[ $(cat "$d/comm" 2>/dev/null) == slurmstepd ]] || continue
        for fd in "$d"/fd/*; do
            if [[ $(readlink "$fd" 2>/dev/null) == "$DIR"/* ]]; then kill -KILL "${d#/proc/}" 2>/dev/null || true; break; fi
        done
    done
}

down() {
    local i ids
    if running slurmctld; then # cancel jobs first so their steps end cleanly
        ids=$(squeue -h -o %A 2>/dev/null || true)
        [[ -n $ids ]] && scancel --quiet $ids 2>/dev/null || true
        for ((i = 0; i < 100; i++)); do [[ -z $(squeue -h -o %A 2>/dev/null) ]] && break; sleep 0.1; done
    fi
    stop_slurm
    stop munged
    kill_orphan_stepds
    rm -f "$SOCK" "$SOCK.lock"
    say "down"
}

status() {
    local f name rc=0 any=0
    for f in "$RUN"/*.pid; do
        [[ -e $f ]] || continue
        any=1 name=${f##*/} name=${name%.pid}
        if running "$name"; then echo "$name: running"; else echo "$name: gone"; rc=1; fi
    done
    ((any)) || { echo "down"; return 3; }
    running slurmctld && { sinfo -N -o '%N %P %T %c %m' || rc=1; squeue || true; }
    return $rc
}

case $CMD in
    up) exec 9>"$DIR/.lock"; flock -w 60 9 || die "$DIR is locked"; up; echo "export SLURM_CONF=$CONF" ;;
    down) exec 9>"$DIR/.lock"; flock -w 60 9 || die "$DIR is locked"; down ;;
    status) status ;;
    env) echo "export SLURM_CONF=$CONF" ;;
    *) echo "usage: scripts/slurm_local.sh install|up|down|status|env [-d DIR] [-n NODES]" >&2; exit 64 ;;
esac
