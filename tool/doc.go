// Package tool is turnd's tool registry: the tools a deployment registers in
// its YAML config (HTTP tools and the builtin demo tools), their effect,
// argument schema and retry policy, and the dispatch.Tool that runs each.
//
// tool may import dispatch and budget; it must not import turn, api or any
// store.
package tool
