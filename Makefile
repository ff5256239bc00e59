.PHONY: test build bench bench-load
# Every check and test (starts a throwaway PostgreSQL when DATABASE_URL is unset).
test:
	bash scripts/test.sh
build:
	go build -o bin/turnd ./cmd/turnd
# Micro-benchmarks of the pure cores.
bench:
	go test -run '^$$' -bench . -benchmem ./budget/ ./dispatch/ ./completion/
# Whole-stack load benchmarks against a throwaway PostgreSQL: turns and
# completions beside the same server's single-row INSERT rate, idle and
# pending RSS.
bench-load:
	bash -c '. scripts/pg.sh; pg_start; trap pg_stop EXIT; go test -run "^$$" -bench . -benchtime 1x -timeout 30m ./internal/loadtest/'
