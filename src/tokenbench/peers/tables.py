"""The options of each tool's benchmark command, as their parsers declare them (vLLM 0.32 `vllm bench serve`,
with the older benchmark_serving.py's sonnet options,
SGLang 0.5.23 `sglang.bench_serving`, AIPerf 0.13 `aiperf profile`, GuideLLM 0.3-0.6.1 `guidellm benchmark`
and 0.8.1 `guidellm run`): spellings (aliases joined by |) grouped by how many values each takes. With
them a line is read as its tool reads it, and an option its tool does not have is refused as the tool
refuses it."""

from __future__ import annotations

from tokenbench.peers.argv import FLAG, MANY, ONE, Table

VLLM_FLAG = """
--trust-remote-code --no-stream --no-oversample --skip-chat-template --enable-multimodal-chat
--disable-shuffle --use-beam-search --disable-tqdm --profile --save-result --save-detailed --append-result
--ignore-eos --self-timed|--no-self-timed --skip-tokenizer-init --insecure --plot-timeline
--plot-dataset-stats --custom-ensure-client-side-data --no-reranker
"""
VLLM_ONE = """
--seed --num-prompts --dataset-name --dataset-path --label --backend --base-url --host --port --endpoint
--max-concurrency --model --input-len --output-len --tokenizer --tokenizer-mode --logprobs --request-rate
--burstiness --probe-request-rate --num-warmups --result-dir --result-filename --percentile-metrics
--metric-percentiles --request-id-prefix --served-model-name --lora-assignment --ramp-up-strategy
--ramp-up-start-rps --ramp-up-end-rps --ready-check-timeout-sec --chat-template-kwargs --extra-body
--timeline-itl-thresholds --custom-output-len --spec-bench-output-len --spec-bench-category
--sharegpt-output-len --timed-trace-chunk-hash-size --timed-trace-sec-multiplier --timed-trace-label-timestamp
--timed-trace-label-input-length --timed-trace-label-output-length --timed-trace-label-hash-ids
--blazedit-min-distance --blazedit-max-distance --asr-max-audio-len-sec --asr-min-audio-len-sec
--random-input-len --random-output-len --random-range-ratio --random-prefix-len --random-batch-size
--random-mm-base-items-per-request --random-mm-num-mm-items-range-ratio --random-mm-limit-mm-per-prompt
--random-mm-bucket-config --hf-subset --hf-split --hf-name --hf-output-len --bfcl-categories
--prefix-repetition-prefix-len --prefix-repetition-suffix-len --prefix-repetition-num-prefixes
--prefix-repetition-output-len --speed-bench-dataset-subset --speed-bench-output-len --speed-bench-category
--top-p --top-k --min-p --temperature --frequency-penalty --presence-penalty --repetition-penalty
--sonnet-input-len --sonnet-output-len --sonnet-prefix-len
"""
VLLM_MANY = """
--header --metadata --goodput --lora-modules
"""
SGLANG_FLAG = """
--random-image-count --use-trace-timestamps --output-details --print-requests --disable-tqdm --disable-stream
--return-logprob --return-routed-experts --cache-report --disable-ignore-eos --apply-chat-template --profile
--plot-throughput --profile-by-stage --pd-separated --flush-cache --tokenize-prompt --fake-prefill
--rust-client --gsp-fast-prepare --gsp-send-routing-key --gsp-ordered
"""
SGLANG_ONE = """
--backend --base-url --host --port --ready-check-timeout-sec --dataset-name --dataset-path --dataset-offset
--agentic-max-turns --speed-bench-category --speed-bench-output-len --model --served-model-name --tokenizer
--num-prompts --sharegpt-output-len --sharegpt-context-len --random-input-len --random-output-len
--random-range-ratio --image-count --image-resolution --image-format --image-content --request-rate
--max-concurrency --output-file --top-logprobs-num --logprob-start-len --seed --temperature --top-p
--extra-request-body --profile-start-step --profile-steps --profile-num-steps --profile-output-dir
--profile-prefix --lora-request-distribution --lora-zipf-alpha --prompt-suffix --flush-cache-timeout
--warmup-requests --gsp-range-ratio --tag --rust-worker-threads --gsp-num-groups --gsp-prompts-per-group
--gsp-system-prompt-len --gsp-question-len --gsp-output-len --gsp-num-turns --gsp-group-distribution
--gsp-zipf-alpha --mooncake-slowdown-factor --mooncake-num-rounds --mooncake-workload
"""
SGLANG_MANY = """
--goodput --token-ids-logprob --profile-activities --profile-stages --lora-name --profile-prefill-url
--profile-decode-url --header
"""
AIPERF_FLAG = """
--auto-plot|--no-auto-plot --streaming --reset-kv-cache --server-profiler --use-legacy-max-tokens --use-server-token-count
--per-chunk-usage --download-video-content --uuid-and-strip --ignore-trace-delays --use-think-time-only
--allow-dataset-wrap|--no-allow-dataset-wrap --fixed-schedule --no-fixed-schedule --fixed-schedule-auto-offset
--plot-required --export-outputs-json --export-http-trace --show-trace-timing --tokenizer-trust-remote-code
--apply-chat-template --burst-phase-starts --unsafe-override --open-loop-replay|--no-open-loop-replay
--open-loop-strict --omit-kv-hints --force-min-tokens|--no-force-min-tokens --verbose|-v --extra-verbose|-vv
--no-server-metrics --network-latency-automatic --no-gpu-telemetry --zmq-dual-bind --accuracy-verbose
--profile-run-disable-warmup-after-first|--no-profile-run-disable-warmup-after-first
--set-consistent-seed|--no-set-consistent-seed --vary-seed-per-trial|--no-vary-seed-per-trial
--parameter-sweep-same-seed|--no-parameter-sweep-same-seed --no-sweep-table
"""
AIPERF_ONE = """
--model-names|--model|-m --model-selection-strategy --custom-endpoint|--endpoint --endpoint-type --url|-u
--url-strategy --request-timeout-seconds --wait-for-model-timeout --wait-for-model-mode
--wait-for-model-interval --reset-kv-cache-timeout-seconds --reset-kv-cache-path
--server-profiler-timeout-seconds --server-profiler-start-path --server-profiler-stop-path --api-key
--transport|--transport-type --connection-reuse-strategy --request-content-type --session-header
--extra-inputs --header|-H --input-file --public-dataset --hf-subset --hf-weka-dataset --dataset-filter
--custom-dataset-type --max-context-length --dataset-sampling-strategy --random-seed
--trace-session-sample-ratio --config|-f --fixed-schedule-start-offset --fixed-schedule-end-offset --goodput
--output-artifact-dir|--artifact-dir --profile-export-prefix|--profile-export-file
--export-level|--profile-export-level --slice-duration --otel-url --stream
--otel-resource-attributes --gen-ai-provider --mlflow-tracking-uri --mlflow-experiment --mlflow-run-name
--mlflow-tag --mlflow-parent-run-id --mlflow-artifact-glob --wandb-project --wandb-entity --wandb-run-name
--wandb-tag --tokenizer --tokenizer-revision --benchmark-duration --benchmark-grace-period --concurrency
--prefill-concurrency --request-rate --arrival-pattern|--request-rate-mode
--arrival-smoothness|--vllm-burstiness --request-count|--num-requests --concurrency-ramp-duration
--prefill-concurrency-ramp-duration --request-rate-ramp-duration --request-rate-series
--failed-request-threshold --trajectory-start-min-ratio --trajectory-start-max-ratio
--trace-idle-gap-cap-seconds --system-idle-gap-cap-seconds --scenario
--warmup-request-count|--num-warmup-requests --warmup-duration --agentic-cache-warmup-duration
--agentic-warmup-grace-period --num-warmup-sessions --warmup-concurrency --warmup-prefill-concurrency
--warmup-request-rate --warmup-arrival-pattern --warmup-grace-period --warmup-concurrency-ramp-duration
--warmup-prefill-concurrency-ramp-duration --warmup-request-rate-ramp-duration --user-centric-rate --num-users
--request-cancellation-rate --request-cancellation-delay --conversation-num|--num-conversations|--num-sessions
--num-dataset-entries|--num-prompts --conversation-turn-mean|--session-turns-mean
--conversation-turn-stddev|--session-turns-stddev --conversation-turn-delay-mean|--session-turn-delay-mean
--conversation-turn-delay-stddev|--session-turn-delay-stddev
--conversation-turn-delay-ratio|--session-delay-ratio --inter-turn-delay-cap-seconds
--max-idle-gap-cap-seconds --replay-speedup --prompt-input-tokens-mean|--synthetic-input-tokens-mean|--isl
--prompt-input-tokens-stddev|--synthetic-input-tokens-stddev|--isl-stddev
--prompt-input-tokens-block-size|--synthetic-input-tokens-block-size|--isl-block-size
--seq-dist|--sequence-distribution --random-range-ratio --random-corpus-style
--prompt-output-tokens-mean|--output-tokens-mean|--osl
--prompt-output-tokens-stddev|--output-tokens-stddev|--osl-stddev
--prompt-batch-size|--batch-size-text|--batch-size|-b --prompt-corpus --system-prompt --system-prompt-file
--prompt-prefix-pool-size|--prefix-prompt-pool-size|--num-prefix-prompts
--prompt-prefix-length|--prefix-prompt-length --shared-system-prompt-length --user-context-prompt-length
--cache-bust --rankings-passages-mean --rankings-passages-stddev --rankings-passages-prompt-token-mean
--rankings-passages-prompt-token-stddev --rankings-query-prompt-token-mean
--rankings-query-prompt-token-stddev --synthesis-speedup-ratio --synthesis-prefix-len-multiplier
--synthesis-prefix-root-multiplier --synthesis-prompt-len-multiplier --synthesis-output-len-multiplier
--synthesis-max-isl --synthesis-max-osl --audio-batch-size|--batch-size-audio --audio-length-mean
--audio-length-stddev --audio-format --audio-depths --audio-sample-rates --audio-num-channels
--image-width-mean --image-width-stddev --image-height-mean --image-height-stddev
--image-batch-size|--batch-size-image --image-format --image-source --image-source-sampling
--video-batch-size|--batch-size-video --video-duration --video-fps --video-width --video-height
--video-synth-type --video-format --video-codec --video-audio-sample-rate --video-audio-num-channels
--video-audio-codec --video-audio-depth --log-level --record-processor-service-count|--record-processors
--api-port --api-host --stats-interval --server-metrics --server-metrics-formats --network-latency-mean
--network-latency-ping-interval --gpu-telemetry --ui-type|--ui --workers-max|--max-workers --zmq-host
--zmq-ipc-path --accuracy-benchmark --accuracy-tasks --accuracy-n-shots
--accuracy-enable-cot|--accuracy-no-enable-cot --accuracy-grader --accuracy-system-prompt --num-profile-runs
--profile-run-cooldown-seconds --confidence-level --convergence-metric --convergence-stat
--convergence-threshold --convergence-mode --parameter-sweep-cooldown-seconds --parameter-sweep-mode
--sweep-type --search-space --search-metric --search-stat --search-direction --search-max-iterations
--search-initial-points --search-random-seed --search-planner --optuna-sampler --optuna-acquisition
--optuna-terminator --search-percentile-pooling --bo-constraint-mode --variant|--sweep-variant --search-sla
--search-sla-tier --search-recipe --ttft-sla-ms --itl-sla-ms --tpot-sla-ms --e2e-sla-ms --error-rate-sla
--slo-attainment-fraction --search-style --degradation-threshold --degradation-metric-tag --degradation-stat
--isl-min --isl-max --isl-steps --concurrency-min --concurrency-max --concurrency-steps --osl-min --osl-max
--osl-steps
"""

GUIDELLM_FLAG = """
--disable-console|--disable-console-outputs --disable-console-interactive|--disable-progress
--detect-saturation|--default-over-saturation --display-scheduler-stats
"""
GUIDELLM_ONE = """
--scenario|-c --target --data --profile|--rate-type --rate --backend|--backend-type --backend-kwargs|--backend-args
--model --request-format|--request-type --processor --processor-args --data-args --data-samples
--data-column-mapper --data-preprocessors --data-preprocessors-kwargs --data-finalizer --data-sampler
--data-num-workers --dataloader-kwargs --random-seed --output-dir --outputs --output-path
--warmup|--warmup-percent --cooldown|--cooldown-percent --rampup --sample-requests|--output-sampling
--max-seconds --max-requests --max-errors --max-error-rate --max-global-error-rate --over-saturation
--output-extras
"""
GUIDELLM_RUN_FLAG = """
--disable-console|--disable-console-outputs --disable-console-interactive|--disable-progress
"""
GUIDELLM_RUN_ONE = """
--config|-c|--scenario --label|-l --backend --profile --constraint --tokenizer --data --data-column-mapper
--data-preprocessor --data-finalizer --data-loader --seed --output --metrics
"""
GUIDELLM_RUN_MANY = """
--override
"""


def _groups(*blocks: tuple[str, int]) -> list[tuple[str, int]]:
    return [(spelling.replace("|", " "), arity) for text, arity in blocks for spelling in text.split()]


VLLM = Table.of("vllm bench serve", _groups((VLLM_FLAG, FLAG), (VLLM_ONE, ONE), (VLLM_MANY, MANY)),
                abbrev=True, underscores=True)
SGLANG = Table.of("sglang.bench_serving", _groups((SGLANG_FLAG, FLAG), (SGLANG_ONE, ONE), (SGLANG_MANY, MANY)),
                  abbrev=True)
AIPERF = Table.of("aiperf profile", _groups((AIPERF_FLAG, FLAG), (AIPERF_ONE, ONE)))
GUIDELLM = Table.of("guidellm benchmark", _groups((GUIDELLM_FLAG, FLAG), (GUIDELLM_ONE, ONE)))
GUIDELLM_RUN = Table.of("guidellm run", _groups((GUIDELLM_RUN_FLAG, FLAG), (GUIDELLM_RUN_ONE, ONE),
                                                (GUIDELLM_RUN_MANY, MANY)))
