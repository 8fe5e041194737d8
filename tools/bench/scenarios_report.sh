# scenarios_report.sh: the markdown report and the figures of scenarios.sh (sourced by it; reads
# its WORK files s<N>.lb.json, s<N>.direct.json, s<N>.clairfs.json, .dev, .plan, .stats, .rss,
# .oom, s3.skip; the figures also the per-rank s<N>.clairfs.r<R>.json).
# shellcheck shell=bash

# One scenario's numbers as one JSON object, for the tables below.
scenario_json() {
  local s=$1 d=${DATA_OF[$1]}
  jq -n --argjson s "$s" --argjson bytes "${BYTES_OF[$d]}" --argjson files "${FILES_OF[$d]}" \
    --slurpfile lb "$WORK/s$s.lb.json" --slurpfile di "$WORK/s$s.direct.json" \
    --slurpfile cl "$WORK/s$s.clairfs.json" --slurpfile plan "$WORK/s$s.clairfs.plan" \
    --slurpfile st "$WORK/s$s.clairfs.stats" --argjson ddev "$(cat "$WORK/s$s.direct.dev")" \
    --argjson cdev "$(cat "$WORK/s$s.clairfs.dev")" --argjson rss "$(cat "$WORK/s$s.clairfs.rss")" \
    --argjson oom "$(cat "$WORK/s$s.clairfs.oom")" '
    {s: $s, bytes: $bytes, files: $files, lb: $lb[0].epochs[0].seconds, ranks: $cl[0].ranks,
     direct: $di[0], clairfs: $cl[0], plan: $plan[0], stats: $st[0], ddev: $ddev, cdev: $cdev,
     rss: $rss, oom: $oom}'
}

report() {
  local s all=()
  for s in 1 2 3 4; do
    want "$s" || continue
    [[ -f $WORK/s$s.clairfs.json ]] && all+=("$(scenario_json "$s")")
  done
  echo "Command: \`$COMMAND\` ($DATE_START; took $((SECONDS / 60)) min $((SECONDS % 60)) s)."
  echo
  echo "Machine: nproc $(nproc), $(awk '/MemTotal/ {printf "%.0f GiB RAM", $2 / 1048576}' /proc/meminfo)," \
    "kernel $(uname -r); load average $LOAD_START before the run, $LOAD_END after it; $BIN_INFO."
  echo
  echo "Emulated PFS: ext4 image on $PFS_LOOP (direct I/O on) under $TMPBASE, reads throttled by a" \
    "cgroup-v1 blkio group to $(awk -v b="$BPS" 'BEGIN {printf "%.1f", b / 1e6}') MB/s and $IOPS IOPS" \
    "(0: none); page cache capped by a memory group at the processes' memory plus $PAGECACHE MiB" \
    "(direct: $BENCH_MIB MiB per reader; clairfs: plus RAM tier + staging + $OVERHEAD MiB per" \
    "daemon); image remounted (cold cache) before every run. What the group read under each limit" \
    "(4 threads, cold cache, 4 s each):"
  echo
  echo "| read_bps limit | read_iops limit | seconds | group MB/s | group IOPS (bios/s) | KB per bio |"
  echo "|---|---|---|---|---|---|"
  echo "$CHECK_TABLE"
  echo
  echo "clairfs: RAM tier $RAM MiB, SSD tier $SSD MiB (RocksDB on the VM's disk, not throttled)," \
    "staging $STAGING MiB, other keys default; manifest registered right before the first read." \
    "Replay (every run): clairfs-bench ${REPLAY[*]}, $EPOCHS epochs, sleep-based compute;" \
    "lower bound: the same consumer without reads (--compute-only), one epoch." \
    "Datasets: tools/make_dataset.py --mean-kb $MEAN_KB --sigma 0.5 --seed 1 --classes 100;" \
    "manifests: tools/make_manifest.py --epochs $EPOCHS --seed 1."
  echo
  echo "| scenario | epoch | lower bound s | direct s | direct stall s | direct / LB | direct dev / data | clairfs s | clairfs stall s | clairfs / LB | clairfs dev / data | stall direct / clairfs |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
  for s in "${all[@]}"; do
    jq -r 'def f(x; n): if x == null then "-" else (x * pow(10; n) | round) / pow(10; n) | tostring end;
      . as $r | range(0; .clairfs.epochs | length) as $e | $r.direct.epochs[$e] as $d | $r.clairfs.epochs[$e] as $c |
      "| \($r.s) | \($e + 1) | \(f($r.lb; 2)) | \(f($d.seconds; 2)) | \(f($d.stall_s; 2)) | \(f($d.seconds / $r.lb; 2)) | \(f($d.device_read_bytes / $r.bytes; 2)) | \(f($c.seconds; 2)) | \(f($c.stall_s; 3)) | \(f($c.seconds / $r.lb; 2)) | \(f($c.device_read_bytes / $r.bytes; 2)) | \(if $c.stall_s > 0 then f($d.stall_s / $c.stall_s; 0) + "x" else "inf" end) |"' <<<"$s"
  done
  [[ -f $WORK/s3.skip ]] && echo "| 3 | - | scenario 3 $(cat "$WORK/s3.skip") |||||||||"
  echo
  echo "| scenario | dataset | ranks | direct dev bytes / data, $EPOCHS epochs | clairfs dev bytes / data, registration + $EPOCHS epochs | clairfs backing_bytes / data | planned backing / data (one node: its plan; ranks: the cluster's prediction) | clairfs opens served from | daemon peak RSS (sum over ranks) | errors |"
  echo "|---|---|---|---|---|---|---|---|---|---|"
  for s in "${all[@]}"; do
    jq -r --argjson ram "$RAM" --argjson ssd "$SSD" 'def f(x): (x * 100 | round) / 100 | tostring;
      "| \(.s) | \(.files) files, \(.bytes / 1e6 | round) MB (\(f(.bytes / ($ram * 1048576))) x RAM, \(f(.bytes / (($ram + $ssd) * 1048576))) x RAM+SSD) | \(.ranks) | \(f(.ddev / .bytes)) | \(f(.cdev / .bytes)) | \(f(.stats.backing_bytes / .bytes)) | \(f(.plan.predicted_backing_bytes / .bytes)) | \(.stats.served | to_entries | map("\(.key) \(.value)") | join(", ")) | \(.rss) MiB | \(if (.stats.errors | length) == 0 and .oom == 0 and (.clairfs.first_error == null) then "none" else "\(.stats.errors) oom \(.oom) \(.clairfs.first_error // "")" end) |"' <<<"$s"
  done
  echo
  echo "Targets, epochs 2-$EPOCHS (measured against, not asserted): clairfs epoch time <= 1.10 x lower bound (scenarios 1-3), stall at least 10x below direct reads, backing traffic over all epochs close to one dataset read where the tiers hold the dataset (1, 2; 3 across ranks)."
  echo
  echo "| scenario | max clairfs / LB | <= 1.10 | min stall direct / clairfs | >= 10x | clairfs dev bytes / data |"
  echo "|---|---|---|---|---|---|"
  for s in "${all[@]}"; do
    jq -r 'def f(x; n): (x * pow(10; n) | round) / pow(10; n) | tostring;
      . as $r | [range(1; .clairfs.epochs | length)] as $es |
      ([$es[] | $r.clairfs.epochs[.].seconds / $r.lb] | max) as $ratio |
      ([$es[] | if $r.clairfs.epochs[.].stall_s > 0 then $r.direct.epochs[.].stall_s / $r.clairfs.epochs[.].stall_s else 1e9 end] | min) as $st |
      if ($es | length) == 0 then "| \(.s) | (one epoch) ||||" else
      "| \(.s) | \(f($ratio; 2)) | \(if $ratio <= 1.10 then "met" else "missed" end) | \(if $st >= 1e9 then "inf (no stall)" else f($st; 0) + "x" end) | \(if $st >= 10 then "met" else "missed" end) | \(f(.cdev / .bytes; 2)) |" end' <<<"$s"
  done
}

# splice_docs FILE REPORT: puts REPORT between the scenario markers of FILE (or appends both).
splice_docs() {
  local file=$1 rep=$2 begin="<!-- scenarios:begin -->" end="<!-- scenarios:end -->"
  if grep -qF "$begin" "$file" && grep -qF "$end" "$file"; then
    awk -v b="$begin" -v e="$end" -v r="$rep" '
      $0 == b { print; while ((getline line < r) > 0) print line; skip = 1; next }
      $0 == e { skip = 0 } !skip' "$file" >"$file.tmp" && mv "$file.tmp" "$file"
  else
    { echo; echo "$begin"; cat "$rep"; echo "$end"; } >>"$file"
  fi
}

# plot_figures PREFIX: PREFIX-epochs.svg and PREFIX-tiers.svg (.png too or instead: PLOT_FORMAT)
# from WORK's result files (tools/bench/plot_scenarios.py). Never fails the run: the report is
# already written, so a missing matplotlib or a plotting error is logged and the run goes on.
plot_figures() {
  local prefix=$1 out
  if ! "$PYTHON" -c 'import matplotlib' 2>/dev/null; then
    log "figures: skipped, $PYTHON cannot import matplotlib (Debian: apt install python3-matplotlib)"
    return 0
  fi
  if out=$("$PYTHON" "$REPO/tools/bench/plot_scenarios.py" "$WORK" "$prefix" \
    --format "$PLOT_FORMAT" --title "$COMMAND ($DATE_START)" 2>&1); then
    log "figures written: $(tr '\n' ' ' <<<"$out")"
  else
    log "figures: plot_scenarios.py failed: $out"
  fi
}
