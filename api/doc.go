// Package api is turnd's HTTP face: the chi router, its handlers, bearer
// authentication, the browser guard (Host, Origin and CORS, content types;
// guard.go), request limits, the JSON wire types and
// application/problem+json errors. Its subpackage provider translates turns
// from and to the model providers' wire formats (?format=F, formats.go),
// whole or streamed: a turn's body may be the model's stream itself,
// parsed as it arrives (stream.go), whose read calls start early through
// turn.Stream.
//
// Domain types from turn are mapped to wire types here, and domain errors
// to status codes in exactly one function (problemFor). api may import turn,
// tool, dispatch, budget and api/provider, and the OpenTelemetry trace API
// (trace.go names spans); it must not import a store implementation or the
// OpenTelemetry SDK.
package api
