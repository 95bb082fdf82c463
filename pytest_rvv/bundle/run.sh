#!/bin/sh
# pytest-rvv bundle: runs every cell natively on this RISC-V machine. Needs only a POSIX shell and coreutils.
#   sh run.sh [RESULTS_DIR]     (default: results/ beside this script)
#   RVV_REPEAT=N                runs per cell (default: the bundle's), interleaved: each round runs every cell once
#   RVV_LAUNCHER='qemu-riscv64 -cpu ...'   a stand-in for a board (prefixes the probe and every run; empty on one)
# Judge the results where pytest-rvv is installed, with the selection that wrote the bundle:
#   pytest suites/correctness/test_agreement.py suites/performance/test_performance.py --rvv-bundle-results=RESULTS_DIR
set -u
unset CDPATH
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/results}
repeat=${RVV_REPEAT:-@REPEAT@}
launch=${RVV_LAUNCHER:-}
mkdir -p "$out" || { echo "run.sh: cannot create $out" >&2; exit 2; }
out=$(cd "$out" && pwd)
rm -f "$out/complete"
rm -rf "$out/cells"  # a results folder holds one run of one bundle
cp "$here/bundle.json" "$out/bundle.json"

# the machine: V, VLEN (the vlenb CSR), /proc/cpuinfo's isa, uarch, marchid, model name, harts; the kernel
if ! $launch "$here/bin/facts" > "$out/facts.txt" 2> "$out/facts.err"; then
    echo "run.sh: the facts probe did not run: $(tail -n 1 "$out/facts.err") (is this riscv64 Linux?)" >&2
    exit 2
fi
echo "kernel=$(uname -r)" >> "$out/facts.txt"
isa=$(sed -n 's/^isa=//p' "$out/facts.txt" | tr 'A-Z' 'a-z')
vlen=$(sed -n 's/^vlen=//p' "$out/facts.txt")
base=${isa%%_*}
base=${base#rv64}
rest="_${isa#*_}_"
has() {  # an extension in the isa line: a letter of its base (rv64imafdcv) or a _-separated name (zvfh)
    case "$1" in
        ?) case "$base" in *"$1"*) return 0 ;; esac ;;
        *) case "$rest" in *"_$1_"*) return 0 ;; esac ;;
    esac
    return 1
}
case "$(date +%s%N)" in *N) echo "run.sh: date +%s%N gives no nanoseconds here (not GNU coreutils); no times" >&2; exit 2 ;; esac
gnutime=""
if [ -x /usr/bin/time ] && /usr/bin/time -f %M -o /dev/null true 2>/dev/null; then gnutime=1; fi

runnable=""
while read -r cell min_vlen needs || [ -n "${cell:-}" ]; do
    [ -n "$cell" ] || continue
    mkdir -p "$out/cells/$cell"
    missing=""
    for e in $needs; do has "$e" || missing="$missing $e"; done
    why=""
    if [ -n "$missing" ]; then
        why="needs${missing}, which this machine's isa ($isa) does not list"
    elif [ "$min_vlen" -gt "${vlen:-0}" ]; then
        why="compiled for VLEN >= $min_vlen, this machine has VLEN ${vlen:-0}: it would run with silently wrong results"
    fi
    if [ -n "$why" ]; then
        echo "$why" > "$out/cells/$cell/refused.txt"
        echo "run.sh: $cell refused: $why" >&2
    else
        runnable="$runnable $cell"
    fi
done < "$here/cells.txt"

round=1
while [ "$round" -le "$repeat" ]; do
    for cell in $runnable; do
        dir="$out/cells/$cell/run_$round"
        mkdir -p "$dir"
        set --
        while read -r arg || [ -n "$arg" ]; do  # @CELL@: this cell's folder here
            case "$arg" in *@CELL@*) arg="${arg%%@CELL@*}$here/cells/$cell${arg#*@CELL@}" ;; esac
            set -- "$@" "$arg"
        done < "$here/cells/$cell/args"
        printf '%s\n' "$@" > "$dir/args"
        start=$(date +%s%N)
        if [ -n "$gnutime" ]; then  # $launch unquoted: empty on a board, a command and its options under QEMU
            (cd "$dir" && /usr/bin/time -f '%e %U %S %M' -o time.txt $launch "$here/bin/iree-run-module" "$@" \
                > run.out 2> run.err)
        else
            (cd "$dir" && $launch "$here/bin/iree-run-module" "$@" > run.out 2> run.err)
        fi
        rc=$?
        end=$(date +%s%N)
        echo "$rc" > "$dir/rc.txt"
        echo $(( (end - start) / 1000 )) > "$dir/wall_us.txt"
        [ "$rc" -eq 0 ] || echo "run.sh: $cell round $round exited $rc: $(tail -n 1 "$dir/run.err")" >&2
    done
    round=$((round + 1))
done
set -- $runnable
echo "rounds=$repeat cells=$# $(date -u +%Y-%m-%dT%H:%M:%SZ)" > "$out/complete"
echo "run.sh: $# cells x $repeat rounds in $out"
