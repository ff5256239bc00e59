.PHONY: test build run bench
test:
	bash scripts/test.sh
build:
	go build -o bin/turnd ./cmd/turnd
bench:
	go test -run '^$$' -bench . -benchmem ./budget/ ./dispatch/
