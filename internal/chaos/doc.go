// Package chaos is turnd's chaos suite: its harness (Cluster, Turnd,
// ToolServer, Load, Recorder, Check) drives real `turnd serve` processes and
// a PostgreSQL cluster of its own over loopback, and its tests are the
// experiments, short by default and long with CHAOS_LONG=1 (`make chaos`).
// It talks to turnd over HTTP only. RELIABILITY.md has the invariants and
// the figures.
package chaos
