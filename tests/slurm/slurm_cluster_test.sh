#!/usr/bin/env bash
# A Slurm cluster on this machine, from Debian's packages, and the batch script
# experiments/slurm/testbed.sbatch submitted to it with `sbatch --wait`:
#   - munged with a key made here, slurmctld in a hub network namespace, and
#     two slurmd nodes (n1, n2), each in its own namespace with its own address
#     on the hub's bridge, all from a slurm.conf generated here;
#   - job 1: 4 tasks on 2 nodes, ps and two all-reduces; every row exact, and
#     each task's log says it was the rank its number says;
#   - job 2: a training run (ring, 4 ranks, 20 steps) through the same script;
#   - job 3: the task of rank 3 (on n2, found through `scontrol listpids`) is
#     killed mid-sweep; the job fails and its output names rank 3.
# Everything it started is ended by PID and everything it made is removed,
# also when it fails; at the end it checks that no daemon, namespace or munge
# key is left. Needs root and Slurm (.ci/install-deps installs slurm-wlm and
# munge); skips (77) without them.
# usage: slurm_cluster_test.sh BUILD_DIR
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:?usage: slurm_cluster_test.sh BUILD_DIR}" && pwd)
skip() { echo "slurm_cluster_test: skipped: $*"; exit 77; }
((EUID == 0)) || skip "not root (network namespaces and Slurm's daemons)"
for tool in munged slurmctld slurmd sbatch scontrol ip; do
  command -v "$tool" >/dev/null || skip "no $tool (.ci/install-deps installs slurm-wlm and munge)"
done
ip netns add "tbslurm-probe-$$" 2>/dev/null || skip "cannot create network namespaces here"
ip netns del "tbslurm-probe-$$"

work=$(mktemp -d /tmp/tb-slurm.XXXXXX)
ns=tbs$$
hub=$ns-hub
nodes=(n1 n2)
pids=()
log() { echo "slurm_cluster_test: $*"; }
fail() {
  log "FAILED: $*"
  for f in "$work"/*.log "$work"/submit/*.out; do
    [[ -f $f ]] && { echo "---- $f"; tail -n 30 "$f"; }
  done
  exit 1
}
cleanup() {
  local rc=$?
  # Whatever still runs in the nodes' namespaces (a job's slurmstepd and tasks after a
  # failure) was started by this test's slurmd: it ends with them.
  for n in hub "${nodes[@]}"; do
    for pid in $(ip netns pids "$ns-$n" 2>/dev/null); do pids+=("$pid"); done
  done
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  done
  for n in "${nodes[@]}" hub; do ip netns del "$ns-$n" 2>/dev/null || true; done
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
# nsenter, not `ip netns exec`: that one mounts a sysfs of the namespace's own, without
# /sys/fs/cgroup, where slurmd 22.05 looks for cgroups even with no cgroup plugin configured.
in_ns() { local n=$1; shift; nsenter --net="/run/netns/$ns-$n" "$@"; }

# ---- the network: a bridge in the hub, one veth per node --------------------------------------
ip netns add "$hub"
ip -n "$hub" link add br0 type bridge
ip -n "$hub" addr add 10.77.0.1/24 dev br0
ip -n "$hub" link set br0 up
ip -n "$hub" link set lo up
for i in "${!nodes[@]}"; do
  n=${nodes[$i]}
  ip netns add "$ns-$n"
  ip -n "$hub" link add "v$n" type veth peer name eth0 netns "$ns-$n"
  ip -n "$hub" link set "v$n" master br0 up
  ip -n "$ns-$n" addr add "10.77.0.$((11 + i))/24" dev eth0
  ip -n "$ns-$n" link set eth0 up
  ip -n "$ns-$n" link set lo up
done

# ---- munge: a key of this test's own ------------------------------------------------------------
mkdir -m 700 "$work/munge" "$work/state" "$work/spool" "$work/submit"
dd if=/dev/urandom of="$work/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$work/munge/munge.key"
socket=$work/munge/munge.socket
munged --foreground --force --key-file "$work/munge/munge.key" --socket "$socket" \
  --pid-file "$work/munge/munged.pid" --seed-file "$work/munge/munged.seed" \
  --log-file "$work/munged.log" 2>"$work/munged.out" &
pids+=($!)

# ---- slurm.conf ---------------------------------------------------------------------------------
conf=$work/slurm.conf
cat >"$conf" <<EOF
ClusterName=testbed
SlurmctldHost=$(hostname -s)(10.77.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$socket
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool/%n
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd-%n.pid
SlurmctldLogFile=$work/slurmctld.log
SlurmdLogFile=$work/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
ReturnToService=2
MpiDefault=none
MailProg=/bin/true
NodeName=n1 NodeAddr=10.77.0.11 CPUs=2 State=UNKNOWN
NodeName=n2 NodeAddr=10.77.0.12 CPUs=2 State=UNKNOWN
PartitionName=test Nodes=n1,n2 Default=YES MaxTime=30 State=UP
EOF
export SLURM_CONF=$conf
for _ in $(seq 50); do [[ -S $socket ]] && break; sleep 0.1; done
[[ -S $socket ]] || fail "munged did not start"
# Started by nsenter itself, not through in_ns: $! is then the daemon's own PID, not a subshell's.
nsenter --net="/run/netns/$hub" slurmctld -D -c -f "$conf" >"$work/slurmctld.out" 2>&1 &
pids+=($!)
for n in "${nodes[@]}"; do
  mkdir -p "$work/spool/$n"
  nsenter --net="/run/netns/$ns-$n" slurmd -D -N "$n" -f "$conf" >"$work/slurmd-$n.out" 2>&1 &
  pids+=($!)
done
up=""
for _ in $(seq 300); do
  up=$(in_ns hub sinfo -h -N -o '%N %T' 2>/dev/null | sort | tr '\n' ' ') || true
  [[ $up == "n1 idle n2 idle " ]] && break
  sleep 0.2
done
[[ $up == "n1 idle n2 idle " ]] || fail "the nodes did not come up: '$up'"
log "a Slurm cluster: slurmctld at 10.77.0.1, slurmd n1 at 10.77.0.11 and n2 at 10.77.0.12"

# The daemons and the harness from this build; UCX over TCP on each node's own link.
export PATH=$build/experiments:$build/server:$build/worker:$PATH
export UCX_TLS=tcp UCX_NET_DEVICES=eth0
submit() { in_ns hub sbatch --wait --parsable -N 2 -n 4 --chdir "$work/submit" "$@"; }

# ---- job 1: rows come back exact ----------------------------------------------------------------
algorithms=ps,ring,butterfly sizes=4KiB,1MiB
job=$(submit "$root/experiments/slurm/testbed.sbatch" run --algorithms "$algorithms" \
  --sizes "$sizes" --iters 3 --format json) || fail "job 1 failed (status $?)"
log "job $job: done"
out=$work/submit/testbed-$job.out
python3 "$root/.ci/docker-check-rows" --ranks-share-nodes "$out" "$algorithms" "$sizes" 4 \
  "$work/submit/testbed-$job.jsonl" || fail "job $job's rows"
# Each worker counts its own node's link (eth0 in its namespace): every row's wire bytes are real.
python3 - "$out" <<'EOF' || fail "job $job's rows lack wire bytes"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
empty = [(r["algorithm"], r["bytes"]) for r in rows
         if min(r["wire_bytes_sent"]) == 0 or min(r["wire_bytes_received"]) == 0]
sys.exit(f"rows with a rank that counted no wire bytes: {empty}" if empty else 0)
EOF
for rank in 0 1 2 3; do
  grep -q "rank $rank of 4" "$work/submit/testbed-$job-logs/worker-$rank.log" ||
    fail "worker-$rank.log is not rank $rank's"
done
grep -q "coordinator 10.77.0.11:$((20000 + job % 20000)) on n1" "$out" ||
  fail "the coordinator is not on the first node at the job's port"
log "job $job: every row exact, task i's log is rank i's"

# ---- job 2: a training run through the same script -----------------------------------------------
job=$(submit "$root/experiments/slurm/testbed.sbatch" train --sync ring --steps 20) ||
  fail "job 2 (training) failed (status $?)"
python3 - "$work/submit/testbed-$job.jsonl" <<'EOF' || fail "job $job's training row"
import json, sys
runs = [r for r in map(json.loads, open(sys.argv[1])) if r.get("kind") == "RUN"]
assert len(runs) == 1, f"{len(runs)} RUN rows"
r = runs[0]
assert (r["sync"], r["workers"], r["step"]) == ("ring", 4, "20"), r
assert r["test_accuracy"] > 0.3, f"test accuracy {r['test_accuracy']} after 20 steps"
print(f"job: ring training on 4 ranks, test accuracy {r['test_accuracy']:.2%} after 20 steps")
EOF
log "job $job: trained"

# ---- job 3: a task killed mid-sweep fails the job, and the lost rank is named --------------------
submit "$root/experiments/slurm/testbed.sbatch" run --algorithms ring --sizes 64KiB \
  --iters 1000000 --timeout 20 >"$work/job3.id" 2>&1 &
sbatch_pid=$!
pids+=("$sbatch_pid")
victim=""
for _ in $(seq 600); do
  job=$(head -n 1 "$work/job3.id" 2>/dev/null || true)
  if [[ -n $job ]] && grep -qs "started" "$work/submit/testbed-$job-logs/worker-3.log"; then
    # scontrol listpids: PID JOBID STEPID LOCALID GLOBALID; the task of rank 3 is GLOBALID 3.
    victim=$(in_ns n2 scontrol listpids "$job" n2 | awk '$5 == 3 { print $1 }') || true
    [[ -n $victim ]] && break
  fi
  sleep 0.1
done
[[ -n $victim ]] || fail "job 3's rank 3 never started"
log "job $job: killing rank 3 (pid $victim on n2)"
kill -KILL "$victim"
rc=0
wait "$sbatch_pid" || rc=$?
((rc != 0)) || fail "job $job succeeded although rank 3 was killed"
grep -q "lost rank 3" "$work/submit/testbed-$job.out" || fail "job $job's output does not name rank 3"
log "job $job: failed (sbatch --wait status $rc), its output naming the lost rank:"
grep "lost rank 3" "$work/submit/testbed-$job.out" | head -n 1

# ---- nothing left behind ------------------------------------------------------------------------
cluster=("${pids[@]}")
trap - EXIT
cleanup_status=0
(cleanup) || cleanup_status=$?
for pid in "${cluster[@]}"; do
  kill -0 "$pid" 2>/dev/null && { log "FAILED: pid $pid still runs"; exit 1; }
done
# Every daemon's command line names a file under $work.
if left=$(pgrep -a -f "$work"); then log "FAILED: still running: $left"; exit 1; fi
if ip netns list | grep -q "^$ns-"; then log "FAILED: namespaces left"; exit 1; fi
[[ ! -e $work ]] || { log "FAILED: $work (the munge key) left"; exit 1; }
((cleanup_status == 0)) || exit "$cleanup_status"
log "passed; no daemon, namespace or key left"
