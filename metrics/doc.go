// Package metrics is turnd's Prometheus instrumentation: the metric
// families of the issue "Run it in production", registered on a registry
// that cmd builds and passes in (nothing registers globally). Metrics
// implements turn.Observer, times a turn.Store (Metrics.Store) and observes
// HTTP requests by route pattern (Metrics.ObserveRequest, for
// api.Config.ObserveRequest).
//
// The pure cores (dispatch, budget) never import it: their events reach it
// through turn's hooks. Label values are bounded: tool names come from the
// tool config (turn.UnknownTool for any other), statuses and results are
// turn's constants, routes are chi route patterns; no id is ever a label.
package metrics
