.PHONY: test build bench bench-load bench-turnd chaos
# Every check and test (starts a throwaway PostgreSQL when DATABASE_URL is unset).
test:
	bash scripts/test.sh
build:
	go build -o bin/turnd ./cmd/turnd
# The long chaos suite (RELIABILITY.md): SIGKILL loops, PostgreSQL stops,
# racing replicas, poison tools, bad and cross-site requests, against real
# turnd processes and a PostgreSQL cluster of its own. `make test` runs a
# short one.
chaos:
	CHAOS_LONG=1 go test -count=1 -v -timeout 120m ./internal/chaos/
# Micro-benchmarks of the pure cores.
bench:
	go test -run '^$$' -bench . -benchmem ./budget/ ./dispatch/ ./completion/
# Whole-stack load benchmarks against a throwaway PostgreSQL: turns and
# completions beside the same server's single-row INSERT rate, idle and
# pending RSS.
bench-load:
	bash -c '. scripts/pg.sh; pg_start; trap pg_stop EXIT; go test -run "^$$" -bench . -benchtime 1x -timeout 30m ./internal/loadtest/'
# The workloads of BENCHMARKS.md, measured by `turnd bench` (each starts a
# turnd of its own on a throwaway PostgreSQL when the server binaries are
# installed and DATABASE_URL is unset), as a Markdown table to paste there.
# BENCH_TIME=60s BENCH_BASELINE=20s for steadier numbers.
BENCH_TIME ?= 20s
BENCH_BASELINE ?= 10s
BENCH = bin/turnd bench --markdown --progress none --duration $(BENCH_TIME) --baseline $(BENCH_BASELINE) --rounds 4
bench-turnd: build
	@bin/turnd bench --markdown-header
	@$(BENCH) --label "1. 4 instant reads, 32 clients" --tools builtin --concurrency 32 --calls 4
	@$(BENCH) --label "1s. the same on SQLite" --store sqlite --tools builtin --concurrency 32 --calls 4
	@$(BENCH) --label "2. read/write 50/50, 1-20ms tools" --concurrency 32 --calls 4 --read-fraction 0.5 --latency uniform:1ms-20ms
	@$(BENCH) --label "3. 64 KiB outputs (truncated)" --concurrency 16 --calls 4 --output-bytes 65536
	@$(BENCH) --label "4. 25% deferred, exp 20ms" --concurrency 32 --calls 4 --deferred-fraction 0.25 --deferred-delay exp:20ms
	@$(BENCH) --label "5. open loop 100 turns/s, mixed" --rate 100 --calls 4 --read-fraction 0.5 --latency exp:5ms
	@bin/turnd bench --markdown --progress none --baseline $(BENCH_BASELINE) --rounds 4 --label "c. completions, 32 deliverers" --completions --concurrency 32
