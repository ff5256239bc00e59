// Package api is turnd's HTTP face: the chi router, its handlers, bearer
// authentication, request limits, the JSON wire types and
// application/problem+json errors.
//
// Domain types from turn are mapped to wire types here, and domain errors
// to status codes in exactly one function (problemFor). api may import turn,
// tool, dispatch and budget; it must not import a store implementation.
package api
