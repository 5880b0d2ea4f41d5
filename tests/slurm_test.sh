#!/bin/bash
# tests/slurm_test.sh VITREG_BINARY REPO_ROOT
#
# scripts/slurm/extract.sbatch on a real one-node Slurm cluster of its own: installs Slurm and
# MUNGE with apt when missing, starts a private munged, slurmctld and slurmd (own temp dir, own
# socket and ports, no systemd needed), then
#   1. a single-process reference: vitreg extract over 40 inputs (2 of them broken, exit 3);
#   2. sbatch --array=0-3 of extract.sbatch over the same inputs; shard 2 is killed with
#      `scancel --signal=KILL` once it has written a chunk (its inputs include one large image,
#      so it is still busy then);
#   3. vitreg merge must fail and name shard 2; `sbatch --array=2` resumes it (its first chunk
#      is kept); vitreg merge then succeeds and its files are byte-identical to the reference;
#   4. the same script runs `vitreg dense` (--pca) as an array of 3 shards; merged, its per-image
#      arrays, PCA previews and manifest are byte-identical to a single-process dense run.
# Stops the daemons it started (by PID) and removes what it created, whatever happens.
# Needs root (apt, munged as user munge, slurmd). VITREG_SLURM_TEST_KEEP=1 keeps the temp dir.
set -uo pipefail

START=$SECONDS
log() { printf '[slurm_test %3ds] %s\n' $((SECONDS - START)) "$*"; }
fail() {
    log "FAIL: $*"
    dump_logs
    exit 1
}

if (($# != 2)); then
    echo "usage: $0 VITREG_BINARY REPO_ROOT" >&2
    exit 2
fi
VITREG=$(readlink -f "$1")
REPO=$(readlink -f "$2")
SBATCH_SCRIPT=$REPO/scripts/slurm/extract.sbatch
MODEL=$REPO/weights/vitreg-untrained-s14-d192-reg4.safetensors

TMP=""
POLICY_CREATED=0
MUNGED_PID="" CTLD_PID="" SLURMD_PID=""

dump_logs() {
    [[ -n $TMP && -d $TMP ]] || return 0
    local f
    for f in "$TMP"/log/*; do
        [[ -f $f ]] || continue
        echo "----- ${f#"$TMP"/} (last 40 lines) -----"
        tail -n 40 "$f"
    done
    echo "-----"
}

alive() { [[ -n $1 && -e /proc/$1 ]] && ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null; }

stop_pid() { # PID NAME: TERM, up to 10 s, then KILL; only our own children
    local pid=$1 name=$2 i
    [[ -n $pid ]] || return 0
    if alive "$pid"; then
        kill -TERM "$pid" 2>/dev/null
        for ((i = 0; i < 100; i++)); do
            alive "$pid" || break
            sleep 0.1
        done
        if alive "$pid"; then
            log "$name (pid $pid) ignored SIGTERM; SIGKILL"
            kill -KILL "$pid" 2>/dev/null
        fi
    fi
    wait "$pid" 2>/dev/null
    log "stopped $name (pid $pid)"
}

our_stepds() { # PIDs of live slurmstepd processes of this test's cluster
    local p
    [[ -n ${SLURM_CONF:-} ]] || return 0
    for p in /proc/[0-9]*; do
        [[ $(cat "$p/comm" 2>/dev/null) == slurmstepd ]] || continue
        alive "${p#/proc/}" || continue
        tr '\0' '\n' <"$p/environ" 2>/dev/null | grep -qxF "SLURM_CONF=$SLURM_CONF" && echo "${p#/proc/}"
    done
}

cleanup() {
    local rc=$? ids=() i
    trap - EXIT INT TERM
    if [[ -n $CTLD_PID ]] && alive "$CTLD_PID"; then
        # Jobs of this private cluster are all ours: cancel what is left before the daemons go.
        mapfile -t ids < <(squeue -h -o %i 2>/dev/null)
        if ((${#ids[@]})); then
            log "cancelling leftover jobs: ${ids[*]}"
            scancel --full --signal=KILL "${ids[@]}" 2>/dev/null
            scancel "${ids[@]}" 2>/dev/null
            for ((i = 0; i < 75; i++)); do
                [[ -z $(squeue -h -o %i 2>/dev/null) ]] && break
                sleep 0.2
            done
        fi
    fi
    # slurmstepd (one per job, forked by our slurmd, carries our SLURM_CONF) lingers a moment.
    for ((i = 0; i < 50; i++)); do
        mapfile -t ids < <(our_stepds)
        ((${#ids[@]})) || break
        sleep 0.2
    done
    if ((${#ids[@]})); then
        log "slurmstepd still running after 10 s: SIGKILL ${ids[*]}"
        kill -KILL "${ids[@]}" 2>/dev/null
    fi
    stop_pid "$SLURMD_PID" slurmd
    stop_pid "$CTLD_PID" slurmctld
    stop_pid "$MUNGED_PID" munged
    if ((POLICY_CREATED)); then
        rm -f /usr/sbin/policy-rc.d
        POLICY_CREATED=0
    fi
    if [[ -n $TMP && -d $TMP ]]; then
        if [[ -n ${VITREG_SLURM_TEST_KEEP:-} ]]; then
            log "kept $TMP"
        else
            rm -rf "$TMP"
        fi
    fi
    if ((rc == 0)); then log "PASS ($((SECONDS - START)) s)"; else log "exit $rc"; fi
    exit "$rc"
}
trap cleanup EXIT
trap 'log "interrupted"; exit 130' INT TERM

[[ $(id -u) == 0 ]] ||
    fail "must run as root (it installs slurm and munge with apt and starts munged, slurmctld and slurmd); uid is $(id -u)"
[[ -x $VITREG ]] || fail "vitreg binary '$1' is not executable"
[[ -f $SBATCH_SCRIPT ]] || fail "$SBATCH_SCRIPT is missing"
[[ -f $MODEL ]] || fail "$MODEL is missing"

# The test talks to its own cluster only: nothing from a surrounding Slurm job or user setup.
for v in $(compgen -e); do
    case $v in SLURM_* | SBATCH_* | SQUEUE_* | SINFO_* | SCANCEL_* | SCONTROL_* | VITREG_*) [[ $v == VITREG_SLURM_TEST_KEEP ]] || unset "$v" ;; esac
done

# ---- packages ------------------------------------------------------------------------------
PKGS=(slurmctld slurmd slurm-client munge)
missing=()
for p in "${PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
    log "installing ${missing[*]} with apt"
    if [[ ! -e /usr/sbin/policy-rc.d ]]; then
        # postinst scripts must not start munge/slurm services (we start our own)
        printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
        chmod 0755 /usr/sbin/policy-rc.d
        POLICY_CREATED=1
    fi
    apt-get update -qq || fail "apt-get update failed"
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${PKGS[@]}" ||
        fail "apt-get install ${PKGS[*]} failed"
    if ((POLICY_CREATED)); then
        rm -f /usr/sbin/policy-rc.d
        POLICY_CREATED=0
    fi
else
    log "slurm and munge already installed"
fi
for c in munged munge unmunge slurmctld slurmd sbatch squeue sinfo scancel scontrol; do
    command -v "$c" >/dev/null || fail "$c not found after installing ${PKGS[*]}"
done
getent passwd munge >/dev/null || fail "no user munge (the munge package creates it)"

TMP=$(mktemp -d "${TMPDIR:-/tmp}/vitreg-slurm.XXXXXX") || fail "mktemp failed"
chmod 0755 "$TMP" # munged (user munge) must reach its socket dir
mkdir -p "$TMP"/{etc,state,spool,log,run,data/img}

# ---- munge ---------------------------------------------------------------------------------
KEY=/etc/munge/munge.key
if [[ ! -s $KEY ]]; then
    log "creating $KEY"
    install -d -o munge -g munge -m 0700 /etc/munge
    rm -f "$KEY"
    if command -v mungekey >/dev/null; then
        mungekey --create --keyfile="$KEY" || fail "mungekey failed"
    else
        dd if=/dev/urandom of="$KEY" bs=1024 count=1 status=none || fail "cannot write $KEY"
    fi
    chown munge:munge "$KEY"
    chmod 0400 "$KEY"
fi
KEY_USER=$(stat -c %U "$KEY")
MUNGE_DIR=$TMP/munge
SOCKET=$MUNGE_DIR/munge.socket.2
install -d -o "$KEY_USER" -m 0755 "$MUNGE_DIR"     # socket dir: must be world-searchable
install -d -o "$KEY_USER" -m 0700 "$MUNGE_DIR/lib" # seed file
MUNGED_ARGS=(-F --force --key-file="$KEY" --socket="$SOCKET" --pid-file="$MUNGE_DIR/munged.pid"
    --seed-file="$MUNGE_DIR/lib/munged.seed" --log-file="$MUNGE_DIR/lib/munged.log")
if [[ $KEY_USER == root ]]; then
    munged "${MUNGED_ARGS[@]}" >"$TMP/log/munged.out" 2>&1 &
else
    # setpriv execs munged: $! is munged's PID
    setpriv --reuid="$KEY_USER" --regid="$(id -g "$KEY_USER")" --init-groups -- \
        "$(command -v munged)" "${MUNGED_ARGS[@]}" >"$TMP/log/munged.out" 2>&1 &
fi
MUNGED_PID=$!
munge_ok() { munge -S "$SOCKET" -n 2>/dev/null | unmunge -S "$SOCKET" >/dev/null 2>&1; }
for ((i = 0; i < 100; i++)); do
    munge_ok && break
    alive "$MUNGED_PID" || fail "munged exited"
    sleep 0.1
done
munge_ok || fail "munged (pid $MUNGED_PID) does not answer on $SOCKET"
log "munged running as $KEY_USER (pid $MUNGED_PID, socket $SOCKET)"

# ---- slurm ---------------------------------------------------------------------------------
HOST=$(hostname -s 2>/dev/null || uname -n)
HOST=${HOST%%.*}
[[ -n $HOST ]] || fail "cannot learn this host's name"
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
# Listening ports below the kernel's ephemeral range: a port inside it may be some other
# test's client socket a moment later (connect() picks from it), and the daemon's bind fails.
read -r EPHEMERAL_LO _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || EPHEMERAL_LO=32768
PORT_LO=10000 PORT_SPAN=$((EPHEMERAL_LO - 10000))
((PORT_SPAN >= 1000)) || PORT_LO=$((EPHEMERAL_LO > 2000 ? 1024 : 61000)) PORT_SPAN=$((EPHEMERAL_LO > 2000 ? EPHEMERAL_LO - 1024 : 4000))
pick_port() { # [PORT_TO_AVOID]
    local p i
    for ((i = 0; i < 100; i++)); do
        p=$((PORT_LO + RANDOM % PORT_SPAN))
        [[ $p != "${1:-}" ]] && port_free "$p" && {
            echo "$p"
            return 0
        }
    done
    return 1
}

# The node line as slurmd sees this machine (so it is never drained for having less), with
# this host's name and a loopback address (no DNS needed); memory left out (not scheduled).
NODE_LINE=$(slurmd -C 2>/dev/null | grep -m1 '^NodeName=') || NODE_LINE=""
if [[ -z $NODE_LINE ]]; then
    NODE_LINE="NodeName=$HOST CPUs=$(nproc)"
fi
NODE_LINE=$(sed -e "s/^NodeName=[^ ]*/NodeName=$HOST/" -e 's/ RealMemory=[0-9]*//' <<<"$NODE_LINE")

export SLURM_CONF=$TMP/etc/slurm.conf
# slurmd 22.05 loads a cgroup plugin even when nothing uses cgroups; the default "autodetect"
# picks cgroup/v2 on a cgroup-v2 machine, whose init wants systemd (dbus) or a writable,
# delegated /sys/fs/cgroup, and aborts in a container ("Hybrid mode is not supported", "systemd
# scope for slurmstepd could not be set"). cgroup/v1's init touches nothing, and with
# proctrack/linuxproc and task/none nothing else asks it for a cgroup, so pin it.
echo "CgroupPlugin=cgroup/v1" >"$TMP/etc/cgroup.conf"

port_taken() { grep -qs "Address already in use" "$TMP/log/slurmctld.out" "$TMP/log/slurmd.out"; }
start_cluster() { # writes slurm.conf with two fresh ports, starts both daemons, waits for idle
    CTLD_PORT=$(pick_port) || fail "no free port"
    SLURMD_PORT=$(pick_port "$CTLD_PORT") || fail "no free port"
    cat >"$SLURM_CONF" <<EOF
# written by tests/slurm_test.sh: a private one-node cluster
ClusterName=vitregtest
SlurmctldHost=$HOST(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$SOCKET
StateSaveLocation=$TMP/state
SlurmdSpoolDir=$TMP/spool
SlurmctldPidFile=$TMP/run/slurmctld.pid
SlurmdPidFile=$TMP/run/slurmd.pid
SlurmctldLogFile=$TMP/log/slurmctld.log
SlurmdLogFile=$TMP/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/builtin
ReturnToService=2
MaxArraySize=64
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MailProg=/bin/true
KillWait=5
MinJobAge=600
$NODE_LINE NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=debug Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
EOF
    log "slurm.conf: $SLURM_CONF (node: $NODE_LINE; ports $CTLD_PORT/$SLURMD_PORT)"
    : >"$TMP/log/slurmctld.out"
    : >"$TMP/log/slurmd.out"
    slurmctld -D >"$TMP/log/slurmctld.out" 2>&1 &
    CTLD_PID=$!
    slurmd -D -N "$HOST" >"$TMP/log/slurmd.out" 2>&1 &
    SLURMD_PID=$!
    log "started slurmctld (pid $CTLD_PID) and slurmd (pid $SLURMD_PID)"
    local i state=""
    for ((i = 0; i < 300; i++)); do
        state=$(sinfo -h -N -n "$HOST" -o %T 2>/dev/null | head -n1)
        [[ $state == idle ]] && return 0
        alive "$CTLD_PID" || { port_taken && return 2; fail "slurmctld exited"; }
        alive "$SLURMD_PID" || { port_taken && return 2; fail "slurmd exited"; }
        sleep 0.2
    done
    fail "node $HOST is not idle after 60 s (state '$state')"
}
# A port can still be taken between the check and the daemon's bind: then start again on others.
for attempt in 1 2 3; do
    start_cluster && break
    log "a port was taken before the daemons bound it (attempt $attempt): restarting on new ports"
    stop_pid "$SLURMD_PID" slurmd
    stop_pid "$CTLD_PID" slurmctld
    CTLD_PID="" SLURMD_PID=""
    rm -rf "$TMP/state" && mkdir -p "$TMP/state"
    ((attempt < 3)) || fail "ports taken on three attempts"
done
log "node $HOST idle"

# ---- inputs and the single-process reference -----------------------------------------------
IMAGES=$TMP/data/img
REF=$TMP/data/ref
SHARDED=$TMP/data/sharded
ppm() { # FILE W H: a PPM of random pixels
    { printf 'P6\n%d %d\n255\n' "$2" "$3" && head -c $(($2 * $3 * 3)) /dev/urandom; } >"$1"
}
for ((i = 0; i < 40; i++)); do
    name=$IMAGES/img_$(printf %03d "$i")
    case $i in
    13) : >"$name.png" ;;                              # shard 1: empty file
    31) echo "this is not a JPEG" >"$name.jpg" ;;      # shard 3: text named .jpg
    25) ppm "$name.ppm" 1400 1400 ;;                   # shard 2: 10000 tokens, some seconds
    *) ppm "$name.ppm" 28 28 ;;
    esac
done
OPTS=(--resize none --chunk 4 --patch-tokens)
log "40 inputs in $IMAGES; reference run"
"$VITREG" extract "$MODEL" "$IMAGES" -o "$REF" --threads 1 "${OPTS[@]}" >"$TMP/log/reference.out" 2>&1
rc=$?
((rc == 3)) || fail "reference extract exited $rc, expected 3 (2 broken inputs): $(cat "$TMP/log/reference.out")"
[[ -f $REF/run.json ]] || fail "reference has no run.json"
log "reference done (exit 3: 2 inputs failed, as meant)"

# ---- the array job -------------------------------------------------------------------------
cd "$TMP" || fail "cd $TMP"
submit() { # ARRAY: prints the job id
    local out
    out=$(VITREG=$VITREG sbatch --parsable --array="$1" --cpus-per-task=1 --output="$TMP/log/job-%A_%a.out" \
        "$SBATCH_SCRIPT" "$MODEL" "$IMAGES" "$SHARDED" "${OPTS[@]}") || return 1
    echo "${out%%;*}"
}
wait_jobs() { # TIMEOUT: until this cluster has no job left
    local end=$((SECONDS + $1)) out
    while ((SECONDS < end)); do
        out=$(squeue -h -o %i 2>/dev/null) && [[ -z $out ]] && return 0
        sleep 0.25
    done
    return 1
}
task_state() { # JOBID TASK → "STATE EXITCODE"
    scontrol -o show job "$1_$2" 2>/dev/null | tr ' ' '\n' |
        awk -F= '$1=="JobState"{s=$2} $1=="ExitCode"{e=$2} END{print s, e}'
}

J=$(submit 0-3) || fail "sbatch --array=0-3 failed"
log "submitted array job $J (4 shards)"
CHUNKS=$SHARDED/shard-2-of-4/chunks
end=$((SECONDS + 120))
until compgen -G "$CHUNKS/*.safetensors" >/dev/null; do
    ((SECONDS < end)) || fail "shard 2 wrote no chunk in 120 s"
    if out=$(squeue -h -o %i 2>/dev/null) && [[ -z $out ]]; then
        compgen -G "$CHUNKS/*.safetensors" >/dev/null && break
        fail "array job $J ended before shard 2 wrote a chunk: $(cat "$TMP"/log/job-"${J}"_*.out 2>&1)"
    fi
    sleep 0.05
done
log "shard 2 wrote $(ls "$CHUNKS" | wc -l) chunk(s): scancel --full --signal=KILL ${J}_2"
scancel --full --signal=KILL "${J}_2" || log "scancel ${J}_2 failed (finished already?)"
wait_jobs 120 || fail "array job $J still queued after 120 s: $(squeue)"
for k in 0 1 3; do
    st=$(task_state "$J" "$k")
    [[ $st == "COMPLETED 0:0" ]] || fail "task ${J}_$k: '$st', expected COMPLETED 0:0"
    [[ -f $SHARDED/shard-$k-of-4/run.json ]] || fail "shard $k has no run.json"
done
for k in 1 3; do # vitreg exited 3 there (a broken input each) and the task still counts as done
    grep -q "some inputs failed" "$TMP/log/job-${J}_$k.out" ||
        fail "task ${J}_$k: no exit-3 note in its log: $(cat "$TMP/log/job-${J}_$k.out")"
done
log "tasks 0, 1, 3: COMPLETED 0:0 (1 and 3 had a broken input: vitreg exit 3 → task exit 0)"
if [[ -f $SHARDED/shard-2-of-4/run.json ]]; then
    # Only on a machine fast enough to finish the large image before scancel landed.
    log "shard 2 finished before the kill landed: simulating the kill (run.json and last chunk removed)"
    rm -f "$SHARDED/shard-2-of-4/run.json" "$(ls -d "$CHUNKS"/*.safetensors | tail -n1)"
    [[ -n $(ls "$CHUNKS") ]] || fail "shard 2 has no chunk left to resume from"
else
    st=$(task_state "$J" 2)
    [[ $st != COMPLETED* ]] || fail "task ${J}_2 is '$st' though it has no run.json"
    log "task ${J}_2 killed mid-way: $st, $(ls "$CHUNKS" | wc -l) chunk(s) kept"
fi
FIRST_CHUNK=$(ls -d "$CHUNKS"/*.safetensors | head -n1)
FIRST_STAMP=$(stat -c '%i %y %s' "$FIRST_CHUNK")

"$VITREG" merge "$SHARDED" >"$TMP/log/merge1.out" 2>&1
rc=$?
((rc != 0)) || fail "vitreg merge succeeded with shard 2 unfinished"
grep -q "shard 2 of 4" "$TMP/log/merge1.out" || fail "merge did not name shard 2: $(cat "$TMP/log/merge1.out")"
! grep -Eq "shard [013] of 4" "$TMP/log/merge1.out" || fail "merge blamed another shard: $(cat "$TMP/log/merge1.out")"
log "vitreg merge refused (exit $rc): $(grep "shard 2 of 4" "$TMP/log/merge1.out" | sed 's/^ *//')"

# ---- resubmit the one shard ----------------------------------------------------------------
J2=$(submit 2) || fail "sbatch --array=2 failed"
log "resubmitted shard 2 as job $J2 (sbatch --array=2)"
wait_jobs 120 || fail "job $J2 still queued after 120 s: $(squeue)"
st=$(task_state "$J2" 2)
LOG2=$TMP/log/job-${J2}_2.out
[[ $st == "COMPLETED 0:0" ]] || fail "task ${J2}_2: '$st', expected COMPLETED 0:0: $(cat "$LOG2")"
grep -q -- "--shard 2/4 " "$LOG2" || fail "the resubmitted task did not run shard 2/4: $(cat "$LOG2")"
[[ -f $SHARDED/shard-2-of-4/run.json ]] || fail "shard 2 still unfinished"
[[ $(stat -c '%i %y %s' "$FIRST_CHUNK" 2>/dev/null) == "$FIRST_STAMP" ]] ||
    fail "shard 2 was redone from scratch, not resumed ($FIRST_CHUNK changed)"
log "task ${J2}_2 COMPLETED 0:0: resumed shard 2/4 (its first chunk kept)"

"$VITREG" merge "$SHARDED" >"$TMP/log/merge2.out" 2>&1
rc=$?
((rc == 0 || rc == 3)) || fail "vitreg merge exited $rc: $(cat "$TMP/log/merge2.out")"
log "vitreg merge exit $rc"
for f in manifest.jsonl cls.npy pooled.npy registers.npy run.json; do
    cmp "$REF/$f" "$SHARDED/$f" || fail "$f differs from the single-process run"
done
[[ -n $(ls "$REF/patch") ]] || fail "reference wrote no patch/ files"
diff -r "$REF/patch" "$SHARDED/patch" || fail "patch/ differs from the single-process run"
diff -r --exclude=chunks --exclude=job.json --exclude=job.lock --exclude='shard-*-of-*' "$REF" "$SHARDED" ||
    fail "merged output differs from the single-process run"
log "merged output is byte-identical to the single-process run ($(ls "$REF/patch" | wc -l) patch files)"

# ---- the same script running vitreg dense --------------------------------------------------
DENSE_REF=$TMP/data/dense-ref
DENSE=$TMP/data/dense-sharded
DENSE_OPTS=(--resize none --chunk 4 --pca --layers -2,-1)
"$VITREG" dense "$MODEL" "$IMAGES" -o "$DENSE_REF" --threads 1 "${DENSE_OPTS[@]}" >"$TMP/log/dense-reference.out" 2>&1
rc=$?
((rc == 3)) || fail "reference dense exited $rc, expected 3: $(cat "$TMP/log/dense-reference.out")"
out=$(VITREG=$VITREG sbatch --parsable --array=0-2 --cpus-per-task=1 --output="$TMP/log/dense-%A_%a.out" \
    "$SBATCH_SCRIPT" dense "$MODEL" "$IMAGES" "$DENSE" "${DENSE_OPTS[@]}") || fail "sbatch of dense failed"
J3=${out%%;*}
log "submitted dense array job $J3 (3 shards)"
wait_jobs 300 || fail "dense job $J3 still queued after 300 s: $(squeue)"
for k in 0 1 2; do
    st=$(task_state "$J3" "$k")
    [[ $st == "COMPLETED 0:0" ]] || fail "dense task ${J3}_$k: '$st': $(cat "$TMP/log/dense-${J3}_$k.out")"
    grep -q -- " dense .* --shard auto " "$TMP/log/dense-${J3}_$k.out" || fail "task ${J3}_$k did not run dense"
done
"$VITREG" merge "$DENSE" >"$TMP/log/dense-merge.out" 2>&1
rc=$?
((rc == 3)) || fail "vitreg merge of the dense shards exited $rc: $(cat "$TMP/log/dense-merge.out")"
n=$(find "$DENSE_REF" -maxdepth 1 -name '*.pca.png' | wc -l)
((n == 38)) || fail "the dense reference has $n PCA previews, expected 38"
diff -r --exclude=chunks --exclude=job.json --exclude=job.lock --exclude='shard-*-of-*' "$DENSE_REF" "$DENSE" ||
    fail "merged dense output differs from the single-process run"
log "merged dense output is byte-identical to the single-process run (38 arrays and PCA previews)"
exit 0
