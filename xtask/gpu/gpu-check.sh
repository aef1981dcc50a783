#!/bin/bash
# The GPU check, run ON a machine with an NVIDIA GPU from a bundle made by
# `cargo xtask gpu-check bundle` (stripped release binaries, this script, the workloads, libdw and
# libelf for nsys's importer). Writes its log and a results tarball to OUT; `cargo xtask gpu-check
# compare OUT` then checks the reports on a CPU machine. No Rust toolchain is needed here.
#
#   bash gpu-check.sh BUNDLE OUT
#
# What it runs, each workload a fixed number of steps so that runs launch the same kernels:
#   cuda_sample (nvcc) and torch_loop.py (PyTorch):
#     bare (steps/s) | nsys profile -t cuda,nvtx + export + stats | nsight-agent --backend nvtx+cupti
#   torch_loop.py under the local coordinator, two START/STOP collections each:
#     nsight-agent --backend nsys (coordinator mode, `-t cuda,nvtx --sample=none --cpuctxsw=none`)
#     nsight-agent --backend nvtx+cupti
# Every step is bounded by `timeout` and a failure is logged, not fatal: one run tells all.
set -u
B=$(cd "$1" && pwd)
OUT=$2
mkdir -p "$OUT"
W=$(mktemp -d /tmp/gpu-check.XXXX)
R=$W/results
mkdir -p "$R"
exec > >(tee "$OUT/gpu-check.log") 2>&1
START=$(date +%s)
stamp() { echo "== [$(($(date +%s) - START)) s] $*"; }

PY=python3
NSYS=$(ls /opt/nvidia/nsight-systems/*/bin/nsys /opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys 2>/dev/null | head -1)
CUPTI=$(ls /usr/local/cuda*/targets/*/lib/libcupti.so /usr/local/cuda*/extras/CUPTI/lib64/libcupti.so 2>/dev/null | head -1)
export NSYS_LIBS=$B/libs
stamp "machine"
nvidia-smi -L
nvcc --version | tail -2
$PY -c 'import torch; print("torch", torch.__version__, torch.cuda.get_device_name(0))'
echo "nsys: ${NSYS:-none}  cupti: ${CUPTI:-none}"
[ -n "$NSYS" ] && LD_LIBRARY_PATH=$NSYS_LIBS:${LD_LIBRARY_PATH:-} "$NSYS" --version

stamp "build cuda_sample"
nvcc -O2 -o "$W/cuda_sample" "$B/cuda_sample.cu" && echo built

# nsys with its importer's libraries on the path.
nsys() { LD_LIBRARY_PATH=$NSYS_LIBS:${LD_LIBRARY_PATH:-} timeout 240 "$NSYS" "$@"; }

profile_three() { # name, argv...
  local name=$1; shift
  stamp "$name: bare"
  timeout 120 "$@" 2>&1 | tail -3
  stamp "$name: nsys profile"
  nsys profile -t cuda,nvtx --sample=none --cpuctxsw=none --force-overwrite=true \
    -o "$R/$name-nsys" -- "$@" 2>&1 | grep -v "^Collecting\|^Generating" | tail -5
  nsys export --type sqlite --force-overwrite=true -o "$R/$name-nsys.sqlite" "$R/$name-nsys.nsys-rep" >/dev/null 2>&1 \
    && echo "exported $(du -h "$R/$name-nsys.sqlite" | cut -f1)"
  nsys stats -r cuda_gpu_kern_sum,cuda_api_sum,cuda_gpu_mem_time_sum -f csv \
    -o "$R/$name-nsys" "$R/$name-nsys.sqlite" >/dev/null 2>&1 && ls "$R" | grep "^$name-nsys_" | tr '\n' ' '; echo
  stamp "$name: nsight-agent --backend nvtx+cupti (launch mode)"
  timeout 180 "$B/nsight-agent" run --mode launch --backend nvtx+cupti --cupti-lib "$CUPTI" \
    --storage-dir "$R/$name-agent" --work-dir "$W/$name-agent-work" -- "$@" >"$R/$name-agent.log" 2>&1
  echo "agent exit code: $?"
  grep -E "steps/s|target exited|WARN|ERROR|nsight-cupti|stored" "$R/$name-agent.log" | cut -c1-400 | tail -8
  local rep
  rep=$(find "$R/$name-agent" -name '*.sqlite' | head -1)
  if [ -n "$rep" ]; then
    cp "$rep" "$R/$name-cupti.sqlite"
    echo "agent report: $(du -h "$rep" | cut -f1)"
    "$PY" "$B/report_summary.py" "$R/$name-cupti.sqlite"
    # NVIDIA's own stats on the agent's report: the schema is the export's.
    nsys stats -r cuda_gpu_kern_sum -f csv -o "$R/$name-cupti-by-nsys" \
      "$R/$name-cupti.sqlite" 2>&1 | tail -3
  else
    echo "no agent report"
  fi
}

pack() { # the small results so far (again at the end): a timeout still returns them
  ( cd "$R" && tar czf "$OUT/results.tar.gz" --exclude='*.nsys-rep' --exclude='*.qdstrm' \
      --exclude='*-store' --exclude='*-agent' --exclude='coord-*.sqlite' . )
  ls -la "$OUT/results.tar.gz"
}

profile_three cuda_sample "$W/cuda_sample" 60 5000
pack
profile_three torch "$PY" "$B/torch_loop.py" 200
pack

coordinated() { # name, backend, extra agent args...
  local name=$1 backend=$2; shift 2
  stamp "$name: coordinator mode, backend $backend"
  local state=$W/$name-state http=127.0.0.1:18080 grpc=127.0.0.1:18081
  "$B/nsight-coordinator" --http $http --grpc $grpc --state-dir "$state" --tls-dir "$state.tls" \
    --generate-local-certs >"$R/$name-coordinator.log" 2>&1 &
  local coord=$!
  for _ in $(seq 100); do "$PY" - <<<"import urllib.request; urllib.request.urlopen('http://$http/v1/status')" 2>/dev/null && break; sleep 0.1; done
  LD_LIBRARY_PATH=$NSYS_LIBS:${LD_LIBRARY_PATH:-} NSIGHT_AGENT_LOG=info timeout 130 "$B/nsight-agent" run \
    --mode coordinator --backend "$backend" "$@" --coordinator "https://$grpc" --tls-dir "$state.tls" \
    --storage-dir "$R/$name-store" --work-dir "$W/$name-work" --pod gpu-0 \
    -- "$PY" "$B/torch_loop.py" 0 60 >"$R/$name-agent.log" 2>&1 &
  local agent=$!
  timeout 100 "$PY" "$B/coordinate.py" "http://$http" 2 2 8
  kill -TERM $agent 2>/dev/null; wait $agent; echo "agent exit: $?"
  grep -E "WARN|ERROR|torch_loop" "$R/$name-agent.log" | tail -8
  kill $coord 2>/dev/null; wait $coord 2>/dev/null
  find "$R/$name-store" -type f | sed "s|$R/||" | sort
  local i=0
  for rep in $(find "$R/$name-store" -name '*.sqlite' | sort); do
    i=$((i + 1)); cp "$rep" "$R/$name-$i.sqlite"
    "$PY" "$B/report_summary.py" "$R/$name-$i.sqlite"
    nsys stats -r cuda_gpu_kern_sum -f csv -o "$R/$name-$i" "$R/$name-$i.sqlite" >/dev/null 2>&1
  done
}

overhead() { # name, argv...: steps/s bare (twice), with nvtx+cupti, with nsys; reports dropped
  local name=$1; shift
  stamp "$name: overhead"
  for run in bare bare cupti nsys; do
    case $run in
      bare) timeout 120 "$@" 2>&1 | grep "steps/s" ;;
      cupti) timeout 120 "$B/nsight-agent" run --mode launch --backend nvtx+cupti --cupti-lib "$CUPTI" \
               --storage-dir "$W/ovh-$name" --work-dir "$W/ovh-$name-work" -- "$@" 2>&1 | grep "steps/s" ;;
      nsys) nsys profile -t cuda,nvtx --sample=none --cpuctxsw=none --force-overwrite=true \
              -o "$W/ovh-$name" -- "$@" 2>&1 | grep "steps/s" ;;
    esac | sed "s/^/  $run: /"
  done
}
overhead cuda_sample "$W/cuda_sample" 60 50000
overhead torch "$PY" "$B/torch_loop.py" 5000
pack

[ -n "$NSYS" ] && coordinated coord-nsys nsys --nsys "$NSYS" --tool-args "-t cuda,nvtx --sample=none --cpuctxsw=none"
coordinated coord-cupti nvtx+cupti --cupti-lib "$CUPTI"

stamp "pack"
ls -la "$R"
pack
ls -la "$OUT"
stamp "done"
